package daemon

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Probe sees a held lock and its holder's pid without taking the lock
// from the holder, and sees it free once released; the probe leaves the
// lock free for the next serve.
func TestProbe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.lock")
	if h, err := Probe(path); err != nil || h.Held {
		t.Fatalf("no lock file: %+v %v", h, err)
	}
	l, err := AcquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Probe(path)
	if err != nil || !h.Held || h.PID != os.Getpid() {
		t.Fatalf("held: %+v %v (pid %d)", h, err, os.Getpid())
	}
	l.Release()
	if h, err := Probe(path); err != nil || h.Held {
		t.Fatalf("released: %+v %v", h, err)
	}
	// Probing took nothing: the lock can be acquired right after.
	l, err = AcquireLock(path)
	if err != nil {
		t.Fatalf("acquire after a probe: %v", err)
	}
	l.Release()
}

// A pid file is written whole, read back, removed only by the process it
// names, and a file holding anything but a pid is an error, not pid 0.
func TestPIDFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "courier.pid")
	if pid, err := ReadPIDFile(path); pid != 0 || err != nil {
		t.Fatalf("no file: %d %v", pid, err)
	}
	if err := WritePIDFile(path); err != nil {
		t.Fatal(err)
	}
	if pid, err := ReadPIDFile(path); pid != os.Getpid() || err != nil {
		t.Fatalf("read back %d %v", pid, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	// Another process's file (a later serve's) is left alone.
	os.WriteFile(path, []byte(strconv.Itoa(os.Getpid()+1)+"\n"), 0o640)
	RemovePIDFile(path, os.Getpid())
	if _, err := os.Stat(path); err != nil {
		t.Errorf("removed another process's pid file: %v", err)
	}
	RemovePIDFile(path, os.Getpid()+1)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("own pid file not removed: %v", err)
	}
	for _, junk := range []string{"", "abc\n", "-5\n", "0\n"} {
		os.WriteFile(path, []byte(junk), 0o640)
		if pid, err := ReadPIDFile(path); err == nil {
			t.Errorf("pid file %q read as %d", junk, pid)
		}
	}
	// A link in its place is not followed.
	os.Remove(path)
	os.WriteFile(filepath.Join(dir, "target"), []byte("1\n"), 0o640)
	os.Symlink("target", path)
	if pid, err := ReadPIDFile(path); err == nil {
		t.Errorf("a link was read as pid %d", pid)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestLockSingleInstance: a second holder is refused with ErrLocked and
// the first holder's pid, also from another process; Release frees it.
func TestLockSingleInstance(t *testing.T) {
	p := filepath.Join(t.TempDir(), "serve.lock")
	l, err := AcquireLock(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AcquireLock(p); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("second lock in the process: %v, want ErrLocked with a pid", err)
	}
	// flock(1) from another process sees the lock held.
	if flock, err := exec.LookPath("flock"); err == nil {
		if err := exec.Command(flock, "-n", p, "true").Run(); err == nil {
			t.Error("another process took the lock")
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := AcquireLock(p)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l2.Release()
}

// A lock held only by a process the dead holder forked (a hook between
// its fork and exec keeps a copy of the descriptor) is waited for, not
// refused: the lock file names a pid that is gone. A live holder is
// still refused at once.
func TestLockHolderGone(t *testing.T) {
	p := filepath.Join(t.TempDir(), "serve.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	// The holder named in the file has exited.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0)
	// A child holds the descriptor for a moment, then the last copy goes.
	child := exec.Command("sh", "-c", "read x")
	child.ExtraFiles = []*os.File{f}
	in, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := make(chan error, 1)
	go func() {
		l, err := AcquireLock(p)
		if err == nil {
			l.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("acquired (or refused) while the child held it: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	in.Close() // the child exits, and with it the last descriptor
	child.Wait()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("after the child exited: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AcquireLock did not return")
	}

	// A holder that runs (this process) is refused at once.
	l, err := AcquireLock(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	start := time.Now()
	if _, err := AcquireLock(p); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a live holder was waited for %v", d)
	}
}
