package main

// courier start | stop | restart: the service without systemd, as
// upstream's Courier CLI documents them (05_Courier_CLI §3). `start` runs
// `courier serve` detached (the binary run again in a session of its own,
// stdin from /dev/null, stdout and stderr to the log file: a Go process is
// never forked) and waits for the READY=1 serve sends to systemd, on a
// notify socket of its own; `stop` sends SIGTERM and waits for the process
// to end. Which process is the service is the workspace lock's to say
// (internal/service: Probe); the pid file is its label. Under systemd
// the same verbs act through systemctl (systemd.go).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
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
	timeout time.Duration // 0: courier.outbound.shutdown_grace + stopMargin
	force   bool
}

// stopMargin is how much longer than courier.outbound.shutdown_grace stop
// waits by default: the grace bounds the sends in flight; the rest of the
// shutdown (flushing debounce groups, closing the database) is quick. The
// systemd unit's TimeoutStopSec=45 is the same sum.
const stopMargin = 15 * time.Second

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
config). A running service is a conflict: exit 2, naming its pid.

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
	f.BoolVar(&o.foreground, "foreground", false, "run in the foreground, as `courier serve` does")
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
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if u, ok, err := a.systemdUnit(cmd.Context(), cfg); err != nil {
				return err
			} else if ok {
				return a.systemctlVerb(cmd.Context(), u, "restart")
			}
			err = a.stop(cmd.Context(), so)
			var ee *exitError
			if errors.As(err, &ee) && ee.code == exitNoService {
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

// pidPath is the pid file of the workspace's service.
func (a *app) pidPath() string {
	return filepath.Join(mailbox.Layout{Root: a.root}.State(), "courier.pid")
}

// lockPath is the workspace lock serve and fetch take (openExclusive).
func (a *app) lockPath() string {
	return filepath.Join(mailbox.Layout{Root: a.root}.State(), "serve.lock")
}

// running is what start, stop and restart know of the workspace's service.
type running struct {
	pid   int  // the lock holder's pid (0: none, or not written yet)
	serve bool // the holder is a serve (its pid is in the pid file), not a fetch pass
	held  bool
}

// probe finds the service of the workspace and removes a stale pid file:
// one whose process is gone, or whose pid now names another program
// (nothing holds the lock, so no serve of this workspace runs, whatever
// that pid is doing).
func (a *app) probe() (running, error) {
	h, err := service.Probe(a.lockPath())
	if err != nil {
		return running{}, err
	}
	filePID, ferr := service.ReadPIDFile(a.pidPath())
	if !h.Held {
		if filePID != 0 || ferr != nil {
			why := "no longer running"
			if ferr != nil {
				why = "unreadable"
			} else if unix.Kill(filePID, 0) != unix.ESRCH {
				why = "now another program, not courier serve of this workspace"
			}
			if err := os.Remove(a.pidPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
				return running{}, fmt.Errorf("removing the stale pid file: %w", err)
			}
			fmt.Fprintf(a.stderr, "removed a stale pid file (pid %d: %s)\n", filePID, why)
		}
		return running{}, nil
	}
	r := running{held: true, pid: h.PID}
	if r.pid == 0 {
		// The holder has the lock but has not written its pid yet: the
		// pid file, once written, is its.
		r.pid = filePID
	}
	r.serve = filePID != 0 && filePID == r.pid
	return r, nil
}

func (r running) String() string {
	if r.serve {
		return fmt.Sprintf("the service is already running (pid %d; `courier stop` stops it)", r.pid)
	}
	if r.pid != 0 {
		return fmt.Sprintf("pid %d holds the workspace (a `courier fetch` pass, or a serve that is starting)", r.pid)
	}
	return "another process holds the workspace (a serve that is starting, or a `courier fetch` pass)"
}

// start runs serve in the background and waits until it is ready.
func (a *app) start(ctx context.Context, o startOpts) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if u, ok, err := a.systemdUnit(ctx, cfg); err != nil {
		return err
	} else if ok {
		return a.systemctlVerb(ctx, u, "start")
	}
	if mailbox.Initialized(a.root) {
		r, err := a.probe()
		if err != nil {
			return err
		}
		if r.held {
			return withCode(exitConflict, errors.New(r.String()))
		}
	}
	if err := refuseRootInOthersWorkspace(a.root); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start: finding this program to run it: %w", err)
	}
	logPath := cfg.LogPath(a.root)
	logf, err := openServiceLog(logPath)
	if err != nil {
		return withCode(exitCantCreat, err)
	}
	defer logf.Close()
	from, _ := logf.Seek(0, io.SeekEnd)

	// READY=1 comes on a socket in a folder only this user can enter.
	dir, err := os.MkdirTemp("", "courier-start-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("start: notify socket: %w", err)
	}
	defer notify.Close()

	args := []string{"--root", a.root}
	if cfg.Path != "" {
		p, _ := filepath.Abs(cfg.Path)
		args = append(args, "--config", p)
	}
	args = append(args, "serve", "--log-file", logPath)
	if o.debug && o.lf.level == "" {
		o.lf.level = "debug"
	}
	if o.lf.level != "" {
		args = append(args, "--log-level", o.lf.level)
	}
	if o.lf.format != "" {
		args = append(args, "--log-format", o.lf.format)
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = a.root
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(daemonEnv(os.Environ()), "NOTIFY_SOCKET="+notify.LocalAddr().String())
	// A session of its own: no controlling terminal, no SIGHUP or ^C
	// from the one start ran in.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return withCode(exitUnavailable, fmt.Errorf("start: %w", err))
	}
	pid := cmd.Process.Pid

	ready := make(chan struct{})
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := notify.Read(b)
			if err != nil {
				return
			}
			for l := range strings.SplitSeq(string(b[:n]), "\n") {
				if l == "READY=1" {
					close(ready)
					return
				}
			}
		}
	}()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()

	select {
	case <-ready:
		cmd.Process.Release()
		a.printStarted(cfg, pid, logPath)
		return nil
	case <-exited:
		code := cmd.ProcessState.ExitCode()
		msg := fmt.Sprintf("courier serve exited at start (exit %d); the log's last lines (%s):\n%s", code, logPath, logTail(logPath, from, 20))
		switch code {
		case exitConfig, exitConflict:
			return withCode(code, errors.New(msg))
		}
		return withCode(exitUnavailable, errors.New(msg))
	case <-timer.C:
	case <-ctx.Done():
	}
	// Not ready in time (or start interrupted): a service half started is
	// worse than none; stop it, as systemd does at TimeoutStartSec.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(cfg.Courier.Outbound.ShutdownGrace.D() + stopMargin):
		cmd.Process.Kill()
		<-exited
	}
	why := fmt.Sprintf("did not say it was ready within %v", o.timeout)
	if ctx.Err() != nil {
		why = "was interrupted while starting"
	}
	return withCode(exitUnavailable, fmt.Errorf("courier serve (pid %d) %s and was stopped; the log's last lines (%s):\n%s", pid, why, logPath, logTail(logPath, from, 20)))
}

