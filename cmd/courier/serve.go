package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/daemon"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/mcpserver"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/internal/webui"
	"github.com/monoco/courier/mailbox"
)

// serviceCommands are the commands of the running service.
func (a *app) serviceCommands() []*cobra.Command {
	return []*cobra.Command{a.serveCommand(), a.statusCommand(), a.doctorCommand(), a.fetchCommand(), a.reloadCommand(), a.webCommand()}
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
flushed, and it exits 0. SIGHUP reloads the config (see ` + "`courier reload`" + `). Under systemd (Type=notify) it reports READY=1
and answers the watchdog.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.serve(cmd.Context(), lf) },
	}
	c.Flags().StringVar(&lf.format, "log-format", "", "text or json (default from the config, else text)")
	c.Flags().StringVar(&lf.level, "log-level", "", "debug, info, warn or error (default from the config, else info)")
	c.Flags().StringVar(&lf.file, "log-file", "", "log to this file (relative to the workspace unless absolute), rotated by size (courier.log.max_size_mb, max_files), not stderr: what courier start passes")
	return c
}

// newLogger makes the service's logger: readable text, or JSON lines.
func newLogger(w io.Writer, cfg *config.Config, lf logFlags) (*slog.Logger, error) {
	log, _, err := newLevelLogger(w, cfg, lf)
	return log, err
}

// newLevelLogger is newLogger with the level a reload sets.
func newLevelLogger(w io.Writer, cfg *config.Config, lf logFlags) (*slog.Logger, *slog.LevelVar, error) {
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
		return nil, nil, usageError("--log-level %q is not one of debug, info, warn, error", level)
	}
	v := new(slog.LevelVar)
	v.Set(lv)
	opts := &slog.HandlerOptions{Level: v}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), v, nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), v, nil
	}
	return nil, nil, usageError("--log-format %q is not one of text, json", format)
}

// serveLogWriter is where serve logs: stderr, or with --log-file the
// rotating log file (closed by the function returned).
func (a *app) serveLogWriter(cfg *config.Config, lf logFlags) (io.Writer, func(), error) {
	if lf.file == "" {
		return a.stderr, func() {}, nil
	}
	w, err := daemon.OpenLogFile(daemon.AbsIn(a.root, lf.file), cfg.Courier.Log, 1, 2)
	if err != nil {
		return nil, nil, fault.Wrap(fault.CantCreate, err)
	}
	return w, func() { w.Close() }, nil
}

// serve runs the service until ctx is cancelled (SIGTERM, SIGINT).
func (a *app) serve(ctx context.Context, lf logFlags) error {
	// SIGHUP reloads the config (reload.go); caught from the first, so
	// that one sent while the service starts does not kill it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	a.secrets = true
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if err := checkSecretModes(cfg, a.root); err != nil {
		return err
	}
	logw, closeLog, err := a.serveLogWriter(cfg, lf)
	if err != nil {
		return err
	}
	defer closeLog()
	log, level, err := newLevelLogger(logw, cfg, lf)
	if err != nil {
		return err
	}
	redact := service.NewRedactor(log.Handler())
	log = slog.New(redact)
	a.log = log
	lock, mb, dz, err := a.openExclusive(cfg)
	if err != nil {
		return err
	}
	defer lock.Release()
	// The pid file names this serve to `courier stop` (package daemon).
	pidPath := daemon.PIDPath(a.root)
	if err := daemon.WritePIDFile(pidPath); err != nil {
		return err
	}
	defer daemon.RemovePIDFile(pidPath, os.Getpid())
	if n, err := dz.RecoverTemp(time.Hour); err == nil && n > 0 {
		log.Info("removed temporary dropzone files left by an interrupted write", "files", n)
	}
	env := providers.Env{Log: log, Dropzone: dz}
	if isTerminal(a.stderr) {
		env.Progress = a.stderr
	}
	set, err := a.providerTable().Build(cfg, env)
	if err != nil {
		return fault.Wrap(fault.Config, err)
	}
	redact.Add(set.Secrets()...)
	svc, lt, b, err := a.assemble(cfg, set, mb, log)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := lt.Start(ctx); err != nil {
		log.Error("courier could not start", "err", err)
		return fault.Wrap(fault.Unavailable, err)
	}
	startRetention(ctx, cfg, mb, dz, log)
	svc.SetConfig(service.ConfigState{Path: configName(cfg), Hash: cfg.Hash})
	r := &reloader{a: a, svc: svc, backend: b, redact: redact, env: env, log: log, level: level, levelFlag: lf.level != "",
		started: cfg, cur: cfg, set: set}
	a.serving(ctx, cfg, svc, lt, log, hup, r.reload)
	return nil
}

