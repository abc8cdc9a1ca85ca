package main

// courier start | stop | restart | logs: the service without systemd
// (package daemon), or through systemctl when systemd runs it.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/daemon"
	"github.com/monoco/courier/internal/fault"
)

// daemonCommands are start, stop, restart and logs.
func (a *app) daemonCommands() []*cobra.Command {
	return []*cobra.Command{a.startCommand(), a.stopCommand(), a.restartCommand(), a.logsCommand()}
}

type startOpts struct {
	lf         logFlags
	timeout    time.Duration
	foreground bool
	debug      bool
}

type stopOpts struct {
	timeout time.Duration // 0: courier.outbound.shutdown_grace + daemon.StopMargin
	force   bool
}

func (a *app) startCommand() *cobra.Command {
	var o startOpts
	c := &cobra.Command{
		Use:   "start",
		Short: "Start the service in the background (or through systemctl when systemd runs it); exit 2 if it runs",
		Long: `Start the service in the background: ` + "`courier serve`" + ` detached from the terminal,
its log in courier.log.file (.monoco/logs/courier.log, rotated by size; see
` + "`courier logs`" + `), its pid in .monoco/mailbox/.state/courier.pid. It waits until the
service says it is ready and prints its pid and addresses; if the service
fails to start it prints the log's last lines and exits 69 (78 for a bad
config). A provider whose credentials are refused or whose server is out
of reach does not fail it: the service runs the others and tries that one
again, and start exits 0 with a warning on stderr naming the provider and
why. A running service is a conflict: exit 2, naming its pid.

Under systemd (courier.systemd.unit, or a running service whose cgroup is
a unit's) it runs systemctl start instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.foreground {
				if o.debug && o.lf.level == "" {
					o.lf.level = "debug"
				}
				return a.serve(cmd.Context(), o.lf)
			}
			return a.start(cmd.Context(), o)
		},
	}
	f := c.Flags()
	o.timeout = time.Minute
	f.Var((*seconds)(&o.timeout), "timeout", "how long to wait for the service to say it is ready (IMAP logins, Slack and Lark connections)")
	f.BoolVar(&o.foreground, "foreground", false, "run in the foreground, as courier serve does")
	f.BoolVar(&o.debug, "debug", false, "log at debug level (--log-level debug)")
	f.StringVar(&o.lf.format, "log-format", "", "text or json (default from the config, else text)")
	f.StringVar(&o.lf.level, "log-level", "", "debug, info, warn or error (default from the config, else info)")
	return c
}

func (a *app) stopCommand() *cobra.Command {
	var o stopOpts
	c := &cobra.Command{
		Use:   "stop",
		Short: "Stop the service gracefully (SIGTERM, then wait); exit 3 if it is not running",
		Long: `Stop the service: SIGTERM, as systemd sends, then wait until it has
finished the sends in flight (courier.outbound.shutdown_grace, 30 s by
default), flushed its debounce groups and exited. It waits that grace plus
15 s, then reports; with --force it then kills the service (SIGKILL: what
was in flight is retried at the next start, never lost). Exit 3 when the
service is not running, 4 when it is still stopping at the end of the
wait.

Under systemd it runs systemctl stop instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.stop(cmd.Context(), o) },
	}
	addStopFlags(c, &o)
	return c
}

func addStopFlags(c *cobra.Command, o *stopOpts) {
	c.Flags().Var((*seconds)(&o.timeout), "timeout", "how long to wait for the service to stop, as 45s or 45 (default courier.outbound.shutdown_grace + 15s)")
	c.Flags().BoolVar(&o.force, "force", false, "kill the service (SIGKILL) if it has not stopped when the wait ends")
	// Upstream's stop --wait blocks until the service has stopped, which
	// this stop always does.
	var wait bool
	c.Flags().BoolVar(&wait, "wait", true, "wait until the service has stopped (always)")
	c.Flags().MarkHidden("wait")
}

func (a *app) restartCommand() *cobra.Command {
	var (
		so stopOpts
		o  startOpts
	)
	c := &cobra.Command{
		Use:   "restart",
		Short: "Stop the service, then start it (start it if it was not running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := a.daemon()
			if err != nil {
				return err
			}
			if u, ok, err := d.SystemdUnit(cmd.Context()); err != nil {
				return err
			} else if ok {
				return d.Systemctl(cmd.Context(), u, "restart")
			}
			err = a.stop(cmd.Context(), so)
			if err != nil && fault.KindOf(err) == fault.NoService {
				fmt.Fprintln(a.stdout, "courier was not running")
			} else if err != nil {
				return err
			}
			if o.debug && o.lf.level == "" {
				o.lf.level = "debug"
			}
			return a.start(cmd.Context(), o)
		},
	}
	addStopFlags(c, &so)
	o.timeout = time.Minute
	c.Flags().Var((*seconds)(&o.timeout), "start-timeout", "how long to wait for the service to say it is ready")
	c.Flags().BoolVar(&o.debug, "debug", false, "log at debug level (--log-level debug)")
	return c
}

