package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

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

// AcquireLock takes the lock at path without waiting. When another process
// holds it, the error wraps ErrLocked and names that process.
func AcquireLock(path string) (*Lock, error) {
	// 0640, as every file of the workspace (the pid it holds is nobody
	// else's business); O_NOFOLLOW: a link in its place is not followed.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o640)
	if err != nil {
		return nil, fmt.Errorf("service: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			if pid := strings.TrimSpace(string(b[:n])); pid != "" {
				return nil, fmt.Errorf("%w (pid %s, lock %s)", ErrLocked, pid, path)
			}
			return nil, fmt.Errorf("%w (lock %s)", ErrLocked, path)
		}
		return nil, fmt.Errorf("service: lock: %w", err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &Lock{f: f}, nil
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
