package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/monoco/courier/schema"
)

// Options of a Mailbox. The zero value means defaults.
type Options struct {
	Logger *slog.Logger
	// ClaimTimeout is how long a claim holds when the caller gives none
	// (default 300 s, as upstream).
	ClaimTimeout time.Duration
	// MaxClaimTimeout is the longest claim a caller may ask for (default
	// 24 h); a longer one is ErrClaimTooLong.
	MaxClaimTimeout time.Duration
	// MaxFailures is how many times agents may fail a message before it is
	// set aside in .deadletter/ (default 3, as upstream).
	MaxFailures int
	// RetryBackoff is the wait after the first failure before the message
	// can be claimed again; it doubles with each failure (default 1 s).
	RetryBackoff time.Duration
	// BusyTimeout bounds the wait for the database lock (default 10 s).
	BusyTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ReadOnly opens the mailbox for reading only, for a user who may
	// read it but not write it (an agent while the service is the only
	// writer): nothing is created, migrated or rebuilt, and a database
	// that would need it is ErrReadOnlyRebuild.
	ReadOnly bool
	// Hold says whether a draft entering the queue waits for a person's
	// approval (courier.outbound.approval; see approval.go). Nil holds
	// only the drafts whose file says so.
	Hold func(*schema.Draft) bool
}

// Mailbox is an open mailbox: its layout and its state database. It is safe
// for concurrent use, and several processes may open the same mailbox.
type Mailbox struct {
	Layout
	db   *sql.DB
	fs   *fsRoot // every file below the mailbox folder goes through it
	opts Options
	log  *slog.Logger
	subs subscribers // Subscribe's channels (events.go)

	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt // the lookups' statements, prepared once (index.go)
}

// Open opens the mailbox of the workspace at root. The mailbox must exist
// (see Init). When the state database is missing or from another version it
// is rebuilt from the files.
func Open(root string, opts *Options) (*Mailbox, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = discard
	}
	if o.ClaimTimeout <= 0 {
		o.ClaimTimeout = 300 * time.Second
	}
	if o.MaxClaimTimeout <= 0 {
		o.MaxClaimTimeout = 24 * time.Hour
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = 3
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = time.Second
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ReadOnly {
		return openReadOnly(root, o)
	}
	if !Initialized(root) {
		return nil, ErrNotInitialized
	}
	l := Layout{Root: root}
	fsr, err := openRoot(l.Mailbox(), l.Rel)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{l.State(), l.Tmp()} {
		if err := fsr.mkdirAll(d); err != nil {
			fsr.close()
			return nil, err
		}
	}
	fresh, err := prepareDB(fsr, l.DB(), o.Logger)
	if err != nil {
		fsr.close()
		return nil, err
	}
	db, err := openDB(l.DB(), o.BusyTimeout)
	if err != nil {
		fsr.close()
		return nil, err
	}
	mb := &Mailbox{Layout: l, db: db, fs: fsr, opts: o, log: o.Logger}
	v, err := getMeta(db, "version")
	if err != nil {
		mb.Close()
		return nil, fmt.Errorf("mailbox: state database: %w", dbError(err))
	}
	if fresh || v != strconv.Itoa(dbVersion) {
		if !fresh {
			mb.log.Warn("state database is from another version; rebuilding the index from the files", "version", v)
			// The derived tables are rebuilt and delivery attempts start
			// over; claims and checkpoints stay.
			if _, err := db.Exec(`DROP TABLE IF EXISTS messages; DROP TABLE IF EXISTS keys; DROP TABLE IF EXISTS deliveries;` + ddl); err != nil {
				mb.Close()
				return nil, fmt.Errorf("mailbox: migrate state database: %w", dbError(err))
			}
		}
		if _, err := mb.Reindex(context.Background()); err != nil {
			mb.Close()
			return nil, err
		}
	}
	return mb, nil
}

// Close closes the state database and the mailbox folder.
func (mb *Mailbox) Close() error {
	mb.stmtMu.Lock()
	for _, st := range mb.stmts {
		st.Close()
	}
	mb.stmts = nil
	mb.stmtMu.Unlock()
	err := mb.db.Close()
	mb.fs.close()
	return err
}

