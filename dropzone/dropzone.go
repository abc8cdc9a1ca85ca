package dropzone

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

var (
	// ErrTooLarge is wrapped by the error of a Put whose artifact exceeds
	// Options.MaxSize.
	ErrTooLarge = errors.New("dropzone: artifact exceeds the size limit")
	// ErrNotFound is wrapped by the error of a lookup of an id that is not
	// stored.
	ErrNotFound = errors.New("dropzone: object not found")
	// ErrInvalidID is wrapped by the error of every function given a
	// malformed id.
	ErrInvalidID = errors.New("dropzone: malformed id")

	errBatchDone = errors.New("dropzone: batch already committed or aborted")
)

const (
	idPrefix   = "sha256:"
	objectsDir = "sha256"
	tmpDir     = ".tmp"
	tmpPrefix  = "put-"

	// Readable by the group agents belong to, never by others, whatever
	// the umask (the umask may take more away).
	dirPerm    = 0o750
	tmpDirPerm = 0o700
	objectPerm = 0o440 // also the mode temp files are created with

	copyBufSize = 64 << 10
	// syncWorkers bounds the fsyncs a Commit runs at once. Several in flight
	// let the device merge flushes; more than a handful gains nothing.
	syncWorkers = 8
)

// Options configures a Store. The zero value is the default.
type Options struct {
	// MaxSize is the largest artifact accepted, in bytes; 0 means no limit.
	MaxSize int64
}

// Store is an open dropzone. Its methods are safe for concurrent use.
type Store struct {
	root    *os.Root
	dir     string // absolute path of the dropzone
	maxSize int64

	mu   sync.Mutex
	live map[string]struct{} // temp names of open batches, spared by RecoverTemp

	fds    dirFDs     // the directories kept open (fds.go)
	shared sharedLock // the sweep lock, taken shared (fds.go)

	// verified holds the objects this Store found intact (hashed) and
	// marked in use, by id: their stamp then. An object whose stamp has
	// not changed since is not read and hashed again (sweep.go).
	verified sync.Map // string -> stamp
}

// Object is one stored blob.
type Object struct {
	ID   string // "sha256:<64 lowercase hex>"
	Path string // relative to the dropzone, slash-separated: "sha256/ab/<64 hex>"
	Size int64  // in bytes
}

// Open opens the dropzone at dir (e.g. <workspace>/.monoco/dropzone),
// creating it and its layout if missing. A nil opts means defaults. The Store
// holds a directory handle: Close it when done.
func Open(dir string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("dropzone: negative MaxSize %d", opts.MaxSize)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("dropzone: %w", err)
	}
	_, statErr := os.Stat(abs)
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("dropzone: %w", err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// Make the new directory's entry durable too.
		if err := syncPath(filepath.Dir(abs)); err != nil {
			return nil, fmt.Errorf("dropzone: %w", err)
		}
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("dropzone: %w", err)
	}
	s := &Store{root: root, dir: abs, maxSize: opts.MaxSize, live: make(map[string]struct{})}
	created := false
	for _, d := range []struct {
		name string
		perm os.FileMode
	}{{objectsDir, dirPerm}, {tmpDir, tmpDirPerm}} {
		c, err := s.mkdir(d.name, d.perm)
		if err != nil {
			root.Close()
			return nil, err
		}
		created = created || c
	}
	if created {
		if err := s.syncDir("."); err != nil {
			root.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close releases the Store's directory handle. Batches not yet committed
// cannot be committed afterwards.
func (s *Store) Close() error {
	s.closeDirs()
	s.closeShared()
	if err := s.root.Close(); err != nil {
		return fmt.Errorf("dropzone: %w", err)
	}
	return nil
}

// mkdir creates name inside the dropzone and reports whether it did; an
// existing directory is fine, anything else in its place is an error.
func (s *Store) mkdir(name string, perm os.FileMode) (bool, error) {
	err := s.root.Mkdir(name, perm)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrExist) {
		fi, serr := s.root.Lstat(name)
		if serr == nil && fi.IsDir() {
			return false, nil
		}
		return false, fmt.Errorf("dropzone: %s exists and is not a directory", name)
	}
	return false, fmt.Errorf("dropzone: %w", err)
}

func (s *Store) syncDir(name string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be fsynced there; NTFS journals renames
	}
	f, err := s.root.Open(name)
	if err != nil {
		return fmt.Errorf("dropzone: sync dir: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dropzone: sync dir: %w", err)
	}
	return nil
}

