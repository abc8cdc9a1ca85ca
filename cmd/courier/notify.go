package main

import (
	"log/slog"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/notify"
	"github.com/monoco/courier/schema"
)

// notifyHooks turns courier.notify into the runner's hooks.
func notifyHooks(cfg *config.Config) []notify.Hook {
	var out []notify.Hook
	for _, c := range cfg.Courier.Notify {
		h := notify.Hook{
			Name: c.Name, Exec: c.Exec.Argv, Shell: c.Shell, Env: c.Env, URL: c.URL, Secret: c.Secret.Reveal(),
			Timeout: c.Timeout.D(), Mentions: c.Mentions, PersonalEligible: c.PersonalEligible, Correlation: c.Correlation,
			Digest: c.Digest.D(), MaxDigest: c.MaxDigest, RateCalls: c.Rate.Calls, RatePer: c.Rate.Per,
			MaxQueue: c.MaxQueue, Backoff: c.Backoff.D(), Concurrency: c.Concurrency, MaxOutput: c.MaxOutput,
		}
		for _, e := range c.Events() {
			h.On = append(h.On, mailbox.EventKind(e))
		}
		for _, p := range c.Providers {
			h.Providers = append(h.Providers, schema.Provider(p))
		}
		out = append(out, h)
	}
	return out
}

// notifyComponent runs the hooks with the service. It runs without hooks
// too: it then keeps the event journal pruned.
func notifyComponent(cfg *config.Config, mb *mailbox.Mailbox, log *slog.Logger) service.Component {
	r := notify.New(mb, &notify.Options{Logger: log.With("component", "notify"), Hooks: notifyHooks(cfg), Root: mb.Root})
	return service.Component{Name: "notify", Start: r.Start, Stop: r.Stop}
}
