package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/monoco/courier/schema"
)

// ErrConflict is the class of errors where the message is not in a state
// that allows the operation (claimed by another agent, already done, not
// claimed by the caller). The CLI exits with code 2 for it.
var ErrConflict = errors.New("conflict")

// ErrClaimTooLong is the error of a claim asked for longer than
// Options.MaxClaimTimeout: it would hold the message out of every other
// agent's reach for as long (2^63 ns is 292 years).
var ErrClaimTooLong = errors.New("mailbox: claim timeout too long")

// ConflictError says why an operation on a message was refused.
type ConflictError struct {
	ID        string
	Status    Status
	Holder    string    // the agent holding the claim, if any
	ExpiresAt time.Time // when that claim runs out
	RetryAt   time.Time // a failed message can be claimed again from then
	Msg       string
}

func (e *ConflictError) Error() string { return fmt.Sprintf("message %q %s", e.ID, e.Msg) }

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Claim is a held claim.
type Claim struct {
	ID        string    `json:"message_id"`
	Agent     string    `json:"claimed_by"`
	ClaimedAt time.Time `json:"claimed_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Renewed is true when the agent already held the claim and it was
	// extended.
	Renewed bool `json:"renewed,omitempty"`
}

// claimState is a message's row joined with its claim.
type claimState struct {
	box, path, provider string
	status, agent       string
	expires, retryAt    int64
	failures            int
	hasClaim            bool
}

func (mb *Mailbox) loadClaim(ctx context.Context, tx *sql.Tx, id string) (*claimState, error) {
	var s claimState
	var status, agent sql.NullString
	var expires, retry sql.NullInt64
	var failures sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT m.box, m.path, m.provider, m.direction, c.status, c.agent, c.expires_at, c.retry_at, c.failures
		FROM messages m LEFT JOIN claims c ON c.id = m.id WHERE m.id = ?`, id).
		Scan(&s.box, &s.path, &s.provider, new(string), &status, &agent, &expires, &retry, &failures)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &NotFoundError{ID: id}
	}
	if err != nil {
		return nil, err
	}
	s.hasClaim = status.Valid
	s.status, s.agent, s.expires, s.retryAt, s.failures = status.String, agent.String, expires.Int64, retry.Int64, int(failures.Int64)
	return &s, nil
}

func (mb *Mailbox) boxConflict(id string, s *claimState) error {
	switch Box(s.box) {
	case BoxArchive:
		return &ConflictError{ID: id, Status: StatusDone, Msg: "is already done (archived)"}
	case BoxDeadletter:
		return &ConflictError{ID: id, Status: StatusDead, Msg: "was failed for good (in .deadletter)"}
	case BoxOutbound:
		return &ConflictError{ID: id, Status: StatusQueued, Msg: "is an outbound draft, not an inbound message"}
	}
	return nil
}