// DB returns the state database, for packages that keep state beside the
// mailbox's own (the outbound engine's delivery table).
func (mb *Mailbox) DB() *sql.DB { return mb.db }

func (mb *Mailbox) now() time.Time { return mb.opts.Now().UTC() }

// ReadFile returns the bytes of the file of an id, wherever it is. The
// file must be a regular file reached without a link (see confine.go): a
// link put in its place is an UnsafePathError, and its target is not read.
func (mb *Mailbox) ReadFile(ctx context.Context, id string) ([]byte, *Entry, error) {
	e, err := mb.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	b, err := mb.fs.readFile(mb.Abs(e.Path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, e, fmt.Errorf("mailbox: the index names %s but the file is gone (run `courier reindex`): %w", e.Path, &NotFoundError{ID: id})
	}
	return b, e, err
}

// ReadPath reads a file of the mailbox by its path relative to the
// workspace (as the index and Due name it), refusing links and anything
// but a regular file with an UnsafePathError.
func (mb *Mailbox) ReadPath(rel string) ([]byte, error) { return mb.fs.readFile(mb.Abs(rel)) }

// Message reads and decodes the inbound message of an id, to be read,
// never written back. A file of any size is read in bounded memory: one
// over WholeFile bytes (written before max_text_bytes) has its long values
// and its body cut, saying so; and each list of any file keeps
// schema.MaxReadItems items (schema.CapLists): decoding costs memory by
// the item, and a file written before the email adapter bounded its lists
// holds 57,000 Cc participants in 10 MB.
func (mb *Mailbox) Message(ctx context.Context, id string) (*schema.Message, *Entry, error) {
	b, e, err := mb.openBounded(ctx, id, schema.MaxReadText)
	if err != nil {
		return nil, e, err
	}
	if e.Direction != schema.Inbound {
		return nil, e, fmt.Errorf("mailbox: %s is an outbound draft, not a message", id)
	}
	b, _ = schema.CapLists(b, 0)
	m, err := schema.Decode(b)
	if err != nil {
		return nil, e, fmt.Errorf("mailbox: %s: %w", e.Path, err)
	}
	return m, e, nil
}

// Draft reads and decodes the outbound draft of an id, in bounded memory
// as Message does.
func (mb *Mailbox) Draft(ctx context.Context, id string) (*schema.Draft, *Entry, error) {
	b, e, err := mb.openBounded(ctx, id, schema.MaxReadText)
	if err != nil {
		return nil, e, err
	}
	if e.Direction != schema.Outbound {
		return nil, e, fmt.Errorf("mailbox: %s is an inbound message, not a draft", id)
	}
	d, _, err := schema.DecodeDraft(b)
	if err != nil {
		return nil, e, fmt.Errorf("mailbox: %s: %w", e.Path, err)
	}
	return d, e, nil
}

// Checkpoint returns the value saved under key.
func (mb *Mailbox) Checkpoint(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := mb.db.QueryRowContext(ctx, `SELECT value FROM checkpoints WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, dbError(err)
	}
	return v, true, nil
}

// Checkpoint is a position to save under a key.
type Checkpoint struct{ Key, Value string }

// SetCheckpoints saves checkpoints on their own (for a source whose position
// moved without new messages).
func (mb *Mailbox) SetCheckpoints(ctx context.Context, cps ...Checkpoint) error {
	return withTx(ctx, mb.db, func(tx *sql.Tx) error { return mb.saveCheckpoints(ctx, tx, cps) })
}

func (mb *Mailbox) saveCheckpoints(ctx context.Context, tx *sql.Tx, cps []Checkpoint) error {
	now := mb.now().UnixNano()
	for _, c := range cps {
		if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, c.Key, c.Value, now); err != nil {
			return err
		}
	}
	return nil
}

// Ping checks that the state database answers.
func (mb *Mailbox) Ping(ctx context.Context) error {
	var one int
	return dbError(mb.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one))
}

// Check runs SQLite's quick integrity check on the state database.
func (mb *Mailbox) Check(ctx context.Context) error {
	var res string
	if err := mb.db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil {
		return dbError(err)
	}
	if res != "ok" {
		return fmt.Errorf("mailbox: state database is damaged: %s (run `courier reindex` after moving it away)", res)
	}
	return nil
}
