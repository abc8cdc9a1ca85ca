package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters/slack"
	"github.com/monoco/courier/internal/fault"
)

// slackCommand is `courier slack`, what helps set up a Slack app: its
// manifest, with the scopes doctor checks the bot token for.
func (a *app) slackCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "slack",
		Short: "Set up a Slack app for Courier",
		Args:  cobra.NoArgs,
	}
	var mode, url, name, format string
	m := &cobra.Command{
		Use:   "manifest",
		Short: "Print the Slack app manifest (scopes, events, socket mode or the request URL)",
		Long: `Print the manifest of a Slack app Courier can run with, to paste into
https://api.slack.com/apps, "Create New App", "From a manifest": the bot
scopes courier doctor checks the bot token for, the events Courier reads,
and either Socket Mode (--mode socket, the default: no public URL) or the
Events API at --url (--mode events: the public https URL that reaches
Courier's /webhook/slack).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"yaml", "json"}); err != nil {
				return err
			}
			man, err := slack.NewManifest(name, mode, url)
			if err != nil {
				return fault.Wrap(fault.Usage, err)
			}
			var out []byte
			if format == "json" {
				out, err = json.MarshalIndent(man, "", "  ")
				out = append(out, '\n')
			} else {
				out, err = man.YAML()
			}
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(out)
			return err
		},
	}
	fl := m.Flags()
	fl.StringVar(&mode, "mode", "socket", "how Slack reaches Courier: socket (Socket Mode) or events (the Events API at --url)")
	fl.StringVar(&url, "url", "", "with --mode events: the public https URL of Courier's /webhook/slack")
	fl.StringVar(&name, "name", "Courier", "the app's and its bot's name in Slack")
	fl.StringVar(&format, "format", "yaml", "yaml or json (the manifest editor takes either)")
	c.AddCommand(m)
	return c
}