// refuseRootInOthersWorkspace refuses a start by root in a workspace
// another user owns (the service's, under a careless sudo): the service
// would write files of root's into it, which the owner's service could
// not then change.
func refuseRootInOthersWorkspace(root string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	var st unix.Stat_t
	if unix.Stat(mailbox.Layout{Root: root}.Monoco(), &st) != nil || st.Uid == 0 {
		return nil
	}
	name := strconv.Itoa(int(st.Uid))
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return withCode(exitNoPerm, fmt.Errorf("the workspace %s belongs to %s: start the service as that user (runuser -u %s -- courier start), not as root", root, name, name))
}

// daemonEnv is the environment of a detached serve: start's, without what
// systemd gave start itself (a notify socket, a watchdog, sockets), which
// are not the service's.
func daemonEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "COURIER_CPUPROFILE":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (a *app) printStarted(cfg *config.Config, pid int, logPath string) {
	w := a.stdout
	fmt.Fprintf(w, "courier started (pid %d)\n", pid)
	fmt.Fprintf(w, "  http     http://%s (/health, /metrics)\n", cfg.Courier.HTTP.Listen)
	fmt.Fprintf(w, "  socket   %s\n", cfg.SocketPath(a.root))
	if e := cfg.Courier.Adapters.Email; e.Enabled {
		if e.Receiver.SMTP != "" {
			fmt.Fprintf(w, "  smtp     %s (receiver)\n", e.Receiver.SMTP)
		}
		if e.Receiver.LMTP != "" {
			fmt.Fprintf(w, "  lmtp     %s (receiver)\n", e.Receiver.LMTP)
		}
	}
	fmt.Fprintf(w, "  log      %s (courier logs -f)\n", logPath)
	fmt.Fprintf(w, "  pid file %s\n", a.pidPath())
}

