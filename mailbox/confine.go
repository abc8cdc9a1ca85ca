package mailbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Confinement. Every file Courier reads or writes below the mailbox folder
// is reached through an fsRoot: from a descriptor of .monoco/mailbox opened
// once, one path component at a time, with openat(O_NOFOLLOW). A symbolic
// link anywhere below the mailbox is therefore never followed, whoever
// planted it and wherever it points:
//
//   - a folder replaced by a link (inbound/email → /tmp/elsewhere) is
//     refused with an UnsafePathError, so nothing is written outside the
//     workspace and the writer fails temporarily (the receiver answers 451
//     and the MTA retries; an IMAP checkpoint does not move);
//   - a link, or any other file, planted at the name a message is about to
//     take is not counted as that message: renameat2(RENAME_NOREPLACE)
//     refuses to replace it, and the file in the way is compared with what
//     was to be written (see sameFile) instead of being assumed a duplicate;
//   - a file read from the mailbox (`courier read`, a queued draft, a
//     message being archived) must be a regular file: a link is refused
//     unread, and so is a FIFO or a device, which could block or feed
//     anything.
//
// The workspace and its .monoco/mailbox folder themselves are what the
// operator configured (a mailbox on another disk through a link is fine)
// and are opened as given.

// ErrUnsafePath is matched (errors.Is) by every UnsafePathError.
var ErrUnsafePath = errors.New("mailbox: unsafe path")

// UnsafePathError is returned for a path of the mailbox that is a symbolic
// link, or something else than the folder or regular file expected there,
// and for a file in the way of one being written.
type UnsafePathError struct {
	Path string // relative to the workspace
	What string // what was found: "a symbolic link", "not a folder", ...
	// Write is set when the path was in the way of a file being written;
	// nothing was written and the file found was left alone.
	Write bool
}

func (e *UnsafePathError) Error() string {
	if e.Write {
		return fmt.Sprintf("mailbox: %s is in the way: it is %s, not the file being written; it was left alone and nothing was written (move it away, and the write succeeds on the next try)", e.Path, e.What)
	}
	return fmt.Sprintf("mailbox: %s is %s: Courier follows no links in the mailbox and reads only regular files there (move it away)", e.Path, e.What)
}

// Is makes errors.Is(err, ErrUnsafePath) true.
func (e *UnsafePathError) Is(target error) bool { return target == ErrUnsafePath }

const (
	// dirPerm and filePerm are the modes folders and files are created
	// with (the umask may take more away): readable by the group agents
	// belong to, never by others, whatever the umask of the shell that ran
	// `courier init` or `serve`. Files are read-only: an inbound file is
	// never rewritten, and every change is a new file renamed into place.
	dirPerm  = 0o750
	filePerm = 0o440
	// maxFileBytes bounds a file read from the mailbox: anyone who can drop
	// a file into outbound/ must not make the service read gigabytes into
	// memory. Courier's own files are far smaller (text parts are capped
	// when normalised; drafts by limits.max_draft_bytes).
	maxFileBytes = 256 << 20
)

// fsRoot is the mailbox folder, opened once.
type fsRoot struct {
	fd   int    // O_DIRECTORY descriptor of the mailbox folder
	path string // its path, as the Layout names it
	rel  func(string) string
}

func openRoot(path string, rel func(string) string) (*fsRoot, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mailbox: open %s: %w", path, err)
	}
	return &fsRoot{fd: fd, path: path, rel: rel}, nil
}

func (r *fsRoot) close() error { return unix.Close(r.fd) }

// components splits p, a path below the mailbox folder, into names.
func (r *fsRoot) components(p string) ([]string, error) {
	rel, err := filepath.Rel(r.path, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("mailbox: %s is not in the mailbox", p)
	}
	if rel == "." {
		return nil, nil
	}
	return strings.Split(rel, string(filepath.Separator)), nil
}

// openDirFd opens the folder p (below or at the mailbox folder) without
// following a link at any step; with create, missing folders are made.
// The caller closes the descriptor.
func (r *fsRoot) openDirFd(p string, create bool) (int, error) {
	parts, err := r.components(p)
	if err != nil {
		return -1, err
	}
	// A descriptor of its own (not a dup, which would share the offset
	// of the root's with readdir).
	fd, err := unix.Openat(r.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("mailbox: %w", err)
	}
	for i, name := range parts {
		next, err := openDirAt(fd, name)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, name, dirPerm); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDirAt(fd, name)
			}
		}
		if err != nil {
			err = r.pathError(fd, name, filepath.Join(append([]string{r.path}, parts[:i+1]...)...), "not a folder", err)
			unix.Close(fd)
			return -1, err
		}
		unix.Close(fd)
		fd = next
	}
	return fd, nil
}

