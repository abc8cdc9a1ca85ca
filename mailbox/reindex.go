package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/schema"
)

// ScanStats reports what Reindex or Reconcile found.
type ScanStats struct {
	Files    int           `json:"files"`    // mailbox files seen
	Indexed  int           `json:"indexed"`  // rows written
	Removed  int           `json:"removed"`  // stale rows dropped, stale copies deleted
	Invalid  []string      `json:"invalid"`  // files that do not parse, left in place
	Duration time.Duration `json:"duration"` // wall time
}

// found is a file seen on disk.
type found struct {
	box  Box
	path string // absolute
	rel  string
	id   string
}

// listFiles lists the mailbox files of every box and provider folder. A
// link where a provider folder should be is reported in skipped, and not
// followed.
func (mb *Mailbox) listFiles() ([]found, []string, error) {
	var out []found
	var skipped []string
	for _, b := range Boxes {
		base := filepath.Join(mb.Mailbox(), string(b))
		provs, err := mb.fs.readDir(base)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, pd := range provs {
			dir := filepath.Join(base, pd.Name())
			if pd.Type()&os.ModeSymlink != 0 {
				skipped = append(skipped, mb.Rel(dir)+": a symbolic link, not followed")
				continue
			}
			if !pd.IsDir() {
				continue
			}
			if !schema.Provider(pd.Name()).Valid() {
				skipped = append(skipped, mb.Rel(dir)+": not a provider folder")
				continue
			}
			ents, err := mb.fs.readDir(dir)
			if err != nil {
				return nil, nil, err
			}
			for _, e := range ents {
				_, id, ok := ParseFileName(e.Name())
				if !ok {
					continue
				}
				p := filepath.Join(dir, e.Name())
				out = append(out, found{box: b, path: p, rel: mb.Rel(p), id: id})
			}
		}
	}
	return out, skipped, nil
}

// boxRank orders copies of one id: a crash during done or delivery can
// leave the old copy beside the new, and the later stage wins.
func boxRank(b Box) int {
	switch b {
	case BoxArchive:
		return 3
	case BoxDeadletter:
		return 2
	}
	return 1
}

// parsed is a decoded file's index row.
type parsed struct {
	f   found
	row row
	err error
}