// stop stops the workspace's service and waits for it to end.
func (a *app) stop(ctx context.Context, o stopOpts) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	if u, ok, err := a.systemdUnit(ctx, cfg); err != nil {
		return err
	} else if ok {
		return a.systemctlVerb(ctx, u, "stop")
	}
	if !mailbox.Initialized(a.root) {
		return withCode(exitNoService, fmt.Errorf("the service is not running (no mailbox in %s)", a.root))
	}
	r, err := a.probe()
	if err != nil {
		return err
	}
	switch {
	case !r.held:
		return withCode(exitNoService, errors.New("the service is not running"))
	case !r.serve:
		return withCode(exitNoService, fmt.Errorf("the service is not running: %s", r))
	}
	timeout := o.timeout
	if timeout <= 0 {
		timeout = cfg.Courier.Outbound.ShutdownGrace.D() + stopMargin
	}
	began := time.Now()
	// A pidfd names this process for good: if it ends and its pid is
	// reused meanwhile, the wait below still ends with it.
	pidfd, perr := unix.PidfdOpen(r.pid, 0)
	if perr == nil {
		defer unix.Close(pidfd)
		// The pid was read from the lock; it must still hold it now that it
		// is pinned, or it is not the service any more.
		if h, err := service.Probe(a.lockPath()); err != nil || !h.Held || h.PID != r.pid {
			return withCode(exitNoService, errors.New("the service is not running (it stopped just now)"))
		}
	}
	if err := unix.Kill(r.pid, unix.SIGTERM); err != nil {
		if errors.Is(err, unix.EPERM) {
			return withCode(exitNoPerm, fmt.Errorf("the service (pid %d) runs as another user: stop it as that user (or through systemd, courier.systemd.unit)", r.pid))
		}
		if errors.Is(err, unix.ESRCH) {
			return withCode(exitNoService, errors.New("the service is not running (it stopped just now)"))
		}
		return err
	}
	if waitExit(ctx, r.pid, pidfd, perr == nil, timeout) {
		service.RemovePIDFile(a.pidPath(), r.pid)
		fmt.Fprintf(a.stdout, "courier stopped (pid %d, in %.1fs)\n", r.pid, time.Since(began).Seconds())
		return nil
	}
	if ctx.Err() != nil {
		return withCode(exitTimeout, fmt.Errorf("interrupted: the service (pid %d) is still stopping", r.pid))
	}
	if !o.force {
		return withCode(exitTimeout, fmt.Errorf("the service (pid %d) is still stopping after %v (see `courier logs`); wait, or `courier stop --force` to kill it", r.pid, timeout))
	}
	unix.Kill(r.pid, unix.SIGKILL)
	if !waitExit(ctx, r.pid, pidfd, perr == nil, 10*time.Second) {
		return withCode(exitTimeout, fmt.Errorf("the service (pid %d) did not die of SIGKILL within 10s", r.pid))
	}
	service.RemovePIDFile(a.pidPath(), r.pid)
	fmt.Fprintf(a.stdout, "courier did not stop within %v: killed (pid %d); what was in flight is retried at the next start\n", timeout, r.pid)
	return nil
}

// waitExit waits until the process ends: until its pidfd is readable, or,
// on a kernel without pidfds (before 5.3), until kill(pid, 0) fails.
func waitExit(ctx context.Context, pid, pidfd int, havePidfd bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		// Short slices, so that ^C is heard.
		slice := min(left, 200*time.Millisecond)
		if havePidfd {
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, int(slice.Milliseconds())+1)
			if err == nil && n > 0 {
				return true
			}
			if err != nil && !errors.Is(err, unix.EINTR) {
				return false
			}
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			return true
		}
		time.Sleep(min(slice, 20*time.Millisecond))
	}
}

// openServiceLog opens the log file for a serve's stdout and stderr
// (appending: concurrent writers never overwrite each other), creating it
// and its folder.
func openServiceLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	// O_NOFOLLOW: a link planted in the log's place is not written through.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW, 0o640)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// logTail returns the last n lines of the log from offset from on (what
// this start's serve wrote), indented.
func logTail(path string, from int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "  (" + err.Error() + ")"
	}
	defer f.Close()
	f.Seek(from, io.SeekStart)
	var lines []string
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024)
	for sc.Scan() {
		lines = append(lines, "  "+sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "  (nothing)"
	}
	return strings.Join(lines, "\n")
}
