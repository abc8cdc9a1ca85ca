package mailbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

	tmp     string
	fd      *os.File // open on tmp until it is fsynced
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
// directory touched is fsynced. When it returns nil every file is durable
// at its final path; a file whose name was already taken (a redelivery after
// a crash) is left as it was and marked existed. On error no temporary file
// is left behind; files already renamed stay (they are complete).
func writeFiles(tmpDir string, files []*fileWrite) (err error) {
	defer func() {
		for _, f := range files {
			if f.fd != nil {
				f.fd.Close()
				f.fd = nil
			}
			if f.tmp != "" {
				os.Remove(f.tmp)
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
		if err := f.writeTemp(tmpDir); err != nil {
			return err
		}
		if bulk {
			err := f.fd.Close()
			f.fd = nil
			return err
		}
		return f.syncTemp()
	}); err != nil {
		return err
	}
	if bulk {
		if err := syncFS(tmpDir); err != nil {
			return err
		}
	}
	dirs := map[string]bool{}
	for _, f := range files {
		if !dirs[f.dir] {
			if err := os.MkdirAll(f.dir, 0o755); err != nil {
				return fmt.Errorf("mailbox: %w", err)
			}
			dirs[f.dir] = true
		}
		if err := f.rename(); err != nil {
			return err
		}
	}
	if bulk {
		return syncFS(tmpDir)
	}
	list := make([]string, 0, len(dirs))
	for d := range dirs {
		list = append(list, d)
	}
	return forEach(list, syncDir)
}

// syncfsThreshold is the batch size from which one syncfs(2) replaces an
// fsync per file and per directory.
const syncfsThreshold = 16

// syncFS makes everything written to the file system holding dir durable.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mailbox: %w", err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("mailbox: syncfs: %w", err)
	}
	return nil
}

func (f *fileWrite) writeTemp(tmpDir string) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	f.tmp = filepath.Join(tmpDir, "w-"+hex.EncodeToString(rnd[:])+"-"+f.name)
	fd, err := os.OpenFile(f.tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		f.tmp = ""
		return fmt.Errorf("mailbox: stage %s: %w", f.name, err)
	}
	f.fd = fd
	if _, err := fd.Write(f.data); err != nil {
		return fmt.Errorf("mailbox: stage %s: %w", f.name, err)
	}
	return nil
}

func (f *fileWrite) syncTemp() error {
	err := f.fd.Sync()
	if cerr := f.fd.Close(); err == nil {
		err = cerr
	}
	f.fd = nil
	if err != nil {
		return fmt.Errorf("mailbox: fsync %s: %w", f.name, err)
	}
	return nil
}

func (f *fileWrite) rename() error {
	dst := f.path()
	if f.replace {
		if err := os.Rename(f.tmp, dst); err != nil {
			return fmt.Errorf("mailbox: %w", err)
		}
		f.tmp = ""
		return nil
	}
	err := renameNoReplace(f.tmp, dst)
	switch {
	case err == nil:
		f.tmp = ""
	case errors.Is(err, os.ErrExist):
		f.existed = true
		os.Remove(f.tmp)
		f.tmp = ""
	default:
		return fmt.Errorf("mailbox: %w", err)
	}
	return nil
}

// renameNoReplace renames old to new, failing with os.ErrExist when new
// exists. It uses renameat2(RENAME_NOREPLACE) and falls back to link and
// unlink on file systems without it.
func renameNoReplace(old, new string) error {
	err := unix.Renameat2(unix.AT_FDCWD, old, unix.AT_FDCWD, new, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: os.ErrExist}
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP):
		if err := os.Link(old, new); err != nil {
			return err
		}
		return os.Remove(old)
	}
	return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
}

// writeFile makes one file durable in its final place.
func writeFile(tmpDir, dir, name string, data []byte, replace bool) (existed bool, err error) {
	f := &fileWrite{dir: dir, name: name, data: data, replace: replace}
	err = writeFiles(tmpDir, []*fileWrite{f})
	return f.existed, err
}

// removeDurably removes a file and fsyncs its directory.
func removeDurably(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	fd, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = fd.Sync()
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("mailbox: fsync %s: %w", dir, err)
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
