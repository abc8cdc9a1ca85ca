package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/providers/all"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
)

// providerTable is the provider table the app reads its config and
// builds its providers with: Courier's (internal/providers/all) unless a
// test gave another.
func (a *app) providerTable() providers.Table {
	if a.providers == nil {
		return all.Table
	}
	return a.providers
}

func (a *app) fetchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "fetch",
		Short: "Run one sync pass of every source that can make one (IMAP accounts) and exit (for cron, and to compare with mbsync)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.secrets = true
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if err := checkSecretModes(cfg, a.root); err != nil {
				return err
			}
			lock, mb, dz, err := a.openExclusive(cfg)
			if err != nil {
				return err
			}
			defer lock.Release()
			env := providers.Env{Log: a.logger(), Dropzone: dz}
			if isTerminal(a.stderr) {
				env.Progress = a.stderr
			}
			set, err := a.providerTable().Build(cfg, env)
			if err != nil {
				return fault.Wrap(fault.Config, err)
			}
			p := ingest.New(mb, &ingest.Options{Logger: a.logger(), Self: set.Self()})
			if err := p.Start(cmd.Context()); err != nil {
				return err
			}
			defer p.Stop(context.Background())
			lim := cfg.Courier.Mailbox.DeadLetter
			dl := mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{MaxFiles: lim.MaxFiles, MaxBytes: lim.MaxBytes})
			sink := service.NewDeadLetterSink(p, dl, set.Secrets(), a.logger())
			n := 0
			start := time.Now()
			for _, src := range set.Sources() {
				if f, ok := src.(adapters.Fetcher); ok {
					if err := f.FetchOnce(cmd.Context(), sink); err != nil {
						return fault.Wrap(fault.Unavailable, fmt.Errorf("%s: %w", f.Name(), err))
					}
					n++
				}
			}
			if n == 0 {
				return fault.Wrap(fault.Config, fmt.Errorf("no email account has imap configured (courier.adapters.email.accounts[].imap)"))
			}
			var written, dup uint64
			for _, st := range p.Stats() {
				written, dup = written+st.Written, dup+st.Duplicates
			}
			fmt.Fprintf(a.stdout, "fetched %d new message(s) (%d already in the mailbox) from %d account(s) in %s\n",
				written, dup, n, time.Since(start).Round(time.Millisecond))
			for p, st := range dl.Stats() {
				if st.SetAside+st.Refused > 0 {
					fmt.Fprintf(a.stdout, "%s: %d message(s) could not be filed: set aside in .monoco/mailbox/.deadletter/%s/ (%d more not kept: at the bound)\n", p, st.SetAside, p, st.Refused)
				}
			}
			return nil
		},
	}
}
