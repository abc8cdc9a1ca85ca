package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Status of a message as agents see it.
type Status string

// Statuses. Inbound messages are new, claimed, failed (released for another
// try), done (archived) or dead (failed for good). Outbound drafts are
// queued, sent or dead.
const (
	StatusNew     Status = "new"
	StatusClaimed Status = "claimed"
	StatusFailed  Status = "failed"
	StatusDone    Status = "done"
	StatusDead    Status = "dead"
	StatusQueued  Status = "queued"
	StatusSent    Status = "sent"
)

// Statuses lists every status.
var Statuses = []Status{StatusNew, StatusClaimed, StatusFailed, StatusDone, StatusDead, StatusQueued, StatusSent}

// row is one index row, derived from a file.
type row struct {
	id, provider, direction, box, path          string
	ts, receivedAt, processedAt                 int64
	sessionID, sessionType, sessionName         string
	threadKey, threadRoot, replyTo, correlation string
	fromID, fromName, typ, preview              string
	keys                                        []string
	failure                                     *schema.Failure
}

const previewRunes = 120

func messageRow(m *schema.Message, box Box, rel string) row {
	r := row{
		id: m.ID, provider: string(m.Provider), direction: string(m.Direction), box: string(box), path: rel,
		ts: nanos(m.Timestamp.Time), receivedAt: nanos(m.ReceivedAt.Time),
		sessionID: m.Session.ID, sessionType: string(m.Session.Type), sessionName: m.Session.Name,
		threadKey: string(m.Session.ThreadKey), threadRoot: string(m.ThreadRoot), replyTo: string(m.ReplyTo),
		correlation: string(m.CorrelationID), fromID: m.Participants.From.ID, fromName: m.Participants.From.Name,
		typ: string(m.Type), preview: m.Preview(previewRunes),
	}
	if m.ProcessedAt != nil {
		r.processedAt = nanos(m.ProcessedAt.Time)
	}
	r.keys = MessageKeys(m)
	r.failure = m.Metadata.Extra.Failure
	return r
}

// MessageKeys returns the dedupe keys a message file stands for besides its
// id: the ids merged into it by debounce and its provider event id.
func MessageKeys(m *schema.Message) []string {
	var keys []string
	for _, id := range m.Metadata.Extra.MergedIDs {
		if id != m.ID {
			keys = append(keys, id)
		}
	}
	if e := m.Metadata.Extra.EventID; e != "" {
		keys = append(keys, EventKey(m.Provider, e))
	}
	return keys
}

// EventKey is the dedupe key of a provider event id (Slack event_id).
func EventKey(p schema.Provider, eventID string) string { return "event:" + string(p) + ":" + eventID }

// DraftKeys returns the ids, in the inbound id space, of the message a draft
// becomes once sent, so that its echo (an email we sent showing up in a
// synced Sent folder, a bot message event) is recognised and not ingested.
func DraftKeys(d *schema.Draft) []string {
	var keys []string
	if d.Provider == schema.Email && d.IdempotencyKey != "" {
		keys = append(keys, threading.EmailID(d.IdempotencyKey))
	}
	if d.Delivery != nil && d.Delivery.ProviderMessageID != "" {
		pm := d.Delivery.ProviderMessageID
		switch d.Provider {
		case schema.Lark:
			keys = append(keys, threading.LarkID(pm))
		case schema.Slack:
			if ch, ts, ok := strings.Cut(pm, ":"); ok {
				keys = append(keys, threading.SlackID(ch, ts))
			}
		}
	}
	return keys
}

