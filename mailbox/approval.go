package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/monoco/courier/schema"
)

// The approval gate (courier.outbound.approval, docs/approval.md). A draft
// the policy holds when it is queued (Options.Hold, or its file saying
// approval: awaiting_approval) gets the delivery state "held": no engine
// claims it (DueDrafts, ClaimDelivery) until Approve makes it due, or
// Reject files it in .deadletter/. The hold is in the state database and
// in the queued file's front matter, so a restart, a rebuilt index or a
// config changed since keeps it held. The decision is recorded in the
// approvals table, never taken from the file (which an agent could write),
// and FinishDelivery files it as the delivery block's approval.

// DeliveryHeld marks a queued draft held for a person's approval.
const DeliveryHeld = "held"

// OutAwaitingApproval is the status `courier outbound list` shows for a
// held draft.
const OutAwaitingApproval = schema.ApprovalAwaiting

const approvalsDDL = `
-- Decisions on held drafts (approval.go): not derived from the files, kept
-- across rebuilds of the index, dropped when the draft is filed.
CREATE TABLE IF NOT EXISTS approvals (
	id      TEXT PRIMARY KEY,
	status  TEXT NOT NULL,
	by_user TEXT NOT NULL,
	at      INTEGER NOT NULL,
	reason  TEXT NOT NULL DEFAULT ''
);
`

// holds says whether d is to be held when it enters the queue: its file
// says so, or the policy does.
func (mb *Mailbox) holds(d *schema.Draft) bool {
	return d.Awaiting() || (mb.opts.Hold != nil && mb.opts.Hold(d))
}

// hold marks a queued draft as held, in tx, unless it has a delivery
// state already or a person approved it, and journals the
// awaiting_approval event. It reports whether it did.
func (mb *Mailbox) hold(ctx context.Context, tx *sql.Tx, id string) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO deliveries (id, state, next_at, updated_at)
		SELECT ?1, 'held', 0, ?2 WHERE NOT EXISTS (SELECT 1 FROM approvals WHERE id = ?1 AND status = 'approved')`, id, mb.now().UnixNano())
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	return true, mb.journal(ctx, tx, EventAwaitingApproval, id)
}

// heldOnly is queuedOnly for a decision: the draft must be held.
func heldOnly(ctx context.Context, tx *sql.Tx, id string) error {
	state, err := queuedOnly(ctx, tx, id)
	if err != nil {
		return err
	}
	if state != DeliveryHeld {
		return &ConflictError{ID: id, Status: StatusQueued, Msg: "is not awaiting approval"}
	}
	return nil
}

// decide records a person's decision on a held draft and moves it to
// state, in one transaction: of two decisions racing, one wins and the
// other is a *ConflictError.
func (mb *Mailbox) decide(ctx context.Context, id, state, status, by, reason string) error {
	now := mb.now().UnixNano()
	return dbError(withTx(ctx, mb.db, func(tx *sql.Tx) error {
		if err := heldOnly(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = ?, next_at = 0, updated_at = ? WHERE id = ?`, state, now, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO approvals (id, status, by_user, at, reason) VALUES (?, ?, ?, ?, ?)`,
			id, status, by, now, reason)
		return err
	}))
}

// Approve releases a held draft: it is due at once, and its delivery
// block will say that by approved it, and when. A draft not held is a
// *ConflictError.
func (mb *Mailbox) Approve(ctx context.Context, id, by string) error {
	return mb.decide(ctx, id, DeliveryQueued, schema.ApprovalApproved, by, "")
}

// Reject takes a held draft out, never to be sent: it is filed in
// .deadletter/<provider>/ with the reason (a dead event for hooks), its
// delivery block saying who rejected it, when and why. It returns the new
// path. A draft not held is a *ConflictError.
func (mb *Mailbox) Reject(ctx context.Context, id, by, reason string) (string, error) {
	if err := mb.decide(ctx, id, DeliveryCancelled, schema.ApprovalRejected, by, reason); err != nil {
		return "", err
	}
	return mb.fileTakenOut(ctx, id, "rejected by "+by+": "+reason)
}

// fileApproval gives a draft being filed the decision recorded on it, as
// its delivery block's approval; whatever approval its file said goes.
func (mb *Mailbox) fileApproval(ctx context.Context, d *schema.Draft) error {
	d.Approval = nil
	if d.Delivery == nil {
		return nil
	}
	var a schema.Approval
	var at int64
	var reason string
	err := mb.db.QueryRowContext(ctx, `SELECT status, by_user, at, reason FROM approvals WHERE id = ?`, d.ID).Scan(&a.Status, &a.By, &at, &reason)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return dbError(err)
	}
	a.At, a.Reason = schema.TimePtr(time.Unix(0, at)), schema.Text(reason)
	d.Delivery.Approval = &a
	return nil
}
