package dropzone

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"

	"golang.org/x/sys/unix"
)

// The hot paths of a batch (is this object stored? create a temp file,
// rename it into place) work on directories the Store keeps open: ".",
// ".tmp", "sha256" and the fan-out directories "sha256/xx", each opened
// once through the root (so never through a link) and then used with
// *at(2) calls on a last name opened O_NOFOLLOW. A put of a new object is
// then an openat to look, one to create, a write and a rename, where
// os.Root walks the path component by component on every call (about
// twenty system calls an object, a third of the CPU time of an IMAP
// backfill).
//
// A directory removed behind the Store's back (nothing in Courier removes
// them) answers ENOENT to every lookup, create and rename in it, as a
// removed directory does: the caller then forgets the handle, makes the
// directory again and retries once. A handle forgotten is not closed
// until the Store is (another goroutine may be using its number), and
// Close waits for the calls using handles (use): a number closed under a
// call could be another file's by the time the call uses it.
type dirFDs struct {
	use     sync.RWMutex // held shared by a call using handles, exclusively by Close
	mu      sync.Mutex   // guards the fields below
	open    map[string]*os.File
	retired []*os.File
	closed  bool
}

// inDirs calls f with the kept handles of the directories names, under
// the shared hold that keeps Close from closing them meanwhile. A missing
// directory is an error wrapping fs.ErrNotExist and is not remembered.
func (s *Store) inDirs(f func(fds ...int) error, names ...string) error {
	s.fds.use.RLock()
	defer s.fds.use.RUnlock()
	fds := make([]int, len(names))
	for i, name := range names {
		fd, err := s.dirFD(name)
		if err != nil {
			return err
		}
		fds[i] = fd
	}
	return f(fds...)
}

// dirFD returns the kept handle of the directory name, opening it through
// the root the first time. The caller holds s.fds.use shared.
func (s *Store) dirFD(name string) (int, error) {
	s.fds.mu.Lock()
	defer s.fds.mu.Unlock()
	if s.fds.closed {
		return -1, fmt.Errorf("dropzone: %w", os.ErrClosed)
	}
	if f, ok := s.fds.open[name]; ok {
		return int(f.Fd()), nil
	}
	f, err := s.root.Open(name)
	if err != nil {
		return -1, err
	}
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		f.Close()
		return -1, fmt.Errorf("dropzone: %s is not a directory", name)
	}
	if s.fds.open == nil {
		s.fds.open = map[string]*os.File{}
	}
	s.fds.open[name] = f
	return int(f.Fd()), nil
}

// forgetDir drops the handle of name, which answered ENOENT: the next
// call opens the directory again.
func (s *Store) forgetDir(name string) {
	s.fds.mu.Lock()
	defer s.fds.mu.Unlock()
	if f, ok := s.fds.open[name]; ok {
		delete(s.fds.open, name)
		s.fds.retired = append(s.fds.retired, f)
	}
}

// closeDirs closes every handle once no call uses them, at Store.Close.
func (s *Store) closeDirs() {
	s.fds.use.Lock()
	defer s.fds.use.Unlock()
	s.fds.mu.Lock()
	defer s.fds.mu.Unlock()
	for _, f := range s.fds.open {
		f.Close()
	}
	for _, f := range s.fds.retired {
		f.Close()
	}
	s.fds.open, s.fds.retired, s.fds.closed = nil, nil, true
}

