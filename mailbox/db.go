package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dbVersion is the version of the database schema below; a database of
// another version is rebuilt from the files by Open.
const dbVersion = 6

const ddl = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- The index: one row per file in the mailbox, derived from the file.
CREATE TABLE IF NOT EXISTS messages (
	ts             INTEGER NOT NULL,
	id             TEXT NOT NULL,
	provider       TEXT NOT NULL,
	direction      TEXT NOT NULL,
	box            TEXT NOT NULL,
	path           TEXT NOT NULL,
	thread_key     TEXT NOT NULL DEFAULT '',
	thread_root    TEXT NOT NULL DEFAULT '',
	correlation_id TEXT NOT NULL DEFAULT '',
	doc            BLOB NOT NULL, -- the Entry without its state, as JSON
	PRIMARY KEY (ts, id)
) WITHOUT ROWID; -- clustered by time: a listing reads the table in order
CREATE UNIQUE INDEX IF NOT EXISTS messages_id ON messages(id);
CREATE INDEX IF NOT EXISTS messages_thread ON messages(thread_key) WHERE thread_key != '';
CREATE INDEX IF NOT EXISTS messages_root ON messages(thread_root) WHERE thread_root != '';
CREATE INDEX IF NOT EXISTS messages_corr ON messages(correlation_id) WHERE correlation_id != '';
-- The queue: only drafts in outbound/, however large the mailbox.
CREATE INDEX IF NOT EXISTS messages_queue ON messages(provider, ts, id) WHERE box = 'outbound';
-- Dedupe keys besides ids (Slack event ids, merged ids, Message-IDs we sent),
-- derived from the files.
CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, id TEXT NOT NULL);
-- Agents' claims and failures: state no file holds.
CREATE TABLE IF NOT EXISTS claims (
	id         TEXT PRIMARY KEY,
	status     TEXT NOT NULL,
	agent      TEXT NOT NULL DEFAULT '',
	claimed_at INTEGER,
	expires_at INTEGER,
	failures   INTEGER NOT NULL DEFAULT 0,
	reason     TEXT NOT NULL DEFAULT '',
	retry_at   INTEGER,
	updated_at INTEGER NOT NULL
);
-- Adapter positions (IMAP UIDs, ...).
CREATE TABLE IF NOT EXISTS checkpoints (key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at INTEGER NOT NULL);
-- Delivery state of queued drafts (attempts, next try), kept by the outbound engine.
CREATE TABLE IF NOT EXISTS deliveries (
	id          TEXT PRIMARY KEY,
	state       TEXT NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0,
	next_at     INTEGER NOT NULL DEFAULT 0,
	owner       TEXT NOT NULL DEFAULT '',
	lease_until INTEGER NOT NULL DEFAULT 0,
	last_error  TEXT NOT NULL DEFAULT '',
	accepted    TEXT NOT NULL DEFAULT '', -- JSON: recipients earlier attempts reached
	receipt     TEXT NOT NULL DEFAULT '', -- JSON: what the provider said when it took the draft
	updated_at  INTEGER NOT NULL
);
`

// openDB opens the state database with WAL, full durability of commits and
// a busy timeout, so that concurrent CLI processes queue rather than fail.
func openDB(path string, busy time.Duration) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL in WAL mode: a commit survives the process dying at any
	// instant (kill -9 included); only an OS crash or power loss can roll
	// back the last commits, and every commit that must not run ahead of
	// files (checkpoints, index rows) is made after those files are
	// fsynced, so what is lost is at worst redone (a redelivery found by
	// its file name, a resend).
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_txlock", "immediate")
	db, err := openWAL("file:" + path + "?" + q.Encode())
	if err != nil {
		return nil, fmt.Errorf("mailbox: open state database: %w", err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	// The journal's table is new in an existing database too: created here,
	// it needs no version change (nothing derived is rebuilt).
	if _, err := db.Exec(ddl + eventsDDL + approvalsDDL); err != nil {
		db.Close()
		return nil, fmt.Errorf("mailbox: state database %s: %w", path, dbError(err))
	}
	return db, nil
}

// ErrBusy is returned when the state database stayed locked by other
// processes for longer than the busy timeout.
var ErrBusy = errors.New("mailbox: state database is busy (timed out waiting for other processes)")

// dbError turns SQLite's busy and locked errors into ErrBusy.
func dbError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%w: %v", ErrBusy, err)
		}
	}
	return err
}

// withTx runs fn in a write transaction (BEGIN IMMEDIATE: the write lock is
// taken at the start, so decisions made inside cannot be raced).
func withTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return dbError(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return dbError(err)
	}
	return dbError(tx.Commit())
}

func getMeta(db *sql.DB, key string) (string, error) {
	var v string
	err := db.QueryRow(`SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// dbPerm is the mode of the state database, and so of its -wal and -shm
// files (SQLite gives them the database's mode): the index holds every
// subject and sender, which are not for others to read. SQLite itself
// would create the database 0644.
const dbPerm = 0o640

// prepareDB makes the state database at path ready for SQLite, which opens
// it by path: the database and its -wal and -shm files must be regular
// files (not links SQLite would follow out of the mailbox); a missing
// database is created empty with dbPerm (SQLite takes an empty file for a
// new database), and one others could read, left by an earlier version,
// loses those bits. fresh reports that there was no database.
func prepareDB(r *fsRoot, path string, log *slog.Logger) (fresh bool, err error) {
	dirfd, err := r.openDirFd(filepath.Dir(path), false)
	if err != nil {
		return false, err
	}
	defer unix.Close(dirfd)
	base := filepath.Base(path)
	for _, name := range []string{base, base + "-wal", base + "-shm"} {
		var st unix.Stat_t
		err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			fresh = fresh || name == base
			continue
		case err != nil:
			return false, &os.PathError{Op: "mailbox: stat", Path: r.rel(filepath.Join(filepath.Dir(path), name)), Err: err}
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return false, &UnsafePathError{Path: r.rel(filepath.Join(filepath.Dir(path), name)), What: "a symbolic link"}
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return false, &UnsafePathError{Path: r.rel(filepath.Join(filepath.Dir(path), name)), What: "not a regular file"}
		}
		// Best effort: only the owner may chmod, and an agent running
		// `courier list` as another user is not the owner.
		if perm := uint32(st.Mode) & 0o777; perm&0o007 != 0 && unix.Fchmodat(dirfd, name, perm&^0o007, 0) == nil {
			log.Info("the state database was readable by others; it no longer is", "file", r.rel(filepath.Join(filepath.Dir(path), name)))
		}
	}
	if fresh {
		fd, err := unix.Openat(dirfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, dbPerm)
		switch {
		case err == nil:
			unix.Close(fd)
		case !errors.Is(err, unix.EEXIST): // EEXIST: another process made it just now
			return false, &os.PathError{Op: "mailbox: create", Path: r.rel(path), Err: err}
		}
	}
	return fresh, nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func nullNanos(t *time.Time) any {
	if t == nil || t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(n sql.NullInt64) *time.Time {
	if !n.Valid || n.Int64 == 0 {
		return nil
	}
	t := time.Unix(0, n.Int64).UTC()
	return &t
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

var discard = slog.New(slog.DiscardHandler)
