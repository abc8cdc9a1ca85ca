package mailbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/schema"
)

// Delivery state of queued drafts, kept for the outbound engine in the
// deliveries table. A draft with no row is queued and due.

// Delivery states.
const (
	DeliveryQueued    = "queued"    // due at next_at
	DeliverySending   = "sending"   // claimed by the engine
	DeliveryRetry     = "retry"     // failed for now; due again at next_at
	DeliveryScheduled = "scheduled" // held until options.schedule_at (next_at)
	DeliveryAccepted  = "accepted"  // the provider took it; to be filed in archive/
)

// Due is a queued draft that can be sent now.
type Due struct {
	ID       string
	Provider schema.Provider
	Path     string // relative to the workspace
	Attempts int
	State    string
}

// DueDrafts returns up to limit drafts of the given providers that are due
// at now and not being sent, oldest first, leaving out the ids in skip.
func (mb *Mailbox) DueDrafts(ctx context.Context, providers []schema.Provider, now time.Time, limit int, skip map[string]bool) ([]Due, error) {
	if len(providers) == 0 || limit <= 0 {
		return nil, nil
	}
	args := []any{sql.Named("now", now.UnixNano())}
	ph := make([]string, len(providers))
	for i, p := range providers {
		ph[i] = fmt.Sprintf(":p%d", i)
		args = append(args, sql.Named(fmt.Sprintf("p%d", i), string(p)))
	}
	q := `SELECT m.id, m.provider, m.path, COALESCE(d.attempts, 0), COALESCE(d.state, 'queued') FROM messages m LEFT JOIN deliveries d ON d.id = m.id
		WHERE m.box = 'outbound' AND m.provider IN (` + strings.Join(ph, ", ") + `)
		AND COALESCE(d.state, 'queued') NOT IN ('sending', 'cancelled', 'held') AND COALESCE(d.next_at, 0) <= :now
		ORDER BY m.ts, m.id LIMIT ` + fmt.Sprint(limit+len(skip))
	rows, err := mb.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []Due
	for rows.Next() && len(out) < limit {
		var d Due
		var p string
		if err := rows.Scan(&d.ID, &p, &d.Path, &d.Attempts, &d.State); err != nil {
			return nil, err
		}
		if skip[d.ID] {
			continue
		}
		d.Provider = schema.Provider(p)
		out = append(out, d)
	}
	return out, dbError(rows.Err())
}

// NextDue returns the earliest time at which a draft of the given providers
// that waits (after a failure, or for its schedule) is due; it may be past.
// Zero when none waits.
func (mb *Mailbox) NextDue(ctx context.Context, providers []schema.Provider) (time.Time, error) {
	if len(providers) == 0 {
		return time.Time{}, nil
	}
	var args []any
	ph := make([]string, len(providers))
	for i, p := range providers {
		ph[i] = "?"
		args = append(args, string(p))
	}
	var next sql.NullInt64
	err := mb.db.QueryRowContext(ctx, `SELECT MIN(d.next_at) FROM deliveries d JOIN messages m ON m.id = d.id
		WHERE d.state != 'sending' AND d.next_at > 0 AND m.box = 'outbound' AND m.provider IN (`+strings.Join(ph, ", ")+`)`, args...).Scan(&next)
	if err != nil {
		return time.Time{}, dbError(err)
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return time.Unix(0, next.Int64), nil
}

// ClaimDelivery marks a due draft as being sent by owner and counts the
// attempt. ok is false when the draft is not due or already being sent.
func (mb *Mailbox) ClaimDelivery(ctx context.Context, id, owner string, now time.Time, lease time.Duration) (attempts int, ok bool, err error) {
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error {
		var box string
		if err := tx.QueryRowContext(ctx, `SELECT box FROM messages WHERE id = ?`, id).Scan(&box); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return err
		}
		if box != string(BoxOutbound) {
			return nil
		}
		var state string
		var next int64
		err := tx.QueryRowContext(ctx, `SELECT state, next_at, attempts FROM deliveries WHERE id = ?`, id).Scan(&state, &next, &attempts)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			attempts = 0
		case err != nil:
			return err
		case state == DeliverySending || state == DeliveryCancelled || state == DeliveryHeld || next > now.UnixNano():
			// Being sent, taken out by CancelQueued, held for approval,
			// or not due.
			return nil
		}
		attempts++
		_, err = tx.ExecContext(ctx, `INSERT INTO deliveries (id, state, attempts, next_at, owner, lease_until, updated_at)
			VALUES (?1, 'sending', ?2, 0, ?3, ?4, ?5)
			ON CONFLICT(id) DO UPDATE SET state = 'sending', attempts = ?2, owner = ?3, lease_until = ?4, updated_at = ?5`,
			id, attempts, owner, now.Add(lease).UnixNano(), now.UnixNano())
		ok = err == nil
		return err
	})
	return attempts, ok, err
}

