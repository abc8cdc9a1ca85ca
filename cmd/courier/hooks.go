package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/notify"
)

// hooksCommand is `courier hooks retry`: the calls set aside in the
// hooks' dead letters run again.
func (a *app) hooksCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "hooks",
		Short: "Manage the hooks' dead letters (courier.notify)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(&cobra.Command{
		Use:   "retry [HOOK]...",
		Short: "Run again the calls set aside in the dead letters of the hooks named (every hook's without a name)",
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			known := map[string]bool{}
			for _, h := range cfg.Courier.Notify {
				known[h.Name] = true
			}
			for _, h := range args {
				if !known[h] {
					return fault.Errorf(fault.Usage, "no hook %q in courier.notify", h)
				}
			}
			mb, err := a.Mailbox()
			if err != nil {
				return err
			}
			n, err := notify.Retry(cmd.Context(), mb.DB(), args)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d call(s) put back in the hooks' queues; the service runs them at its next poll (or start)\n", n)
			return nil
		},
	})
	return c
}
