package mailbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

var ctx = context.Background()

func newMailbox(t *testing.T, clock *testutil.Clock) (*mailbox.Mailbox, string) {
	t.Helper()
	root := t.TempDir()
	if err := mailbox.Init(root); err != nil {
		t.Fatal(err)
	}
	opts := &mailbox.Options{}
	if clock != nil {
		opts.Now = clock.Now
	}
	mb, err := mailbox.Open(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	return mb, root
}

func write(t *testing.T, mb *mailbox.Mailbox, msgs ...*schema.Message) []bool {
	t.Helper()
	in := make([]mailbox.Inbound, len(msgs))
	for i, m := range msgs {
		in[i] = mailbox.Inbound{Message: m}
	}
	w, err := mb.WriteInbound(ctx, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// files lists the files under dir, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(r))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func TestInitLayout(t *testing.T) {
	root := t.TempDir()
	if err := mailbox.Init(root); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		".monoco/mailbox/inbound/email", ".monoco/mailbox/inbound/lark", ".monoco/mailbox/inbound/slack",
		".monoco/mailbox/outbound/email", ".monoco/mailbox/archive/slack", ".monoco/mailbox/.deadletter/lark",
		".monoco/mailbox/.tmp", ".monoco/mailbox/.state", ".monoco/dropzone", ".monoco/config",
	} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory (%v)", d, err)
		}
	}
	if err := mailbox.Init(root); err != nil {
		t.Errorf("Init is not idempotent: %v", err)
	}
	if _, err := mailbox.Open(t.TempDir(), nil); !errors.Is(err, mailbox.ErrNotInitialized) {
		t.Errorf("Open of an empty folder: %v, want ErrNotInitialized", err)
	}
}

func TestFileName(t *testing.T) {
	at := time.Date(2026, 2, 6, 20, 45, 0, 999, time.FixedZone("CST", 8*3600))
	name := mailbox.FileName(at, "lark_om_abc123")
	if name != "20260206T124500_lark_om_abc123.md" {
		t.Errorf("FileName = %q (must be the UTC time)", name)
	}
	got, id, ok := mailbox.ParseFileName(name)
	if !ok || id != "lark_om_abc123" || !got.Equal(time.Date(2026, 2, 6, 12, 45, 0, 0, time.UTC)) {
		t.Errorf("ParseFileName = %v %q %v", got, id, ok)
	}
	for _, bad := range []string{"x.md", "20260206T124500_lark_om_abc123.md.swp", ".20260206T124500_a_b.md", "20260206T124500_Bad Id.md", "2026020XT124500_a_b.md"} {
		if _, _, ok := mailbox.ParseFileName(bad); ok {
			t.Errorf("ParseFileName(%q) accepted", bad)
		}
	}
}

func TestWriteInbound(t *testing.T) {
	mb, root := newMailbox(t, nil)
	at := testutil.Time("2026-02-06T20:45:00Z")
	a := testutil.Message(schema.Lark, "om_a", at, "first")
	b := testutil.Message(schema.Slack, "C1_1_000001", at.Add(time.Minute), "second")
	w, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: a}, {Message: b, Keys: []string{"event:slack:Ev1"}}, {Message: a}},
		[]mailbox.Checkpoint{{Key: "src/x", Value: "42"}})
	if err != nil {
		t.Fatal(err)
	}
	if !w[0] || !w[1] || w[2] {
		t.Errorf("written = %v, want [true true false] (the repeat in the batch is a duplicate)", w)
	}
	want := []string{"inbound/lark/20260206T204500_lark_om_a.md", "inbound/slack/20260206T204600_slack_C1_1_000001.md"}
	if got := files(t, filepath.Join(root, ".monoco/mailbox/inbound")); strings.Join(got, ",") != strings.Join([]string{strings.TrimPrefix(want[0], "inbound/"), strings.TrimPrefix(want[1], "inbound/")}, ",") {
		t.Errorf("files = %v, want %v", got, want)
	}
	fi, err := os.Stat(filepath.Join(root, ".monoco/mailbox", want[0]))
	if err != nil || fi.Mode().Perm() != 0o440 {
		t.Errorf("mode = %v, %v; want 0440", fi.Mode().Perm(), err)
	}
	data, _ := os.ReadFile(filepath.Join(root, ".monoco/mailbox", want[0]))
	if m, err := schema.Decode(data); err != nil || m.ID != a.ID || m.Body != "first\n" {
		t.Errorf("written file decodes to %+v, %v", m, err)
	}
	if v, ok, _ := mb.Checkpoint(ctx, "src/x"); !ok || v != "42" {
		t.Errorf("checkpoint = %q %v", v, ok)
	}
	// Redelivery, by id or by key, is dropped.
	b2 := testutil.Message(schema.Slack, "C1_9_000009", at, "same event, new ts")
	w, err = mb.WriteInbound(ctx, []mailbox.Inbound{{Message: a}, {Message: b2, Keys: []string{"event:slack:Ev1"}}}, nil)
	if err != nil || w[0] || w[1] {
		t.Errorf("redelivery written = %v, %v; want none", w, err)
	}
	if got := files(t, filepath.Join(root, ".monoco/mailbox/.tmp")); len(got) != 0 {
		t.Errorf(".tmp not empty: %v", got)
	}
	if seen, _ := mb.Seen(ctx, "event:slack:Ev1"); !seen {
		t.Error("Seen(event key) = false")
	}
}