func draftRow(d *schema.Draft, box Box, rel string) row {
	r := row{
		id: d.ID, provider: string(d.Provider), direction: string(schema.Outbound), box: string(box), path: rel,
		threadKey: string(d.ThreadKey), replyTo: string(d.ReplyTo), correlation: string(d.CorrelationID),
		fromID: d.Agent, fromName: d.Agent, typ: string(d.EffectiveType()),
		sessionName: d.Subject,
	}
	if len(d.To) > 0 {
		r.sessionID = d.To[0]
	}
	if d.CreatedAt != nil {
		r.ts = nanos(d.CreatedAt.Time)
		r.receivedAt = r.ts
	}
	if d.Delivery != nil && d.Delivery.SentAt != nil {
		r.ts = nanos(d.Delivery.SentAt.Time)
		r.processedAt = r.ts
	}
	text := d.Text()
	if text == "" && d.Content.HTML != "" {
		text = string(d.Content.HTML)
	}
	if d.Subject != "" {
		text = d.Subject + " — " + text
	}
	r.preview = schema.Preview(text, previewRunes)
	r.keys = DraftKeys(d)
	return r
}

const insertRowSQL = `INSERT OR REPLACE INTO messages (id, provider, direction, box, path, ts, received_at, processed_at,
	session_id, session_type, session_name, thread_key, thread_root, reply_to, correlation_id, from_id, from_name, type, preview)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// inserter keeps the statements of a transaction that writes many rows.
type inserter struct {
	row, key *sql.Stmt
}

func newInserter(ctx context.Context, tx *sql.Tx) (*inserter, error) {
	r, err := tx.PrepareContext(ctx, insertRowSQL)
	if err != nil {
		return nil, err
	}
	k, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO keys (key, id) VALUES (?, ?)`)
	if err != nil {
		r.Close()
		return nil, err
	}
	return &inserter{row: r, key: k}, nil
}

func (in *inserter) close() { in.row.Close(); in.key.Close() }

func (in *inserter) insert(ctx context.Context, r row) error {
	var processed any
	if r.processedAt != 0 {
		processed = r.processedAt
	}
	var received any
	if r.receivedAt != 0 {
		received = r.receivedAt
	}
	_, err := in.row.ExecContext(ctx, r.id, r.provider, r.direction, r.box, r.path, r.ts, received, processed,
		r.sessionID, r.sessionType, r.sessionName, r.threadKey, r.threadRoot, r.replyTo, r.correlation,
		r.fromID, r.fromName, r.typ, r.preview)
	if err != nil {
		return fmt.Errorf("index %s: %w", r.id, err)
	}
	for _, k := range r.keys {
		if _, err := in.key.ExecContext(ctx, k, r.id); err != nil {
			return fmt.Errorf("index key %s: %w", k, err)
		}
	}
	return nil
}

// Entry is a message or draft as the index knows it: what `list`, `thread`
// and `context` print.
type Entry struct {
	ID          string           `json:"id"`
	Provider    schema.Provider  `json:"provider"`
	Direction   schema.Direction `json:"direction"`
	Status      Status           `json:"status"`
	Path        string           `json:"path"` // relative to the workspace root
	Timestamp   time.Time        `json:"timestamp"`
	ReceivedAt  *time.Time       `json:"received_at"`
	ProcessedAt *time.Time       `json:"processed_at"`
	Session     EntrySession     `json:"session"`
	From        EntryParty       `json:"from"`
	Type        string           `json:"type"`
	Preview     string           `json:"preview"`

	CorrelationID string `json:"correlation_id"`
	ReplyTo       string `json:"reply_to"`
	ThreadRoot    string `json:"thread_root"`

	ClaimedBy      string     `json:"claimed_by,omitempty"`
	ClaimExpiresAt *time.Time `json:"claim_expires_at,omitempty"`
	Failures       int        `json:"failures,omitempty"`
	FailReason     string     `json:"fail_reason,omitempty"`
}

// EntrySession is the session of an Entry.
type EntrySession struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Name      string `json:"name"`
	ThreadKey string `json:"thread_key"`
}

// EntryParty is the sender of an Entry.
type EntryParty struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Filter selects entries.
type Filter struct {
	// All includes done and dead messages; without it List shows what is
	// still in the inbox (new, claimed, failed).
	All bool
	// Statuses keeps only these statuses (implies All).
	Statuses    []Status
	Providers   []schema.Provider
	Since       time.Time // messages at or after this time
	Correlation string
	// Outbound lists drafts (queued, sent, dead) instead of inbound
	// messages.
	Outbound bool
	Limit    int
}

