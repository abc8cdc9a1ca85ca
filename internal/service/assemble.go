package service

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/buildinfo"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/notify"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
)

// Version is the version of the running binary (buildinfo.Version),
// "(devel)" for a build without one.
func Version() string { return buildinfo.Version() }

// Assemble makes the service of the providers: the ingest pipeline, the
// outbound engine over their Senders, the notify hooks, the HTTP handler
// (/health, /metrics and each Webhook at /webhook/<provider>) served by the
// component serveHTTP makes, and a component per Source (restarted after
// the backoffs of courier.restart), started in that order (so /health
// answers while sources connect); the extra components
// (the agents' socket) start after the hooks, before the HTTP server.
// Sources and Webhooks are given the pipeline with the mailbox's dead
// letters (NewDeadLetterSink). Start the Lifetime to run it.
func Assemble(cfg *config.Config, set providers.Set, mb *mailbox.Mailbox, dz *dropzone.Store, log *slog.Logger,
	serveHTTP func(http.Handler) Component, extra ...Component) (*Service, *Lifetime) {
	svc := &Service{Mailbox: mb, Version: Version(), Listen: cfg.Courier.HTTP.Listen, Hooks: HookNames(cfg)}
	metrics := svc.Metrics()
	d := cfg.Courier.Debounce
	pipeline := ingest.New(mb, &ingest.Options{
		Logger:   log.With("component", "ingest"),
		Debounce: ingest.Debounce{Window: time.Duration(d.WindowMS) * time.Millisecond, MaxWait: time.Duration(d.MaxWaitMS) * time.Millisecond},
		Self:     set.Self(),
		Observer: metrics,
	})
	dl := cfg.Courier.Mailbox.DeadLetter
	svc.DeadLetters = mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{MaxFiles: dl.MaxFiles, MaxBytes: dl.MaxBytes})
	svc.sink = NewDeadLetterSink(pipeline, svc.DeadLetters, set.Secrets(), log.With("component", "deadletter"))
	senders, webhooks := svc.makeLanes(set, log, RestartOf(cfg))
	o := cfg.Courier.Outbound
	engine := outbound.New(mb, &outbound.Options{
		Logger: log.With("component", "outbound"), Senders: senders, Dropzone: dz, Observer: metrics,
		MaxAttempts: o.MaxAttempts, BackoffBase: o.BackoffBase.D(), BackoffMax: o.BackoffMax.D(),
		RescanInterval: o.RescanInterval.D(), Concurrency: o.Concurrency, SendTimeout: o.SendTimeout.D(),
		MaxRecipients: o.MaxRecipients,
	})
	svc.Pipeline, svc.Engine, svc.Waiting = pipeline, engine, set.Waiting()
	svc.Ignored = set.Ignored()
	svc.secrets.Add(set.Secrets()...)
	for name := range svc.Adapters {
		if p := schema.Provider(name); p.Valid() {
			metrics.Init(p)
		}
	}
	lt := NewLifetime(log)
	lt.Add(Component{Name: "ingest", Start: pipeline.Start, Stop: pipeline.Stop})
	lt.Add(Component{Name: "outbound", Start: engine.Start, Stop: engine.Stop})
	// Hooks run for what the journal holds, whenever it was written; they
	// stop before ingest flushes its last groups, which then wake them at
	// the next start. They run without hooks too: they then keep the
	// event journal pruned.
	svc.hooks = &hooksSlot{mb: mb, log: log.With("component", "notify"), hooks: notifyHooks(cfg)}
	lt.Add(svc.hooks.component())
	for _, c := range extra {
		lt.Add(c)
	}
	lt.Add(serveHTTP(svc.Handler(webhooks)))
	for _, p := range set {
		for _, c := range svc.lanes[string(p.Name)].components() {
			lt.Add(c)
		}
	}
	return svc, lt
}

// RestartOf is the restart backoffs of cfg (courier.restart).
func RestartOf(cfg *config.Config) Restart {
	r := DefaultRestart
	if c := cfg.Courier.Restart; c.Refused > 0 {
		r.Refused = Backoff{First: c.Refused.D(), Max: max(c.RefusedMax.D(), c.Refused.D())}
	}
	return r
}

// notifyHooks turns courier.notify into the runner's hooks.
func notifyHooks(cfg *config.Config) []notify.Hook {
	var out []notify.Hook
	for _, c := range cfg.Courier.Notify {
		h := notify.Hook{
			Name: c.Name, Exec: c.Exec.Argv, Shell: c.Shell, Env: c.Env, URL: c.URL, Secret: c.Secret.Reveal(),
			Timeout: c.Timeout.D(), Mentions: c.Mentions, PersonalEligible: c.PersonalEligible, Correlation: c.Correlation,
			Digest: c.Digest.D(), MaxDigest: c.MaxDigest, RateCalls: c.Rate.Calls, RatePer: c.Rate.Per,
			MaxQueue: c.MaxQueue, Backoff: c.Backoff.D(), Concurrency: c.Concurrency, MaxOutput: c.MaxOutput,
			MaxAttempts: c.MaxAttempts,
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

// makeLanes makes a lane for each provider (lane.go) and returns what
// the outbound engine and the HTTP server reach them by.
func (s *Service) makeLanes(set providers.Set, log *slog.Logger, r Restart) (map[schema.Provider]adapters.Sender, map[string]http.Handler) {
	senders, webhooks := map[schema.Provider]adapters.Sender{}, map[string]http.Handler{}
	s.lanes, s.Adapters = map[string]*lane{}, map[string]adapters.HealthReporter{}
	for _, p := range set {
		l := newLane(p, s.sink, log, r, realClock)
		s.lanes[string(p.Name)] = l
		if l.sender != nil {
			senders[p.Name] = l.sender
		}
		if l.health != nil {
			s.Adapters[string(p.Name)] = l.health
		}
		if l.webhook != nil {
			webhooks["/webhook/"+string(p.Name)] = l.webhook
		}
	}
	return senders, webhooks
}