// Accepted returns the recipients earlier attempts of a draft reached.
func (mb *Mailbox) Accepted(ctx context.Context, id string) ([]schema.RecipientResult, error) {
	var s string
	err := mb.db.QueryRowContext(ctx, `SELECT accepted FROM deliveries WHERE id = ?`, id).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && s == "") {
		return nil, nil
	}
	if err != nil {
		return nil, dbError(err)
	}
	var out []schema.RecipientResult
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("mailbox: delivery %s: %w", id, err)
	}
	return out, nil
}

// AddAccepted records recipients an attempt reached, so that the next
// attempt leaves them out. An address already recorded is kept as it was.
func (mb *Mailbox) AddAccepted(ctx context.Context, id string, more []schema.RecipientResult) error {
	prev, err := mb.Accepted(ctx, id)
	if err != nil {
		return err
	}
	had := map[string]bool{}
	for _, r := range prev {
		had[r.Address] = true
	}
	for _, r := range more {
		if !had[r.Address] {
			had[r.Address] = true
			prev = append(prev, r)
		}
	}
	b, err := json.Marshal(prev)
	if err != nil {
		return err
	}
	_, err = mb.db.ExecContext(ctx, `UPDATE deliveries SET accepted = ? WHERE id = ?`, string(b), id)
	return dbError(err)
}

// Receipt is what a provider said when it took a draft (see
// adapters.Receipt for what each field holds).
type Receipt struct {
	ProviderMessageID string                   `json:"provider_message_id,omitempty"`
	Channel           string                   `json:"channel,omitempty"`
	InboundID         string                   `json:"inbound_id,omitempty"`
	ThreadKey         string                   `json:"thread_key,omitempty"`
	Recipients        []schema.RecipientResult `json:"recipients,omitempty"`
	At                time.Time                `json:"at"`
}

// File records the receipt on the draft as its delivery record: the draft
// is then ready to be filed in archive/. The inbound id the provider gave
// fills the draft's when the queue did not know it, and the thread the
// provider put the message in, when it gave one, is the draft's thread.
func (r *Receipt) File(d *schema.Draft, attempts int) {
	d.Delivery = &schema.Delivery{Status: schema.DeliverySent, Attempts: attempts, SentAt: schema.TimePtr(r.At),
		ProviderMessageID: r.ProviderMessageID, Channel: r.Channel, Recipients: r.Recipients}
	if d.InboundID == "" {
		d.InboundID = r.InboundID
	}
	if r.ThreadKey != "" {
		d.ThreadKey = schema.NullString(r.ThreadKey)
	}
}

// MarkAccepted records, at once, that the provider took a draft: a crash
// before the draft is filed in archive/ then files it at the next start
// instead of sending it again. The window for a duplicate is the time from
// the provider's answer to this commit.
func (mb *Mailbox) MarkAccepted(ctx context.Context, id string, r Receipt) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = mb.db.ExecContext(ctx, `UPDATE deliveries SET state = 'accepted', receipt = ?, next_at = 0, updated_at = ? WHERE id = ?`,
		string(b), mb.now().UnixNano(), id)
	return dbError(err)
}

