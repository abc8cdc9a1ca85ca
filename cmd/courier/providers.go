package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/adapters/lark"
	"github.com/monoco/courier/adapters/slack"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/schema"
)

// providerEnv is what every provider is built with besides its config.
type providerEnv struct {
	log      *slog.Logger
	dropzone *dropzone.Store // nil for commands that only resolve drafts
	progress io.Writer       // backfill progress on a terminal; nil is silent
}

// providerRow is one provider Courier can run: its name and its
// constructor, given the whole config and the environment.
type providerRow struct {
	name schema.Provider
	new  func(cfg *config.Config, env providerEnv) (*adapters.Provider, error)
}

// providerTable is the one place a provider is wired: an explicit table, as
// matterbridge's router takes its bridge map, with no registry filled by
// init(). A new provider is one row here and its section in the config.
var providerTable = []providerRow{
	{schema.Email, func(cfg *config.Config, env providerEnv) (*adapters.Provider, error) {
		return email.New(email.Options{Config: cfg.Courier.Adapters.Email, Limits: cfg.Courier.Limits,
			Dropzone: env.dropzone, Logger: env.log, Progress: env.progress})
	}},
	{schema.Lark, func(cfg *config.Config, env providerEnv) (*adapters.Provider, error) {
		return lark.New(lark.Options{Config: cfg.Courier.Adapters.Lark, Limits: cfg.Courier.Limits, Dropzone: env.dropzone, Logger: env.log})
	}},
	{schema.Slack, func(cfg *config.Config, env providerEnv) (*adapters.Provider, error) {
		return slack.New(slack.Options{Config: cfg.Courier.Adapters.Slack, Limits: cfg.Courier.Limits, Dropzone: env.dropzone, Logger: env.log})
	}},
}

// buildProviders builds every provider of the app's table. A provider that
// is not enabled still resolves drafts (they stay queued for it) and runs
// nothing.
func (a *app) buildProviders(cfg *config.Config, env providerEnv) (providers.Set, error) {
	if env.log == nil {
		env.log = slog.New(slog.DiscardHandler)
	}
	var set providers.Set
	for _, row := range providerTable {
		p, err := row.new(cfg, env)
		if err != nil {
			return nil, err
		}
		if p.Name != row.name {
			return nil, fmt.Errorf("provider table: the row for %s built a provider named %s", row.name, p.Name)
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		set = append(set, p)
	}
	return set, nil
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
			if err := checkSecretModes(cfg); err != nil {
				return err
			}
			lock, mb, dz, err := a.openExclusive(cfg)
			if err != nil {
				return err
			}
			defer lock.Release()
			env := providerEnv{log: a.logger(), dropzone: dz}
			if isTerminal(a.stderr) {
				env.progress = a.stderr
			}
			set, err := a.buildProviders(cfg, env)
			if err != nil {
				return fault.Wrap(fault.Config, err)
			}
			p := ingest.New(mb, &ingest.Options{Logger: a.logger(), Self: set.Self()})
			if err := p.Start(cmd.Context()); err != nil {
				return err
			}
			defer p.Stop(context.Background())
			n := 0
			start := time.Now()
			for _, src := range set.Sources() {
				if f, ok := src.(adapters.Fetcher); ok {
					if err := f.FetchOnce(cmd.Context(), p); err != nil {
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
			return nil
		},
	}
}