// openAt opens the last name of rel (a path in the dropzone) read-only in
// its directory's kept handle, never following a link; ENOENT may mean
// the directory itself is gone.
func (s *Store) openAt(rel string) (fd int, err error) {
	err = s.inDirs(func(d ...int) error {
		for {
			fd, err = unix.Openat(d[0], path.Base(rel), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return &fs.PathError{Op: "open", Path: rel, Err: err}
		}
		return nil
	}, path.Dir(rel))
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// createTempFD creates a new empty temporary file in .tmp/, read-only
// (objectPerm: the descriptor returned is still writable), registers it
// as live and returns its name (relative to the dropzone) and descriptor.
func (s *Store) createTempFD() (string, int, error) {
	retried := false
	for range 10 {
		base := tmpPrefix + rand.Text()
		fd := -1
		err := s.inDirs(func(d ...int) (err error) {
			fd, err = unix.Openat(d[0], base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, objectPerm)
			return err
		}, tmpDir)
		switch {
		case err == unix.EEXIST || err == unix.EINTR:
			continue
		case errors.Is(err, fs.ErrNotExist) && !retried: // .tmp/ removed behind our back
			retried = true
			s.forgetDir(tmpDir)
			if _, err := s.mkdir(tmpDir, tmpDirPerm); err != nil {
				return "", -1, err
			}
			continue
		case err != nil:
			return "", -1, fmt.Errorf("dropzone: create temp: %w", err)
		}
		name := tmpDir + "/" + base
		s.mu.Lock()
		s.live[name] = struct{}{}
		s.mu.Unlock()
		return name, fd, nil
	}
	return "", -1, errors.New("dropzone: create temp: no unused name")
}

// writeAll writes data to fd whole.
func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// renameInto renames the temp file tmp to the object path dst, both held
// by kept handles; ENOENT from a fan-out directory removed behind our back
// is retried once after making it again. made names the directories
// whose entries that changed: sha256/ when a fan-out directory was made,
// "." when sha256/ itself was.
func (s *Store) renameInto(tmp, dst string) (made []string, err error) {
	dir := path.Dir(dst)
	for attempt := 0; ; attempt++ {
		err := s.inDirs(func(d ...int) error {
			return unix.Renameat(d[0], path.Base(tmp), d[1], path.Base(dst))
		}, tmpDir, dir)
		if attempt == 0 && errors.Is(err, fs.ErrNotExist) {
			// The fan-out directory is not made yet (its open failed),
			// or a kept one, or .tmp/, went away meanwhile (the rename
			// failed): only then are the handles dropped.
			if err == unix.ENOENT {
				s.forgetDir(dir)
				s.forgetDir(tmpDir)
			}
			if made, err = s.makeFan(dir); err != nil {
				return made, err
			}
			continue
		}
		var errno unix.Errno
		if errors.As(err, &errno) {
			return made, &os.LinkError{Op: "rename", Old: tmp, New: dst, Err: err}
		}
		return made, err
	}
}

// makeFan makes the fan-out directory dir, and sha256/ if it is missing,
// and names the directories whose entries changed.
func (s *Store) makeFan(dir string) ([]string, error) {
	var made []string
	created, err := s.mkdir(dir, dirPerm)
	if errors.Is(err, fs.ErrNotExist) {
		// sha256/ itself went missing: recreate it.
		s.forgetDir(objectsDir)
		var c bool
		if c, err = s.mkdir(objectsDir, dirPerm); err == nil {
			if c {
				made = append(made, ".")
			}
			created, err = s.mkdir(dir, dirPerm)
		}
	}
	if created {
		made = append(made, objectsDir)
	}
	return made, err
}

// sharedLock is the sweep lock taken shared by the uses of this Store
// (sweep.go) on one open file of the dropzone's folder: the first use
// takes it, the last releases it, and uses that overlap make no system
// call. flock(2) locks belong to an open file, so this one is never used
// for the exclusive lock, which a sweep takes on an open file of its own.
type sharedLock struct {
	mu sync.Mutex
	n  int
	f  *os.File
}

// lockShared takes the sweep lock shared; the function returned releases
// it. ok is false when it cannot be had.
func (s *Store) lockShared() (unlock func(), ok bool) {
	l := &s.shared
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		if l.f == nil {
			f, err := s.root.Open(".")
			if err != nil {
				return nil, false
			}
			l.f = f
		}
		if !flock(l.f, unix.LOCK_SH) {
			return nil, false
		}
	}
	l.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.n--; l.n == 0 && l.f != nil {
				flock(l.f, unix.LOCK_UN)
			}
		})
	}, true
}

// flock applies how to f, retrying when interrupted.
func flock(f *os.File, how int) bool {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err == nil
		}
	}
}

// closeShared closes the shared lock's file, at Store.Close.
func (s *Store) closeShared() {
	s.shared.mu.Lock()
	defer s.shared.mu.Unlock()
	if s.shared.f != nil {
		s.shared.f.Close()
		s.shared.f = nil
	}
}
