package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/monoco/courier/schema"
)

// Inbound is a message to write, with the dedupe keys it stands for besides
// its id.
type Inbound struct {
	Message *schema.Message
	Keys    []string
}

// WriteInbound writes a batch of inbound messages and saves checkpoints:
//
//  1. messages whose id or keys the mailbox already holds are skipped;
//  2. the others are written to .tmp/, fsynced together, renamed into
//     inbound/<provider>/ and the directories fsynced;
//  3. one transaction then records their index rows, their keys and the
//     checkpoints.
//
// So a checkpoint is never saved before the files it covers are durable, and
// a crash between 2 and 3 leaves complete files that Reconcile indexes (and
// that a redelivery finds by name). written[i] reports whether msgs[i] was
// written (false: a duplicate). A name taken by anything but that message
// (a link, another file) fails the batch with an UnsafePathError, and no
// checkpoint moves: the source delivers it again once the way is clear.
func (mb *Mailbox) WriteInbound(ctx context.Context, msgs []Inbound, cps []Checkpoint) (written []bool, err error) {
	written = make([]bool, len(msgs))
	idx := make([]int, 0, len(msgs))
	var keys []string
	for _, in := range msgs {
		keys = append(append(keys, in.Message.ID), in.Keys...)
	}
	known, err := mb.Known(ctx, keys)
	if err != nil {
		return nil, err
	}
	inBatch := map[string]bool{}
	for i, in := range msgs {
		if err := mb.admitInbound(in, known, inBatch); errors.Is(err, errDuplicate) {
			continue
		} else if err != nil {
			return nil, err
		}
		idx = append(idx, i)
	}
	// Each file is encoded, and its index row made, by the goroutine that
	// writes it (writeFiles).
	rows := make([]row, len(idx))
	files := make([]*fileWrite, len(idx))
	for k, i := range idx {
		files[k] = mb.inboundFile(msgs[i], &rows[k])
	}
	if len(files) > 0 {
		if err := mb.fs.writeFiles(files); err != nil {
			return nil, err
		}
	}
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error { return mb.recordInbound(ctx, tx, rows, cps) })
	if err != nil {
		return nil, fmt.Errorf("mailbox: record batch: %w", err)
	}
	if len(rows) > 0 {
		mb.signal()
	}
	for _, i := range idx {
		written[i] = true // new, or found whole at its name after a crash
	}
	return written, nil
}

// errDuplicate is admitInbound's answer for a message already held.
var errDuplicate = errors.New("mailbox: a duplicate")

// admitInbound validates a message of a batch and, unless the mailbox
// (known: the batch's keys it holds) or the batch (inBatch) already holds
// it, adds its id and keys to inBatch; errDuplicate when one of them
// holds it.
func (mb *Mailbox) admitInbound(in Inbound, known, inBatch map[string]bool) error {
	m := in.Message
	if err := m.Validate(); err != nil {
		return fmt.Errorf("mailbox: message %s is not valid: %w", m.ID, err)
	}
	if knownInbound(in, known, inBatch) {
		return errDuplicate
	}
	inBatch[m.ID] = true
	for _, k := range in.Keys {
		inBatch[k] = true
	}
	return nil
}

// inboundFile is the file of an admitted message: encoded, and its index
// row set in r, when it is written.
func (mb *Mailbox) inboundFile(in Inbound, r *row) *fileWrite {
	m := in.Message
	dir := mb.Dir(BoxInbound, m.Provider)
	name := FileName(m.Timestamp.Time, m.ID)
	return &fileWrite{dir: dir, name: name, same: sameMessage(m.ID), encode: func() ([]byte, error) {
		data, err := schema.Encode(m)
		if err != nil {
			return nil, err
		}
		*r = messageRow(m, BoxInbound, mb.Rel(filepath.Join(dir, name)))
		r.keys = append(r.keys, in.Keys...)
		return data, nil
	}}
}

// knownInbound reports whether the message's id or one of its keys is in
// the mailbox (known) or earlier in the batch (inBatch).
func knownInbound(in Inbound, known, inBatch map[string]bool) bool {
	if known[in.Message.ID] || inBatch[in.Message.ID] {
		return true
	}
	for _, k := range in.Keys {
		if known[k] || inBatch[k] {
			return true
		}
	}
	return false
}

// recordInbound records the index rows of the messages written, their
// keys and the checkpoints, in tx.
func (mb *Mailbox) recordInbound(ctx context.Context, tx *sql.Tx, rows []row, cps []Checkpoint) error {
	if len(rows) > 0 {
		in, err := newInserter(ctx, tx)
		if err != nil {
			return err
		}
		defer in.close()
		for _, r := range rows {
			if err := in.insert(ctx, r); err != nil {
				return err
			}
		}
		// In the index rows' transaction: what reacts to new mail
		// finds every message the index has (events.go).
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.entry.ID
		}
		if err := mb.journal(ctx, tx, EventInbound, ids...); err != nil {
			return err
		}
	}
	return mb.saveCheckpoints(ctx, tx, cps)
}

// sameMessage accepts a file found at a message's name as that message
// when it is a valid message with its id: written before a crash kept it
// out of the index, and normalised again now (received_at differs). Any
// other file there is in the way and fails the write (see sameFile).
func sameMessage(id string) func([]byte) bool {
	return func(existing []byte) bool {
		m, err := schema.Decode(existing)
		return err == nil && m.ID == id
	}
}

// Queue writes a draft into outbound/<provider>/ and indexes it. The draft
// must have its id, provider and created_at set.
func (mb *Mailbox) Queue(ctx context.Context, d *schema.Draft) (string, error) {
	if d.ID == "" || d.Provider == "" || d.CreatedAt == nil {
		return "", fmt.Errorf("mailbox: queue: draft needs id, provider and created_at")
	}
	held := mb.holds(d)
	d.Approval = nil
	if held {
		d.Approval = &schema.Approval{Status: schema.ApprovalAwaiting}
	}
	data, err := schema.EncodeDraft(d)
	if err != nil {
		return "", err
	}
	dir := mb.Dir(BoxOutbound, d.Provider)
	name := FileName(d.CreatedAt.Time, d.ID)
	existed, err := mb.fs.writeFile(dir, name, data, false)
	if err != nil {
		return "", err
	}
	if existed {
		return "", fmt.Errorf("mailbox: queue: %s already exists", name)
	}
	rel := mb.Rel(filepath.Join(dir, name))
	// The engine may have seen the file first (indexed it, even sent and
	// archived it): then its row stands.
	journaled := false
	err = withTx(ctx, mb.db, func(tx *sql.Tx) error {
		if err := insertIfAbsent(ctx, tx, draftRow(d, BoxOutbound, rel)); err != nil || !held {
			return err
		}
		journaled, err = mb.hold(ctx, tx, d.ID)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("mailbox: queue %s: %w", d.ID, err)
	}
	if journaled {
		mb.signal()
	}
	return rel, nil
}