// AcceptedReceipt returns the receipt MarkAccepted recorded.
func (mb *Mailbox) AcceptedReceipt(ctx context.Context, id string) (*Receipt, error) {
	var s string
	if err := mb.db.QueryRowContext(ctx, `SELECT receipt FROM deliveries WHERE id = ? AND state = 'accepted'`, id).Scan(&s); err != nil {
		return nil, dbError(err)
	}
	var r Receipt
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RetryDelivery releases a claimed draft to be tried again at next.
func (mb *Mailbox) RetryDelivery(ctx context.Context, id string, next time.Time, lastErr string) error {
	_, err := mb.db.ExecContext(ctx, `UPDATE deliveries SET state = 'retry', next_at = ?, owner = '', lease_until = 0, last_error = ?, updated_at = ? WHERE id = ?`,
		next.UnixNano(), lastErr, mb.now().UnixNano(), id)
	return dbError(err)
}

// ScheduleDelivery holds a draft until at; the claim that found it early
// does not count as an attempt.
func (mb *Mailbox) ScheduleDelivery(ctx context.Context, id string, at time.Time) error {
	_, err := mb.db.ExecContext(ctx, `UPDATE deliveries SET state = 'scheduled', next_at = ?, owner = '', lease_until = 0,
		attempts = MAX(attempts - 1, 0), updated_at = ? WHERE id = ?`, at.UnixNano(), mb.now().UnixNano(), id)
	return dbError(err)
}

// ResetSending releases every draft marked as being sent. Call it at
// start-up, when no other engine can run (serve holds the workspace lock):
// such marks are left over from a crash, and those drafts are due again.
func (mb *Mailbox) ResetSending(ctx context.Context) (int, error) {
	res, err := mb.db.ExecContext(ctx, `UPDATE deliveries SET state = 'retry', next_at = 0, owner = '', lease_until = 0,
		last_error = 'interrupted (the service stopped during the send)', updated_at = ? WHERE state = 'sending'`, mb.now().UnixNano())
	if err != nil {
		return 0, dbError(err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// FinishDelivery files a draft that is done with: box is BoxArchive (sent,
// with its delivery block) or BoxDeadletter (failed for good, with the
// reason in its delivery block). The new file is durable and indexed before
// the queued one is removed; a crash in between leaves both, and Reconcile
// keeps the new one. It returns the new path, relative to the workspace.
func (mb *Mailbox) FinishDelivery(ctx context.Context, d *schema.Draft, queuedRel string, box Box) (string, error) {
	if box != BoxArchive && box != BoxDeadletter {
		return "", fmt.Errorf("mailbox: finish delivery into %s", box)
	}
	if err := mb.fileApproval(ctx, d); err != nil {
		return "", err
	}
	data, err := schema.EncodeDraft(d)
	if err != nil {
		return "", err
	}
	dir := mb.Dir(box, d.Provider)
	name := filepath.Base(queuedRel)
	if _, err := mb.fs.writeFile(dir, name, data, true); err != nil {
		return "", err
	}
	rel := mb.Rel(filepath.Join(dir, name))
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error {
		if err := reindexRow(ctx, tx, draftRow(d, box, rel)); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM deliveries WHERE id = ?`, `DELETE FROM approvals WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, d.ID); err != nil {
				return err
			}
		}
		return mb.journal(ctx, tx, finishEvent(box), d.ID)
	})
	if err != nil {
		return "", fmt.Errorf("mailbox: finish delivery of %s: %w", d.ID, err)
	}
	mb.signal()
	if err := mb.fs.remove(mb.Abs(queuedRel)); err != nil {
		mb.log.Warn("could not remove a delivered draft from outbound", "path", queuedRel, "err", err)
	}
	return rel, nil
}

// finishEvent is the journal's kind for a draft filed in box.
func finishEvent(box Box) EventKind {
	if box == BoxArchive {
		return EventDelivered
	}
	return EventDead
}

// SetAside moves a file that cannot be delivered at all (it is not a valid
// draft, or it sits in a folder that is not a provider's) from outbound/ to
// .deadletter/, unchanged, with the reason in <name>.reason beside it. It
// is never deleted. rel is relative to the workspace; the file keeps its
// path below outbound/. The file is moved, never opened: a link is moved
// as the link, and nothing it points to is read or copied.
func (mb *Mailbox) SetAside(ctx context.Context, rel, reason string) (string, error) {
	out := filepath.Join(mb.Mailbox(), string(BoxOutbound))
	src := mb.Abs(rel)
	sub, err := filepath.Rel(out, src)
	if err != nil || strings.HasPrefix(sub, "..") {
		return "", fmt.Errorf("mailbox: set aside: %s is not in outbound/", rel)
	}
	dst := filepath.Join(mb.Mailbox(), string(BoxDeadletter), sub)
	srcDir, err := mb.fs.openDir(filepath.Dir(src), false)
	if err != nil {
		return "", fmt.Errorf("mailbox: set aside: %w", err)
	}
	defer srcDir.Close()
	// The file must still be there (a watch event may come late), whatever
	// it is; it is not followed.
	var st unix.Stat_t
	if err := unix.Fstatat(int(srcDir.Fd()), filepath.Base(src), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", &os.PathError{Op: "mailbox: set aside", Path: rel, Err: err}
	}
	dstDir, err := mb.fs.openDir(filepath.Dir(dst), true)
	if err != nil {
		return "", fmt.Errorf("mailbox: set aside: %w", err)
	}
	defer dstDir.Close()
	note := fmt.Sprintf("%s\nset aside by courier at %s from %s\n", reason, mb.now().Format(time.RFC3339), rel)
	if _, err := mb.fs.writeFile(filepath.Dir(dst), filepath.Base(dst)+".reason", []byte(note), true); err != nil {
		return "", err
	}
	// Never replace a file already set aside under this name.
	for i := 1; ; i++ {
		err := renameAt(int(srcDir.Fd()), filepath.Base(src), int(dstDir.Fd()), filepath.Base(dst), false)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return "", &os.PathError{Op: "mailbox: set aside", Path: rel, Err: err}
		}
		dst = filepath.Join(filepath.Dir(dst), fmt.Sprintf("%s.%d", filepath.Base(sub), i))
	}
	if err := dstDir.Sync(); err != nil {
		return "", fmt.Errorf("mailbox: set aside: fsync: %w", err)
	}
	if err := srcDir.Sync(); err != nil {
		return "", fmt.Errorf("mailbox: set aside: fsync: %w", err)
	}
	// Drop whatever the index knew of it.
	var id string
	err = mb.db.QueryRowContext(ctx, `SELECT id FROM messages WHERE path = ?`, rel).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return mb.Rel(dst), nil
	case err != nil:
		return mb.Rel(dst), dbError(err)
	}
	return mb.Rel(dst), mb.Forget(ctx, id)
}

