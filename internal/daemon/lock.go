package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked is returned when another process serves the workspace.
var ErrLocked = errors.New("another courier serve is running on this mailbox")

// Lock is the single-instance lock of a workspace: an flock on a file in
// .state/, released by the kernel when the process dies, so a crash never
// leaves a stale lock.
type Lock struct {
	f *os.File
}

// holderGone is how long AcquireLock waits for a lock whose holder, as the
// lock file names it, is no longer running. A process the service forks
// (a hook) holds a copy of the lock's descriptor from fork until its exec
// closes it; when the service is killed in that instant, the child holds
// the lock a moment longer than the service did. A restart then waits
// for it instead of refusing to start.
const holderGone = 5 * time.Second

// AcquireLock takes the lock at path without waiting for a holder that
// runs. When another process holds it, the error wraps ErrLocked and names
// that process.
func AcquireLock(path string) (*Lock, error) {
	// 0640, as every file of the workspace (the pid it holds is nobody
	// else's business); O_NOFOLLOW: a link in its place is not followed.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o640)
	if err != nil {
		return nil, fmt.Errorf("service: lock: %w", err)
	}
	deadline := time.Now().Add(holderGone)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("service: lock: %w", err)
		}
		pid := holder(f)
		if pid == "" || mayRun(pid) || time.Now().After(deadline) {
			f.Close()
			if pid != "" {
				return nil, fmt.Errorf("%w (pid %s, lock %s)", ErrLocked, pid, path)
			}
			return nil, fmt.Errorf("%w (lock %s)", ErrLocked, path)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &Lock{f: f}, nil
}

// holder is the pid the lock file names ("" when it names none: a holder
// that has not written it yet, or one that released it).
func holder(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	return strings.TrimSpace(string(b[:n]))
}

// mayRun reports whether the process pid may still run: it exists, or
// the pid is not one this process can tell about.
func mayRun(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return true
	}
	err = unix.Kill(n, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Release drops the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close()
	l.f = nil
	return err
}