// assemble makes the service of the workspace (service.Assemble): the
// agents' socket beside it, and /mcp on its HTTP listener unless
// courier.mcp.http is false. Closing the agents' Backend releases what
// they hold once the service has stopped.
func (a *app) assemble(cfg *config.Config, set providers.Set, mb *mailbox.Mailbox, log *slog.Logger) (*service.Service, *service.Lifetime, *agents.Backend, error) {
	b, err := agents.NewBackend(a.root, cfg, mb, set)
	if err != nil {
		return nil, nil, nil, err
	}
	socket, sock := agents.Socket(a.root, b, log)
	web, err := webui.New(webui.Options{Mailbox: mb, Dropzone: a.dz, Operator: b, Approver: b, Logger: log})
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	sock.ServeLogin(web)
	serveHTTP := func(h http.Handler) service.Component {
		return service.HTTPComponent(cfg.Courier.HTTP.Listen, web.Mount(h), log)
	}
	if cfg.Courier.MCP.Enabled() {
		mlog := log.With("component", "mcp")
		s := mcpserver.New(mcpserver.Options{Mailbox: mb, Dropzone: a.dz, Backend: b, Caller: mcpserver.HTTPCaller, Version: service.Version(), Logger: mlog})
		h, err := mcpserver.NewHTTP(s, a.root, cfg.Courier.MCP, mlog)
		if err != nil {
			b.Close()
			return nil, nil, nil, err
		}
		serveHTTP = func(next http.Handler) service.Component {
			return h.Around(service.HTTPComponent(cfg.Courier.HTTP.Listen, web.Mount(h.Mount(next)), log))
		}
	}
	svc, lt := service.Assemble(cfg, set, mb, a.dz, log, serveHTTP, socket, service.Component{Name: "web viewer", Start: web.Start, Stop: web.Stop})
	b.Wake = svc.Engine.Wake
	return svc, lt, b, nil
}

// serving says the service is ready (to the log and to systemd), reloads
// on each signal of hup, waits for ctx to end, and stops it.
func (a *app) serving(ctx context.Context, cfg *config.Config, svc *service.Service, lt *service.Lifetime, log *slog.Logger,
	hup <-chan os.Signal, reload func(context.Context)) {
	svc.MarkStarted()
	names := make([]string, 0, len(svc.Adapters))
	for n := range svc.Adapters {
		names = append(names, n)
	}
	log.Info("courier is serving", "root", a.root, "http", "http://"+cfg.Courier.HTTP.Listen, "socket", cfg.SocketPath(a.root), "adapters", names,
		"config", configName(cfg), "version", svc.Version)
	sd.SdNotify(false, sd.SdNotifyReady)
	stopWatchdog := service.Watchdog(ctx, svc.Mailbox, log)

	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-hup:
			sd.SdNotify(false, reloadingNotice())
			reload(ctx)
			sd.SdNotify(false, sd.SdNotifyReady)
		}
	}
	o := cfg.Courier.Outbound
	log.Info("stopping: finishing sends in flight", "grace", o.ShutdownGrace.D())
	sd.SdNotify(false, sd.SdNotifyStopping)
	svc.MarkStopping()
	stopWatchdog()
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownGrace.D())
	defer cancel()
	if err := lt.Stop(sctx); err != nil {
		log.Warn("stopped with errors", "err", err)
	}
	log.Info("stopped")
}

func configName(cfg *config.Config) string {
	if cfg.Path == "" {
		return "(embedded default)"
	}
	return cfg.Path
}

// isTerminal reports whether w is a terminal (progress output).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