func syncPath(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ParseID validates an id of the form "sha256:<64 lowercase hex digits>" and
// returns the hex digits. The error of a malformed id wraps ErrInvalidID and
// quotes the id (cut short if long).
func ParseID(id string) (string, error) {
	h, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(h) != sha256.Size*2 {
		return "", invalidID(id)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", invalidID(id)
		}
	}
	return h, nil
}

func invalidID(id string) error {
	const max = 80
	if len(id) > max {
		id = id[:max] + "…"
	}
	return fmt.Errorf("%w %q", ErrInvalidID, id)
}

// objectPath is the slash-separated path of an object relative to the
// dropzone. hex must have been validated.
func objectPath(hex string) string {
	return objectsDir + "/" + hex[:2] + "/" + hex
}

func (s *Store) object(id string) (Object, error) {
	h, err := ParseID(id)
	if err != nil {
		return Object{}, err
	}
	return Object{ID: id, Path: objectPath(h)}, nil
}

// Stat looks id up and returns its Object. A missing object is an error
// wrapping ErrNotFound; anything but a regular file at the object's path (a
// symbolic link, say) is an error too.
func (s *Store) Stat(id string) (Object, error) {
	o, err := s.object(id)
	if err != nil {
		return Object{}, err
	}
	fi, err := s.root.Lstat(o.Path)
	if err != nil {
		return Object{}, s.lookupErr(id, err)
	}
	if !fi.Mode().IsRegular() {
		return Object{}, fmt.Errorf("dropzone: %s: not a regular file", id)
	}
	o.Size = fi.Size()
	return o, nil
}

func (s *Store) lookupErr(id string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return fmt.Errorf("dropzone: %s: %w", id, err)
}

// Open opens the object id for reading. The caller closes the file.
func (s *Store) Open(id string) (*os.File, error) {
	o, err := s.object(id)
	if err != nil {
		return nil, err
	}
	return s.openRegular(o.Path, id)
}

// Has reports whether id is a well-formed id of a stored object.
func (s *Store) Has(id string) bool {
	_, err := s.Stat(id)
	return err == nil
}

// Abs returns the absolute path of the stored object id, for programs that
// need a path. It fails if the object is not stored. Whoever opens the path
// does so without the confinement of this package.
func (s *Store) Abs(id string) (string, error) {
	o, err := s.Stat(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.dir, filepath.FromSlash(o.Path)), nil
}

// Put stores the content of r as a one-item batch: when it returns without
// error, the object is durable.
func (s *Store) Put(r io.Reader) (Object, error) {
	b := s.NewBatch()
	o, err := b.Put(r)
	if err != nil {
		b.Abort()
		return Object{}, err
	}
	if err := b.Commit(); err != nil {
		return Object{}, err
	}
	return o, nil
}

