package mailbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/monoco/courier/schema"
)

// The operator's verbs on the outbound queue (`courier outbound`): list it
// with its dead letters, make a waiting draft due now, take a queued draft
// out, and put a dead letter back. Each decides in one transaction of the
// state database, which the outbound engine's claim (ClaimDelivery) goes
// through too: of a cancel and a claim racing, exactly one wins.

// DeliveryCancelled marks a queued draft being taken out by CancelQueued:
// no engine claims it, and the cancel that set it files it in .deadletter.
const DeliveryCancelled = "cancelled"

// Outbound draft statuses, as `courier outbound list` shows them.
const (
	OutQueued     = "queued"     // due: sent as soon as a slot is free
	OutWaiting    = "waiting"    // failed for now: tried again at NextAt
	OutScheduled  = "scheduled"  // held until its schedule_at (NextAt)
	OutSending    = "sending"    // being sent now
	OutAccepted   = "accepted"   // the provider took it; being filed in archive/
	OutCancelling = "cancelling" // a cancel was interrupted: `cancel` again files it
	OutDead       = "dead"       // in .deadletter/<provider>/, with the reason
)

// OutboundDraft is one draft of the queue, or a dead-lettered one.
type OutboundDraft struct {
	ID       string          `json:"id"`
	Provider schema.Provider `json:"provider"`
	Status   string          `json:"status"`
	Path     string          `json:"path"` // relative to the workspace
	Agent    string          `json:"agent,omitempty"`
	To       string          `json:"to,omitempty"` // the first recipient
	Subject  string          `json:"subject,omitempty"`
	QueuedAt time.Time       `json:"queued_at"`
	Attempts int             `json:"attempts"`
	// NextAt is when a waiting or scheduled draft is due (the backoff's end).
	NextAt *time.Time `json:"next_at,omitempty"`
	// Reason is why: a waiting draft's last error, a dead one's delivery
	// reason.
	Reason   string     `json:"reason,omitempty"`
	FailedAt *time.Time `json:"failed_at,omitempty"`
}