// statusSQL computes an entry's status from its box and claim.
const statusSQL = `CASE
	WHEN m.direction = 'outbound' THEN CASE m.box WHEN 'outbound' THEN 'queued' WHEN 'archive' THEN 'sent' ELSE 'dead' END
	WHEN m.box = 'archive' THEN 'done'
	WHEN m.box = '.deadletter' THEN 'dead'
	WHEN c.status = 'claimed' AND c.expires_at > :now THEN 'claimed'
	WHEN c.status = 'failed' THEN 'failed'
	ELSE 'new' END`

const selectEntries = `SELECT m.id, m.provider, m.direction, ` + statusSQL + `, m.path, m.ts, m.received_at, m.processed_at,
	m.session_id, m.session_type, m.session_name, m.thread_key, m.from_id, m.from_name, m.type, m.preview,
	m.correlation_id, m.reply_to, m.thread_root,
	CASE WHEN c.status = 'claimed' AND c.expires_at > :now THEN c.agent ELSE '' END,
	CASE WHEN c.status = 'claimed' AND c.expires_at > :now THEN c.expires_at END,
	COALESCE(c.failures, 0), COALESCE(c.reason, '')
	FROM messages m LEFT JOIN claims c ON c.id = m.id`

func scanEntry(rows *sql.Rows, e *Entry) error {
	var ts int64
	var recv, proc, exp sql.NullInt64
	var status, provider, direction string
	err := rows.Scan(&e.ID, &provider, &direction, &status, &e.Path, &ts, &recv, &proc,
		&e.Session.ID, &e.Session.Type, &e.Session.Name, &e.Session.ThreadKey, &e.From.ID, &e.From.Name, &e.Type, &e.Preview,
		&e.CorrelationID, &e.ReplyTo, &e.ThreadRoot, &e.ClaimedBy, &exp, &e.Failures, &e.FailReason)
	if err != nil {
		return err
	}
	e.Provider, e.Direction, e.Status = schema.Provider(provider), schema.Direction(direction), Status(status)
	e.Timestamp = time.Unix(0, ts).UTC()
	e.ReceivedAt, e.ProcessedAt, e.ClaimExpiresAt = fromNanos(recv), fromNanos(proc), fromNanos(exp)
	return nil
}

// List calls fn for each entry the filter selects, oldest first. It
// streams: memory does not grow with the size of the mailbox.
func (mb *Mailbox) List(ctx context.Context, f Filter, fn func(*Entry) error) error {
	var where []string
	args := []any{sql.Named("now", mb.now().UnixNano())}
	if f.Outbound {
		where = append(where, "m.direction = 'outbound'")
	} else {
		where = append(where, "m.direction = 'inbound'")
		if !f.All && len(f.Statuses) == 0 {
			where = append(where, "m.box = 'inbound'")
		}
	}
	if len(f.Statuses) > 0 {
		ph := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			ph[i] = fmt.Sprintf(":s%d", i)
			args = append(args, sql.Named(fmt.Sprintf("s%d", i), string(s)))
		}
		where = append(where, "("+statusSQL+") IN ("+strings.Join(ph, ", ")+")")
	}
	if len(f.Providers) > 0 {
		ph := make([]string, len(f.Providers))
		for i, p := range f.Providers {
			ph[i] = fmt.Sprintf(":p%d", i)
			args = append(args, sql.Named(fmt.Sprintf("p%d", i), string(p)))
		}
		where = append(where, "m.provider IN ("+strings.Join(ph, ", ")+")")
	}
	if !f.Since.IsZero() {
		where = append(where, "m.ts >= :since")
		args = append(args, sql.Named("since", f.Since.UnixNano()))
	}
	if f.Correlation != "" {
		where = append(where, "m.correlation_id = :corr")
		args = append(args, sql.Named("corr", f.Correlation))
	}
	q := selectEntries + " WHERE " + strings.Join(where, " AND ") + " ORDER BY m.ts, m.id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return mb.query(ctx, q, args, fn)
}

