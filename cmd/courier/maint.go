package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/deploy"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

func (a *app) initCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create the mailbox layout (and a commented config) in the workspace",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := a.loadConfig(); err != nil {
				return err
			}
			if err := mailbox.Init(a.root); err != nil {
				return fault.Wrap(fault.CantCreate, err)
			}
			l := mailbox.Layout{Root: a.root}
			cfgPath := l.Config()
			if a.configFlag == "" {
				if _, err := os.Stat(cfgPath); errors.Is(err, os.ErrNotExist) {
					if err := os.WriteFile(cfgPath, deploy.ExampleConfig, 0o640); err != nil {
						return fault.Wrap(fault.CantCreate, err)
					}
					fmt.Fprintf(a.stdout, "wrote %s\n", cfgPath)
				}
			}
			// Opening builds the state database.
			if _, err := a.Mailbox(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "mailbox ready in %s\n", l.Mailbox())
			return nil
		},
	}
}

func (a *app) validateCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check messages and drafts against the protocol; errors name the field and line",
		Long: `Check mailbox files against the protocol. A file with "direction:
inbound" is checked as a message, anything else as a draft (on its own
terms: send also resolves reply_to against the mailbox). Exit 65 when a
file is invalid, 66 when one cannot be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			type report struct {
				File   string               `json:"file"`
				Kind   string               `json:"kind"`
				Valid  bool                 `json:"valid"`
				Errors []*schema.FieldError `json:"errors,omitempty"`
			}
			code := 0
			enc := json.NewEncoder(a.stdout)
			for _, f := range args {
				r := report{File: f}
				data, err := os.ReadFile(f)
				if err != nil {
					fmt.Fprintf(a.stderr, "%s: %v\n", f, errors.Unwrap(err))
					code = max(code, fault.NoInput.ExitCode())
					continue
				}
				var verr error
				if schema.DetectKind(data) == schema.KindMessage {
					r.Kind = "message"
					_, verr = schema.Decode(data)
				} else {
					r.Kind = "draft"
					_, _, verr = schema.DecodeDraft(data)
				}
				var errs schema.Errors
				switch {
				case verr == nil:
					r.Valid = true
				case errors.As(verr, &errs):
					r.Errors = configHint(f, data, errs.WithFile(f))
					code = max(code, fault.Invalid.ExitCode())
				default:
					return verr
				}
				if format == "json" {
					enc.Encode(r)
					continue
				}
				if r.Valid {
					fmt.Fprintf(a.stdout, "%s: ok (%s)\n", f, r.Kind)
				} else {
					for _, e := range r.Errors {
						fmt.Fprintln(a.stderr, e.Error())
					}
				}
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

// configHint tells, of a file validate finds no front matter in, that it
// looks like a Courier config (a mapping with a top-level courier: key)
// and that doctor checks those: "front matter missing" alone sent people
// looking for a message's header in their courier.yaml.
func configHint(f string, data []byte, errs []*schema.FieldError) []*schema.FieldError {
	if len(errs) == 0 || !strings.HasPrefix(errs[0].Msg, "front matter missing") {
		return errs
	}
	var top map[string]any
	if yaml.Unmarshal(data, &top) != nil || top["courier"] == nil {
		return errs
	}
	errs[0].Msg = fmt.Sprintf("this looks like a Courier config (a courier: key, no front matter), not a message or a draft: check a config with `courier doctor --config %s`", f)
	return errs
}

func (a *app) reindexCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the index and dedupe keys of the state database from the files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			mb, err := a.Mailbox()
			if err != nil {
				return err
			}
			st, err := mb.Reindex(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				return json.NewEncoder(a.stdout).Encode(st)
			}
			fmt.Fprintf(a.stdout, "indexed %d of %d files in %s", st.Indexed, st.Files, st.Duration.Round(1e6))
			if st.Removed > 0 {
				fmt.Fprintf(a.stdout, "; removed %d stale", st.Removed)
			}
			fmt.Fprintln(a.stdout)
			for _, s := range st.Invalid {
				fmt.Fprintf(a.stderr, "skipped %s\n", s)
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}
