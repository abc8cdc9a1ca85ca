package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// related is what enrichment knows of a message m points at.
type related struct {
	threadKey, threadRoot, sessionID, correlation string
}

// lookup finds a message by id or dedupe key, in this batch or the mailbox.
func (p *Pipeline) lookup(ctx context.Context, key string, local map[string]*schema.Message) (*related, error) {
	if key == "" {
		return nil, nil
	}
	if m := local[key]; m != nil {
		return &related{threadKey: string(m.Session.ThreadKey), threadRoot: string(m.ThreadRoot), sessionID: m.Session.ID,
			correlation: string(m.CorrelationID)}, nil
	}
	id, ok, err := p.mb.Lookup(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	e, err := p.mb.Get(ctx, id)
	if err != nil {
		if errors.Is(err, mailbox.ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return &related{threadKey: e.Session.ThreadKey, threadRoot: e.ThreadRoot, sessionID: e.Session.ID, correlation: e.CorrelationID}, nil
}

// enrich applies thread and correlation inheritance. The correlation id is
// looked for in what m pointed at as delivered, before joinKnownThread
// moves its thread root.
func (p *Pipeline) enrich(ctx context.Context, m *schema.Message, ev adapters.Event, local map[string]*schema.Message) error {
	targets := []string{string(m.ReplyTo), m.Metadata.Extra.Edits, m.Metadata.Extra.Recalls, string(m.ThreadRoot)}
	if ev.JoinKnownThread {
		if err := p.joinKnownThread(ctx, m, local); err != nil {
			return err
		}
	}
	if m.CorrelationID == "" {
		if err := p.inheritCorrelation(ctx, m, targets, ev, local); err != nil {
			return err
		}
	}
	if m.CorrelationID == "" && ev.ThreadCorrelation && !ev.UnverifiedSender && m.Session.ThreadKey != "" {
		c, err := p.threadCorrelation(ctx, m, local)
		if err != nil {
			return err
		}
		m.CorrelationID = schema.NullString(c)
	}
	return nil
}

// joinKnownThread moves m into the thread of its parent, else of its root,
// when the mailbox knows them (Event.JoinKnownThread); the thread key its
// headers gave goes to metadata.extra.thread_key_from_headers.
func (p *Pipeline) joinKnownThread(ctx context.Context, m *schema.Message, local map[string]*schema.Message) error {
	for _, t := range []string{string(m.ReplyTo), string(m.ThreadRoot)} {
		r, err := p.lookup(ctx, t, local)
		if err != nil {
			return err
		}
		if r == nil || r.threadKey == "" {
			continue
		}
		if r.threadKey != string(m.Session.ThreadKey) {
			if m.Metadata.Extra.Other == nil {
				m.Metadata.Extra.Other = map[string]any{}
			}
			m.Metadata.Extra.Other["thread_key_from_headers"] = string(m.Session.ThreadKey)
			m.Session.ThreadKey = schema.NullString(r.threadKey)
			m.Session.ID = r.threadKey
			root := r.threadRoot
			if root == "" {
				root = t
			}
			if root == m.ID {
				root = ""
			}
			m.ThreadRoot = schema.NullString(root)
		}
		return nil
	}
	return nil
}

// inheritCorrelation gives m the correlation id of the first of targets
// (the messages it answers, edits, recalls or starts from) that carries
// one; from an unverified sender, only of a message the sender took part
// in, and never when nothing backs its From (Event.SenderNotAligned).
func (p *Pipeline) inheritCorrelation(ctx context.Context, m *schema.Message, targets []string, ev adapters.Event, local map[string]*schema.Message) error {
	for _, t := range targets {
		r, err := p.lookup(ctx, t, local)
		if err != nil {
			return err
		}
		if r == nil || r.correlation == "" {
			continue
		}
		if ev.UnverifiedSender && ev.SenderNotAligned != "" {
			p.log.Info("correlation id not inherited: "+ev.SenderNotAligned, "id", m.ID, "from", m.Participants.From.ID, "parent", t)
			if a := m.Metadata.Extra.Auth; a != nil {
				a.Correlation = "not inherited from " + t + ": " + ev.SenderNotAligned
			}
			return nil
		}
		if ev.UnverifiedSender {
			ok, err := p.tookPart(ctx, m.Participants.From, t, local)
			if err != nil {
				return err
			}
			if !ok {
				p.log.Info("correlation id not inherited: the sender is not verified and did not take part in the message answered",
					"id", m.ID, "from", m.Participants.From.ID, "parent", t)
				continue
			}
		}
		m.CorrelationID = schema.NullString(r.correlation)
		return nil
	}
	return nil
}

// threadCorrelation returns the correlation id of the latest message or
// draft of m's session and thread that carries one (Event.ThreadCorrelation),
// in this batch or the mailbox; "" if none does.
func (p *Pipeline) threadCorrelation(ctx context.Context, m *schema.Message, local map[string]*schema.Message) (string, error) {
	var c string
	var at time.Time
	err := p.mb.Thread(ctx, string(m.Session.ThreadKey), func(e *mailbox.Entry) error {
		if e.Session.ID == m.Session.ID && e.Session.ThreadKey == string(m.Session.ThreadKey) && e.CorrelationID != "" && e.ID != m.ID && !e.Timestamp.Before(at) {
			c, at = e.CorrelationID, e.Timestamp
		}
		return nil
	})
	for _, o := range local {
		if o != m && o.Session.ID == m.Session.ID && o.Session.ThreadKey == m.Session.ThreadKey && o.CorrelationID != "" && !o.Timestamp.Time.Before(at) {
			c, at = string(o.CorrelationID), o.Timestamp.Time
		}
	}
	return c, err
}

// tookPart reports whether sender is among the participants of the message
// or draft key names: its From, To, Cc or Bcc. Participants are compared
// by id and email address, in threading's normal form.
func (p *Pipeline) tookPart(ctx context.Context, sender schema.Participant, key string, local map[string]*schema.Message) (bool, error) {
	own := map[string]bool{}
	for _, s := range []string{sender.ID, sender.Email} {
		if n := threading.NormalizeAddress(s); n != "" {
			own[n] = true
		}
	}
	if len(own) == 0 {
		return false, nil
	}
	in := func(ids ...string) bool {
		for _, s := range ids {
			if own[threading.NormalizeAddress(s)] {
				return true
			}
		}
		return false
	}
	inParticipants := func(ps schema.Participants) bool {
		all := append([]schema.Participant{ps.From}, ps.To...)
		all = append(append(all, ps.Cc...), ps.Bcc...)
		for _, x := range all {
			if in(x.ID, x.Email) {
				return true
			}
		}
		return false
	}
	if m := local[key]; m != nil {
		return inParticipants(m.Participants), nil
	}
	id, ok, err := p.mb.Lookup(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	e, err := p.mb.Get(ctx, id)
	if err != nil {
		return false, ignoreNotFound(err)
	}
	// A file that is gone or does not parse counts as one the sender did
	// not take part in: failing would stop ingestion behind it for good.
	if e.Direction == schema.Outbound {
		d, _, err := p.mb.Draft(ctx, id)
		if err != nil {
			p.log.Warn("cannot read the draft answered; its correlation id is not inherited", "id", id, "err", err)
			return false, nil
		}
		return in(d.Recipients()...), nil
	}
	pm, _, err := p.mb.Message(ctx, id)
	if err != nil {
		p.log.Warn("cannot read the message answered; its correlation id is not inherited", "id", id, "err", err)
		return false, nil
	}
	return inParticipants(pm.Participants), nil
}

// ignoreNotFound makes a message that is gone (between the index and its
// lookup) count as one the sender did not take part in.
func ignoreNotFound(err error) error {
	if errors.Is(err, mailbox.ErrNotFound) {
		return nil
	}
	return err
}
