// Package daemon is the service without systemd, as upstream's Courier
// CLI documents it (05_Courier_CLI §3): `courier start` runs `courier
// serve` detached (the binary run again in a session of its own, stdin
// from /dev/null, stdout and stderr to the log file: a Go process is never
// forked) and waits for the READY=1 serve sends to systemd, on a notify
// socket of its own; `stop` sends SIGTERM and waits for the process to
// end; `logs` prints the rotating log serve writes (LogFile). Which
// process is the service is the workspace lock's to say (Lock, Probe);
// the pid file is its label. Under systemd the same verbs act through
// systemctl and journalctl (systemd.go).
//
// Its errors carry a fault.Kind: a running service is a Conflict, none a
// NoService, a stop still waiting a Timeout.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// StopMargin is how much longer than courier.outbound.shutdown_grace stop
// waits by default: the grace bounds the sends in flight; the rest of the
// shutdown (flushing debounce groups, closing the database) is quick. The
// systemd unit's TimeoutStopSec=45 is the same sum.
const StopMargin = 15 * time.Second

// Daemon is the service of one workspace, as start, stop and logs see it.
type Daemon struct {
	Root   string
	Config *config.Config
	// The command line's streams: notes (a stale pid file removed) go to
	// Stderr; under systemd, systemctl and journalctl use all three.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// PIDPath is the pid file of the service of the workspace at root.
func PIDPath(root string) string {
	return filepath.Join(mailbox.Layout{Root: root}.State(), "courier.pid")
}

// LockPath is the workspace lock serve and fetch take.
func LockPath(root string) string {
	return filepath.Join(mailbox.Layout{Root: root}.State(), "serve.lock")
}

// AbsIn is path, relative to the workspace root unless absolute.
func AbsIn(root, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(root, path)
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
func (d *Daemon) probe() (running, error) {
	h, err := Probe(LockPath(d.Root))
	if err != nil {
		return running{}, err
	}
	pidPath := PIDPath(d.Root)
	filePID, ferr := ReadPIDFile(pidPath)
	if !h.Held {
		if filePID != 0 || ferr != nil {
			why := "no longer running"
			if ferr != nil {
				why = "unreadable"
			} else if unix.Kill(filePID, 0) != unix.ESRCH {
				why = "now another program, not courier serve of this workspace"
			}
			if err := os.Remove(pidPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return running{}, fmt.Errorf("removing the stale pid file: %w", err)
			}
			fmt.Fprintf(d.Stderr, "removed a stale pid file (pid %d: %s)\n", filePID, why)
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

// StopOptions are stop's flags.
type StopOptions struct {
	Timeout time.Duration // 0: courier.outbound.shutdown_grace + StopMargin
	Force   bool          // SIGKILL when the wait ends
}

// Stopped is what Stop did.
type Stopped struct {
	// Systemd: systemctl stopped it, and said so.
	Systemd bool
	PID     int
	Took    time.Duration
	// Killed: it did not stop within Timeout and was killed (Force).
	Killed  bool
	Timeout time.Duration
}

// Stop stops the workspace's service and waits for it to end.
func (d *Daemon) Stop(ctx context.Context, o StopOptions) (*Stopped, error) {
	if u, ok, err := d.SystemdUnit(ctx); err != nil {
		return nil, err
	} else if ok {
		return &Stopped{Systemd: true}, d.Systemctl(ctx, u, "stop")
	}
	r, err := d.serving()
	if err != nil {
		return nil, err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = d.Config.Courier.Outbound.ShutdownGrace.D() + StopMargin
	}
	began := time.Now()
	// A pidfd names this process for good: if it ends and its pid is
	// reused meanwhile, the wait below still ends with it.
	pidfd, perr := unix.PidfdOpen(r.pid, 0)
	if perr == nil {
		defer unix.Close(pidfd)
		// The pid was read from the lock; it must still hold it now that it
		// is pinned, or it is not the service any more.
		if h, err := Probe(LockPath(d.Root)); err != nil || !h.Held || h.PID != r.pid {
			return nil, fault.Wrap(fault.NoService, errors.New("the service is not running (it stopped just now)"))
		}
	}
	if err := terminate(r.pid); err != nil {
		return nil, err
	}
	st := &Stopped{PID: r.pid, Timeout: timeout}
	if waitExit(ctx, r.pid, pidfd, perr == nil, timeout) {
		RemovePIDFile(PIDPath(d.Root), r.pid)
		st.Took = time.Since(began)
		return st, nil
	}
	return d.kill(ctx, st, pidfd, perr == nil, o.Force)
}

// serving finds the workspace's serve, which stop and reload signal; not
// running (or only a fetch pass holding the workspace) is NoService.
func (d *Daemon) serving() (running, error) {
	if !mailbox.Initialized(d.Root) {
		return running{}, fault.Errorf(fault.NoService, "the service is not running (no mailbox in %s)", d.Root)
	}
	r, err := d.probe()
	if err != nil {
		return running{}, err
	}
	switch {
	case !r.held:
		return running{}, fault.Wrap(fault.NoService, errors.New("the service is not running"))
	case !r.serve:
		return running{}, fault.Errorf(fault.NoService, "the service is not running: %s", r)
	}
	return r, nil
}

// terminate sends the service SIGTERM.
func terminate(pid int) error {
	err := unix.Kill(pid, unix.SIGTERM)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM):
		return fault.Errorf(fault.NoPermission, "the service (pid %d) runs as another user: stop it as that user (or through systemd, courier.systemd.unit)", pid)
	case errors.Is(err, unix.ESRCH):
		return fault.Wrap(fault.NoService, errors.New("the service is not running (it stopped just now)"))
	}
	return err
}

// kill ends a stop whose wait ran out: with force, SIGKILL and a short
// wait; without, a Timeout error.
func (d *Daemon) kill(ctx context.Context, st *Stopped, pidfd int, havePidfd, force bool) (*Stopped, error) {
	if ctx.Err() != nil {
		return nil, fault.Errorf(fault.Timeout, "interrupted: the service (pid %d) is still stopping", st.PID)
	}
	if !force {
		return nil, fault.Errorf(fault.Timeout, "the service (pid %d) is still stopping after %v (see `courier logs`); wait, or `courier stop --force` to kill it", st.PID, st.Timeout)
	}
	unix.Kill(st.PID, unix.SIGKILL)
	if !waitExit(ctx, st.PID, pidfd, havePidfd, 10*time.Second) {
		return nil, fault.Errorf(fault.Timeout, "the service (pid %d) did not die of SIGKILL within 10s", st.PID)
	}
	RemovePIDFile(PIDPath(d.Root), st.PID)
	st.Killed = true
	return st, nil
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
	return fault.Errorf(fault.NoPermission, "the workspace %s belongs to %s: start the service as that user (runuser -u %s -- courier start), not as root", root, name, name)
}

// sysProcAttr puts a detached serve in a session of its own: no
// controlling terminal, no SIGHUP or ^C from the one start ran in.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
