package main

// Reload: SIGHUP makes the running service re-read its config and apply
// what can change live (reloader); `courier reload` sends it and reports
// the outcome the service writes (daemon.ReloadPath) and shows on /health.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/daemon"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// reloader applies a changed config to the running service. What it can
// change live: each provider's section (that provider restarted alone,
// the others running on: credentials, allow-lists, accounts),
// courier.limits but max_artifact_bytes (every provider restarted),
// courier.notify (the hooks restarted) and courier.log.level. Any other
// key needs a restart, and is logged so; the rest is applied. A config
// that does not load, or whose providers do not build, is refused: the
// service runs on with the one it has.
type reloader struct {
	a       *app
	svc     *service.Service
	backend *agents.Backend
	redact  *service.Redactor
	env     providers.Env
	log     *slog.Logger
	level   *slog.LevelVar
	// levelFlag: --log-level was given, and wins over courier.log.level.
	levelFlag bool

	started *config.Config // what serve started with: the keys only a restart applies
	cur     *config.Config // what runs now
	set     providers.Set  // the providers that run now
	count   int            // reloads so far
}

// liveKey reports whether a reload applies key (as config.Diff names
// keys). Of courier.limits, every key but max_artifact_bytes (the
// dropzone's bound is set when it opens): every provider is rebuilt, and
// the socket's checks take the new ones.
func liveKey(key string) bool {
	switch {
	case key == "courier.notify", key == "courier.log.level", strings.HasPrefix(key, "courier.adapters."):
		return true
	case strings.HasPrefix(key, "courier.limits."):
		return key != "courier.limits.max_artifact_bytes"
	}
	return false
}

// reload re-reads the config and applies it; the outcome goes to the log
// and to /health.
func (r *reloader) reload(ctx context.Context) {
	r.log.Info("reloading the config (SIGHUP)", "config", configName(r.cur))
	// A SIGTERM meanwhile must not cut a provider's restart short (its
	// old sources left running beside the new): the reload has the
	// shutdown's grace, then the service stops.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(r.cur.Courier.Outbound.ShutdownGrace.D(), 30*time.Second))
	defer cancel()
	out := r.apply(ctx)
	out.At = time.Now().UTC()
	switch out.Outcome {
	case "refused":
		r.log.Error("reload refused: the service runs on with its config as it was", "err", out.Error)
	case "failed":
		r.log.Error("reload failed in part", "err", out.Error, "applied", out.Applied)
	default:
		r.log.Info("reload applied", "changed", out.Applied)
	}
	for _, k := range out.NeedsRestart {
		r.log.Warn("needs a restart: "+k, "key", k)
	}
	// The file first, then /health: whoever saw this reload on /health
	// finds it in the file too.
	r.count++
	out.Count = r.count
	b, _ := json.Marshal(reloadFile{PID: os.Getpid(), Reload: out})
	if err := daemon.WriteReloadFile(r.a.root, b); err != nil {
		r.log.Warn("could not write the reload's outcome for `courier reload`", "err", err)
	}
	r.svc.Reloaded(out)
}

// reloadFile is what the service writes after each reload
// (daemon.ReloadPath), and `courier reload` waits for.
type reloadFile struct {
	PID int `json:"pid"`
	service.Reload
}

func readReloadFile(root string) reloadFile {
	var f reloadFile
	if b, err := os.ReadFile(daemon.ReloadPath(root)); err == nil {
		json.Unmarshal(b, &f)
	}
	return f
}

func (r *reloader) apply(ctx context.Context) service.Reload {
	next, set, err := r.load()
	if err != nil {
		return service.Reload{Outcome: "refused", Error: err.Error()}
	}
	out := service.Reload{Outcome: "applied"}
	for _, k := range config.Diff(r.started, next) {
		if !liveKey(k) {
			out.NeedsRestart = append(out.NeedsRestart, k)
		}
	}
	// A provider turned on or off (or given a way to send, or a webhook,
	// it had not) runs as it was until a restart, however many reloads.
	shaped := map[schema.Provider]bool{}
	for _, p := range set {
		if !r.svc.Fits(p) {
			shaped[p.Name] = true
			out.NeedsRestart = append(out.NeedsRestart, "courier.adapters."+string(p.Name)+".enabled")
		}
	}
	restart := map[schema.Provider]bool{}
	var errs []error
	for _, k := range config.Diff(r.cur, next) {
		switch {
		case !liveKey(k):
			continue
		case k == "courier.notify":
			if err := r.svc.ReloadHooks(ctx, next); err != nil {
				errs = append(errs, err)
				continue
			}
		case k == "courier.log.level":
			r.setLevel(next.Courier.Log.Level)
		case strings.HasPrefix(k, "courier.limits."):
			for _, p := range set {
				restart[p.Name] = true
			}
		case shaped[schema.Provider(strings.TrimPrefix(k, "courier.adapters."))]:
			continue
		default:
			restart[schema.Provider(strings.TrimPrefix(k, "courier.adapters."))] = true
		}
		out.Applied = append(out.Applied, k)
	}
	for p := range shaped {
		delete(restart, p)
	}
	errs = append(errs, r.restartProviders(ctx, set, restart)...)
	r.backend.Reload(r.liveConfig(next), r.set)
	if len(errs) > 0 {
		// r.cur stays: the next reload tries again what failed.
		out.Outcome, out.Error = "failed", errors.Join(errs...).Error()
		return out
	}
	r.cur = next
	r.svc.SetConfig(service.ConfigState{Path: configName(next), Hash: next.Hash})
	return out
}

