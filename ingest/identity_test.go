package ingest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// mail is an email message under id with digest d, received at.
func mail(id, d string, at time.Time, text string) *schema.Message {
	m := testutil.Message(schema.Email, "x", at, text)
	m.ID = id
	m.ThreadRoot = schema.NullString(id)
	m.Session = schema.Session{ID: "email-thread:" + id, Type: schema.Thread, ThreadKey: schema.NullString("email-thread:" + id)}
	m.Metadata.Extra.Digest = d
	m.ReceivedAt = schema.NewTime(at)
	return m
}

// contentEvent is the event of m with the email's Content rule.
func contentEvent(m *schema.Message, window time.Duration) adapters.Event {
	base := m.ID
	return adapters.Event{Message: m, JoinKnownThread: true, Content: &adapters.Content{Window: window,
		Derive: func(salt string) string { return threading.DerivedID(base, salt) }}}
}

// TestContentIdentity: a message that comes with an id already filed is the
// same message only when its content is the same; a different one is filed
// under an id of its own, says whose id it repeats, and inherits nothing
// from it. A copy of what is filed (any time later) is a duplicate.
func TestContentIdentity(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	id := threading.EmailID("<octo/repo/pull/4242@github.com>")

	spoof := mail(id, "sha256:aa", at, "attacker's text")
	spoof.CorrelationID = "task_1"
	if err := p.Deliver(ctx, contentEvent(spoof, 0)); err != nil {
		t.Fatal(err)
	}
	real := mail(id, "sha256:bb", at.Add(time.Minute), "the real pull request")
	if err := p.Deliver(ctx, contentEvent(real, 0)); err != nil {
		t.Fatal(err)
	}
	want := threading.DerivedID(id, "sha256:bb")
	m, _, err := mb.Message(ctx, want)
	if err != nil {
		t.Fatalf("the real mail was not filed under an id of its own: %v", err)
	}
	if m.Content.Text.String() != "the real pull request" {
		t.Errorf("filed text %q", m.Content.Text.String())
	}
	if !strings.Contains(string(m.Metadata.Extra.Notes), id) {
		t.Errorf("notes %q do not name %s, whose id it repeats", m.Metadata.Extra.Notes, id)
	}
	if m.CorrelationID != "" || string(m.ThreadRoot) != want {
		t.Errorf("inherited from the message it collides with: correlation %q, thread_root %q", m.CorrelationID, m.ThreadRoot)
	}
	if got, _, _ := mb.Message(ctx, id); got == nil || got.Content.Text.String() != "attacker's text" {
		t.Errorf("the first message under %s was changed: %+v", id, got)
	}

	// Redeliveries of either, a day later, and both in one batch: nothing new.
	again := mail(id, "sha256:bb", at.Add(24*time.Hour), "the real pull request")
	spoof2 := mail(id, "sha256:aa", at.Add(24*time.Hour), "attacker's text")
	if err := p.Deliver(ctx, contentEvent(again, 0), contentEvent(spoof2, 0)); err != nil {
		t.Fatal(err)
	}
	// Two new different mails under one new id, in one batch: two files.
	id2 := threading.EmailID("<jira-7@example.com>")
	a, b := mail(id2, "sha256:c1", at, "one"), mail(id2, "sha256:c2", at, "two")
	if err := p.Deliver(ctx, contentEvent(a, 0), contentEvent(b, 0)); err != nil {
		t.Fatal(err)
	}
	if n := len(inboxFiles(t, root)); n != 4 {
		t.Errorf("%d files, want 4: %v", n, inboxFiles(t, root))
	}
	if _, _, err := mb.Message(ctx, threading.DerivedID(id2, "sha256:c2")); err != nil {
		t.Errorf("the second of two mails sharing an id in one batch: %v", err)
	}
	if st := p.Stats()[schema.Email]; st.Duplicates != 2 || st.Written != 4 {
		t.Errorf("stats %+v, want 4 written and 2 duplicates", st)
	}
}