// Claim gives agent the message for timeout (0 = the default, 300 s; more
// than Options.MaxClaimTimeout is ErrClaimTooLong). An
// agent that holds the claim renews it. A claim that ran out can be taken
// by anyone; a failed message can be claimed again once its retry time has
// come.
func (mb *Mailbox) Claim(ctx context.Context, id, agent string, timeout time.Duration) (*Claim, error) {
	if agent == "" {
		return nil, errors.New("mailbox: claim: no agent identity")
	}
	if timeout <= 0 {
		timeout = mb.opts.ClaimTimeout
	}
	if timeout > mb.opts.MaxClaimTimeout {
		return nil, fmt.Errorf("%w: %v is longer than %v", ErrClaimTooLong, timeout, mb.opts.MaxClaimTimeout)
	}
	now := mb.now()
	c := &Claim{ID: id, Agent: agent, ClaimedAt: now, ExpiresAt: now.Add(timeout)}
	err := withTx(ctx, mb.db, func(tx *sql.Tx) error {
		s, err := mb.loadClaim(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := mb.boxConflict(id, s); err != nil {
			return err
		}
		if s.hasClaim {
			switch {
			case s.status == "claimed" && s.expires > now.UnixNano() && s.agent != agent:
				return &ConflictError{ID: id, Status: StatusClaimed, Holder: s.agent, ExpiresAt: time.Unix(0, s.expires).UTC(),
					Msg: fmt.Sprintf("is already claimed by %s until %s", s.agent, time.Unix(0, s.expires).UTC().Format(time.RFC3339))}
			case s.status == "claimed" && s.expires > now.UnixNano():
				c.Renewed = true
			case s.status == "failed" && s.retryAt > now.UnixNano():
				return &ConflictError{ID: id, Status: StatusFailed, RetryAt: time.Unix(0, s.retryAt).UTC(),
					Msg: fmt.Sprintf("failed %d time(s); it can be claimed again at %s", s.failures, time.Unix(0, s.retryAt).UTC().Format(time.RFC3339))}
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO claims (id, status, agent, claimed_at, expires_at, updated_at)
			VALUES (?1, 'claimed', ?2, ?3, ?4, ?3)
			ON CONFLICT(id) DO UPDATE SET status = 'claimed', agent = ?2, claimed_at = ?3, expires_at = ?4, retry_at = NULL, updated_at = ?3`,
			id, agent, now.UnixNano(), c.ExpiresAt.UnixNano())
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// requireClaim checks that agent holds the claim on a message in the inbox.
// A claim that ran out but that nobody took is still the agent's.
func (mb *Mailbox) requireClaim(id, agent string, s *claimState) error {
	if err := mb.boxConflict(id, s); err != nil {
		return err
	}
	if !s.hasClaim || s.status != "claimed" {
		return &ConflictError{ID: id, Status: StatusNew, Msg: "is not claimed: claim it first"}
	}
	if s.agent != agent {
		return &ConflictError{ID: id, Status: StatusClaimed, Holder: s.agent, ExpiresAt: time.Unix(0, s.expires).UTC(),
			Msg: fmt.Sprintf("is claimed by %s, not by %s", s.agent, agent)}
	}
	return nil
}

// Done marks a message the agent holds as processed: the message is written
// to archive/<provider>/ with processed_at set, then removed from the inbox.
// It returns the archived path, relative to the workspace.
func (mb *Mailbox) Done(ctx context.Context, id, agent string) (string, error) {
	var rel, oldPath string
	err := withTx(ctx, mb.db, func(tx *sql.Tx) error {
		s, err := mb.loadClaim(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := mb.requireClaim(id, agent, s); err != nil {
			return err
		}
		now := mb.now()
		m, err := mb.decodeAt(s.path)
		if err != nil {
			return err
		}
		m.ProcessedAt = schema.TimePtr(now)
		data, err := schema.Encode(m)
		if err != nil {
			return err
		}
		dir := mb.Dir(BoxArchive, m.Provider)
		name := filepath.Base(s.path)
		if _, err := mb.fs.writeFile(dir, name, data, true); err != nil {
			return err
		}
		rel = mb.Rel(filepath.Join(dir, name))
		oldPath = s.path
		if err := reindexRow(ctx, tx, messageRow(m, BoxArchive, rel)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE claims SET status = 'done', updated_at = ? WHERE id = ?`, now.UnixNano(), id)
		return err
	})
	if err != nil {
		return "", err
	}
	// The archive copy is durable and indexed: the inbox copy can go. A
	// crash before this line leaves both, and Reconcile removes this one.
	if err := mb.fs.remove(mb.Abs(oldPath)); err != nil {
		mb.log.Warn("done: could not remove the inbox copy", "id", id, "err", err)
	}
	return rel, nil
}

// FailResult says what became of a failed message.
type FailResult struct {
	ID       string     `json:"message_id"`
	Status   Status     `json:"status"` // failed (released for another try) or dead
	Failures int        `json:"failures"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
	Path     string     `json:"path"`
}

// Fail records that agent could not process a message it holds. A
// retryable failure releases the message for another try after a backoff
// (1 s, 2 s, 4 s ...); a permanent one, or the MaxFailures-th, sets it aside
// in .deadletter/<provider>/ with the reason written in the file.
func (mb *Mailbox) Fail(ctx context.Context, id, agent, reason string, retryable bool) (*FailResult, error) {
	res := &FailResult{ID: id}
	var oldPath string
	err := withTx(ctx, mb.db, func(tx *sql.Tx) error {
		s, err := mb.loadClaim(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := mb.requireClaim(id, agent, s); err != nil {
			return err
		}
		now := mb.now()
		res.Failures = s.failures + 1
		if retryable && res.Failures < mb.opts.MaxFailures {
			retry := now.Add(mb.opts.RetryBackoff << (res.Failures - 1))
			res.Status, res.RetryAt, res.Path = StatusFailed, &retry, s.path
			_, err := tx.ExecContext(ctx, `UPDATE claims SET status = 'failed', agent = '', expires_at = NULL, failures = ?, reason = ?, retry_at = ?, updated_at = ? WHERE id = ?`,
				res.Failures, reason, retry.UnixNano(), now.UnixNano(), id)
			return err
		}
		m, err := mb.decodeAt(s.path)
		if err != nil {
			return err
		}
		m.Metadata.Extra.Failure = &schema.Failure{Reason: schema.Text(reason), Agent: agent, Attempts: res.Failures, Retryable: retryable, FailedAt: schema.NewTime(now)}
		data, err := schema.Encode(m)
		if err != nil {
			return err
		}
		dir := mb.Dir(BoxDeadletter, m.Provider)
		name := filepath.Base(s.path)
		if _, err := mb.fs.writeFile(dir, name, data, true); err != nil {
			return err
		}
		res.Status, res.Path = StatusDead, mb.Rel(filepath.Join(dir, name))
		oldPath = s.path
		if err := reindexRow(ctx, tx, messageRow(m, BoxDeadletter, res.Path)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE claims SET status = 'dead', agent = '', failures = ?, reason = ?, updated_at = ? WHERE id = ?`,
			res.Failures, reason, now.UnixNano(), id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if oldPath != "" {
		if err := mb.fs.remove(mb.Abs(oldPath)); err != nil {
			mb.log.Warn("fail: could not remove the inbox copy", "id", id, "err", err)
		}
	}
	return res, nil
}

func (mb *Mailbox) decodeAt(rel string) (*schema.Message, error) {
	b, err := mb.fs.readFile(mb.Abs(rel))
	if err != nil {
		return nil, fmt.Errorf("mailbox: %w", err)
	}
	m, err := schema.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("mailbox: %s: %w", rel, err)
	}
	return m, nil
}

// reindexRow replaces a message's index row (after it moved).
func reindexRow(ctx context.Context, tx *sql.Tx, r row) error {
	in, err := newInserter(ctx, tx)
	if err != nil {
		return err
	}
	defer in.close()
	return in.insert(ctx, r)
}

// insertIfAbsent indexes a row unless its id is indexed already.
func insertIfAbsent(ctx context.Context, tx *sql.Tx, r row) error {
	var one int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM messages WHERE id = ?`, r.entry.ID).Scan(&one); {
	case err == nil:
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	return reindexRow(ctx, tx, r)
}