// PutFile streams the local file at path, which may be anywhere on disk, into
// the dropzone. It must be a regular file. The size limit is checked before
// reading, and again while streaming in case the file grows.
func (s *Store) PutFile(path string) (Object, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Object{}, fmt.Errorf("dropzone: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return Object{}, fmt.Errorf("dropzone: %s: not a regular file", path)
	}
	name := filepath.Base(path)
	if s.maxSize > 0 && fi.Size() > s.maxSize {
		return Object{}, tooLarge(name, s.maxSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return Object{}, fmt.Errorf("dropzone: %w", err)
	}
	defer f.Close()
	if fi2, err := f.Stat(); err != nil || !fi2.Mode().IsRegular() {
		return Object{}, fmt.Errorf("dropzone: %s: not a regular file", path)
	}
	b := s.NewBatch()
	o, err := b.put(f, name, false)
	if err != nil {
		b.Abort()
		return Object{}, err
	}
	if err := b.Commit(); err != nil {
		return Object{}, err
	}
	return o, nil
}

func tooLarge(name string, limit int64) error {
	if name == "" {
		return fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
	}
	return fmt.Errorf("%w of %d bytes: %s", ErrTooLarge, limit, name)
}

// RecoverTemp removes temporary files older than olderThan, left in .tmp/ by
// a process that stopped before committing or aborting. Files of batches
// still open in this Store are spared whatever their age; those of another
// process are spared only by their age (the time of their last write), so
// olderThan must exceed the time any process keeps a batch open. Call it at
// start-up. It returns how many entries it removed.
func (s *Store) RecoverTemp(olderThan time.Duration) (removed int, err error) {
	d, err := s.root.Open(tmpDir)
	if err != nil {
		return 0, fmt.Errorf("dropzone: recover: %w", err)
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return 0, fmt.Errorf("dropzone: recover: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	var errs []error
	for _, e := range entries {
		name := tmpDir + "/" + e.Name()
		s.mu.Lock()
		_, live := s.live[name]
		s.mu.Unlock()
		if live {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if fi.ModTime().After(cutoff) {
			continue
		}
		// RemoveAll does not follow links, and copes with a directory.
		if err := s.root.RemoveAll(name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("dropzone: recover: %w", errors.Join(errs...))
	}
	return removed, nil
}

// Batch is a two-phase write: Put stages objects, then Commit makes them all
// durable at their final paths, or Abort discards them. Put may be called from
// several goroutines at once. After Commit or Abort the Batch is done: Put
// fails and Commit and Abort do nothing more.
type Batch struct {
	s *Store

	mu    sync.Mutex
	items []item
	done  bool
}

type item struct {
	obj Object
	tmp string // temp file to sync and rename; "" if the object was already stored
}

// NewBatch starts a batch. It does no I/O.
func (s *Store) NewBatch() *Batch {
	return &Batch{s: s}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// Put streams r into a temporary file while hashing it and returns the
// Object it will be once committed. If the content exceeds the size limit,
// Put stops reading, removes the temporary file and returns an error wrapping
// ErrTooLarge. Put does not close r.
func (b *Batch) Put(r io.Reader) (Object, error) {
	return b.put(r, "", false)
}

// PutFresh is Put for content that is almost never stored yet (a raw
// message just fetched): it is staged without first looking for it at
// its final path, and Commit renames it over an object already there
// (the same bytes, or a damaged copy, which this repairs). A look costs
// a failed open for every new object, and each of a mailbox's raw
// messages is new but for a re-sync; content often repeated (an
// attachment) goes through Put, which writes no file for a copy.
func (b *Batch) PutFresh(r io.Reader) (Object, error) {
	return b.put(r, "", true)
}

func (b *Batch) put(r io.Reader, name string, fresh bool) (Object, error) {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	if done {
		return Object{}, errBatchDone
	}
	s := b.s
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	// The first buffer's worth is read before any file is made: content
	// that fits (a message held in memory, most attachments) is hashed
	// first, and when it is already stored no temp file is created and
	// removed for it.
	head, eof, err := s.readHead(r, buf, name)
	if err != nil {
		return Object{}, err
	}
	if eof {
		it := item{obj: objectOf(sha256.Sum256(head), int64(len(head)))}
		if fresh || !s.reuse(it.obj) {
			if it.tmp, err = s.writeTemp(head); err != nil {
				return Object{}, err
			}
		}
		return b.add(it)
	}
	it, err := s.stream(r, buf, head, name)
	if err != nil {
		return Object{}, err
	}
	if !fresh && s.reuse(it.obj) {
		// Already durable at its final path (Commit syncs before renaming):
		// nothing to sync or rename, only the directory to sync at Commit in
		// case the rename that put it there is not yet durable; marked in
		// use, so that a sweep spares it (sweep.go). A damaged object
		// keeps the temp file, which Commit renames over it.
		s.removeTemp(it.tmp)
		it.tmp = ""
	}
	return b.add(it)
}

// add records it in the batch, unless the batch is done meanwhile.
func (b *Batch) add(it item) (Object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		if it.tmp != "" {
			b.s.removeTemp(it.tmp)
		}
		return Object{}, errBatchDone
	}
	b.items = append(b.items, it)
	return it.obj, nil
}

func objectOf(sum [sha256.Size]byte, size int64) Object {
	hx := hex.EncodeToString(sum[:])
	return Object{ID: idPrefix + hx, Path: objectPath(hx), Size: size}
}

// readHead reads r into buf until buf is full or r ends (eof), and no
// more than one byte past the size limit (enough to know).
func (s *Store) readHead(r io.Reader, buf []byte, name string) (head []byte, eof bool, err error) {
	n := 0
	for n < len(buf) {
		p := buf[n:]
		if s.maxSize > 0 && s.maxSize+1-int64(n) < int64(len(p)) {
			p = p[:s.maxSize+1-int64(n)]
		}
		m, rerr := r.Read(p)
		n += m
		if s.maxSize > 0 && int64(n) > s.maxSize {
			return nil, false, tooLarge(name, s.maxSize)
		}
		if rerr == io.EOF {
			return buf[:n], true, nil
		}
		if rerr != nil {
			return nil, false, fmt.Errorf("dropzone: read: %w", rerr)
		}
	}
	return buf[:n], false, nil
}

// writeTemp writes data to a new temporary file and returns its name.
func (s *Store) writeTemp(data []byte) (string, error) {
	tmp, fd, err := s.createTempFD()
	if err != nil {
		return "", err
	}
	err = writeAll(fd, data)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		s.removeTemp(tmp)
		return "", fmt.Errorf("dropzone: write: %w", err)
	}
	return tmp, nil
}

// stream writes head and the rest of r to a new temporary file while
// hashing them, and returns the item they make.
func (s *Store) stream(r io.Reader, buf, head []byte, name string) (item, error) {
	tmp, f, err := s.createTemp()
	if err != nil {
		return item{}, err
	}
	fail := func(err error) (item, error) {
		f.Close()
		s.removeTemp(tmp)
		return item{}, err
	}
	h := sha256.New()
	h.Write(head)
	if _, err := f.Write(head); err != nil {
		return fail(fmt.Errorf("dropzone: write: %w", err))
	}
	n := int64(len(head))
	for {
		p := buf
		if s.maxSize > 0 {
			// Read at most one byte past the limit: enough to know.
			if left := s.maxSize + 1 - n; left < int64(len(p)) {
				p = p[:left]
			}
		}
		m, rerr := r.Read(p)
		if m > 0 {
			n += int64(m)
			if s.maxSize > 0 && n > s.maxSize {
				return fail(tooLarge(name, s.maxSize))
			}
			h.Write(p[:m])
			if _, err := f.Write(p[:m]); err != nil {
				return fail(fmt.Errorf("dropzone: write: %w", err))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fail(fmt.Errorf("dropzone: read: %w", rerr))
		}
	}
	if err := f.Close(); err != nil {
		s.removeTemp(tmp)
		return item{}, fmt.Errorf("dropzone: write: %w", err)
	}
	return item{obj: objectOf([sha256.Size]byte(h.Sum(nil)), n), tmp: tmp}, nil
}

// Open opens an object for reading: one put in this batch and not yet
// committed (its temporary file), or one already stored. It lets a caller
// stream a message into the batch once and then read it back (to parse it)
// before anything is committed. The file is opened read-only and confined
// like every other operation of the package; the caller closes it, and
// should do so before Commit (Windows cannot rename a file that is open).
//
// An object of the batch is found between its Put and the batch's Commit or
// Abort; after Commit it is opened at its final path, as Store.Open does. An
// id that is neither staged here nor stored is an error wrapping
// ErrNotFound; a malformed one wraps ErrInvalidID.
func (b *Batch) Open(o Object) (*os.File, error) {
	if _, err := ParseID(o.ID); err != nil {
		return nil, err
	}
	b.mu.Lock()
	tmp := ""
	for _, it := range b.items {
		if it.obj.ID == o.ID && it.tmp != "" {
			tmp = it.tmp
			break
		}
	}
	b.mu.Unlock()
	if tmp == "" {
		return b.s.Open(o.ID)
	}
	return b.s.openRegular(tmp, o.ID)
}

// openRegular opens name read-only, refusing anything but a regular file.
// The last name is opened with O_NOFOLLOW, and the open file is what is
// checked (fstat): a link swapped in is refused, never followed (os.Root
// follows a final symlink inside the root, O_NOFOLLOW or not, so the
// directory is opened through the root and the file beside it). id names
// the object in errors.
func (s *Store) openRegular(name, id string) (*os.File, error) {
	f, _, err := s.openStat(name, id)
	return f, err
}

// openStat is openRegular, with the open file's status.
func (s *Store) openStat(name, id string) (*os.File, *unix.Stat_t, error) {
	fd, st, err := s.openStatFD(name, id)
	if err != nil {
		return nil, nil, err
	}
	// Back to blocking reads: O_NONBLOCK only kept a FIFO from hanging
	// the open.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("dropzone: %s: %w", id, err)
	}
	return os.NewFile(uintptr(fd), path.Join(s.dir, name)), st, nil
}

// openStatFD opens name read-only in its directory's kept handle (fds.go)
// with O_NOFOLLOW and O_NONBLOCK, and refuses anything but a regular
// file, checked on the descriptor opened (fstat); the caller closes it.
func (s *Store) openStatFD(name, id string) (int, *unix.Stat_t, error) {
	fd, err := s.openAt(name)
	switch {
	case errors.Is(err, unix.ELOOP):
		return -1, nil, fmt.Errorf("dropzone: %s: not a regular file", id)
	case err != nil:
		return -1, nil, s.lookupErr(id, err)
	}
	st := new(unix.Stat_t)
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("dropzone: %s: %w", id, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("dropzone: %s: not a regular file", id)
	}
	return fd, st, nil
}

// stamp is what tells one state of a file from another without reading
// it: the inode, the size and the change time (which every write, chmod,
// link, rename and touch moves; Linux gives a change that follows a
// reading of the change time a fine-grained one, so two never share it).
type stamp struct {
	ino   uint64
	size  int64
	ctime unix.Timespec
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{ino: st.Ino, size: st.Size, ctime: st.Ctim}
}

// hashesFD reports whether the content of fd, read from its current
// offset, hashes to o's id (and is o's size).
func hashesFD(fd int, o Object) bool {
	h := sha256.New()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	if n, err := io.CopyBuffer(h, io.LimitReader(fdReader(fd), o.Size+1), *bp); err != nil || n != o.Size {
		return false
	}
	return idPrefix+hex.EncodeToString(h.Sum(nil)) == o.ID
}

// fdReader reads a descriptor the caller owns.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// stored reports whether a regular file of o's size is at o's final path.
func (s *Store) stored(o Object) bool {
	fi, err := s.root.Lstat(o.Path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == o.Size
}

// createTemp creates a new empty temporary file under .tmp/ and registers it
// as live. The file is created read-only (the descriptor returned is still
// writable), so sealing it at Commit needs no chmod.
func (s *Store) createTemp() (string, *os.File, error) {
	name, fd, err := s.createTempFD()
	if err != nil {
		return "", nil, err
	}
	return name, os.NewFile(uintptr(fd), path.Join(s.dir, name)), nil
}

func (s *Store) removeTemp(name string) {
	s.inDirs(func(d ...int) error { return unix.Unlinkat(d[0], path.Base(name), 0) }, path.Dir(name))
	s.forget(name)
}

func (s *Store) forget(name string) {
	s.mu.Lock()
	delete(s.live, name)
	s.mu.Unlock()
}

// finish marks the batch done and returns its items, or reports that it
// already was.
func (b *Batch) finish() ([]item, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil, false
	}
	b.done = true
	items := b.items
	b.items = nil
	return items, true
}

// Abort removes the batch's temporary files. Objects that were already
// stored before the batch stay.
func (b *Batch) Abort() {
	items, ok := b.finish()
	if !ok {
		return
	}
	for _, it := range items {
		if it.tmp != "" {
			b.s.removeTemp(it.tmp)
		}
	}
}

// Commit makes every object of the batch durable at its final path: it
// fsyncs the temporary files (created read-only), renames each into place
// (over an identical file if one got there meanwhile) and fsyncs the
// directories it touched; from 16 objects on, one syncfs(2) before and one
// after the renames replace the per-file and per-directory fsyncs. On error, the temporary files not yet renamed are
// removed; objects already renamed stay (they are complete, and content
// addressed), but the caller should treat the whole batch as failed.
func (b *Batch) Commit() error {
	items, ok := b.finish()
	if !ok {
		return errBatchDone
	}
	s := b.s
	var pending []int
	for i, it := range items {
		if it.tmp != "" {
			pending = append(pending, i)
		}
	}
	cleanup := func() {
		for _, i := range pending {
			if items[i].tmp != "" {
				s.removeTemp(items[i].tmp)
			}
		}
	}

	// 1. Make the content durable, several files at a time; a large
	// batch with one syncfs(2) of the file system instead of a journal
	// commit per file (the cost of an IMAP backfill is mostly those).
	bulk := len(pending) >= syncfsThreshold
	if err := parallel(len(pending), func(k int) error {
		return s.sealTemp(items[pending[k]].tmp, !bulk)
	}); err != nil {
		cleanup()
		return err
	}
	if bulk {
		if err := s.syncFS(); err != nil {
			cleanup()
			return err
		}
	}

	// 2. Rename into place.
	touched := make(map[string]struct{})
	var errs []error
	for _, i := range pending {
		it := &items[i]
		if err := s.place(it, touched); err != nil {
			errs = append(errs, err)
			continue
		}
		it.tmp = ""
	}
	cleanup()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	// 3. Make the renames (ours, or a concurrent batch's that we rely on)
	// durable.
	for _, it := range items {
		touched[path.Dir(it.obj.Path)] = struct{}{}
	}
	if bulk {
		return s.syncFS()
	}
	dirs := make([]string, 0, len(touched))
	for d := range touched {
		dirs = append(dirs, d)
	}
	return parallel(len(dirs), func(k int) error { return s.syncDir(dirs[k]) })
}

// syncfsThreshold is the batch size from which one syncfs(2) replaces an
// fsync per file and per directory.
const syncfsThreshold = 16

// syncFS makes everything written to the dropzone's file system durable.
func (s *Store) syncFS() error {
	if err := s.inDirs(func(d ...int) error { return unix.Syncfs(d[0]) }, "."); err != nil {
		return fmt.Errorf("dropzone: commit: syncfs: %w", err)
	}
	return nil
}

// sealTemp flushes a staged file to disk. (It is read-only from creation.)
func (s *Store) sealTemp(name string, sync bool) error {
	if !sync {
		return nil
	}
	fd, err := s.openAt(name)
	if err != nil {
		return fmt.Errorf("dropzone: commit: %w", err)
	}
	err = unix.Fsync(fd)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dropzone: commit: fsync %s: %w", name, err)
	}
	return nil
}

// place renames a sealed temp file to its final path, creating the fan-out
// directory if needed and recording the directories whose entries changed.
// Renaming over an identical file another batch placed meanwhile is fine:
// it holds the same bytes, and rename is atomic.
func (s *Store) place(it *item, touched map[string]struct{}) error {
	made, err := s.renameInto(it.tmp, it.obj.Path)
	for _, d := range made {
		touched[d] = struct{}{}
	}
	if err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			return s.renameFailed(it, err)
		}
		return fmt.Errorf("dropzone: commit %s: %w", it.obj.ID, err)
	}
	s.forget(it.tmp)
	return nil
}

// renameFailed handles a failed rename into place: where rename does not
// replace (a read-only target on Windows), a concurrent batch may have won
// the race, and that is success too.
func (s *Store) renameFailed(it *item, err error) error {
	if s.stored(it.obj) {
		s.removeTemp(it.tmp)
		return nil
	}
	return fmt.Errorf("dropzone: commit %s: %w", it.obj.ID, err)
}

// parallel runs f(0..n-1) on at most syncWorkers goroutines and returns the
// errors joined.
func parallel(n int, f func(int) error) error {
	if n == 0 {
		return nil
	}
	if n == 1 {
		return f(0)
	}
	workers := min(n, syncWorkers)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range next {
				errs[k] = f(k)
			}
		})
	}
	for k := range n {
		next <- k
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}