// liveConfig is the config the agents' socket checks drafts by after a
// reload: the one serve started with, but for what a reload applies
// (courier.limits; max_artifact_bytes stays, with the dropzone's bound).
func (r *reloader) liveConfig(next *config.Config) *config.Config {
	c := *r.started
	c.Courier.Limits = next.Courier.Limits
	c.Courier.Limits.MaxArtifactBytes = r.started.Courier.Limits.MaxArtifactBytes
	return &c
}

// load reads the config again and builds its providers, as serve did.
func (r *reloader) load() (*config.Config, providers.Set, error) {
	path, opts := r.cur.Path, config.LoadOptions{Secrets: true, Adapters: r.a.providerTable().Adapters()}
	if path == "" {
		path, opts.AllowMissing = mailbox.Layout{Root: r.a.root}.Config(), true
	}
	next, err := config.Load(path, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := checkSecretModes(next, r.a.root); err != nil {
		return nil, nil, err
	}
	set, err := r.a.providerTable().Build(next, r.env)
	if err != nil {
		return nil, nil, err
	}
	return next, set, nil
}

// restartProviders restarts each provider of restart with its build in
// set; one whose new build fails to start is started again with its old
// one.
func (r *reloader) restartProviders(ctx context.Context, set providers.Set, restart map[schema.Provider]bool) []error {
	var errs []error
	for _, p := range set {
		if !restart[p.Name] {
			continue
		}
		r.redact.Add(p.Secrets...)
		err := r.svc.RestartProvider(ctx, p)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("restarting %s: %w; it runs its config as it was", p.Name, err))
			r.rollBack(ctx, p.Name)
		default:
			r.log.Info("provider restarted with the new config", "provider", string(p.Name))
			r.set = replaceProvider(r.set, p)
		}
	}
	return errs
}

// rollBack starts provider name again with the config that runs.
func (r *reloader) rollBack(ctx context.Context, name schema.Provider) {
	old, err := r.a.providerTable().Build(r.cur, r.env)
	if err == nil {
		err = r.svc.RestartProvider(ctx, old.Get(name))
	}
	if err != nil {
		r.log.Error("the provider could not be started again with its config as it was", "provider", string(name), "err", err)
	}
}

func replaceProvider(set providers.Set, p *adapters.Provider) providers.Set {
	out := slices.Clone(set)
	for i, x := range out {
		if x.Name == p.Name {
			out[i] = p
		}
	}
	return out
}

// setLevel applies courier.log.level, unless --log-level was given.
func (r *reloader) setLevel(level string) {
	if r.levelFlag {
		r.log.Info("courier.log.level changed, but --log-level sets the level", "level", level)
		return
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err == nil {
		r.level.Set(lv)
	}
}

// reloadingNotice tells systemd a reload began: RELOADING=1 with the
// monotonic clock's time, which systemd asks for with it.
func reloadingNotice() string {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return fmt.Sprintf("%s\nMONOTONIC_USEC=%d", sd.SdNotifyReloading, ts.Nano()/1000)
}

func (a *app) reloadCommand() *cobra.Command {
	timeout := 30 * time.Second
	c := &cobra.Command{
		Use:   "reload",
		Short: "Make the running service re-read its config and apply what can change live (SIGHUP); exit 78 if the new config is refused",
		Long: `Send the running service SIGHUP (under systemd: systemctl reload, whose
ExecReload sends it), wait for its outcome and print it. The service
re-reads its config and applies what can change live: a provider's
section (that provider alone is restarted: credentials, allow-lists,
accounts), courier.limits, courier.notify (the hooks) and
courier.log.level. Other keys (courier.http.listen, courier.root, ...)
are named as needing a restart; the rest is applied.

Exit 0 when applied (the keys that need a restart are listed), 78 when the
new config is refused (it does not load: the service runs on with the old
one, and the reason is printed), 69 when a provider failed to restart
with it (it runs its old config), 3 when the service is not running, 4
when it gave no outcome within --timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.reload(cmd.Context(), timeout) },
	}
	c.Flags().Var((*seconds)(&timeout), "timeout", "how long to wait for the service's outcome")
	return c
}

// reload sends the service SIGHUP and reports the outcome the service
// writes (daemon.ReloadPath; /health shows it too).
func (a *app) reload(ctx context.Context, timeout time.Duration) error {
	d, err := a.daemon()
	if fault.KindOf(err) == fault.Config {
		// The service would refuse it the same way: no need to ask.
		return fault.Errorf(fault.Config, "reload refused; the service runs on with its config as it was: %v", err)
	} else if err != nil {
		return err
	}
	before := readReloadFile(a.root)
	if _, err := d.Reload(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		if f := readReloadFile(a.root); f.PID != 0 && (f.PID != before.PID || f.Count != before.Count) {
			return a.printReload(f.Reload)
		}
		if time.Now().After(deadline) {
			return fault.Errorf(fault.Timeout, "the service gave no outcome of the reload within %v (see `courier logs`)", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (a *app) printReload(r service.Reload) error {
	switch r.Outcome {
	case "refused":
		return fault.Errorf(fault.Config, "reload refused; the service runs on with its config as it was: %s", r.Error)
	case "failed":
		return fault.Errorf(fault.Unavailable, "reload failed in part: %s", r.Error)
	}
	if len(r.Applied) == 0 {
		fmt.Fprintln(a.stdout, "reloaded: nothing that can change live changed")
	} else {
		fmt.Fprintf(a.stdout, "reloaded: applied %s\n", strings.Join(r.Applied, ", "))
	}
	for _, k := range r.NeedsRestart {
		fmt.Fprintf(a.stdout, "needs a restart: %s (courier restart)\n", k)
	}
	return nil
}
