package dropzone

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// Sweeping (`courier prune`): objects no file references any more are
// removed, possibly by another process than the one that writes. Content
// addressing makes that a race: a Put of content already stored writes no
// file, and the message that names the object is written after; a sweep
// between the two would leave that message naming nothing. So each use of
// a stored object (a Put deduped against it, Keep) sets its modification
// time to now, and Sweep removes only objects untouched since a time the
// caller chose before it looked for references (older than any write in
// flight). The check and the touch of a use, and the check and the unlink
// of a sweep, hold a lock on the dropzone's folder (flock(2), shared and
// exclusive; no file of its own): a use either touches the object before
// the sweep looks at it, or finds it gone and stores it again.

// lock takes the sweep lock, shared or exclusive; the function returned
// releases it. ok is false when it cannot be had: the caller then acts
// as if the object were not stored.
func (s *Store) lock(how int) (unlock func(), ok bool) {
	if how == unix.LOCK_SH {
		return s.lockShared()
	}
	f, err := s.root.Open(".") // a descriptor of its own: flock is per open file
	if err != nil {
		return nil, false
	}
	if !flock(f, how) {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true // closing releases the lock
}

// touch marks o as in use now.
func (s *Store) touch(o Object) bool {
	now := time.Now()
	return s.root.Chtimes(o.Path, now, now) == nil
}

// reuse reports whether o is stored intact, and if so marks it in use,
// under the shared lock. Intact is a regular file at o's final path (not
// a link), of o's size, whose SHA-256 is o's: size alone was trusted
// before, so an object damaged in place (a bit flip, a partial copy back
// from a backup, a write by hand) was deduped against forever. The file is
// opened once and everything is checked on what was opened; the hash is
// skipped when this Store already verified that very file (inode, size
// and change time unchanged: the touch below moves the change time, and
// the stamp is taken after it).
func (s *Store) reuse(o Object) bool {
	unlock, ok := s.lock(unix.LOCK_SH)
	if !ok {
		return false
	}
	defer unlock()
	fd, st, err := s.openStatFD(o.Path, o.ID)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if st.Size != o.Size {
		return false
	}
	if v, ok := s.verified.Load(o.ID); !ok || v.(stamp) != stampOf(st) {
		if !hashesFD(fd, o) {
			return false
		}
	}
	// Marked in use through the open file: the one just checked. A nil
	// time sets both times to now, which the owner (or a writer) may do.
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, 0, 0, 0, 0); e != 0 {
		return false
	}
	if unix.Fstat(fd, st) == nil {
		s.verified.Store(o.ID, stampOf(st))
	}
	return true
}

// Keep looks id up, as Stat does, and marks the object in use, so that a
// sweep begun before does not remove it: for a draft that names an object
// by id. An object that cannot be marked (a user who does not own it) is
// still returned.
func (s *Store) Keep(id string) (Object, error) {
	if unlock, ok := s.lock(unix.LOCK_SH); ok {
		defer unlock()
	}
	o, err := s.Stat(id)
	if err != nil {
		return Object{}, err
	}
	s.touch(o)
	return o, nil
}

// Hold keeps every sweep from starting until the function returned is
// called (a backup copying the objects holds it); uses go on.
func (s *Store) Hold() (release func(), err error) {
	unlock, ok := s.lock(unix.LOCK_SH)
	if !ok {
		return nil, fmt.Errorf("dropzone: cannot lock %s", s.dir)
	}
	return unlock, nil
}

// Dir returns the dropzone's absolute path.
func (s *Store) Dir() string { return s.dir }

// StoredObject is an object as Objects lists it.
type StoredObject struct {
	Object
	ModTime time.Time // its last use (see Keep)
}

// Objects calls fn for every stored object, in no particular order.
// Files that are not objects are left out.
func (s *Store) Objects(fn func(StoredObject) error) error {
	fans, err := fs.ReadDir(s.root.FS(), objectsDir)
	if err != nil {
		return fmt.Errorf("dropzone: list: %w", err)
	}
	for _, fan := range fans {
		if !fan.IsDir() {
			continue
		}
		dir := objectsDir + "/" + fan.Name()
		ents, err := fs.ReadDir(s.root.FS(), dir)
		if err != nil {
			return fmt.Errorf("dropzone: list: %w", err)
		}
		for _, e := range ents {
			id := idPrefix + e.Name()
			if _, err := ParseID(id); err != nil || !e.Type().IsRegular() || objectPath(e.Name()) != dir+"/"+e.Name() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("dropzone: list: %w", err)
			}
			if err := fn(StoredObject{Object: Object{ID: id, Path: dir + "/" + e.Name(), Size: fi.Size()}, ModTime: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Sweep removes the objects of ids that were not used since before, under
// the exclusive lock, and fsyncs the folders it removed from; removed is
// called after each unlink. Ids already gone are skipped.
func (s *Store) Sweep(ids []string, before time.Time, removed func(Object)) error {
	unlock, ok := s.lock(unix.LOCK_EX)
	if !ok {
		return fmt.Errorf("dropzone: sweep: cannot lock %s", s.dir)
	}
	defer unlock()
	touched := map[string]bool{}
	var errs []error
	for _, id := range ids {
		o, err := s.object(id)
		if err != nil {
			return err
		}
		fi, err := s.root.Lstat(o.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !fi.Mode().IsRegular() || !fi.ModTime().Before(before) {
			continue
		}
		if err := s.root.Remove(o.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		o.Size = fi.Size()
		touched[path.Dir(o.Path)] = true
		if removed != nil {
			removed(o)
		}
	}
	for d := range touched {
		if err := s.syncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("dropzone: sweep: %w", errors.Join(errs...))
	}
	return nil
}