// IndexQueued indexes a file found in outbound/ that the index does not
// know (queued by hand, or while the database was away). It returns the
// draft, or an error saying why it is not a valid draft for that folder;
// a link or anything but a regular file is an UnsafePathError, unread.
func (mb *Mailbox) IndexQueued(ctx context.Context, rel string) (*schema.Draft, error) {
	data, err := mb.fs.readFile(mb.Abs(rel))
	if err != nil {
		return nil, err
	}
	d, _, err := schema.DecodeDraft(data)
	if err != nil {
		return nil, err
	}
	_, id, ok := ParseFileName(filepath.Base(rel))
	folder := schema.Provider(filepath.Base(filepath.Dir(rel)))
	switch {
	case !ok:
		return nil, fmt.Errorf("the file name is not {YYYYMMDDTHHMMSS}_{id}.md")
	case d.ID != id:
		return nil, fmt.Errorf("draft id %q does not match the file name (queue drafts with `courier send`)", d.ID)
	case d.Provider != folder:
		return nil, fmt.Errorf("draft is for %q but queued in outbound/%s/", d.Provider, folder)
	case d.CreatedAt == nil:
		return nil, fmt.Errorf("draft has no created_at (queue drafts with `courier send`)")
	}
	// Already indexed (by `courier send`, or elsewhere: delivered meanwhile
	// and the copy here is stale): the row stands.
	journaled := false
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error {
		if err := insertIfAbsent(ctx, tx, draftRow(d, BoxOutbound, rel)); err != nil || !mb.holds(d) {
			return err
		}
		journaled, err = mb.hold(ctx, tx, d.ID)
		return err
	})
	if journaled {
		mb.signal()
	}
	return d, err
}