// parseFiles decodes files in parallel and sends each result on the
// returned channel (in no particular order), so that memory stays bounded
// whatever the number of files.
func (mb *Mailbox) parseFiles(ctx context.Context, files []found) <-chan parsed {
	out := make(chan parsed, 256)
	next := make(chan found, 256)
	workers := runtime.GOMAXPROCS(0)
	large := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range next {
				select {
				case out <- mb.parseFile(f, large):
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(next)
		for _, f := range files {
			select {
			case next <- f:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}

// largeFile is the size from which a file is parsed by one worker at a
// time: decoding takes some five times a file's front matter, and a
// mailbox of 16 MiB files on a 32-core machine must not take 2.5 GB.
const largeFile = 1 << 20

// parseFile decodes one file into its index row; large holds the turn of
// large files.
func (mb *Mailbox) parseFile(f found, large chan struct{}) parsed {
	fh, err := mb.fs.openFile(f.path)
	if err != nil {
		return parsed{f: f, err: err}
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err == nil && fi.Size() > largeFile {
		large <- struct{}{}
		defer func() { <-large }()
	}
	// The index needs the front matter and the start of the body (the
	// preview): a file of an older Courier, hundreds of megabytes, is not
	// read whole.
	b, err := readBounded(fh, f.rel, indexHead, previewBody)
	if err != nil {
		return parsed{f: f, err: err}
	}
	// Nor are its lists decoded whole (see Message): the index holds
	// none of them.
	b, _ = schema.CapLists(b, 0)
	m, d, err := schema.DecodeFile(b)
	switch {
	case err != nil:
		return parsed{f: f, err: err}
	case m != nil && m.ID != f.id:
		return parsed{f: f, err: fmt.Errorf("id %s does not match the file name", m.ID)}
	case m != nil:
		return parsed{f: f, row: messageRow(m, f.box, f.rel)}
	case d.ID != f.id:
		return parsed{f: f, err: fmt.Errorf("draft id %q does not match the file name", d.ID)}
	}
	r := draftRow(d, f.box, f.rel)
	if f.box == BoxOutbound {
		r.awaiting, r.policyHold = d.Awaiting(), mb.holds(d)
	}
	return parsed{f: f, row: r}
}

// Reindex rebuilds the index and dedupe keys from the files. Claims and
// failure counts of messages still in the inbox are kept (no file holds
// them); claims of messages that are gone are dropped. A stale inbox copy of
// a message that is also archived is deleted. Files that do not parse are
// reported and left alone.
func (mb *Mailbox) Reindex(ctx context.Context) (*ScanStats, error) {
	return mb.scan(ctx, true)
}

// Reconcile brings the index up to date with the files cheaply: it indexes
// files the index lacks, drops rows whose file is gone, deletes stale
// copies left by a crash, and removes abandoned temporary files. The
// service runs it at start, before any source delivers.
func (mb *Mailbox) Reconcile(ctx context.Context) (*ScanStats, error) {
	return mb.scan(ctx, false)
}

func (mb *Mailbox) scan(ctx context.Context, full bool) (*ScanStats, error) {
	start := time.Now()
	st := &ScanStats{}
	files, skipped, err := mb.listFiles()
	if err != nil {
		return nil, err
	}
	st.Invalid = append(st.Invalid, skipped...)
	st.Files = len(files)
	best, stale := pickCopies(files)
	indexed, hadIndex, err := mb.indexedPaths(ctx, full)
	if err != nil {
		return nil, err
	}
	todo, gone := scanWork(best, indexed, full)
	now := mb.now().UnixNano()
	journaled := 0
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error {
		if err := dropRows(ctx, tx, full, gone); err != nil {
			return err
		}
		n, err := mb.indexFiles(ctx, tx, todo, indexed, hadIndex, st)
		if err != nil {
			return err
		}
		journaled = n
		return settleClaims(ctx, tx, now)
	})
	if err != nil {
		return nil, fmt.Errorf("mailbox: reindex: %w", err)
	}
	st.Removed = len(gone)
	if journaled > 0 {
		mb.signal()
	}
	// The winning copies are durable and indexed: the stale ones can go.
	st.Removed += mb.removeStale(stale, best)
	if !full {
		mb.cleanTmp(time.Hour)
	}
	st.Duration = time.Since(start)
	return st, nil
}

// pickCopies picks one copy per id, the one in the box ranked highest
// (boxRank); the others are stale.
func pickCopies(files []found) (best map[string]found, stale []found) {
	best = map[string]found{}
	for _, f := range files {
		cur, ok := best[f.id]
		switch {
		case !ok:
			best[f.id] = f
		case boxRank(f.box) > boxRank(cur.box):
			stale = append(stale, cur)
			best[f.id] = f
		default:
			stale = append(stale, f)
		}
	}
	return best, stale
}

// indexedPaths returns id -> rel path in the index now. A full rebuild
// reads it too, to journal what a crash left unindexed (events.go), but
// only for the rows of inbound/ and outbound/ (not the archive, the bulk
// of an old mailbox), with hadIndex saying whether there was an index at
// all.
func (mb *Mailbox) indexedPaths(ctx context.Context, full bool) (indexed map[string]string, hadIndex bool, err error) {
	indexed = map[string]string{}
	hadIndex = !full
	if full {
		if err := mb.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM messages)`).Scan(&hadIndex); err != nil {
			return nil, false, dbError(err)
		}
	}
	q := `SELECT id, path FROM messages`
	if full {
		q += ` WHERE box IN ('inbound', 'outbound')`
	}
	rows, err := mb.db.QueryContext(ctx, q)
	if err != nil {
		return nil, false, dbError(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, p string
		if err := rows.Scan(&id, &p); err != nil {
			return nil, false, err
		}
		indexed[id] = p
	}
	return indexed, hadIndex, nil
}

// scanWork returns the files to index, in path order (all of them in a
// full rebuild, else those the index lacks or has elsewhere), and the ids
// whose file is gone (a full rebuild drops every row anyway).
func scanWork(best map[string]found, indexed map[string]string, full bool) (todo []found, gone []string) {
	for _, f := range best {
		if full || indexed[f.id] != f.rel {
			todo = append(todo, f)
		}
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].rel < todo[j].rel })
	if !full {
		for id := range indexed {
			if _, ok := best[id]; !ok {
				gone = append(gone, id)
			}
		}
	}
	return todo, gone
}

// dropRows deletes the index rows and keys of every message (a full
// rebuild) or of those whose file is gone.
func dropRows(ctx context.Context, tx *sql.Tx, full bool, gone []string) error {
	if full {
		for _, q := range []string{`DELETE FROM messages`, `DELETE FROM keys`, dropSearch} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
	}
	for _, id := range gone {
		if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM keys WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// indexFiles parses the files of todo, in parallel, and inserts their
// rows: a file that does not parse goes to st.Invalid, a row that records
// an event the journal missed is journaled (missedEvent), and a dead
// letter's file gives its claim. It returns the events journaled.
func (mb *Mailbox) indexFiles(ctx context.Context, tx *sql.Tx, todo []found, indexed map[string]string, hadIndex bool, st *ScanStats) (journaled int, err error) {
	in, err := newInserter(ctx, tx)
	if err != nil {
		return 0, err
	}
	defer in.close()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for p := range mb.parseFiles(pctx, todo) {
		if p.err != nil {
			st.Invalid = append(st.Invalid, p.f.rel+": "+strings.ReplaceAll(p.err.Error(), "\n", "; "))
			continue
		}
		if err := in.insert(ctx, p.row); err != nil {
			return 0, err
		}
		if k, ok := mb.missedEvent(p.row, indexed, hadIndex); ok {
			if err := mb.journal(ctx, tx, k, p.row.entry.ID); err != nil {
				return 0, err
			}
			journaled++
		}
		// A held draft stays held; one the index did not know (dropped
		// into outbound/ while no service ran) is decided on now.
		if _, known := indexed[p.row.entry.ID]; p.row.awaiting || (p.row.policyHold && !known) {
			ok, err := mb.hold(ctx, tx, p.row.entry.ID)
			if err != nil {
				return 0, err
			}
			if ok {
				journaled++
			}
		}
		if f := p.row.failure; f != nil && Box(p.row.box) == BoxDeadletter {
			// The file records why it was set aside.
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO claims (id, status, agent, failures, reason, updated_at)
					VALUES (?, 'dead', '', ?, ?, ?)`, p.row.entry.ID, f.Attempts, f.Reason, nanos(f.FailedAt.Time)); err != nil {
				return 0, err
			}
		}
		st.Indexed++
	}
	return journaled, nil
}

// settleClaims makes the claims follow the files: done and dead come from
// where the file is; claims of messages no longer in the mailbox go, and
// so do the deliveries of drafts no longer queued. It records the index's
// version.
func settleClaims(ctx context.Context, tx *sql.Tx, now int64) error {
	stmts := []string{
		`DELETE FROM claims WHERE id NOT IN (SELECT id FROM messages)`,
		`UPDATE claims SET status = 'done', updated_at = ?1 WHERE status != 'done' AND id IN (SELECT id FROM messages WHERE box = 'archive' AND direction = 'inbound')`,
		`UPDATE claims SET status = 'dead', updated_at = ?1 WHERE status != 'dead' AND id IN (SELECT id FROM messages WHERE box = '.deadletter' AND direction = 'inbound')`,
		`DELETE FROM deliveries WHERE id NOT IN (SELECT id FROM messages WHERE box = 'outbound')`,
		`DELETE FROM approvals WHERE id NOT IN (SELECT id FROM messages WHERE box = 'outbound')`,
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q, now); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta (key, value) VALUES ('version', ?)`, fmt.Sprint(dbVersion))
	return err
}

// removeStale deletes the stale copies, and returns how many it removed.
func (mb *Mailbox) removeStale(stale []found, best map[string]found) int {
	n := 0
	for _, f := range stale {
		if err := mb.fs.remove(f.path); err != nil {
			mb.log.Warn("could not remove a stale copy", "path", f.rel, "err", err)
			continue
		}
		mb.log.Info("removed a stale copy left by an interrupted move", "path", f.rel, "kept", best[f.id].rel)
		n++
	}
	return n
}

// missedEvent says whether a row a scan indexes records an event the
// journal missed: a crash between a file's rename and its index commit
// (WriteInbound, FinishDelivery) left the file unindexed or indexed where
// it was before (indexed holds at least the rows of inbound/ and
// outbound/). A rebuild with no index before (a new database) misses
// nothing: its files are history, not news.
func (mb *Mailbox) missedEvent(r row, indexed map[string]string, hadIndex bool) (EventKind, bool) {
	if !hadIndex {
		return "", false
	}
	prev, had := indexed[r.entry.ID]
	box := Box(r.box)
	switch {
	case r.entry.Direction == schema.Inbound && box == BoxInbound && !had:
		return EventInbound, true
	case r.entry.Direction == schema.Outbound && (box == BoxArchive || box == BoxDeadletter) && had &&
		strings.HasPrefix(prev, mb.Rel(filepath.Join(mb.Mailbox(), string(BoxOutbound)))+string(filepath.Separator)):
		return finishEvent(box), true
	}
	return "", false
}

// cleanTmp removes temporary files of interrupted writes older than age.
// Younger ones may belong to a write in progress in another process.
func (mb *Mailbox) cleanTmp(age time.Duration) {
	d, err := mb.fs.openDir(mb.Tmp(), false)
	if err != nil {
		return
	}
	defer d.Close()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-age)
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "w-") {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			unix.Unlinkat(int(d.Fd()), e.Name(), 0)
		}
	}
}
