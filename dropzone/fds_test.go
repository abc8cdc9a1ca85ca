package dropzone

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCloseWaitsForHandles: Close does not close the kept directory
// handles under a call that is using one, because the number could be
// another file's by the time the call renames into it.
func TestCloseWaitsForHandles(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	used := make(chan error, 1)
	go func() {
		used <- s.inDirs(func(fds ...int) error {
			close(inside)
			<-release
			return nil
		}, tmpDir)
	}()
	<-inside
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a call was using a directory handle")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-used; err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the call was done")
	}
	if err := s.inDirs(func(...int) error { return nil }, tmpDir); err == nil {
		t.Error("a handle was used after Close")
	}
}

// TestNewFanKeepsTmpHandle: making the fan-out directories of a new store
// does not drop the kept handle of .tmp/ each time (a handle dropped is
// held until Close, so a fresh store would hold one per fan-out made).
func TestNewFanKeepsTmpHandle(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.NewBatch()
	for i := range 64 {
		if _, err := b.Put(strings.NewReader(fmt.Sprint("object ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	s.fds.mu.Lock()
	retired := len(s.fds.retired)
	s.fds.mu.Unlock()
	if retired != 0 {
		t.Errorf("%d directory handles dropped while making fan-out directories, want 0", retired)
	}
}