// OutboundStatus counts queued drafts per provider.
type OutboundStatus struct {
	Provider  schema.Provider `json:"provider"`
	Queued    int             `json:"queued"`    // in outbound/, in any state
	Due       int             `json:"due"`       // could be sent now
	Retrying  int             `json:"retrying"`  // waiting after a temporary failure
	Scheduled int             `json:"scheduled"` // held until schedule_at
	Sending   int             `json:"sending"`
	// AwaitingApproval counts the drafts held for a person (approval.go).
	AwaitingApproval int        `json:"awaiting_approval,omitempty"`
	Oldest           *time.Time `json:"oldest,omitempty"`
	LastError        string     `json:"last_error,omitempty"`
}

// Outbound returns the queue per provider.
func (mb *Mailbox) Outbound(ctx context.Context) ([]OutboundStatus, error) {
	now := mb.now().UnixNano()
	rows, err := mb.db.QueryContext(ctx, `SELECT m.provider, COUNT(*),
		SUM(CASE WHEN COALESCE(d.state, 'queued') NOT IN ('sending', 'cancelled', 'held') AND COALESCE(d.next_at, 0) <= ?1 THEN 1 ELSE 0 END),
		SUM(CASE WHEN d.state = 'retry' AND d.next_at > ?1 THEN 1 ELSE 0 END),
		SUM(CASE WHEN d.state = 'scheduled' AND d.next_at > ?1 THEN 1 ELSE 0 END),
		SUM(CASE WHEN d.state = 'sending' THEN 1 ELSE 0 END),
		SUM(CASE WHEN d.state = 'held' THEN 1 ELSE 0 END),
		MIN(m.ts),
		COALESCE(MAX(CASE WHEN d.last_error != '' THEN d.updated_at || ' ' || d.last_error END), '')
		FROM messages m LEFT JOIN deliveries d ON d.id = m.id WHERE m.box = 'outbound' GROUP BY m.provider ORDER BY m.provider`, now)
	if err != nil {
		return nil, dbError(err)
	}
	defer rows.Close()
	var out []OutboundStatus
	for rows.Next() {
		var s OutboundStatus
		var p string
		var oldest int64
		if err := rows.Scan(&p, &s.Queued, &s.Due, &s.Retrying, &s.Scheduled, &s.Sending, &s.AwaitingApproval, &oldest, &s.LastError); err != nil {
			return nil, err
		}
		s.Provider = schema.Provider(p)
		t := time.Unix(0, oldest).UTC()
		s.Oldest = &t
		if _, msg, ok := strings.Cut(s.LastError, " "); ok {
			s.LastError = msg
		}
		out = append(out, s)
	}
	return out, dbError(rows.Err())
}

// Forget drops the index and delivery rows of an id whose file is gone.
func (mb *Mailbox) Forget(ctx context.Context, id string) error {
	return withTx(ctx, mb.db, func(tx *sql.Tx) error {
		for _, q := range []string{`DELETE FROM messages WHERE id = ?`, `DELETE FROM deliveries WHERE id = ?`, `DELETE FROM keys WHERE id = ?`, `DELETE FROM approvals WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
}
