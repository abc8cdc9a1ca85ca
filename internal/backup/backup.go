// Package backup writes a workspace to a tar file while the service runs
// (`courier backup`): a copy from which `courier reindex` makes a working
// workspace again, with its claims, checkpoints, hook queues and journal.
//
// The order makes the copy consistent. The state database comes first,
// through SQLite's VACUUM INTO (a snapshot of one read transaction, the
// WAL included, while writers go on); then the mailbox's files, listed
// after the snapshot, so every file the database knows was on disk by
// then, and a file moved meanwhile (done, delivery) is found in its new
// box (mailbox.EachFile): the tar's files are a superset of what its
// database knows, which is the side reindex repairs (it indexes files,
// and drops rows whose file is gone). The dropzone's objects come last:
// every object a copied file names was stored before that file was
// written; and the backup holds the dropzone's shared lock throughout,
// so that a prune's sweep waits for it to end.
//
// The tar holds .monoco/mailbox (not its staging folder .tmp/, nor the
// live database files), .monoco/dropzone (objects only) and
// .monoco/config, and the other files of the workspace the caller names
// (the secrets a config names by *_file keys that live in the workspace:
// the caller says so). Never the service's socket, pid and lock files
// (.monoco/run), nor its logs, nor anything outside the workspace.
package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Report says what a backup holds.
type Report struct {
	Path          string        `json:"path"`
	Files         int           `json:"files"`          // mailbox files
	FileBytes     int64         `json:"file_bytes"`     // their bytes
	Objects       int           `json:"objects"`        // dropzone objects
	ObjectBytes   int64         `json:"object_bytes"`   // their bytes
	DatabaseBytes int64         `json:"database_bytes"` // the snapshot's
	ConfigFiles   []string      `json:"config_files"`   // relative to the workspace
	Duration      time.Duration `json:"duration"`
}

// Write writes the workspace of mb and dz (its root root), and the files
// of extra (absolute paths inside root), to the tar file path: written
// beside it under a temporary name, made durable, and renamed into place
// only when whole, so that a file at path is a complete backup. An
// existing file at path is an error.
func Write(ctx context.Context, root string, mb *mailbox.Mailbox, dz *dropzone.Store, path string, extra []string) (*Report, error) {
	start := time.Now()
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("backup: %s exists (choose a new name)", path)
	}
	tmp := path + ".partial"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	rep := &Report{Path: path, ConfigFiles: []string{}}
	err = write(ctx, root, mb, dz, out, tmp, extra, rep)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("backup: %w", err)
	}
	rep.Duration = time.Since(start)
	return rep, nil
}

func write(ctx context.Context, root string, mb *mailbox.Mailbox, dz *dropzone.Store, out io.Writer, tmp string, extra []string, rep *Report) error {
	release, err := dz.Hold()
	if err != nil {
		return err
	}
	defer release()
	tw := &tarWriter{w: tar.NewWriter(out), dirs: map[string]bool{}}
	if err := layout(root, mb, dz, tw); err != nil {
		return err
	}
	if err := snapshot(ctx, mb, tmp+".db", tw, rep); err != nil {
		return err
	}
	err = mb.EachFile(ctx, false, func(f mailbox.MailboxFile, data []byte) error {
		rep.Files++
		rep.FileBytes += int64(len(data))
		return tw.file(f.Rel, f.Mode, f.ModTime, int64(len(data)), bytes.NewReader(data))
	})
	if err != nil {
		return err
	}
	if err := objects(ctx, root, dz, tw, rep); err != nil {
		return err
	}
	if err := configFiles(root, extra, tw, rep); err != nil {
		return err
	}
	return tw.w.Close()
}

// layout writes the folders of the workspace, empty ones included, so
// that the copy has the layout `courier init` makes.
func layout(root string, mb *mailbox.Mailbox, dz *dropzone.Store, tw *tarWriter) error {
	dirs := []string{mb.Tmp(), mb.State(), filepath.Join(dz.Dir(), "sha256")}
	for _, b := range mailbox.Boxes {
		for _, p := range schema.Implemented {
			dirs = append(dirs, mb.Dir(b, p))
		}
	}
	for _, d := range dirs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return err
		}
		if err := tw.dir(filepath.ToSlash(rel)); err != nil {
			return err
		}
	}
	return nil
}

// snapshot copies the state database through VACUUM INTO a file beside
// the tar (made 0600 first: the index holds every subject and sender); in
// the tar it is 0640, as the mailbox makes it (agents read it).
func snapshot(ctx context.Context, mb *mailbox.Mailbox, file string, tw *tarWriter, rep *Report) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(file)
	if _, err := mb.DB().ExecContext(ctx, `VACUUM INTO ?`, file); err != nil {
		return fmt.Errorf("snapshot of the state database: %w", err)
	}
	db, err := os.Open(file)
	if err != nil {
		return err
	}
	defer db.Close()
	fi, err := db.Stat()
	if err != nil {
		return err
	}
	rep.DatabaseBytes = fi.Size()
	rel := mb.Rel(mb.Layout.DB())
	return tw.file(rel, 0o640, time.Now(), fi.Size(), db)
}

// objects copies the dropzone's objects; one removed meanwhile (by a
// prune that began before the backup, as the lock waits for no one else)
// is left out.
func objects(ctx context.Context, root string, dz *dropzone.Store, tw *tarWriter, rep *Report) error {
	base, err := filepath.Rel(root, dz.Dir())
	if err != nil {
		return err
	}
	return dz.Objects(func(o dropzone.StoredObject) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := dz.Open(o.ID)
		if errors.Is(err, dropzone.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		rep.Objects++
		rep.ObjectBytes += o.Size
		return tw.file(path.Join(filepath.ToSlash(base), o.Path), 0o440, o.ModTime, o.Size, f)
	})
}

// configFiles copies the regular files of .monoco/config and of extra
// (links are not followed: what they point to may be outside the
// workspace).
func configFiles(root string, extra []string, tw *tarWriter, rep *Report) error {
	var files []string
	dir := filepath.Dir(mailbox.Layout{Root: root}.Config())
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range append(files, extra...) {
		rel, err := filepath.Rel(root, p)
		if err != nil || !filepath.IsLocal(rel) || seen[rel] {
			continue
		}
		seen[rel] = true
		if err := copyFile(p, filepath.ToSlash(rel), tw, rep); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(p, rel string, tw *tarWriter, rep *Report) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	rep.ConfigFiles = append(rep.ConfigFiles, rel)
	return tw.file(rel, fi.Mode().Perm(), fi.ModTime(), fi.Size(), f)
}

// tarWriter writes files, each after the folders above it (0750, as the
// workspace makes them), once.
type tarWriter struct {
	w    *tar.Writer
	dirs map[string]bool
}

func (t *tarWriter) dir(name string) error {
	if name == "." || name == "/" || t.dirs[name] {
		return nil
	}
	if err := t.dir(path.Dir(name)); err != nil {
		return err
	}
	t.dirs[name] = true
	return t.w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o750, ModTime: time.Now(), Format: tar.FormatPAX})
}

func (t *tarWriter) file(name string, mode fs.FileMode, mtime time.Time, size int64, r io.Reader) error {
	if err := t.dir(path.Dir(name)); err != nil {
		return err
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(mode.Perm()), Size: size, ModTime: mtime, Format: tar.FormatPAX}
	if err := t.w.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(t.w, io.LimitReader(r, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s changed while it was copied (%d of %d bytes)", name, n, size)
	}
	return err
}
