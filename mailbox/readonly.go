package mailbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	"modernc.org/sqlite"
)

// ErrReadOnlyRebuild is returned by a read-only Open when the state
// database is missing or from another version: rebuilding it is a write,
// which the service (or `courier reindex` as its user) does.
var ErrReadOnlyRebuild = errors.New("mailbox: the state database must be rebuilt, which needs write access (start the service, or run `courier reindex` as its user)")

// openReadOnly opens the mailbox for reading only (Options.ReadOnly): no
// folder is made, the database is neither created, migrated nor
// rebuilt, and SQLite opens it read-only. This is how an agent that is in
// the workspace's group, but may not write the mailbox, lists and reads it
// (DESIGN §7: while the service runs it is the only writer).
func openReadOnly(root string, o Options) (*Mailbox, error) {
	if !Initialized(root) {
		return nil, ErrNotInitialized
	}
	l := Layout{Root: root}
	// SQLite opens the database by path: refuse links in its place, as the
	// read-write open does.
	for _, p := range []string{l.DB(), l.DB() + "-wal", l.DB() + "-shm"} {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist) && p == l.DB():
			return nil, ErrReadOnlyRebuild
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("mailbox: %w", err)
		case !fi.Mode().IsRegular():
			return nil, &UnsafePathError{Path: l.Rel(p), What: "not a regular file"}
		}
	}
	fsr, err := openRoot(l.Mailbox(), l.Rel)
	if err != nil {
		return nil, err
	}
	db, err := openDBReadOnly(l.DB(), o.BusyTimeout)
	if err != nil {
		fsr.close()
		return nil, err
	}
	mb := &Mailbox{Layout: l, db: db, fs: fsr, opts: o, log: o.Logger}
	v, err := getMeta(db, "version")
	if err != nil {
		mb.Close()
		return nil, fmt.Errorf("mailbox: state database %s: %w", l.DB(), dbError(err))
	}
	if v != strconv.Itoa(dbVersion) {
		mb.Close()
		return nil, fmt.Errorf("%w: it is version %q, this courier reads version %d", ErrReadOnlyRebuild, v, dbVersion)
	}
	return mb, nil
}

// openDBReadOnly opens the state database with SQLite's mode=ro. A WAL
// database can be read that way by a user who may not write its folder
// as long as its -wal and -shm files exist: SQLite then reads the WAL
// index from a private copy ("unreliable" shared memory) instead of
// writing read marks into it, and the writers keep both files (see
// persistWAL).
func openDBReadOnly(path string, busy time.Duration) (*sql.DB, error) {
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	// With query_only, BEGIN IMMEDIATE fails at once (mode=ro alone lets
	// it start and fails only the first write): Claim, Done and Fail then
	// stop before their transaction writes any file.
	q.Add("_pragma", "query_only(1)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("mailbox: open state database: %w", err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	if err := db.PingContext(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("mailbox: state database %s: %w", path, dbError(err))
	}
	return db, nil
}

// persistWAL opens connections that keep the database's -wal and -shm
// files when the last of them closes (SQLITE_FCNTL_PERSIST_WAL). SQLite
// would delete both whenever the service stops, and a reader without
// write access to .state/ cannot open a WAL database without them
// (SQLITE_READONLY_DIRECTORY): agents in the workspace's group could then
// not even list their inbox until the service started again.
type persistWAL struct{ driver.Connector }

// Connect implements driver.Connector.
func (p persistWAL) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := p.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	fc, ok := c.(sqlite.FileControl)
	if !ok {
		c.Close()
		return nil, errors.New("mailbox: the SQLite driver has no file control (persistent WAL)")
	}
	if _, err := fc.FileControlPersistWAL("main", 1); err != nil {
		c.Close()
		return nil, fmt.Errorf("mailbox: persistent WAL: %w", err)
	}
	return c, nil
}

// openWAL opens dsn through persistWAL.
func openWAL(dsn string) (*sql.DB, error) {
	c, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(persistWAL{c}), nil
}
