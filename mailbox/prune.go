package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/schema"
)

// Retention (package retention drives it): files of archive/ old enough
// go, their index rows first (ForgetArchived), then the files (RemoveArchived);
// nothing else in the mailbox is ever removed here. EachFile reads what
// stays, for the dropzone objects it names, and for `courier backup`.

// Archived is a file of archive/ that retention may remove.
type Archived struct {
	ID        string
	Rel       string // relative to the workspace, as the index stores it
	Provider  schema.Provider
	Direction schema.Direction // inbound: a message marked done; outbound: a delivered draft
	Time      time.Time        // the time in its name
	ModTime   time.Time        // when it was filed in archive/
	Size      int64
	path      string
}

// ArchivedBefore lists the files of archive/ filed and named before
// cutoff, oldest first. A file whose id also has a copy in another box
// (a done or a delivery a crash interrupted, which Reconcile settles) is
// not listed but named in skipped.
func (mb *Mailbox) ArchivedBefore(cutoff time.Time) (files []Archived, skipped []string, err error) {
	all, _, err := mb.listFiles()
	if err != nil {
		return nil, nil, err
	}
	elsewhere := map[string]string{}
	for _, f := range all {
		if f.box != BoxArchive {
			elsewhere[f.id] = f.rel
		}
	}
	for _, f := range all {
		if f.box != BoxArchive {
			continue
		}
		t, _, _ := ParseFileName(filepath.Base(f.path))
		if !t.Before(cutoff) {
			continue
		}
		fi, err := os.Lstat(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
			continue
		}
		if other, ok := elsewhere[f.id]; ok {
			skipped = append(skipped, fmt.Sprintf("%s: also in %s (run `courier reindex`)", f.rel, other))
			continue
		}
		a := Archived{ID: f.id, Rel: f.rel, Provider: schema.Provider(filepath.Base(filepath.Dir(f.path))),
			Time: t, ModTime: fi.ModTime(), Size: fi.Size(), path: f.path, Direction: schema.Outbound}
		if data, err := mb.fs.readFile(f.path); err == nil && schema.DetectKind(data) == schema.KindMessage {
			a.Direction = schema.Inbound
		}
		files = append(files, a)
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Time.Before(files[j].Time) })
	return files, skipped, nil
}

// ForgetArchived drops what the state database holds of ids: their index rows
// and dedupe keys, claims and delivery state, in one transaction. The
// journal keeps its rows (hooks read it; notify prunes it).
func (mb *Mailbox) ForgetArchived(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	err := withTx(ctx, mb.db, func(tx *sql.Tx) error {
		for _, q := range []string{`DELETE FROM messages WHERE id = ?`, `DELETE FROM keys WHERE id = ?`,
			`DELETE FROM claims WHERE id = ?`, `DELETE FROM deliveries WHERE id = ?`} {
			st, err := tx.PrepareContext(ctx, q)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := st.ExecContext(ctx, id); err != nil {
					st.Close()
					return err
				}
			}
			st.Close()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mailbox: forget archived: %w", err)
	}
	return nil
}

// RemoveArchived removes files ArchivedBefore listed (one already gone is
// fine) and fsyncs each folder once; after, if not nil, is called once a
// file is unlinked. It returns how many it removed.
func (mb *Mailbox) RemoveArchived(files []Archived, after func(Archived)) (int, error) {
	byDir := map[string][]Archived{}
	var dirs []string
	for _, f := range files {
		d := filepath.Dir(f.path)
		if filepath.Dir(d) != filepath.Join(mb.Mailbox(), string(BoxArchive)) {
			return 0, fmt.Errorf("mailbox: %s is not in archive/", f.Rel)
		}
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	n := 0
	for _, d := range dirs {
		dir, err := mb.fs.openDir(d, false)
		if err != nil {
			return n, err
		}
		for _, f := range byDir[d] {
			if err := unix.Unlinkat(int(dir.Fd()), filepath.Base(f.path), 0); err != nil && !errors.Is(err, unix.ENOENT) {
				dir.Close()
				return n, &os.PathError{Op: "mailbox: remove", Path: f.Rel, Err: err}
			}
			n++
			if after != nil {
				after(f)
			}
		}
		err = dir.Sync()
		dir.Close()
		if err != nil {
			return n, fmt.Errorf("mailbox: fsync %s: %w", mb.Rel(d), err)
		}
	}
	return n, nil
}

// MailboxFile is a file EachFile read.
type MailboxFile struct {
	Rel     string // relative to the workspace
	Mode    fs.FileMode
	ModTime time.Time
}

// EachFile calls fn with every regular file below the mailbox folder but
// the state database's folder (and the staging folder .tmp/ unless
// withTmp), read whole. Files move between boxes while the service runs
// (done, delivery, a requeue): each move writes the new copy before it
// removes the old, so a mailbox file gone when its turn comes is looked
// for again in every box, and fn sees every message that was in the
// mailbox when EachFile began, in one box or another.
func (mb *Mailbox) EachFile(ctx context.Context, withTmp bool, fn func(f MailboxFile, data []byte) error) error {
	names, err := mb.walk(withTmp)
	if err != nil {
		return err
	}
	var missing []string // ids whose file moved away
	for _, p := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		gone, err := mb.eachRead(p, fn)
		if err != nil {
			return err
		}
		if _, id, ok := ParseFileName(filepath.Base(p)); gone && ok {
			missing = append(missing, id)
		}
	}
	for round := 0; len(missing) > 0 && round < 10; round++ {
		files, _, err := mb.listFiles()
		if err != nil {
			return err
		}
		where := map[string]string{}
		for _, f := range files {
			where[f.id] = f.path
		}
		var again []string
		for _, id := range missing {
			p, ok := where[id]
			if !ok {
				continue // removed for good (pruned)
			}
			gone, err := mb.eachRead(p, fn)
			if err != nil {
				return err
			}
			if gone {
				again = append(again, id)
			}
		}
		missing = again
	}
	return nil
}

// eachRead reads p and hands it to fn; gone reports that p was not there.
func (mb *Mailbox) eachRead(p string, fn func(MailboxFile, []byte) error) (gone bool, err error) {
	f, err := mb.fs.openFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	data, err := readAllBounded(f, mb.Rel(p))
	if err != nil {
		return false, err
	}
	return false, fn(MailboxFile{Rel: mb.Rel(p), Mode: fi.Mode(), ModTime: fi.ModTime()}, data)
}

// walk lists the regular files below the mailbox folder, boxes first in
// the order files move (inbound, outbound, archive, dead letters), then
// the rest; links are not followed.
func (mb *Mailbox) walk(withTmp bool) ([]string, error) {
	var out []string
	var rec func(dir string) error
	rec = func(dir string) error {
		ents, err := mb.fs.readDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			switch {
			case e.Type().IsRegular():
				out = append(out, p)
			case e.IsDir():
				if err := rec(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	top := []string{string(BoxInbound), string(BoxOutbound), string(BoxArchive), string(BoxDeadletter)}
	if withTmp {
		top = append(top, ".tmp")
	}
	for _, d := range top {
		if err := rec(filepath.Join(mb.Mailbox(), d)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
