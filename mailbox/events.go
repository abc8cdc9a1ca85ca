package mailbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The event journal: one row for each message that became durable in
// inbound/ and each draft filed as delivered or dead, written in the same
// transaction as the index row that records it. What reacts to new mail
// (the notify hooks, `courier watch`) reads the journal from a position of
// its own, so a crash between the commit and the reaction loses nothing:
// the row is there after a restart. Seqs grow by one a row (AUTOINCREMENT,
// and a rolled-back insert takes no number), so a reader can tell that rows
// it had not read were pruned.

// EventKind is what happened.
type EventKind string

// Event kinds.
const (
	EventInbound   EventKind = "inbound"   // a message became durable in inbound/
	EventDelivered EventKind = "delivered" // a draft was sent and filed in archive/
	EventDead      EventKind = "dead"      // a draft failed for good and was filed in .deadletter/
	// EventAwaitingApproval: a draft was queued held for a person's
	// approval (approval.go).
	EventAwaitingApproval EventKind = "awaiting_approval"
)

// EventKinds lists every kind.
var EventKinds = []EventKind{EventInbound, EventDelivered, EventDead, EventAwaitingApproval}

// Event is one row of the journal.
type Event struct {
	Seq  int64
	Kind EventKind
	ID   string
	At   time.Time
}

const eventsDDL = `
-- The event journal (events.go): not derived from the files, kept across
-- rebuilds of the index.
CREATE TABLE IF NOT EXISTS events (
	seq  INTEGER PRIMARY KEY AUTOINCREMENT,
	kind TEXT NOT NULL,
	id   TEXT NOT NULL,
	at   INTEGER NOT NULL
);
`

// journal records events inside tx; mb.signal is to be called once tx has
// committed.
func (mb *Mailbox) journal(ctx context.Context, tx *sql.Tx, kind EventKind, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO events (kind, id, at) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	now := mb.now().UnixNano()
	for _, id := range ids {
		if _, err := st.ExecContext(ctx, string(kind), id, now); err != nil {
			return fmt.Errorf("journal %s: %w", id, err)
		}
	}
	return nil
}

// Events returns up to limit events after seq, oldest first.
func (mb *Mailbox) Events(ctx context.Context, after int64, limit int) ([]Event, error) {
	rows, err := mb.db.QueryContext(ctx, `SELECT seq, kind, id, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, eventsError(err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var k string
		var at int64
		if err := rows.Scan(&e.Seq, &k, &e.ID, &at); err != nil {
			return nil, err
		}
		e.Kind, e.At = EventKind(k), time.Unix(0, at).UTC()
		out = append(out, e)
	}
	return out, dbError(rows.Err())
}

// LastEvent returns the seq of the newest event (0: none yet), and of the
// oldest one kept (0: none), so that a reader that was at a position
// before first-1 knows rows it never read were pruned.
func (mb *Mailbox) LastEvent(ctx context.Context) (last, first int64, err error) {
	var l, f sql.NullInt64
	if err := mb.db.QueryRowContext(ctx, `SELECT MAX(seq), MIN(seq) FROM events`).Scan(&l, &f); err != nil {
		return 0, 0, eventsError(err)
	}
	if l.Valid {
		last = l.Int64
	} else {
		// An empty journal: the next row's number is what AUTOINCREMENT
		// remembers, +1.
		mb.db.QueryRowContext(ctx, `SELECT seq FROM sqlite_sequence WHERE name = 'events'`).Scan(&last)
	}
	return last, f.Int64, nil
}

// EventOf returns the event of an id of the given kind, if the journal
// still holds it.
func (mb *Mailbox) EventOf(ctx context.Context, id string, kind EventKind) (Event, bool, error) {
	var e Event
	var at int64
	err := mb.db.QueryRowContext(ctx, `SELECT seq, at FROM events WHERE id = ? AND kind = ? ORDER BY seq DESC LIMIT 1`, id, string(kind)).Scan(&e.Seq, &at)
	if err == sql.ErrNoRows {
		return e, false, nil
	}
	if err != nil {
		return e, false, eventsError(err)
	}
	e.ID, e.Kind, e.At = id, kind, time.Unix(0, at).UTC()
	return e, true, nil
}

// PruneEvents deletes the events up to seq upTo that are older than
// before; it returns how many.
func (mb *Mailbox) PruneEvents(ctx context.Context, upTo int64, before time.Time) (int, error) {
	res, err := mb.db.ExecContext(ctx, `DELETE FROM events WHERE seq <= ? AND at < ?`, upTo, before.UnixNano())
	if err != nil {
		return 0, dbError(err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// eventsError explains a missing journal: a database a read-only reader
// opened that no Courier with the journal has written yet.
func eventsError(err error) error {
	if err != nil && strings.Contains(err.Error(), "no such table: events") {
		return fmt.Errorf("mailbox: the state database has no event journal yet (the service, started once, adds it): %w", err)
	}
	return dbError(err)
}

// Subscribe returns a channel that receives a value after each commit
// that journals events in this process (the notify runner wakes on it
// instead of polling). The channel holds one pending signal: a slow
// reader sees one wake-up for many commits, and reads the journal for
// what they were. cancel ends the subscription.
func (mb *Mailbox) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	mb.subs.Lock()
	if mb.subs.m == nil {
		mb.subs.m = map[chan struct{}]bool{}
	}
	mb.subs.m[ch] = true
	mb.subs.Unlock()
	return ch, func() {
		mb.subs.Lock()
		delete(mb.subs.m, ch)
		mb.subs.Unlock()
	}
}

// subscribers is the set of Subscribe's channels.
type subscribers struct {
	sync.Mutex
	m map[chan struct{}]bool
}

// signal wakes every subscriber.
func (mb *Mailbox) signal() {
	mb.subs.Lock()
	defer mb.subs.Unlock()
	for ch := range mb.subs.m {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
