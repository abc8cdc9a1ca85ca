package mailbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// fileWrite is one file to make durable in its final place.
type fileWrite struct {
	dir, name string
	data      []byte
	// replace allows replacing an existing file of the same name; without
	// it an existing file is kept and existed is set.
	replace bool
	// same, when set, accepts a regular file found at the name as the file
	// being written although its bytes differ: an inbound message
	// normalised again on a redelivery differs in received_at, yet it is
	// the message the file holds (see sameFile).
	same func(existing []byte) bool
	// encode, when set, makes data on the goroutine that writes the
	// file: a batch's encoding spreads over the cores with its writes.
	encode func() ([]byte, error)

	tmp     string // name in .tmp/ while staged
	fd      int    // open on tmp (while open) until it is fsynced
	open    bool
	existed bool
}

func (f *fileWrite) path() string { return filepath.Join(f.dir, f.name) }

// fsyncParallelism bounds the fsyncs in flight. Journalled file systems
// merge concurrent fsyncs into one commit, which is most of the speed of a
// batch.
const fsyncParallelism = 32

// writeFiles makes files durable in their final place: each is written to
// .tmp/, all are fsynced concurrently, then each is renamed into place
// without replacing an existing file (unless replace is set), and every
// directory touched is fsynced. Every folder is reached through the root,
// never through a link (see confine.go). When it returns nil every file is
// durable at its final path; a file whose name was already taken by the
// same file (a redelivery after a crash) is left as it was and marked
// existed, and anything else in the way is an UnsafePathError. On error no
// temporary file is left behind; files already renamed stay (they are
// complete).
func (r *fsRoot) writeFiles(files []*fileWrite) (err error) {
	tmpfd, err := r.openDirFd(r.tmp(), true)
	if err != nil {
		return err
	}
	defer unix.Close(tmpfd)
	defer func() {
		for _, f := range files {
			f.closeTemp()
			if f.tmp != "" {
				unix.Unlinkat(tmpfd, f.tmp, 0)
				f.tmp = ""
			}
		}
	}()
	// Each file is created, written and fsynced by one of a bounded set of
	// goroutines: the fsyncs overlap, and the file system commits them
	// together. A large batch is made durable by one syncfs(2) instead of a
	// journal commit per file and per directory.
	bulk := len(files) >= syncfsThreshold
	if err := forEach(files, func(f *fileWrite) error {
		if err := f.writeTemp(tmpfd); err != nil {
			return err
		}
		if bulk {
			return f.closeTemp()
		}
		return f.syncTemp()
	}); err != nil {
		return err
	}
	if bulk {
		if err := syncFS(tmpfd); err != nil {
			return err
		}
	}
	dirs := map[string]int{}
	defer func() {
		for _, fd := range dirs {
			unix.Close(fd)
		}
	}()
	for _, f := range files {
		dfd, ok := dirs[f.dir]
		if !ok {
			if dfd, err = r.openDirFd(f.dir, true); err != nil {
				return err
			}
			dirs[f.dir] = dfd
		}
		if err := r.place(tmpfd, dfd, f); err != nil {
			return err
		}
	}
	if bulk {
		return syncFS(tmpfd)
	}
	type dir struct {
		path string
		fd   int
	}
	list := make([]dir, 0, len(dirs))
	for p, fd := range dirs {
		list = append(list, dir{p, fd})
	}
	return forEach(list, func(d dir) error {
		if err := unix.Fsync(d.fd); err != nil {
			return fmt.Errorf("mailbox: fsync %s: %w", r.rel(d.path), err)
		}
		return nil
	})
}

// syncfsThreshold is the batch size from which one syncfs(2) replaces an
// fsync per file and per directory.
const syncfsThreshold = 16

// syncFS makes everything written to the file system holding the folder
// fd durable.
func syncFS(fd int) error {
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("mailbox: syncfs: %w", err)
	}
	return nil
}