// seconds is a duration flag that also takes a bare number of seconds, as
// upstream's `stop --timeout 30` does.
type seconds time.Duration

func (s *seconds) String() string {
	if *s == 0 {
		return ""
	}
	return time.Duration(*s).String()
}

func (s *seconds) Set(v string) error {
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		*s = seconds(n * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration (45s, 2m) or a number of seconds", v)
	}
	*s = seconds(d)
	return nil
}

func (s *seconds) Type() string { return "duration" }

// daemon is the workspace's service, as start, stop and logs see it.
func (a *app) daemon() (*daemon.Daemon, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	return &daemon.Daemon{Root: a.root, Config: cfg, Stdin: a.stdin, Stdout: a.stdout, Stderr: a.stderr}, nil
}

// start runs serve in the background and waits until it is ready.
func (a *app) start(ctx context.Context, o startOpts) error {
	d, err := a.daemon()
	if err != nil {
		return err
	}
	if o.debug && o.lf.level == "" {
		o.lf.level = "debug"
	}
	st, err := d.Start(ctx, daemon.StartOptions{Timeout: o.timeout, LogLevel: o.lf.level, LogFormat: o.lf.format})
	if err != nil {
		return err
	}
	if !st.Systemd {
		a.printStarted(d.Config, st)
	}
	a.warnDegraded(ctx, d.Config)
	return nil
}

// warnDegraded tells, on stderr, of each provider the service just
// started runs without (its credentials refused, its server out of
// reach): the service runs the others and tries it again, so start
// succeeds, but whoever started it should know.
func (a *app) warnDegraded(ctx context.Context, cfg *config.Config) {
	rep, live := a.fetchHealth(ctx, cfg.Courier.HTTP.Listen)
	if !live {
		return
	}
	for _, d := range degradedAdapters(rep) {
		fmt.Fprintf(a.stderr, "courier: warning: %s; the other providers run (courier status shows it)\n", d)
	}
}

func (a *app) printStarted(cfg *config.Config, st *daemon.Started) {
	w := a.stdout
	fmt.Fprintf(w, "courier started (pid %d)\n", st.PID)
	fmt.Fprintf(w, "  http     http://%s (/health, /metrics)\n", cfg.Courier.HTTP.Listen)
	fmt.Fprintf(w, "  socket   %s\n", cfg.SocketPath(a.root))
	if e := email.ConfigOf(cfg); e != nil && e.Enabled {
		if e.Receiver.SMTP != "" {
			fmt.Fprintf(w, "  smtp     %s (receiver)\n", e.Receiver.SMTP)
		}
		if e.Receiver.LMTP != "" {
			fmt.Fprintf(w, "  lmtp     %s (receiver)\n", e.Receiver.LMTP)
		}
	}
	fmt.Fprintf(w, "  log      %s (courier logs -f)\n", st.LogPath)
	fmt.Fprintf(w, "  pid file %s\n", daemon.PIDPath(a.root))
}

// stop stops the workspace's service and waits for it to end.
func (a *app) stop(ctx context.Context, o stopOpts) error {
	d, err := a.daemon()
	if err != nil {
		return err
	}
	st, err := d.Stop(ctx, daemon.StopOptions{Timeout: o.timeout, Force: o.force})
	switch {
	case err != nil || st.Systemd:
		return err
	case st.Killed:
		fmt.Fprintf(a.stdout, "courier did not stop within %v: killed (pid %d); what was in flight is retried at the next start\n", st.Timeout, st.PID)
	default:
		fmt.Fprintf(a.stdout, "courier stopped (pid %d, in %.1fs)\n", st.PID, st.Took.Seconds())
	}
	return nil
}

func (a *app) logsCommand() *cobra.Command {
	var (
		follow bool
		lines  int
	)
	c := &cobra.Command{
		Use:   "logs",
		Short: "Print the service's log (the last lines; -f follows it); journalctl under systemd",
		Long: `Print the last lines of the log of the service ` + "`courier start`" + ` runs
(courier.log.file, .monoco/logs/courier.log), going back into the rotated
files when the current one is shorter; -f then follows it, across
rotations, until interrupted. Under systemd it runs journalctl -u UNIT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 0 {
				return usageError("--lines %d: want 0 or more", lines)
			}
			d, err := a.daemon()
			if err != nil {
				return err
			}
			return d.Logs(cmd.Context(), lines, follow)
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing what is written, across rotations, until interrupted")
	c.Flags().IntVarP(&lines, "lines", "n", 10, "how many of the last lines to print")
	return c
}
