package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// StartOptions are start's flags.
type StartOptions struct {
	// Timeout is how long to wait for the service to say it is ready.
	Timeout time.Duration
	// LogLevel and LogFormat are serve's --log-level and --log-format
	// ("" for the config's).
	LogLevel, LogFormat string
}

// Started is what Start did.
type Started struct {
	// Systemd: systemctl started it, and said so.
	Systemd bool
	PID     int
	LogPath string
}

// Start runs serve in the background and waits until it is ready. A
// running service is a Conflict; one that exits at start gives its exit
// code's kind (a bad config, a conflict) or Unavailable.
func (d *Daemon) Start(ctx context.Context, o StartOptions) (*Started, error) {
	if u, ok, err := d.SystemdUnit(ctx); err != nil {
		return nil, err
	} else if ok {
		return &Started{Systemd: true}, d.Systemctl(ctx, u, "start")
	}
	if mailbox.Initialized(d.Root) {
		r, err := d.probe()
		if err != nil {
			return nil, err
		}
		if r.held {
			return nil, fault.Wrap(fault.Conflict, errors.New(r.String()))
		}
	}
	if err := refuseRootInOthersWorkspace(d.Root); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start: finding this program to run it: %w", err)
	}
	logPath := d.Config.LogPath(d.Root)
	logf, err := openServiceLog(logPath)
	if err != nil {
		return nil, fault.Wrap(fault.CantCreate, err)
	}
	defer logf.Close()
	from, _ := logf.Seek(0, io.SeekEnd)

	// READY=1 comes on a socket in a folder only this user can enter.
	dir, err := os.MkdirTemp("", "courier-start-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("start: notify socket: %w", err)
	}
	defer notify.Close()

	cmd := exec.Command(exe, d.serveArgs(logPath, o)...)
	cmd.Dir = d.Root
	cmd.Stdin = nil // /dev/null
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(daemonEnv(os.Environ()), "NOTIFY_SOCKET="+notify.LocalAddr().String())
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fault.Wrap(fault.Unavailable, fmt.Errorf("start: %w", err))
	}
	pid := cmd.Process.Pid // Release, once it is ready, forgets it
	if err := d.awaitReady(ctx, cmd, notify, o.Timeout, logPath, from); err != nil {
		return nil, err
	}
	return &Started{PID: pid, LogPath: logPath}, nil
}

// serveArgs are the arguments of the detached serve.
func (d *Daemon) serveArgs(logPath string, o StartOptions) []string {
	args := []string{"--root", d.Root}
	if d.Config.Path != "" {
		p, _ := filepath.Abs(d.Config.Path)
		args = append(args, "--config", p)
	}
	args = append(args, "serve", "--log-file", logPath)
	if o.LogLevel != "" {
		args = append(args, "--log-level", o.LogLevel)
	}
	if o.LogFormat != "" {
		args = append(args, "--log-format", o.LogFormat)
	}
	return args
}

// awaitReady waits for the serve cmd runs to send READY=1 on notify. One
// that exits first, or is not ready in time (or start is interrupted), is
// an error that quotes what it logged since from; one not ready in time
// is stopped, as systemd does at TimeoutStartSec: a service half started
// is worse than none.
func (d *Daemon) awaitReady(ctx context.Context, cmd *exec.Cmd, notify *net.UnixConn, timeout time.Duration, logPath string, from int64) error {
	pid := cmd.Process.Pid
	ready := make(chan struct{})
	go readReady(notify, ready)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	select {
	case <-ready:
		cmd.Process.Release()
		return nil
	case <-exited:
		code := cmd.ProcessState.ExitCode()
		err := fmt.Errorf("courier serve exited at start (exit %d); the log's last lines (%s):\n%s", code, logPath, logTail(logPath, from, 20))
		switch k := fault.OfExitCode(code); k {
		case fault.Config, fault.Conflict:
			return fault.Wrap(k, err)
		}
		return fault.Wrap(fault.Unavailable, err)
	case <-timer.C:
	case <-ctx.Done():
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(d.Config.Courier.Outbound.ShutdownGrace.D() + StopMargin):
		cmd.Process.Kill()
		<-exited
	}
	why := fmt.Sprintf("did not say it was ready within %v", timeout)
	if ctx.Err() != nil {
		why = "was interrupted while starting"
	}
	return fault.Errorf(fault.Unavailable, "courier serve (pid %d) %s and was stopped; the log's last lines (%s):\n%s", pid, why, logPath, logTail(logPath, from, 20))
}

// readReady closes ready when READY=1 arrives on notify.
func readReady(notify *net.UnixConn, ready chan<- struct{}) {
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
}

// daemonEnv is the environment of a detached serve: start's, without what
// systemd gave start itself (a notify socket, a watchdog, sockets), which
// are not the service's.
func daemonEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "COURIER_CPUPROFILE", "COURIER_MEMPROFILE":
			continue
		}
		out = append(out, kv)
	}
	return out
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