// OutboundDrafts returns the queued drafts and the dead-lettered ones,
// oldest first.
func (mb *Mailbox) OutboundDrafts(ctx context.Context) ([]OutboundDraft, error) {
	rows, err := mb.db.QueryContext(ctx, `SELECT m.box, m.doc, COALESCE(d.state, ''), COALESCE(d.attempts, 0), COALESCE(d.next_at, 0), COALESCE(d.last_error, '')
		FROM messages m LEFT JOIN deliveries d ON d.id = m.id
		WHERE m.box = 'outbound' OR (m.box = '.deadletter' AND m.direction = 'outbound') ORDER BY m.ts, m.id`)
	if err != nil {
		return nil, dbError(err)
	}
	var out []OutboundDraft
	now := mb.now()
	for rows.Next() {
		var box, state, lastErr string
		var doc []byte
		var next int64
		var o OutboundDraft
		if err := rows.Scan(&box, &doc, &state, &o.Attempts, &next, &lastErr); err != nil {
			rows.Close()
			return nil, err
		}
		var e staticEntry
		if err := json.Unmarshal(doc, &e); err != nil {
			rows.Close()
			return nil, fmt.Errorf("mailbox: index row: %w", err)
		}
		o.ID, o.Provider, o.Path, o.Agent, o.To, o.Subject = e.ID, e.Provider, e.Path, e.From.ID, e.Session.ID, e.Session.Name
		if e.ReceivedAt != nil {
			o.QueuedAt = e.ReceivedAt.UTC()
		}
		if Box(box) == BoxDeadletter {
			o.Status = OutDead
		} else {
			o.Status, o.Reason = queueStatus(state, next, now), lastErr
			if next > now.UnixNano() {
				t := time.Unix(0, next).UTC()
				o.NextAt = &t
			}
		}
		out = append(out, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, dbError(err)
	}
	// A dead draft's reason is in its file's delivery block.
	for i := range out {
		if out[i].Status != OutDead {
			continue
		}
		if d, _, err := mb.Draft(ctx, out[i].ID); err != nil {
			out[i].Reason = "(cannot read the file: " + oneLine(err.Error()) + ")"
		} else if d.Delivery != nil {
			out[i].Reason, out[i].Attempts, out[i].FailedAt = string(d.Delivery.Reason), d.Delivery.Attempts, timeOf(d.Delivery.FailedAt)
		}
	}
	return out, nil
}

func timeOf(t *schema.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// queueStatus is the status of a queued draft in delivery state state.
func queueStatus(state string, next int64, now time.Time) string {
	switch state {
	case DeliverySending:
		return OutSending
	case DeliveryAccepted:
		return OutAccepted
	case DeliveryCancelled:
		return OutCancelling
	case DeliveryHeld:
		return OutAwaitingApproval
	case DeliveryScheduled:
		if next > now.UnixNano() {
			return OutScheduled
		}
	case DeliveryRetry:
		if next > now.UnixNano() {
			return OutWaiting
		}
	}
	return OutQueued
}

// queuedState reads, in tx, the box of id and its delivery state (""
// with no delivery row). A missing id is a *NotFoundError.
func queuedState(ctx context.Context, tx *sql.Tx, id string) (box Box, dir schema.Direction, state string, err error) {
	var b, d string
	if err := tx.QueryRowContext(ctx, `SELECT box, direction FROM messages WHERE id = ?`, id).Scan(&b, &d); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", "", "", &NotFoundError{ID: id}
		}
		return "", "", "", err
	}
	err = tx.QueryRowContext(ctx, `SELECT state FROM deliveries WHERE id = ?`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return Box(b), schema.Direction(d), state, err
}

// queuedOnly is queuedState for a verb on a queued draft: an id that is
// not one is refused.
func queuedOnly(ctx context.Context, tx *sql.Tx, id string) (string, error) {
	box, dir, state, err := queuedState(ctx, tx, id)
	switch {
	case err != nil:
		return "", err
	case box == BoxOutbound:
		return state, nil
	case dir != schema.Outbound:
		return "", &ConflictError{ID: id, Msg: "is an inbound message, not a draft"}
	case box == BoxDeadletter:
		return "", &ConflictError{ID: id, Status: StatusDead, Msg: "is dead-lettered, not queued (`courier outbound requeue` puts it back)"}
	}
	return "", &ConflictError{ID: id, Status: StatusSent, Msg: "was sent already (it is in archive/)"}
}

// RetryNow makes a draft waiting after a failure due now. It returns false
// when the draft was due already (nothing to do); a draft being sent, held
// for its schedule_at, or not queued is a *ConflictError.
func (mb *Mailbox) RetryNow(ctx context.Context, id string) (bool, error) {
	changed := false
	err := withTx(ctx, mb.db, func(tx *sql.Tx) error {
		state, err := queuedOnly(ctx, tx, id)
		if err != nil {
			return err
		}
		switch state {
		case DeliverySending, DeliveryAccepted:
			return &ConflictError{ID: id, Status: StatusQueued, Msg: "is being sent now"}
		case DeliveryCancelled:
			return &ConflictError{ID: id, Status: StatusQueued, Msg: "is being cancelled"}
		case DeliveryScheduled:
			return &ConflictError{ID: id, Status: StatusQueued, Msg: "is held until its options.schedule_at, which retry does not override"}
		case DeliveryHeld:
			return &ConflictError{ID: id, Status: StatusQueued, Msg: "is awaiting approval (`courier approve` sends it)"}
		case DeliveryRetry:
			res, err := tx.ExecContext(ctx, `UPDATE deliveries SET next_at = 0, updated_at = ? WHERE id = ? AND next_at > ?`,
				mb.now().UnixNano(), id, mb.now().UnixNano())
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			changed = n > 0
		}
		return nil
	})
	return changed, dbError(err)
}

// CancelQueued takes a queued draft out so that it is never sent, and
// files it in .deadletter/<provider>/ with a delivery block whose reason
// says who cancelled it (`requeue` puts it back). A draft being sent now
// is a *ConflictError: the send won. It returns the new path.
func (mb *Mailbox) CancelQueued(ctx context.Context, id, by string) (string, error) {
	err := withTx(ctx, mb.db, func(tx *sql.Tx) error {
		state, err := queuedOnly(ctx, tx, id)
		if err != nil {
			return err
		}
		if state == DeliverySending || state == DeliveryAccepted {
			return &ConflictError{ID: id, Status: StatusQueued, Msg: "is being sent now; it cannot be cancelled"}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO deliveries (id, state, next_at, updated_at) VALUES (?1, 'cancelled', 0, ?2)
			ON CONFLICT(id) DO UPDATE SET state = 'cancelled', next_at = 0, owner = '', lease_until = 0, updated_at = ?2`, id, mb.now().UnixNano())
		return err
	})
	if err != nil {
		return "", dbError(err)
	}
	// From here no engine claims it: file it. An interruption leaves it
	// queued as cancelled ("cancelling"), and a cancel again files it.
	return mb.fileTakenOut(ctx, id, "cancelled by "+by)
}

// fileTakenOut files a queued draft no engine claims any more (cancelled,
// rejected) in .deadletter/<provider>/, its delivery block saying why.
func (mb *Mailbox) fileTakenOut(ctx context.Context, id, reason string) (string, error) {
	d, e, err := mb.Draft(ctx, id)
	if err != nil {
		return "", err
	}
	reached := []schema.RecipientResult(nil)
	if acc, err := mb.Accepted(ctx, id); err == nil {
		reached = acc
	}
	var attempts int
	mb.db.QueryRowContext(ctx, `SELECT attempts FROM deliveries WHERE id = ?`, id).Scan(&attempts)
	d.Delivery = &schema.Delivery{Status: schema.DeliveryFailed, Attempts: attempts, FailedAt: schema.TimePtr(mb.now()),
		Reason: schema.Text(reason), Recipients: reached}
	return mb.FinishDelivery(ctx, d, e.Path, BoxDeadletter)
}

// Requeue puts a dead-lettered draft back in outbound/<provider>/ as it
// was queued, its idempotency key (Message-ID, uuid) kept, so that a
// provider that dedupes on it does not post it twice; the recipients an
// earlier attempt reached are not tried again, and the attempts start
// over. It returns the queued path.
//
// A crash loses nothing: the queued copy is written (durable) before the
// dead one is removed, and the index follows. With both copies left,
// Reconcile keeps the dead one (the draft stays dead; requeue again); with
// the queued one only, Reconcile indexes it (requeued).
func (mb *Mailbox) Requeue(ctx context.Context, id string) (string, error) {
	var box Box
	var dir schema.Direction
	err := withTx(ctx, mb.db, func(tx *sql.Tx) error {
		var err error
		box, dir, _, err = queuedState(ctx, tx, id)
		return err
	})
	if err != nil {
		return "", dbError(err)
	}
	if dir != schema.Outbound {
		return "", &ConflictError{ID: id, Msg: "is an inbound message, not a draft (outbound requeue takes drafts)"}
	}
	if box != BoxDeadletter {
		return "", &ConflictError{ID: id, Status: StatusQueued, Msg: fmt.Sprintf("is not dead-lettered (it is in %s/)", box)}
	}
	d, e, err := mb.Draft(ctx, id)
	if err != nil {
		return "", err
	}
	var reached []schema.RecipientResult
	if d.Delivery != nil {
		reached = d.Delivery.Recipients
	}
	d.Delivery, d.Approval = nil, nil
	held := mb.holds(d)
	if held {
		d.Approval = &schema.Approval{Status: schema.ApprovalAwaiting}
	}
	data, err := schema.EncodeDraft(d)
	if err != nil {
		return "", err
	}
	qdir := mb.Dir(BoxOutbound, d.Provider)
	name := filepath.Base(e.Path)
	if _, err := mb.fs.writeFile(qdir, name, data, true); err != nil {
		return "", err
	}
	if err := mb.fs.remove(mb.Abs(e.Path)); err != nil {
		return "", err
	}
	rel := mb.Rel(filepath.Join(qdir, name))
	acc := ""
	if len(reached) > 0 {
		b, _ := json.Marshal(reached)
		acc = string(b)
	}
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error {
		if err := reindexRow(ctx, tx, draftRow(d, BoxOutbound, rel)); err != nil {
			return err
		}
		// Queued again, it is decided on again: a rejected draft an
		// agent requeues waits for a person once more.
		for _, q := range []string{`DELETE FROM deliveries WHERE id = ?`, `DELETE FROM approvals WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		if held {
			if _, err := mb.hold(ctx, tx, id); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO deliveries (id, state, attempts, next_at, accepted, updated_at) VALUES (?1, 'queued', 0, 0, ?2, ?3)
			ON CONFLICT(id) DO UPDATE SET accepted = ?2`, id, acc, mb.now().UnixNano())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("mailbox: requeue %s: %w", id, err)
	}
	mb.signal()
	return rel, nil
}

// DeadDrafts counts the dead-lettered drafts per provider.
func (mb *Mailbox) DeadDrafts(ctx context.Context) (map[schema.Provider]int, error) {
	rows, err := mb.db.QueryContext(ctx, `SELECT provider, COUNT(*) FROM messages WHERE box = '.deadletter' AND direction = 'outbound' GROUP BY provider`)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	out := map[schema.Provider]int{}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, err
		}
		out[schema.Provider(p)] = n
	}
	return out, dbError(rows.Err())
}
