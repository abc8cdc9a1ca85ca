package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
)

// serviceCommands are the commands of the running service.
func (a *app) serviceCommands() []*cobra.Command {
	return []*cobra.Command{a.serveCommand(), a.statusCommand(), a.doctorCommand(), a.fetchCommand()}
}

type logFlags struct{ format, level, file string }

func (a *app) serveCommand() *cobra.Command {
	var lf logFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the service in the foreground (what systemd runs): adapters, ingest, outbound delivery, /health, /metrics",
		Long: `Run the service in the foreground. With no config file it runs the embedded
default: the mailbox of the workspace and an SMTP receiver on
127.0.0.1:2525 that ingests whatever mail is handed to it.

SIGTERM or SIGINT stops it gracefully: no new work is taken, sends in
flight finish (up to courier.outbound.shutdown_grace), debounce groups are
flushed, and it exits 0. Under systemd (Type=notify) it reports READY=1
and answers the watchdog.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.serve(cmd.Context(), lf) },
	}
	c.Flags().StringVar(&lf.format, "log-format", "", "text or json (default from the config, else text)")
	c.Flags().StringVar(&lf.level, "log-level", "", "debug, info, warn or error (default from the config, else info)")
	c.Flags().StringVar(&lf.file, "log-file", "", "log to this file (relative to the workspace unless absolute), rotated by size (courier.log.max_size_mb, max_files), not stderr: what `courier start` passes")
	return c
}

// newLogger makes the service's logger: readable text, or JSON lines.
func newLogger(w io.Writer, cfg *config.Config, lf logFlags) (*slog.Logger, error) {
	format := lf.format
	if format == "" {
		format = cfg.Courier.Log.Format
	}
	level := lf.level
	if level == "" {
		level = cfg.Courier.Log.Level
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format %q is not one of text, json", format)
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// serve runs the service until ctx is cancelled (SIGTERM, SIGINT).
func (a *app) serve(ctx context.Context, lf logFlags) error {
	a.secrets = true
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if err := checkSecretModes(cfg); err != nil {
		return err
	}
	logw, closeLog, err := a.serveLogWriter(cfg, lf)
	if err != nil {
		return err
	}
	defer closeLog()
	log, err := newLogger(logw, cfg, lf)
	if err != nil {
		return err
	}
	redact := newRedactor(log.Handler())
	log = slog.New(redact)
	a.log = log
	lock, mb, dz, err := a.openExclusive(cfg)
	if err != nil {
		return err
	}
	defer lock.Release()
	// The pid file names this serve to `courier stop` (daemon.go).
	if err := service.WritePIDFile(a.pidPath()); err != nil {
		return err
	}
	defer service.RemovePIDFile(a.pidPath(), os.Getpid())
	if n, err := dz.RecoverTemp(time.Hour); err == nil && n > 0 {
		log.Info("removed temporary dropzone files left by an interrupted write", "files", n)
	}
	env := providerEnv{log: log, dropzone: dz}
	if isTerminal(a.stderr) {
		env.progress = a.stderr
	}
	set, err := a.buildProviders(cfg, env)
	if err != nil {
		return withCode(exitConfig, err)
	}
	redact.Add(set.secrets()...)
	// Agents' writing verbs come through the socket (agents.go).
	agents, _, closeAgents, err := a.agentSocket(cfg, mb, set, log)
	if err != nil {
		return err
	}
	defer closeAgents()
	// MCP at /mcp on the HTTP listener (mcp.go).
	serveHTTP, closeMCP, err := a.mcpMount(cfg, mb, set, log, func(h http.Handler) service.Component {
		return httpComponent(cfg.Courier.HTTP.Listen, h, log)
	})
	if err != nil {
		return err
	}
	defer closeMCP()
	svc, lt := assemble(cfg, set, mb, dz, log, serveHTTP, agents)
	if err := lt.Start(ctx); err != nil {
		log.Error("courier could not start", "err", err)
		return withCode(exitUnavailable, err)
	}
	svc.MarkStarted()
	names := make([]string, 0, len(svc.Adapters))
	for n := range svc.Adapters {
		names = append(names, n)
	}
	log.Info("courier is serving", "root", a.root, "http", "http://"+cfg.Courier.HTTP.Listen, "socket", cfg.SocketPath(a.root), "adapters", names,
		"config", configName(cfg), "version", svc.Version)
	daemon.SdNotify(false, daemon.SdNotifyReady)
	stopWatchdog := watchdog(ctx, mb, log)

	<-ctx.Done()
	o := cfg.Courier.Outbound
	log.Info("stopping: finishing sends in flight", "grace", o.ShutdownGrace.D())
	daemon.SdNotify(false, daemon.SdNotifyStopping)
	svc.MarkStopping()
	stopWatchdog()
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace.D())
	defer cancel()
	if err := lt.Stop(sctx); err != nil {
		log.Warn("stopped with errors", "err", err)
	}
	log.Info("stopped")
	return nil
}

// assemble makes the service of the providers: the ingest pipeline, the
// outbound engine over their Senders, the HTTP handler (/health, /metrics
// and each Webhook at /webhook/<provider>) served by the component serveHTTP
// makes, and a component per Source, started in that order (so /health
// answers while sources connect); the extra components (the agents'
// socket) start after the outbound engine, before the HTTP server. Start
// the Lifetime to run it.
func assemble(cfg *config.Config, set providerSet, mb *mailbox.Mailbox, dz *dropzone.Store, log *slog.Logger,
	serveHTTP func(http.Handler) service.Component, extra ...service.Component) (*service.Service, *service.Lifetime) {
	svc := &service.Service{Mailbox: mb, Version: version(), Listen: cfg.Courier.HTTP.Listen}
	metrics := svc.Metrics()
	pipeline := ingest.New(mb, &ingest.Options{
		Logger:   log.With("component", "ingest"),
		Debounce: ingest.Debounce{Window: time.Duration(cfg.Courier.Debounce.WindowMS) * time.Millisecond, MaxWait: time.Duration(cfg.Courier.Debounce.MaxWaitMS) * time.Millisecond},
		Self:     set.self(),
		Observer: metrics,
	})
	o := cfg.Courier.Outbound
	engine := outbound.New(mb, &outbound.Options{
		Logger: log.With("component", "outbound"), Senders: set.senders(), Dropzone: dz, Observer: metrics,
		MaxAttempts: o.MaxAttempts, BackoffBase: o.BackoffBase.D(), BackoffMax: o.BackoffMax.D(),
		RescanInterval: o.RescanInterval.D(), Concurrency: o.Concurrency, SendTimeout: o.SendTimeout.D(),
	})
	svc.Pipeline, svc.Engine, svc.Adapters, svc.Waiting = pipeline, engine, set.health(), set.waiting()
	for name := range svc.Adapters {
		if p := schema.Provider(name); p.Valid() {
			metrics.Init(p)
		}
	}
	lt := service.NewLifetime(log)
	lt.Add(service.Component{Name: "ingest", Start: pipeline.Start, Stop: pipeline.Stop})
	lt.Add(service.Component{Name: "outbound", Start: engine.Start, Stop: engine.Stop})
	// Hooks run for what the journal holds, whenever it was written
	// (notify.go); they stop before ingest flushes its last groups, which
	// then wake them at the next start.
	lt.Add(notifyComponent(cfg, mb, log))
	for _, c := range extra {
		lt.Add(c)
	}
	lt.Add(serveHTTP(svc.Handler(set.webhooks(pipeline))))
	for _, src := range set.sources() {
		lt.Add(sourceComponent(src, pipeline, log))
	}
	return svc, lt
}

func configName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "(embedded default)"
	}
	return cfg.Path
}

// watchdog answers systemd's watchdog while the state database answers.
func watchdog(ctx context.Context, mb *mailbox.Mailbox, log *slog.Logger) (stop func()) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, interval/3)
				err := mb.Ping(pctx)
				pcancel()
				if err != nil {
					log.Error("watchdog: state database does not answer; not petting the watchdog", "err", err)
					continue
				}
				daemon.SdNotify(false, daemon.SdNotifyWatchdog)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// httpComponent serves /health, /metrics and webhooks. Binding happens at
// start, so a port in use fails the start.
func httpComponent(listen string, h http.Handler, log *slog.Logger) service.Component {
	lim := serveHTTPLimits()
	srv := newHTTPServer(h, lim, log)
	var done chan struct{}
	return service.Component{
		Name: "http " + listen,
		Start: func(ctx context.Context) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s (courier.http.listen): %w", listen, err)
			}
			ln = limitListener(ln, lim.MaxConns)
			done = make(chan struct{})
			go func() {
				defer close(done)
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("http server failed", "err", err)
				}
			}()
			return nil
		},
		Stop: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			<-done
			return err
		},
	}
}

// sourceComponent runs a Source: its Start (connect, check credentials) is
// part of the service's start; its Run loop is restarted with a backoff if
// it ever returns an error.
func sourceComponent(src adapters.Source, sink adapters.Sink, log *slog.Logger) service.Component {
	log = log.With("source", src.Name())
	var (
		cancel context.CancelFunc
		wg     sync.WaitGroup
	)
	return service.Component{
		Name: src.Name(),
		Start: func(ctx context.Context) error {
			if s, ok := src.(adapters.Starter); ok {
				if err := s.Start(ctx); err != nil {
					return err
				}
			}
			var rctx context.Context
			rctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
			wg.Add(1)
			go func() {
				defer wg.Done()
				backoff := time.Second
				for {
					err := src.Run(rctx, sink)
					if rctx.Err() != nil {
						return
					}
					if err == nil {
						err = errors.New("source stopped on its own")
					}
					log.Error("source failed; restarting", "err", err, "in", backoff)
					if h, ok := src.(adapters.ErrorReporter); ok {
						h.Error(err)
					}
					select {
					case <-rctx.Done():
						return
					case <-time.After(backoff):
					}
					backoff = min(backoff*2, time.Minute)
				}
			}()
			return nil
		},
		Stop: func(ctx context.Context) error {
			if cancel != nil {
				cancel()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				return fmt.Errorf("did not stop in time")
			}
			if s, ok := src.(adapters.Stopper); ok {
				return s.Stop(ctx)
			}
			return nil
		},
	}
}

// isTerminal reports whether w is a terminal (progress output).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
