package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The pid file says which process is `courier serve` for `courier start`,
// `stop` and `restart`, as upstream's courier.pid does. It is only a
// label: whether a service runs is the lock's to say (a pid file outlives
// a crash, and its pid may since name another program), so every reader
// checks it against the lock with Probe.

// WritePIDFile writes this process's pid to path, atomically (a reader
// sees the old file or the new one, never half of one).
func WritePIDFile(path string) error {
	if err := writeFile(path, []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		return fmt.Errorf("service: pid file: %w", err)
	}
	return nil
}

// writeFile writes data to path at once (a temporary file renamed), mode
// 0640: a reader sees the old content or the new, never a part.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o640)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// RemovePIDFile removes the pid file at path if it names pid, so that a
// process never removes the file of a later one.
func RemovePIDFile(path string, pid int) error {
	if got, err := ReadPIDFile(path); err != nil || got != pid {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("service: pid file: %w", err)
	}
	return nil
}

// ReadPIDFile returns the pid the file at path names: 0 when there is no
// file, an error when it holds anything but a pid.
func ReadPIDFile(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("service: pid file: %w", err)
	}
	defer f.Close()
	// A pid is a few digits: read no more, whatever was planted there.
	b := make([]byte, 32)
	n, _ := f.Read(b)
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:n])))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("service: pid file %s does not hold a pid", path)
	}
	return pid, nil
}

// Holder is what Probe finds of the process serving a workspace.
type Holder struct {
	// Held is whether a process holds the workspace's lock: a serve, or a
	// `courier fetch` pass.
	Held bool
	// PID is the holder's pid, as it wrote it in the lock (0 if Held is
	// false, or if the holder has not written it yet).
	PID int
}

// Probe tells whether a process holds the lock at lockPath, without
// waiting and without taking it for more than the instant of the test (a
// shared lock, taken and dropped at once): the kernel drops the lock when
// its holder dies, so a held lock is a live holder, whatever the pid files
// say. Only reading the lock is needed, so a user who may read the
// workspace's state folder can probe it.
func Probe(lockPath string) (Holder, error) {
	f, err := os.OpenFile(lockPath, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Holder{}, nil
	}
	if err != nil {
		return Holder{}, fmt.Errorf("service: lock: %w", err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return Holder{}, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return Holder{}, fmt.Errorf("service: lock: %w", err)
	}
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return Holder{Held: true, PID: max(pid, 0)}, nil
}