func TestWriteInboundRejectsInvalid(t *testing.T) {
	mb, root := newMailbox(t, nil)
	good := testutil.Message(schema.Lark, "om_good", testutil.Time("2026-01-01T00:00:00Z"), "ok")
	bad := testutil.Message(schema.Lark, "om_bad", testutil.Time("2026-01-01T00:00:00Z"), "no sender")
	bad.Participants.From = schema.Participant{}
	_, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: good}, {Message: bad}}, []mailbox.Checkpoint{{Key: "k", Value: "1"}})
	if err == nil || !strings.Contains(err.Error(), "participants.from.id") {
		t.Fatalf("err = %v, want a validation error naming participants.from.id", err)
	}
	if got := files(t, filepath.Join(root, ".monoco/mailbox/inbound")); len(got) != 0 {
		t.Errorf("a refused batch left files: %v", got)
	}
	if _, ok, _ := mb.Checkpoint(ctx, "k"); ok {
		t.Error("a refused batch moved the checkpoint")
	}
}

// A crash after the files were renamed but before the database commit
// leaves complete, unindexed files: Reconcile indexes them, and a
// redelivery of the same message is not written twice.
func TestReconcileAfterCrashBeforeCommit(t *testing.T) {
	mb, root := newMailbox(t, nil)
	m := testutil.Message(schema.Lark, "om_crash", testutil.Time("2026-03-01T10:00:00Z"), "survived")
	data, _ := schema.Encode(m)
	path := filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(m.Timestamp.Time, m.ID))
	if err := os.WriteFile(path, data, 0o444); err != nil {
		t.Fatal(err)
	}
	// An abandoned temporary file from the same crash.
	tmp := filepath.Join(root, ".monoco/mailbox/.tmp", "w-0123-x.md")
	os.WriteFile(tmp, []byte("partial"), 0o444)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(tmp, old, old)

	st, err := mb.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Indexed != 1 {
		t.Errorf("Reconcile indexed %d, want 1", st.Indexed)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Error("abandoned temporary file not removed")
	}
	if w := write(t, mb, m); w[0] {
		t.Error("redelivery after reconcile was written again")
	}
	if e, err := mb.Get(ctx, m.ID); err != nil || e.Status != mailbox.StatusNew {
		t.Errorf("Get = %+v, %v", e, err)
	}
}

// Without Reconcile, a redelivery still finds the file by its name and
// does not write a second copy.
func TestRedeliveryFindsFileByName(t *testing.T) {
	mb, root := newMailbox(t, nil)
	m := testutil.Message(schema.Lark, "om_byname", testutil.Time("2026-03-01T10:00:00Z"), "once")
	data, _ := schema.Encode(m)
	dir := filepath.Join(root, ".monoco/mailbox/inbound/lark")
	os.WriteFile(filepath.Join(dir, mailbox.FileName(m.Timestamp.Time, m.ID)), data, 0o444)
	write(t, mb, m)
	if got := files(t, dir); len(got) != 1 {
		t.Errorf("files = %v, want one", got)
	}
	if _, err := mb.Get(ctx, m.ID); err != nil {
		t.Errorf("not indexed after redelivery: %v", err)
	}
}