func openDirAt(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openDir is openDirFd as an *os.File.
func (r *fsRoot) openDir(p string, create bool) (*os.File, error) {
	fd, err := r.openDirFd(p, create)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// pathError explains a failed open of name in dirfd (whose path is full):
// a link or the wrong kind of file becomes an UnsafePathError, anything
// else a PathError naming the file relative to the workspace.
func (r *fsRoot) pathError(dirfd int, name, full, wrongKind string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENXIO) {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			what := wrongKind
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				what = "a symbolic link"
			}
			return &UnsafePathError{Path: r.rel(full), What: what}
		}
	}
	return &os.PathError{Op: "mailbox: open", Path: r.rel(full), Err: err}
}

// openFile opens the regular file p for reading. A link, a FIFO, a device
// or a folder at p is an UnsafePathError; the open never blocks (a FIFO is
// opened non-blocking, then refused).
func (r *fsRoot) openFile(p string) (*os.File, error) {
	dirfd, err := r.openDirFd(filepath.Dir(p), false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dirfd)
	return r.openFileAt(dirfd, filepath.Base(p), p)
}

func (r *fsRoot) openFileAt(dirfd int, name, full string) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, r.pathError(dirfd, name, full, "not a regular file", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "mailbox: stat", Path: r.rel(full), Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &UnsafePathError{Path: r.rel(full), What: "not a regular file"}
	}
	unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), full), nil
}

// readFile reads the regular file p, up to maxFileBytes.
func (r *fsRoot) readFile(p string) ([]byte, error) {
	f, err := r.openFile(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAllBounded(f, r.rel(p))
}

func readAllBounded(f *os.File, name string) ([]byte, error) {
	size := 0
	if fi, err := f.Stat(); err == nil {
		size = int(min(fi.Size(), maxFileBytes))
	}
	b := make([]byte, 0, size+512)
	b, err := readUpTo(b, f, maxFileBytes+1)
	if err != nil {
		return nil, fmt.Errorf("mailbox: read %s: %w", name, err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("mailbox: %s is larger than %d MiB: not a mailbox file", name, maxFileBytes>>20)
	}
	return b, nil
}

// readUpTo appends what r holds to buf, reading at most max bytes.
func readUpTo(buf []byte, r io.Reader, max int) ([]byte, error) {
	for len(buf) < max {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), max)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// readDir lists the folder p, sorted by name. Entries are not followed:
// their types are the folder's (a link is a link).
func (r *fsRoot) readDir(p string) ([]os.DirEntry, error) {
	d, err := r.openDir(p, false)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("mailbox: read %s: %w", r.rel(p), err)
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, nil
}

// remove removes the file (not folder) p and fsyncs its folder; a file
// already gone is fine.
func (r *fsRoot) remove(p string) error {
	d, err := r.openDir(filepath.Dir(p), false)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer d.Close()
	if err := unix.Unlinkat(int(d.Fd()), filepath.Base(p), 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "mailbox: remove", Path: r.rel(p), Err: err}
	}
	if err := d.Sync(); err != nil {
		return fmt.Errorf("mailbox: fsync %s: %w", r.rel(filepath.Dir(p)), err)
	}
	return nil
}

// mkdirAll makes the folder p and its parents below the mailbox folder.
func (r *fsRoot) mkdirAll(p string) error {
	fd, err := r.openDirFd(p, true)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// renameAt renames oldName in oldDir to newName in newDir, without
// replacing an existing file unless replace is set. Without replace, an
// existing target is reported as os.ErrExist. It uses
// renameat2(RENAME_NOREPLACE) and falls back to link and unlink on file
// systems without it. Neither name is followed if it is a link.
func renameAt(oldDir int, oldName string, newDir int, newName string, replace bool) error {
	if replace {
		return unix.Renameat(oldDir, oldName, newDir, newName)
	}
	err := unix.Renameat2(oldDir, oldName, newDir, newName, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return os.ErrExist
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP):
		if err := unix.Linkat(oldDir, oldName, newDir, newName, 0); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return os.ErrExist
			}
			return err
		}
		return unix.Unlinkat(oldDir, oldName, 0)
	}
	return err
}
