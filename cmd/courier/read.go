package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/mailview"
)

func (a *app) readCommand() *cobra.Command {
	var raw, content bool
	var format string
	c := &cobra.Command{
		Use:   "read ID... | read -",
		Short: "Show a message or draft (ids from standard input with -)",
		Example: `  courier read lark_om_abc123
  courier read lark_om_abc123 --content
  courier list --format id | head -1 | courier read -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			if raw && content {
				return usageError("--raw and --content do not go together")
			}
			ids, err := a.ids(args)
			if err != nil {
				return err
			}
			mb, err := a.Mailbox()
			if err != nil {
				return err
			}
			form := mailview.Form{Raw: raw, Content: content, JSON: format == "json", Terminal: isTerminal(a.stdout)}
			var first error
			for i, id := range ids {
				// Opened, not read: mailview.Write reads a file of any
				// size in bounded memory.
				f, e, err := mb.OpenFile(cmd.Context(), id)
				if err != nil {
					fmt.Fprintf(a.stderr, "%s%v\n", errPrefix, err)
					if first == nil {
						first = err
					}
					continue
				}
				if i > 0 && format == "text" && !raw {
					fmt.Fprintln(a.stdout)
				}
				err = mailview.Write(a.stdout, f, e, form)
				f.Close()
				if err != nil {
					return err
				}
			}
			if first != nil {
				return &exitError{code: fault.ExitCode(first)}
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.BoolVar(&raw, "raw", false, "print the file as it is on disk")
	fl.BoolVar(&content, "content", false, "print only the body (no front matter)")
	fl.StringVar(&format, "format", "text", "text or json")
	return c
}
