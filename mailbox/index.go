package mailbox

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/monoco/courier/schema"
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

// row is one index row, derived from a file: the columns queries filter
// on, and the entry itself, stored as JSON so that listing 100,000
// messages is one column read and a byte copy each.
type row struct {
	entry   Entry // the static part: everything but status and claim
	box     string
	keys    []string
	failure *schema.Failure
	// A queued draft's hold (approval.go): its file says it awaits
	// approval, or the policy would hold it.
	awaiting, policyHold bool
}

const previewRunes = 120

func messageRow(m *schema.Message, box Box, rel string) row {
	e := Entry{
		ID: m.ID, Provider: m.Provider, Direction: m.Direction, Path: rel,
		Timestamp: m.Timestamp.Time, ReceivedAt: timePtr(m.ReceivedAt.Time),
		Session: EntrySession{ID: m.Session.ID, Type: string(m.Session.Type), Name: m.Session.Name, ThreadKey: string(m.Session.ThreadKey)},
		From:    EntryParty{ID: m.Participants.From.ID, Name: m.Participants.From.Name},
		Type:    string(m.Type), Preview: m.Preview(previewRunes),
		CorrelationID: string(m.CorrelationID), ReplyTo: string(m.ReplyTo), ThreadRoot: string(m.ThreadRoot),
	}
	if m.ProcessedAt != nil {
		e.ProcessedAt = timePtr(m.ProcessedAt.Time)
	}
	return row{entry: e, box: string(box), keys: MessageKeys(m), failure: m.Metadata.Extra.Failure}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
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
	if d := m.Metadata.Extra.Digest; d != "" && !m.ReceivedAt.IsZero() {
		keys = append(keys, DigestKey(d, m.ReceivedAt.Time))
	}
	return keys
}

// DigestKey is the dedupe key of a message's digest (metadata.extra.digest)
// and its time received: "digest:", the digest, "@" and the time received in
// Unix seconds, zero-padded to 12 digits, so that the copies of a content
// received in a span of time are one range of keys (FindDigest).
func DigestKey(digest string, received time.Time) string {
	return fmt.Sprintf("digest:%s@%012d", digest, min(max(received.Unix(), 0), 999999999999))
}

// EventKey is the dedupe key of a provider event id (Slack event_id):
// schema.EventKey, the one format every provider and the index share.
func EventKey(p schema.Provider, eventID string) string { return schema.EventKey(p, eventID) }

// DraftKeys returns the ids, in the inbound id space, of the message a draft
// sends: the draft's InboundID, which its provider fixed when it was queued
// or when it was delivered. A copy of it seen inbound (an IMAP Sent folder,
// Slack's echo) is then our own, and a reply to it finds its thread.
func DraftKeys(d *schema.Draft) []string {
	if d.InboundID == "" {
		return nil
	}
	return []string{d.InboundID}
}

func draftRow(d *schema.Draft, box Box, rel string) row {
	e := Entry{
		ID: d.ID, Provider: d.Provider, Direction: schema.Outbound, Path: rel,
		Session:       EntrySession{Name: d.Subject, ThreadKey: string(d.ThreadKey)},
		From:          EntryParty{ID: d.Agent, Name: d.Agent},
		Type:          string(d.EffectiveType()),
		CorrelationID: string(d.CorrelationID), ReplyTo: string(d.ReplyTo),
	}
	if len(d.To) > 0 {
		e.Session.ID = d.To[0]
	}
	if d.CreatedAt != nil {
		e.Timestamp = d.CreatedAt.UTC()
		e.ReceivedAt = timePtr(d.CreatedAt.Time)
	}
	if d.Delivery != nil && d.Delivery.SentAt != nil {
		e.Timestamp = d.Delivery.SentAt.UTC()
		e.ProcessedAt = timePtr(d.Delivery.SentAt.Time)
	}
	text := d.Text()
	if text == "" && d.Content.HTML != "" {
		text = string(d.Content.HTML)
	}
	if d.Subject != "" {
		text = d.Subject + " — " + text
	}
	e.Preview = schema.Preview(text, previewRunes)
	return row{entry: e, box: string(box), keys: DraftKeys(d)}
}