func (f *fileWrite) writeTemp(tmpfd int) error {
	if f.encode != nil {
		data, err := f.encode()
		if err != nil {
			return err
		}
		f.data, f.encode = data, nil
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	name := "w-" + hex.EncodeToString(rnd[:]) + "-" + f.name
	fd, err := unix.Openat(tmpfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, filePerm)
	if err != nil {
		return fmt.Errorf("mailbox: stage %s: %w", f.name, err)
	}
	f.tmp = name
	f.fd, f.open = fd, true
	// On the descriptor, not an os.File: no finalizer, no F_GETFL, for a
	// file written once.
	for b := f.data; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			return fmt.Errorf("mailbox: stage %s: %w", f.name, err)
		}
		b = b[n:]
	}
	return nil
}

// closeTemp closes the staged file if it is open.
func (f *fileWrite) closeTemp() error {
	if !f.open {
		return nil
	}
	f.open = false
	if err := unix.Close(f.fd); err != nil {
		return fmt.Errorf("mailbox: stage %s: %w", f.name, err)
	}
	return nil
}

func (f *fileWrite) syncTemp() error {
	if err := unix.Fsync(f.fd); err != nil {
		f.closeTemp()
		return fmt.Errorf("mailbox: fsync %s: %w", f.name, err)
	}
	return f.closeTemp()
}

// place renames a staged file into its folder. A name already taken is
// looked at (sameFile): the same file is a duplicate, anything else an
// error; the name is tried again if what held it is gone by then.
func (r *fsRoot) place(tmpfd, dirfd int, f *fileWrite) error {
	for range 3 {
		err := renameAt(tmpfd, f.tmp, dirfd, f.name, f.replace)
		if err == nil {
			f.tmp = ""
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return &os.PathError{Op: "mailbox: rename into", Path: r.rel(f.path()), Err: err}
		}
		same, err := r.sameFile(dirfd, f)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile: the name is free again
		}
		if err != nil {
			return err
		}
		if same {
			f.existed = true
			unix.Unlinkat(tmpfd, f.tmp, 0)
			f.tmp = ""
			return nil
		}
		return &UnsafePathError{Path: r.rel(f.path()), What: "a different file", Write: true}
	}
	return fmt.Errorf("mailbox: %s: the name is taken and freed again and again", r.rel(f.path()))
}

// sameFile reports whether the file at f's name is f: a regular file with
// f's bytes, or one f.same accepts. Before, an existing name counted as a
// duplicate whatever held it, so a link planted at the predictable name of
// the next message made its writer report the message written while it
// was dropped. A link or anything but a regular file is an
// UnsafePathError; nothing it points to is read.
func (r *fsRoot) sameFile(dirfd int, f *fileWrite) (bool, error) {
	h, err := r.openFileAt(dirfd, f.name, f.path())
	if err != nil {
		var ue *UnsafePathError
		if errors.As(err, &ue) {
			ue.Write = true
			return false, ue
		}
		return false, err
	}
	defer h.Close()
	b, err := readAllBounded(h, r.rel(f.path()))
	if err != nil {
		return false, err
	}
	return bytes.Equal(b, f.data) || (f.same != nil && f.same(b)), nil
}

// writeFile makes one file durable in its final place.
func (r *fsRoot) writeFile(dir, name string, data []byte, replace bool) (existed bool, err error) {
	f := &fileWrite{dir: dir, name: name, data: data, replace: replace}
	err = r.writeFiles([]*fileWrite{f})
	return f.existed, err
}

func (r *fsRoot) tmp() string { return filepath.Join(r.path, ".tmp") }

// syncDir fsyncs the folder p of the mailbox.
func (r *fsRoot) syncDir(p string) error {
	fd, err := r.openDirFd(p, false)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("mailbox: fsync %s: %w", r.rel(p), err)
	}
	return nil
}

// forEach runs fn over items with bounded concurrency and returns the first
// error.
func forEach[T any](items []T, fn func(T) error) error {
	if len(items) == 1 {
		return fn(items[0])
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ferr error
		sem  = make(chan struct{}, fsyncParallelism)
	)
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func(it T) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(it); err != nil {
				mu.Lock()
				if ferr == nil {
					ferr = err
				}
				mu.Unlock()
			}
		}(it)
	}
	wg.Wait()
	return ferr
}
