package ingest_test

import (
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// An unverified sender (Event.UnverifiedSender) inherits a correlation id
// only from a message it took part in: the attack of issue 9 is a forged
// From replying to one of our messages to attach itself to an agent's
// task. A verified sender, or one the parent was from or addressed to,
// inherits as before; so does every event that does not say it is
// unverified (chat providers).
func TestUnverifiedSenderCorrelation(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")

	// An inbound email from Ann to the agent, Cc Carol, that an agent
	// tied to incident_7.
	parent := testutil.Message(schema.Email, "00000000000000000001", at, "the disk is full")
	parent.CorrelationID = "incident_7"
	parent.Participants.To = []schema.Participant{{ID: "agent@example.com", Name: "agent@example.com", Email: "agent@example.com"}}
	parent.Participants.Cc = []schema.Participant{{ID: "carol@example.com", Name: "Carol", Email: "carol@example.com"}}
	// And one of our drafts, sent to Bob about task_9.
	d := &schema.Draft{ID: "email_out_00000000000000000000000000000001", Provider: schema.Email, To: schema.Recipients{"Bob <Bob@Example.com>"},
		CorrelationID: "task_9", CreatedAt: schema.TimePtr(at), Body: "done?\n", InboundID: "email_00000000000000000sent",
		Delivery: &schema.Delivery{Status: schema.DeliverySent, Attempts: 1, SentAt: schema.TimePtr(at)}}
	if _, err := mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := p.Deliver(ctx, adapters.Event{Message: parent}); err != nil {
		t.Fatal(err)
	}

	reply := func(uid, from, parentID string) *schema.Message {
		m := testutil.Message(schema.Email, uid, at.Add(time.Hour), "reply")
		m.Participants.From = schema.Participant{ID: from, Name: from, Email: from}
		m.ReplyTo = schema.NullString(parentID)
		return m
	}
	cases := []struct {
		name       string
		m          *schema.Message
		unverified bool
		want       string
	}{
		{"stranger, unverified, to our draft (the issue's mail)", reply("00000000000000000010", "alice@evil.example", d.InboundID), true, ""},
		{"stranger, unverified, to an inbound message", reply("00000000000000000011", "alice@evil.example", parent.ID), true, ""},
		{"stranger, verified", reply("00000000000000000012", "dave@example.net", parent.ID), false, "incident_7"},
		{"the parent's sender, unverified", reply("00000000000000000013", "ann@example.com", parent.ID), true, "incident_7"},
		{"the parent's Cc, unverified", reply("00000000000000000014", "carol@example.com", parent.ID), true, "incident_7"},
		{"our draft's recipient, unverified, other case", reply("00000000000000000015", "bob@example.com", d.InboundID), true, "task_9"},
		{"no sender at all, unverified", noSender(reply("00000000000000000016", "", parent.ID)), true, ""},
	}
	for _, c := range cases {
		if err := p.Deliver(ctx, adapters.Event{Message: c.m, UnverifiedSender: c.unverified}); err != nil {
			t.Fatal(err)
		}
		m, _, err := mb.Message(ctx, c.m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.CorrelationID) != c.want {
			t.Errorf("%s: correlation_id %q, want %q", c.name, m.CorrelationID, c.want)
		}
	}

	// In one batch: the parent and an unverified stranger's reply to it
	// (found in the batch, not the mailbox) are judged alike.
	p2 := testutil.Message(schema.Email, "00000000000000000020", at, "second")
	p2.CorrelationID = "bug_1"
	stranger := reply("00000000000000000021", "alice@evil.example", p2.ID)
	member := reply("00000000000000000022", "ann@example.com", p2.ID)
	if err := p.Deliver(ctx, adapters.Event{Message: p2}, adapters.Event{Message: stranger, UnverifiedSender: true},
		adapters.Event{Message: member, UnverifiedSender: true}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{stranger.ID: "", member.ID: "bug_1"} {
		if m, _, err := mb.Message(ctx, id); err != nil || string(m.CorrelationID) != want {
			t.Errorf("%s in the parent's batch: correlation %v (%v), want %q", id, m, err, want)
		}
	}
}

// noSender gives m the From of an email without one, as the email adapter
// writes it.
func noSender(m *schema.Message) *schema.Message {
	m.Participants.From = schema.Participant{ID: "unknown", Name: "(no sender)"}
	return m
}

// Issue 18, item 12: an unverified sender whose envelope does not back its
// From (Event.SenderNotAligned) inherits nothing, even from a message the
// From's address took part in, and its file's auth block says why; one
// whose envelope does still inherits from a message it took part in.
func TestSenderNotAlignedCorrelation(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	parent := testutil.Message(schema.Email, "00000000000000000001", at, "the disk is full")
	parent.CorrelationID = "incident_7"
	if err := p.Deliver(ctx, adapters.Event{Message: parent}); err != nil {
		t.Fatal(err)
	}
	sender := parent.Participants.From.Email
	reason := "the sender is not verified and the envelope sender's domain evil.test (MAIL FROM) is not aligned with the From domain example.com"
	for _, c := range []struct {
		uid, notAligned, want string
	}{
		{"00000000000000000010", reason, ""},
		{"00000000000000000011", "", "incident_7"},
	} {
		m := testutil.Message(schema.Email, c.uid, at.Add(time.Hour), "reply")
		m.Participants.From = schema.Participant{ID: sender, Name: sender, Email: sender}
		m.ReplyTo = schema.NullString(parent.ID)
		m.Metadata.Extra.Auth = &schema.Auth{FromDomain: "example.com", DKIM: "none"}
		if err := p.Deliver(ctx, adapters.Event{Message: m, UnverifiedSender: true, SenderNotAligned: c.notAligned}); err != nil {
			t.Fatal(err)
		}
		got, _, err := mb.Message(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.CorrelationID) != c.want {
			t.Errorf("not aligned %q: correlation_id %q, want %q", c.notAligned, got.CorrelationID, c.want)
		}
		wantAuth := ""
		if c.notAligned != "" {
			wantAuth = "not inherited from " + parent.ID + ": " + reason
		}
		if a := got.Metadata.Extra.Auth; a == nil || a.Correlation != wantAuth {
			t.Errorf("not aligned %q: auth %+v, want correlation %q", c.notAligned, a, wantAuth)
		}
	}
}