func (mb *Mailbox) query(ctx context.Context, q string, args []any, fn func(*Entry) error) error {
	rows, err := mb.db.QueryContext(ctx, q, args...)
	if err != nil {
		return dbError(err)
	}
	defer rows.Close()
	var e Entry
	for rows.Next() {
		e = Entry{}
		if err := scanEntry(rows, &e); err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return dbError(rows.Err())
}

// ErrNotFound is returned for an id the mailbox does not hold.
var ErrNotFound = errors.New("not found")

// NotFoundError names the id that was not found.
type NotFoundError struct{ ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("message %q not found", e.ID) }

// Unwrap makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// Get returns the entry of an id.
func (mb *Mailbox) Get(ctx context.Context, id string) (*Entry, error) {
	var out *Entry
	err := mb.query(ctx, selectEntries+" WHERE m.id = :id", []any{sql.Named("now", mb.now().UnixNano()), sql.Named("id", id)},
		func(e *Entry) error { c := *e; out = &c; return nil })
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, &NotFoundError{ID: id}
	}
	return out, nil
}

// Thread calls fn for every message and draft of a thread, oldest first.
// key is a session.thread_key, or the id of any message of the thread.
func (mb *Mailbox) Thread(ctx context.Context, key string, fn func(*Entry) error) error {
	threadKey, root := key, key
	if e, err := mb.Get(ctx, key); err == nil {
		threadKey = e.Session.ThreadKey
		root = e.ThreadRoot
		if root == "" {
			root = e.ID
		}
	}
	args := []any{sql.Named("now", mb.now().UnixNano()), sql.Named("key", threadKey), sql.Named("root", root)}
	// The root of an IM thread has no thread key of its own: find it
	// through its replies' thread_root.
	q := selectEntries + ` WHERE (:key != '' AND m.thread_key = :key) OR m.thread_root = :root OR m.id = :root
		OR (:key != '' AND m.id IN (SELECT thread_root FROM messages WHERE thread_key = :key AND thread_root != ''))
		ORDER BY m.ts, m.id`
	return mb.query(ctx, q, args, fn)
}

// Context calls fn for every message and draft, in any box, that carries a
// correlation id, oldest first.
func (mb *Mailbox) Context(ctx context.Context, correlation string, fn func(*Entry) error) error {
	args := []any{sql.Named("now", mb.now().UnixNano()), sql.Named("corr", correlation)}
	return mb.query(ctx, selectEntries+` WHERE m.correlation_id = :corr ORDER BY m.ts, m.id`, args, fn)
}

// Seen reports whether the mailbox holds a message of this id, or a file
// that stands for this dedupe key.
func (mb *Mailbox) Seen(ctx context.Context, key string) (bool, error) {
	var one int
	err := mb.db.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ?1 UNION ALL SELECT 1 FROM keys WHERE key = ?1 LIMIT 1`, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, dbError(err)
}

// Lookup returns the id of the message a key stands for (the key itself if
// it is an id).
func (mb *Mailbox) Lookup(ctx context.Context, key string) (string, bool, error) {
	var id string
	err := mb.db.QueryRowContext(ctx, `SELECT id FROM messages WHERE id = ?1 UNION ALL SELECT id FROM keys WHERE key = ?1 LIMIT 1`, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, dbError(err)
	}
	return id, true, nil
}

// Count returns the number of entries per status.
func (mb *Mailbox) Count(ctx context.Context) (map[Status]int, error) {
	rows, err := mb.db.QueryContext(ctx, `SELECT `+statusSQL+` AS s, COUNT(*) FROM messages m LEFT JOIN claims c ON c.id = m.id GROUP BY s`,
		sql.Named("now", mb.now().UnixNano()))
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[Status]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[Status(s)] = n
	}
	return out, rows.Err()
}