func TestClaimDoneFail(t *testing.T) {
	clock := &testutil.Clock{T: testutil.Time("2026-02-06T21:00:00Z")}
	mb, root := newMailbox(t, clock)
	at := testutil.Time("2026-02-06T20:45:00Z")
	m1 := testutil.Message(schema.Lark, "om_1", at, "one")
	m2 := testutil.Message(schema.Lark, "om_2", at.Add(time.Second), "two")
	m3 := testutil.Message(schema.Lark, "om_3", at.Add(2*time.Second), "three")
	write(t, mb, m1, m2, m3)

	t.Run("not found", func(t *testing.T) {
		if _, err := mb.Claim(ctx, "lark_om_nope", "a", 0); !errors.Is(err, mailbox.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("one holder", func(t *testing.T) {
		c, err := mb.Claim(ctx, m1.ID, "alice", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !c.ExpiresAt.Equal(clock.Now().Add(300 * time.Second)) {
			t.Errorf("expires %v, want 300 s after claim", c.ExpiresAt)
		}
		var ce *mailbox.ConflictError
		if _, err := mb.Claim(ctx, m1.ID, "bob", 0); !errors.As(err, &ce) || ce.Holder != "alice" {
			t.Errorf("second claim: %v, want a conflict naming alice", err)
		}
		if c, err := mb.Claim(ctx, m1.ID, "alice", 0); err != nil || !c.Renewed {
			t.Errorf("renewal by the holder: %+v, %v", c, err)
		}
		if _, err := mb.Done(ctx, m1.ID, "bob"); !errors.Is(err, mailbox.ErrConflict) {
			t.Errorf("done by a non-holder: %v, want conflict", err)
		}
	})
	t.Run("expired claim can be stolen", func(t *testing.T) {
		if _, err := mb.Claim(ctx, m2.ID, "alice", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		clock.Advance(11 * time.Second)
		if e, _ := mb.Get(ctx, m2.ID); e.Status != mailbox.StatusNew {
			t.Errorf("status of an expired claim = %s, want new", e.Status)
		}
		if _, err := mb.Claim(ctx, m2.ID, "bob", 0); err != nil {
			t.Fatalf("steal after expiry: %v", err)
		}
		if _, err := mb.Done(ctx, m2.ID, "alice"); !errors.Is(err, mailbox.ErrConflict) {
			t.Errorf("done by the former holder: %v, want conflict", err)
		}
	})
	t.Run("done archives with processed_at", func(t *testing.T) {
		rel, err := mb.Done(ctx, m1.ID, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if rel != ".monoco/mailbox/archive/lark/20260206T204500_lark_om_1.md" {
			t.Errorf("archived to %s", rel)
		}
		if _, err := os.Stat(filepath.Join(root, ".monoco/mailbox/inbound/lark/20260206T204500_lark_om_1.md")); !errors.Is(err, os.ErrNotExist) {
			t.Error("inbox copy still there")
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		m, err := schema.Decode(data)
		if err != nil || m.ProcessedAt == nil || !m.ProcessedAt.Equal(clock.Now()) {
			t.Errorf("archived message: processed_at %v, %v", m.ProcessedAt, err)
		}
		// Everything but processed_at is as it was.
		m.ProcessedAt = nil
		orig, _ := schema.Encode(m1)
		again, _ := schema.Encode(m)
		if !bytes.Equal(orig, again) {
			t.Errorf("archive changed more than processed_at:\n%s\n%s", orig, again)
		}
		if _, err := mb.Claim(ctx, m1.ID, "carol", 0); !errors.Is(err, mailbox.ErrConflict) {
			t.Errorf("claim of a done message: %v, want conflict", err)
		}
		if e, _ := mb.Get(ctx, m1.ID); e.Status != mailbox.StatusDone {
			t.Errorf("status = %s", e.Status)
		}
	})
	t.Run("fail retries with backoff then dead-letters", func(t *testing.T) {
		for i := 1; i <= 2; i++ {
			if _, err := mb.Claim(ctx, m3.ID, "alice", 0); err != nil {
				t.Fatalf("claim %d: %v", i, err)
			}
			r, err := mb.Fail(ctx, m3.ID, "alice", "API timeout", true)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != mailbox.StatusFailed || r.Failures != i {
				t.Errorf("fail %d: %+v", i, r)
			}
			wantWait := time.Second << (i - 1)
			if !r.RetryAt.Equal(clock.Now().Add(wantWait)) {
				t.Errorf("retry at %v, want now+%v", r.RetryAt, wantWait)
			}
			if _, err := mb.Claim(ctx, m3.ID, "bob", 0); !errors.Is(err, mailbox.ErrConflict) {
				t.Errorf("claim before the retry time: %v, want conflict", err)
			}
			if e, _ := mb.Get(ctx, m3.ID); e.Status != mailbox.StatusFailed || e.FailReason != "API timeout" {
				t.Errorf("entry = %+v", e)
			}
			clock.Advance(wantWait)
		}
		if _, err := mb.Claim(ctx, m3.ID, "alice", 0); err != nil {
			t.Fatal(err)
		}
		r, err := mb.Fail(ctx, m3.ID, "alice", "still failing", true)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != mailbox.StatusDead || r.Path != ".monoco/mailbox/.deadletter/lark/20260206T204502_lark_om_3.md" {
			t.Errorf("third failure: %+v", r)
		}
		data, _ := os.ReadFile(filepath.Join(root, r.Path))
		m, err := schema.Decode(data)
		if err != nil || m.Metadata.Extra.Failure == nil || m.Metadata.Extra.Failure.Reason != "still failing" || m.Metadata.Extra.Failure.Attempts != 3 {
			t.Errorf("dead letter: %+v, %v", m.Metadata.Extra.Failure, err)
		}
	})
	t.Run("permanent failure dead-letters at once", func(t *testing.T) {
		m4 := testutil.Message(schema.Lark, "om_4", at, "four")
		write(t, mb, m4)
		mb.Claim(ctx, m4.ID, "alice", 0)
		r, err := mb.Fail(ctx, m4.ID, "alice", "cannot parse", false)
		if err != nil || r.Status != mailbox.StatusDead || r.Failures != 1 {
			t.Errorf("permanent fail: %+v, %v", r, err)
		}
	})
}

// Concurrent claims through separate connections: exactly one winner.
func TestClaimRace(t *testing.T) {
	mb, root := newMailbox(t, nil)
	m := testutil.Message(schema.Lark, "om_race", testutil.Time("2026-01-01T00:00:00Z"), "race")
	write(t, mb, m)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, conflicts := 0, 0
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		other, err := mailbox.Open(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, err := other.Claim(ctx, m.ID, "agent-"+string(rune('a'+i)), 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, mailbox.ErrConflict):
				conflicts++
			default:
				t.Errorf("claim %d: %v", i, err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	if wins != 1 || conflicts != n-1 {
		t.Errorf("wins %d conflicts %d, want 1 and %d", wins, conflicts, n-1)
	}
}

func listJSON(t *testing.T, mb *mailbox.Mailbox, f mailbox.Filter) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := mb.List(ctx, f, func(e *mailbox.Entry) error { return enc.Encode(e) }); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// Delete the database, reopen (which reindexes), and the listing is the
// same as before.
func TestReindexReproducesIndex(t *testing.T) {
	clock := &testutil.Clock{T: testutil.Time("2026-02-07T00:00:00Z")}
	mb, root := newMailbox(t, clock)
	at := testutil.Time("2026-02-06T20:00:00Z")
	var msgs []*schema.Message
	for i := 0; i < 30; i++ {
		p := []schema.Provider{schema.Email, schema.Lark, schema.Slack}[i%3]
		uid := []string{"m", "om_", "C1_"}[i%3] + strings.Repeat("x", i+1)
		m := testutil.Message(p, uid, at.Add(time.Duration(i)*time.Minute), "message "+uid)
		if i%4 == 0 {
			m.CorrelationID = "task_7"
		}
		if i%3 == 2 {
			m.Metadata.Extra.MergedIDs = []string{m.ID, m.ID + "_merged"}
		}
		msgs = append(msgs, m)
	}
	write(t, mb, msgs...)
	for _, m := range msgs[:5] {
		mb.Claim(ctx, m.ID, "alice", 0)
		if _, err := mb.Done(ctx, m.ID, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	mb.Claim(ctx, msgs[6].ID, "alice", 0)
	mb.Fail(ctx, msgs[6].ID, "alice", "bad", false)
	d := &schema.Draft{ID: "lark_out_0123456789abcdef0123456789abcdef", Provider: schema.Lark, To: schema.Recipients{"oc_1"},
		CorrelationID: "task_7", CreatedAt: schema.TimePtr(at.Add(time.Hour)), Agent: "alice", Body: "reply\n"}
	if _, err := mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	all := mailbox.Filter{All: true}
	before := listJSON(t, mb, all) + listJSON(t, mb, mailbox.Filter{Outbound: true})
	var ctxBefore bytes.Buffer
	mb.Context(ctx, "task_7", func(e *mailbox.Entry) error { ctxBefore.WriteString(e.ID + " " + string(e.Status) + "\n"); return nil })
	if strings.Count(before, "\n") != 31 {
		t.Fatalf("listed %d entries, want 31:\n%s", strings.Count(before, "\n"), before)
	}
	mb.Close()
	for _, f := range []string{"courier.db", "courier.db-wal", "courier.db-shm"} {
		os.Remove(filepath.Join(root, ".monoco/mailbox/.state", f))
	}
	mb2, err := mailbox.Open(root, &mailbox.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer mb2.Close()
	after := listJSON(t, mb2, all) + listJSON(t, mb2, mailbox.Filter{Outbound: true})
	if before != after {
		t.Errorf("listing differs after reindex:\n--- before\n%s--- after\n%s", before, after)
	}
	var ctxAfter bytes.Buffer
	mb2.Context(ctx, "task_7", func(e *mailbox.Entry) error { ctxAfter.WriteString(e.ID + " " + string(e.Status) + "\n"); return nil })
	if ctxBefore.String() != ctxAfter.String() || !strings.Contains(ctxAfter.String(), "lark_out_") {
		t.Errorf("context differs:\n%s\n%s", ctxBefore.String(), ctxAfter.String())
	}
	// Dedupe keys came back too.
	if seen, _ := mb2.Seen(ctx, msgs[2].ID+"_merged"); !seen {
		t.Error("merged id not a dedupe key after reindex")
	}
}

// A crash in the middle of done leaves the message in both inbound/ and
// archive/: reconciling keeps the archived copy.
func TestReconcileInterruptedDone(t *testing.T) {
	mb, root := newMailbox(t, nil)
	m := testutil.Message(schema.Lark, "om_half", testutil.Time("2026-01-01T00:00:00Z"), "half done")
	write(t, mb, m)
	done := *m
	done.ProcessedAt = schema.TimePtr(time.Now())
	data, _ := schema.Encode(&done)
	name := mailbox.FileName(m.Timestamp.Time, m.ID)
	os.WriteFile(filepath.Join(root, ".monoco/mailbox/archive/lark", name), data, 0o444)
	st, err := mb.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Removed != 1 {
		t.Errorf("removed %d, want 1 (the stale inbox copy)", st.Removed)
	}
	if _, err := os.Stat(filepath.Join(root, ".monoco/mailbox/inbound/lark", name)); !errors.Is(err, os.ErrNotExist) {
		t.Error("stale inbox copy kept")
	}
	if e, _ := mb.Get(ctx, m.ID); e.Status != mailbox.StatusDone {
		t.Errorf("status = %s, want done", e.Status)
	}
}

func TestReindexReportsInvalidFiles(t *testing.T) {
	mb, root := newMailbox(t, nil)
	bad := filepath.Join(root, ".monoco/mailbox/inbound/lark/20260101T000000_lark_om_bad.md")
	os.WriteFile(bad, []byte("not a message\n"), 0o444)
	os.MkdirAll(filepath.Join(root, ".monoco/mailbox/inbound/telegram"), 0o755)
	st, err := mb.Reindex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(st.Invalid, "\n")
	if !strings.Contains(joined, "20260101T000000_lark_om_bad.md: 1: front matter missing") || !strings.Contains(joined, "telegram: not a provider folder") {
		t.Errorf("invalid = %q", st.Invalid)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Error("reindex removed an invalid file; it must leave it for a person to look at")
	}
}

func TestThreadAndContext(t *testing.T) {
	mb, _ := newMailbox(t, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	root := testutil.Message(schema.Slack, "C1_100_000001", at, "question")
	r1 := testutil.Message(schema.Slack, "C1_101_000001", at.Add(time.Minute), "answer 1")
	r1.Session.ThreadKey, r1.ThreadRoot, r1.ReplyTo = "100.000001", schema.NullString(root.ID), schema.NullString(root.ID)
	r2 := testutil.Message(schema.Slack, "C1_102_000001", at.Add(2*time.Minute), "answer 2")
	r2.Session.ThreadKey, r2.ThreadRoot, r2.ReplyTo = "100.000001", schema.NullString(root.ID), schema.NullString(root.ID)
	other := testutil.Message(schema.Slack, "C1_200_000001", at, "unrelated")
	write(t, mb, other, r2, root, r1)
	ids := func(key string) string {
		var out []string
		mb.Thread(ctx, key, func(e *mailbox.Entry) error { out = append(out, e.ID); return nil })
		return strings.Join(out, " ")
	}
	want := "slack_C1_100_000001 slack_C1_101_000001 slack_C1_102_000001"
	for _, key := range []string{"100.000001", root.ID, r2.ID} {
		if got := ids(key); got != want {
			t.Errorf("Thread(%s) = %s, want %s", key, got, want)
		}
	}
}