// TestContentIdentityLegacy: a message filed before digests were recorded
// is compared by id alone, as it was filed (no re-id of what is filed);
// with a window (mail without a Message-ID), by its time received.
func TestContentIdentityLegacy(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	old := mail("email_00000000000000000001", "", at, "filed by an older courier")
	if err := p.Deliver(ctx, adapters.Event{Message: old}); err != nil {
		t.Fatal(err)
	}
	if err := p.Deliver(ctx, contentEvent(mail(old.ID, "sha256:aa", at.Add(time.Hour), "again"), 0)); err != nil {
		t.Fatal(err)
	}
	if n := len(inboxFiles(t, root)); n != 1 {
		t.Fatalf("%d files: a message filed before digests was filed again", n)
	}
	noID := mail("email_00000000000000000002", "", at, "alert")
	if err := p.Deliver(ctx, adapters.Event{Message: noID}); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{5 * time.Minute, time.Hour} {
		if err := p.Deliver(ctx, contentEvent(mail(noID.ID, "sha256:dd", at.Add(after), "alert"), 10*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(inboxFiles(t, root)); n != 3 {
		t.Errorf("%d files, want 3: the copy 5 minutes later is the same message, the one an hour later is not", n)
	}
}

// TestContentWindow: identical content without a Message-ID is one message
// within the window of a copy filed, a new message outside it; and a copy
// of that new message is a duplicate of it.
func TestContentWindow(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	id := "email_" + threading.SyntheticUID("a@x", "", "disk full", []byte("disk full\n"))
	w := 10 * time.Minute
	for i, after := range []time.Duration{0, 9 * time.Minute, 20 * time.Minute, 25 * time.Minute, 29 * time.Minute, 40 * time.Minute} {
		if err := p.Deliver(ctx, contentEvent(mail(id, "sha256:ee", at.Add(after), "disk full"), w)); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	// 0 and 9 min: one; 20, 25 and 29 (each within 10 min of 20): one; 40: one.
	if n := len(inboxFiles(t, root)); n != 3 {
		t.Errorf("%d files, want 3: %v", n, inboxFiles(t, root))
	}
	second := threading.DerivedID(id, "received:"+at.Add(20*time.Minute).Format(time.RFC3339Nano))
	m, _, err := mb.Message(ctx, second)
	if err != nil {
		t.Fatalf("the copy 20 minutes later: %v", err)
	}
	if !strings.Contains(string(m.Metadata.Extra.Notes), id) {
		t.Errorf("notes %q do not name the earlier copy %s", m.Metadata.Extra.Notes, id)
	}
}

// TestContentWindowCollision: a mail without a Message-ID whose id (From,
// Date, Subject, body) is that of a different mail, sent again after the
// window, is filed again: its copies are one message only within it.
func TestContentWindowCollision(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	id := "email_" + threading.SyntheticUID("a@x", "", "disk full", []byte("disk full\n"))
	w := 10 * time.Minute
	for i, c := range []struct {
		digest string
		after  time.Duration
	}{{"sha256:to-ops", 0}, {"sha256:to-dev", time.Minute}, {"sha256:to-dev", 5 * time.Minute}, {"sha256:to-dev", time.Hour}} {
		if err := p.Deliver(ctx, contentEvent(mail(id, c.digest, at.Add(c.after), "disk full"), w)); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	// to-ops; to-dev at +1m (+5m is the same); to-dev at +1h.
	if n := len(inboxFiles(t, root)); n != 3 {
		t.Errorf("%d files, want 3: %v", n, inboxFiles(t, root))
	}
}

// TestContentInOneBatch: the content lookups of a batch are asked of the
// mailbox at once, and answer as one at a time did: with a window, a copy
// of a filed message within it is a duplicate, one outside it a message
// of its own, and a copy of that in the same batch a duplicate of it;
// without one, a copy of a filed content any time later is a duplicate.
func TestContentInOneBatch(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	id := "email_" + threading.SyntheticUID("a@x", "", "disk full", []byte("disk full\n"))
	w := 10 * time.Minute
	if err := p.Deliver(ctx, contentEvent(mail(id, "sha256:ee", at, "disk full"), w)); err != nil {
		t.Fatal(err)
	}
	pr := threading.EmailID("<pr-1@example.com>")
	if err := p.Deliver(ctx, contentEvent(mail(pr, "sha256:ff", at, "the pull request"), 0)); err != nil {
		t.Fatal(err)
	}
	err := p.Deliver(ctx,
		contentEvent(mail(id, "sha256:ee", at.Add(5*time.Minute), "disk full"), w),  // within the window: a duplicate
		contentEvent(mail(id, "sha256:ee", at.Add(30*time.Minute), "disk full"), w), // outside it: new
		contentEvent(mail(id, "sha256:ee", at.Add(35*time.Minute), "disk full"), w), // the copy of that: a duplicate
		contentEvent(mail(pr, "sha256:ff", at.Add(48*time.Hour), "the pull request"), 0))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(inboxFiles(t, root)); n != 3 {
		t.Errorf("%d files, want 3: %v", n, inboxFiles(t, root))
	}
	if st := p.Stats()[schema.Email]; st.Duplicates != 3 || st.Written != 3 {
		t.Errorf("stats %+v, want 3 written and 3 duplicates", st)
	}
}
