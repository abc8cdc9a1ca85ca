package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/monoco/courier/adapters"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// dedupeKeys are the keys a message is known by: its id, the event's
// dedupe keys and its provider event id.
func dedupeKeys(m *schema.Message, evKeys []string) []string {
	keys := append([]string{m.ID}, evKeys...)
	if e := m.Metadata.Extra.EventID; e != "" {
		keys = append(keys, mailbox.EventKey(m.Provider, e))
	}
	return keys
}

func (p *Pipeline) isSelf(m *schema.Message) bool {
	for _, id := range p.opts.Self[m.Provider] {
		if id != "" && (m.Participants.From.ID == id || m.Participants.From.PlatformID == id) {
			return true
		}
	}
	return false
}

// askKeys asks the mailbox, in one query, which of the keys the batch's
// messages come with it holds (a message given an id of its own later is
// asked about on its own).
func (p *Pipeline) askKeys(ctx context.Context, w *batchWork, batch []*request) error {
	var keys []string
	for _, r := range batch {
		for _, ev := range r.events {
			if ev.Message != nil {
				keys = append(keys, dedupeKeys(ev.Message, ev.Keys)...)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	known, err := p.mb.Known(ctx, keys)
	if err != nil {
		return err
	}
	w.known, w.asked = known, make(map[string]bool, len(keys))
	for _, k := range keys {
		w.asked[k] = true
	}
	return p.askDigests(ctx, w, batch)
}

// askDigests asks the mailbox, in one query, which of the batch's
// messages identified by their content (adapters.Content) it holds a copy
// of, as FindDigest would find it; identify takes the answer from
// w.digests.
func (p *Pipeline) askDigests(ctx context.Context, w *batchWork, batch []*request) error {
	var spans []mailbox.DigestSpan
	for _, r := range batch {
		for _, ev := range r.events {
			if sp, ok := digestSpan(ev.Message, ev.Content); ok {
				spans = append(spans, sp)
			}
		}
	}
	if len(spans) == 0 {
		return nil
	}
	found, err := p.mb.KnownDigests(ctx, spans)
	if err != nil {
		return err
	}
	w.digestsFiled = make(map[mailbox.DigestSpan]bool, len(spans))
	for i, sp := range spans {
		w.digestsFiled[sp] = found[i]
	}
	return nil
}

// digestSpan is the digest of m and the span of reception times in
// which a copy of it is the same message (rule's window, or any time),
// when m is identified by its content.
func digestSpan(m *schema.Message, rule *adapters.Content) (mailbox.DigestSpan, bool) {
	if m == nil || rule == nil || m.Metadata.Extra.Digest == "" {
		return mailbox.DigestSpan{}, false
	}
	sp := mailbox.DigestSpan{Digest: m.Metadata.Extra.Digest, From: anyTime[0], To: anyTime[1]}
	if rule.Window > 0 {
		at := m.ReceivedAt.Time
		sp.From, sp.To = at.Add(-rule.Window), at.Add(rule.Window)
	}
	return sp, true
}

// filedDigest reports whether the mailbox holds a message in sp, as
// askDigests found or asked now.
func (p *Pipeline) filedDigest(ctx context.Context, w *batchWork, sp mailbox.DigestSpan) (bool, error) {
	if found, ok := w.digestsFiled[sp]; ok {
		return found, nil
	}
	_, found, err := p.mb.FindDigest(ctx, sp.Digest, sp.From, sp.To)
	return found, err
}

// inMailbox reports whether the mailbox holds key: as askKeys found, or
// asked now.
func (p *Pipeline) inMailbox(ctx context.Context, w *batchWork, key string) (bool, error) {
	if w.asked[key] {
		return w.known[key], nil
	}
	return p.mb.Seen(ctx, key)
}

// seen reports whether any key is in the mailbox, the staging area or this
// batch.
func (p *Pipeline) seen(ctx context.Context, w *batchWork, keys []string) (bool, error) {
	for _, k := range keys {
		if w.local[k] != nil || p.staged[k] {
			return true, nil
		}
		ok, err := p.inMailbox(ctx, w, k)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// anyTime is the widest span FindDigest takes: a content without a window
// is the same message whenever it comes.
var anyTime = [2]time.Time{time.Unix(0, 0), time.Unix(999999999999, 0)}

// identify applies an event's Content rule (adapters.Content) before the
// dedupe by keys: it reports a copy of content already filed as a
// duplicate, and gives a different message that comes with a filed id an
// id of its own (rekey).
func (p *Pipeline) identify(ctx context.Context, w *batchWork, m *schema.Message, rule *adapters.Content) (dup bool, err error) {
	sp, ok := digestSpan(m, rule)
	if !ok {
		return false, nil
	}
	digest, at := sp.Digest, m.ReceivedAt.Time
	if w.digestSeen(digest, [2]time.Time{sp.From, sp.To}) {
		return true, nil
	}
	if ok, err := p.filedDigest(ctx, w, sp); err != nil || ok {
		return ok, err
	}
	if w.asked[m.ID] && !w.known[m.ID] && w.local[m.ID] == nil {
		return false, nil // an id nothing is filed under (askKeys)
	}
	filed, ok, err := p.filedUnder(ctx, m.ID, w.local)
	if err != nil || !ok {
		return false, err
	}
	if filed == nil {
		return true, nil // a key of a draft we sent or of a merged message
	}
	fx := filed.Metadata.Extra
	switch {
	case fx.Digest == "" && rule.Window == 0:
		return true, nil // filed before digests: one id, one message, as filed
	case fx.Digest == "" || fx.Digest == digest:
		if d := at.Sub(filed.ReceivedAt.Time).Abs(); d <= rule.Window {
			return true, nil
		}
		rekey(m, filed.ID, rule.Derive("received:"+at.UTC().Format(time.RFC3339Nano)),
			fmt.Sprintf("the same content as %s, received more than %s apart from it: a message of its own", filed.ID, rule.Window))
	default:
		salt := digest
		if rule.Window > 0 {
			// Its own copies are one message only within the window too:
			// a later one must not come back to this id.
			salt += " received:" + at.UTC().Format(time.RFC3339Nano)
		}
		rekey(m, filed.ID, rule.Derive(salt),
			fmt.Sprintf("its id repeats that of %s, a different message: filed under an id of its own", filed.ID))
	}
	return false, nil
}

// filedUnder returns the message filed under id, in this batch or the
// mailbox; nil with ok when id is a key of something else (a draft we
// sent, a message merged into another).
func (p *Pipeline) filedUnder(ctx context.Context, id string, local map[string]*schema.Message) (*schema.Message, bool, error) {
	if m := local[id]; m != nil {
		if m.ID != id {
			return nil, true, nil
		}
		return m, true, nil
	}
	found, ok, err := p.mb.Lookup(ctx, id)
	if err != nil || !ok {
		return nil, ok, err
	}
	if found != id {
		return nil, true, nil
	}
	filed, e, err := p.mb.Message(ctx, id)
	switch {
	case err == nil:
		return filed, true, nil
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case e != nil && e.Direction != schema.Inbound:
		return nil, true, nil // a draft's id
	}
	// Unreadable: compare with nothing, and lose nothing (the new message
	// is filed under an id of its own).
	p.log.Warn("the message filed under an id that came again cannot be read", "id", id, "err", err)
	unknown := &schema.Message{ID: id}
	unknown.Metadata.Extra.Digest = "unreadable"
	return unknown, true, nil
}

// rekey gives m the id of its own it must have instead of was (the id of
// the message filed under it), and notes why. Nothing of the filed message
// is inherited: a root or parent that is the filed message becomes m
// itself or nothing (thread keys still come from the headers).
func rekey(m *schema.Message, was, id, why string) {
	m.ID = id
	if string(m.ThreadRoot) == was {
		m.ThreadRoot = schema.NullString(id)
	}
	if string(m.ReplyTo) == was {
		m.ReplyTo = ""
	}
	x := &m.Metadata.Extra
	if x.Notes != "" {
		x.Notes += "; "
	}
	x.Notes += schema.Text(why)
}

// digestSeen reports whether this batch holds a message of digest received
// within span.
func (w *batchWork) digestSeen(digest string, span [2]time.Time) bool {
	for _, m := range w.digests[digest] {
		if t := m.ReceivedAt.Unix(); t >= span[0].Unix() && t <= span[1].Unix() {
			return true
		}
	}
	return false
}

// addDigest records m's digest in the batch.
func (w *batchWork) addDigest(m *schema.Message) {
	if d := m.Metadata.Extra.Digest; d != "" {
		if w.digests == nil {
			w.digests = map[string][]*schema.Message{}
		}
		w.digests[d] = append(w.digests[d], m)
	}
}