const insertRowSQL = `INSERT OR REPLACE INTO messages (id, provider, direction, box, path, ts, thread_key, thread_root, correlation_id, doc)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

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
	e := &r.entry
	doc, err := marshalJSON(e.static())
	if err != nil {
		return err
	}
	_, err = in.row.ExecContext(ctx, e.ID, string(e.Provider), string(e.Direction), r.box, e.Path, nanos(e.Timestamp),
		e.Session.ThreadKey, e.ThreadRoot, e.CorrelationID, doc)
	if err != nil {
		return fmt.Errorf("index %s: %w", e.ID, err)
	}
	for _, k := range r.keys {
		if _, err := in.key.ExecContext(ctx, k, e.ID); err != nil {
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

	// The state of the message, not derived from its file.
	Status         Status     `json:"status"`
	ClaimedBy      string     `json:"claimed_by,omitempty"`
	ClaimExpiresAt *time.Time `json:"claim_expires_at,omitempty"`
	Failures       int        `json:"failures,omitempty"`
	FailReason     string     `json:"fail_reason,omitempty"`
}

// staticEntry is the part of an Entry derived from its file: the JSON
// stored in the index.
type staticEntry struct {
	ID            string           `json:"id"`
	Provider      schema.Provider  `json:"provider"`
	Direction     schema.Direction `json:"direction"`
	Path          string           `json:"path"`
	Timestamp     time.Time        `json:"timestamp"`
	ReceivedAt    *time.Time       `json:"received_at"`
	ProcessedAt   *time.Time       `json:"processed_at"`
	Session       EntrySession     `json:"session"`
	From          EntryParty       `json:"from"`
	Type          string           `json:"type"`
	Preview       string           `json:"preview"`
	CorrelationID string           `json:"correlation_id"`
	ReplyTo       string           `json:"reply_to"`
	ThreadRoot    string           `json:"thread_root"`
}

// stateEntry is the part of an Entry kept in the claims table.
type stateEntry struct {
	Status         Status     `json:"status"`
	ClaimedBy      string     `json:"claimed_by,omitempty"`
	ClaimExpiresAt *time.Time `json:"claim_expires_at,omitempty"`
	Failures       int        `json:"failures,omitempty"`
	FailReason     string     `json:"fail_reason,omitempty"`
}

func (e *Entry) static() *staticEntry {
	return &staticEntry{e.ID, e.Provider, e.Direction, e.Path, e.Timestamp, e.ReceivedAt, e.ProcessedAt, e.Session, e.From,
		e.Type, e.Preview, e.CorrelationID, e.ReplyTo, e.ThreadRoot}
}

func (e *Entry) setStatic(s *staticEntry) {
	e.ID, e.Provider, e.Direction, e.Path, e.Timestamp, e.ReceivedAt, e.ProcessedAt = s.ID, s.Provider, s.Direction, s.Path, s.Timestamp, s.ReceivedAt, s.ProcessedAt
	e.Session, e.From, e.Type, e.Preview, e.CorrelationID, e.ReplyTo, e.ThreadRoot = s.Session, s.From, s.Type, s.Preview, s.CorrelationID, s.ReplyTo, s.ThreadRoot
}

// MarshalJSON writes the entry as ListJSON does, byte for byte: the stored
// static part, then the state.
func (e *Entry) MarshalJSON() ([]byte, error) {
	doc, err := marshalJSON(e.static())
	if err != nil {
		return nil, err
	}
	st, err := marshalJSON(&stateEntry{e.Status, e.ClaimedBy, e.ClaimExpiresAt, e.Failures, e.FailReason})
	if err != nil {
		return nil, err
	}
	return splice(nil, doc, st), nil
}

// splice joins two JSON objects into one: {a..., b...}.
func splice(dst, a, b []byte) []byte {
	dst = append(dst, a[:len(a)-1]...)
	dst = append(dst, ',')
	return append(dst, b[1:]...)
}

// marshalJSON encodes without HTML escaping and without a trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
	// Both lists inbound messages and outbound drafts (context, thread).
	Both bool
	// Thread keeps the entries of a thread: a thread key or the id of a
	// message in it.
	Thread string
	Limit  int
}

// statusSQL computes an entry's status from its box and claim.
const statusSQL = `CASE
	WHEN m.direction = 'outbound' THEN CASE m.box WHEN 'outbound' THEN 'queued' WHEN 'archive' THEN 'sent' ELSE 'dead' END
	WHEN m.box = 'archive' THEN 'done'
	WHEN m.box = '.deadletter' THEN 'dead'
	WHEN c.status = 'claimed' AND c.expires_at > :now THEN 'claimed'
	WHEN c.status = 'failed' THEN 'failed'
	ELSE 'new' END`

const selectEntries = `SELECT m.doc, ` + statusSQL + `,
	CASE WHEN c.status = 'claimed' AND c.expires_at > :now THEN c.agent ELSE '' END,
	CASE WHEN c.status = 'claimed' AND c.expires_at > :now THEN c.expires_at END,
	COALESCE(c.failures, 0), COALESCE(c.reason, '')
	FROM messages m LEFT JOIN claims c ON c.id = m.id`

// where builds the query for a filter.
func (mb *Mailbox) where(ctx context.Context, f Filter) (string, []any) {
	var where []string
	args := []any{sql.Named("now", mb.now().UnixNano())}
	switch {
	case f.Both:
	case f.Outbound:
		where = append(where, "m.direction = 'outbound'")
	default:
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
	if f.Thread != "" {
		key, root := f.Thread, f.Thread
		if e, err := mb.Get(ctx, f.Thread); err == nil {
			key, root = e.Session.ThreadKey, e.ThreadRoot
			if root == "" {
				root = e.ID
			}
		}
		// The root of an IM thread has no thread key of its own: find it
		// through its replies' thread_root.
		where = append(where, `((:key != '' AND m.thread_key = :key) OR m.thread_root = :root OR m.id = :root
			OR (:key != '' AND m.id IN (SELECT thread_root FROM messages WHERE thread_key = :key AND thread_root != '')))`)
		args = append(args, sql.Named("key", key), sql.Named("root", root))
	}
	q := selectEntries
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY m.ts, m.id"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	return q, args
}

// scanState reads the state columns of a selectEntries row.
func scanState(rows *sql.Rows, doc *[]byte, st *stateEntry) error {
	var exp sql.NullInt64
	var status string
	if err := rows.Scan(doc, &status, &st.ClaimedBy, &exp, &st.Failures, &st.FailReason); err != nil {
		return err
	}
	st.Status = Status(status)
	st.ClaimExpiresAt = fromNanos(exp)
	return nil
}

// List calls fn for each entry the filter selects, oldest first. It
// streams: memory does not grow with the size of the mailbox.
func (mb *Mailbox) List(ctx context.Context, f Filter, fn func(*Entry) error) error {
	q, args := mb.where(ctx, f)
	return mb.query(ctx, q, args, fn)
}

// ListJSON writes the entries the filter selects to w as a JSON array, one
// entry per line, oldest first; each entry is what Entry.MarshalJSON
// writes. It is List for `--format json`, without decoding anything. It
// stops at the first error of w.
func (mb *Mailbox) ListJSON(ctx context.Context, f Filter, w io.Writer) (int, error) {
	q, args := mb.where(ctx, f)
	rows, err := mb.db.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, dbError(err)
	}
	defer rows.Close()
	bw := bufio.NewWriterSize(w, 256<<10)
	var doc, line []byte
	var st stateEntry
	n := 0
	for rows.Next() {
		st = stateEntry{}
		if err := scanState(rows, &doc, &st); err != nil {
			return n, err
		}
		state, err := marshalState(&st)
		if err != nil {
			return n, err
		}
		if n == 0 {
			bw.WriteString("[\n")
		} else {
			bw.WriteString(",\n")
		}
		line = splice(line[:0], doc, state)
		if _, err := bw.Write(line); err != nil {
			return n, err // w takes no more: read no further
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, dbError(err)
	}
	if n == 0 {
		bw.WriteString("[]\n")
	} else {
		bw.WriteString("\n]\n")
	}
	return n, bw.Flush()
}

// marshalState is marshalJSON of a stateEntry, by hand for the common case
// of no claim (the listing's hot path).
func marshalState(st *stateEntry) ([]byte, error) {
	if st.ClaimedBy == "" && st.ClaimExpiresAt == nil && st.Failures == 0 && st.FailReason == "" {
		return []byte(`{"status":"` + string(st.Status) + `"}`), nil
	}
	return marshalJSON(st)
}

func (mb *Mailbox) query(ctx context.Context, q string, args []any, fn func(*Entry) error) error {
	rows, err := mb.db.QueryContext(ctx, q, args...)
	if err != nil {
		return dbError(err)
	}
	defer rows.Close()
	var doc []byte
	for rows.Next() {
		var st stateEntry
		if err := scanState(rows, &doc, &st); err != nil {
			return err
		}
		var s staticEntry
		if err := json.Unmarshal(doc, &s); err != nil {
			return fmt.Errorf("mailbox: index row: %w (run `courier reindex`)", err)
		}
		e := &Entry{Status: st.Status, ClaimedBy: st.ClaimedBy, ClaimExpiresAt: st.ClaimExpiresAt, Failures: st.Failures, FailReason: st.FailReason}
		e.setStatic(&s)
		if err := fn(e); err != nil {
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
		func(e *Entry) error { out = e; return nil })
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
	return mb.List(ctx, Filter{Both: true, Thread: key}, fn)
}

// Context calls fn for every message and draft, in any box, that carries a
// correlation id, oldest first.
func (mb *Mailbox) Context(ctx context.Context, correlation string, fn func(*Entry) error) error {
	return mb.List(ctx, Filter{Both: true, Correlation: correlation}, fn)
}

// Seen reports whether the mailbox holds a message of this id, or a file
// that stands for this dedupe key.
func (mb *Mailbox) Seen(ctx context.Context, key string) (bool, error) {
	var one int
	err := mb.queryRow(ctx, seenSQL, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, dbError(err)
}

const (
	seenSQL   = `SELECT 1 FROM messages WHERE id = ?1 UNION ALL SELECT 1 FROM keys WHERE key = ?1 LIMIT 1`
	lookupSQL = `SELECT id FROM messages WHERE id = ?1 UNION ALL SELECT id FROM keys WHERE key = ?1 LIMIT 1`
	digestSQL = `SELECT id FROM keys WHERE key >= ?1 AND key <= ?2 LIMIT 1`
	// knownSQL takes the keys as one JSON array: one statement, prepared
	// once, for any number of them.
	knownSQL = `SELECT j.value FROM json_each(?1) j WHERE EXISTS (SELECT 1 FROM messages WHERE id = j.value) OR EXISTS (SELECT 1 FROM keys WHERE key = j.value)`
	// knownDigestsSQL takes the spans as one JSON array of [from, to]
	// key pairs and returns the index of each span holding a key.
	knownDigestsSQL = `SELECT j.key FROM json_each(?1) j WHERE EXISTS (SELECT 1 FROM keys WHERE key >= j.value ->> 0 AND key <= j.value ->> 1)`
)

// knownChunk bounds the keys Known asks about in one query.
const knownChunk = 1000

// Known returns the keys the mailbox holds, as Seen tells them, asking
// about up to a thousand keys in one query (a batch's dedupe).
func (mb *Mailbox) Known(ctx context.Context, keys []string) (map[string]bool, error) {
	known := map[string]bool{}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), knownChunk)]
		keys = keys[len(chunk):]
		err := mb.eachJSON(ctx, knownSQL, chunk, func(rows *sql.Rows) error {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			known[k] = true
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return known, nil
}

// eachJSON runs the prepared query, its one argument arg as JSON, and
// calls fn for each row.
func (mb *Mailbox) eachJSON(ctx context.Context, query string, arg any, fn func(*sql.Rows) error) error {
	b, err := json.Marshal(arg)
	if err != nil {
		return err
	}
	st, err := mb.stmt(ctx, query)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, string(b))
	if err != nil {
		return dbError(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return dbError(err)
		}
	}
	if err := rows.Err(); err != nil {
		return dbError(err)
	}
	return nil
}

// stmt returns the statement of query, prepared on first use: the
// lookups run several times a message, and preparing their SQL each time
// cost more than running it.
func (mb *Mailbox) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	mb.stmtMu.Lock()
	defer mb.stmtMu.Unlock()
	if st := mb.stmts[query]; st != nil {
		return st, nil
	}
	st, err := mb.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, dbError(err)
	}
	if mb.stmts == nil {
		mb.stmts = map[string]*sql.Stmt{}
	}
	mb.stmts[query] = st
	return st, nil
}

// queryRow is QueryRowContext through the prepared statement of query.
func (mb *Mailbox) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	st, err := mb.stmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

type rowScanner interface{ Scan(dest ...any) error }

// errRow is a row that fails to scan with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// DigestSpan is a digest and the span of reception times FindDigest
// takes for it.
type DigestSpan struct {
	Digest   string
	From, To time.Time
}

// KnownDigests reports, for each span, whether FindDigest finds a message
// in it, asking about up to a thousand spans in one query (a batch's
// dedupe by content: one query where FindDigest made one a message).
func (mb *Mailbox) KnownDigests(ctx context.Context, spans []DigestSpan) ([]bool, error) {
	found := make([]bool, len(spans))
	for base := 0; base < len(spans); base += knownChunk {
		chunk := spans[base:min(len(spans), base+knownChunk)]
		pairs := make([][2]string, len(chunk))
		for i, sp := range chunk {
			pairs[i] = [2]string{DigestKey(sp.Digest, sp.From), DigestKey(sp.Digest, sp.To)}
		}
		err := mb.eachJSON(ctx, knownDigestsSQL, pairs, func(rows *sql.Rows) error {
			var i int
			if err := rows.Scan(&i); err != nil {
				return err
			}
			if i < 0 || i >= len(chunk) {
				return fmt.Errorf("mailbox: known digests: index %d out of range", i)
			}
			found[base+i] = true
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// FindDigest returns the id of a message of this digest received from from
// to to (both included, to the second): a copy of content already filed.
func (mb *Mailbox) FindDigest(ctx context.Context, digest string, from, to time.Time) (string, bool, error) {
	var id string
	err := mb.queryRow(ctx, digestSQL, DigestKey(digest, from), DigestKey(digest, to)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, dbError(err)
	}
	return id, true, nil
}

// Lookup returns the id of the message a key stands for (the key itself if
// it is an id).
func (mb *Mailbox) Lookup(ctx context.Context, key string) (string, bool, error) {
	var id string
	err := mb.queryRow(ctx, lookupSQL, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, dbError(err)
	}
	return id, true, nil
}

// Count returns the number of inbound messages per status (the drafts'
// are OutboundStatus's and DeadDrafts': a dead draft is not a dead
// message of the inbox).
func (mb *Mailbox) Count(ctx context.Context) (map[Status]int, error) {
	rows, err := mb.db.QueryContext(ctx, `SELECT `+statusSQL+` AS s, COUNT(*) FROM messages m LEFT JOIN claims c ON c.id = m.id WHERE m.direction = 'inbound' GROUP BY s`,
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
