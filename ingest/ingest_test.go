package ingest_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

var ctx = context.Background()

func TestMain(m *testing.M) {
	if dir := os.Getenv("COURIER_INGEST_CHILD"); dir != "" {
		child(dir)
		return
	}
	os.Exit(m.Run())
}

func setup(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := mailbox.Init(root); err != nil {
		t.Fatal(err)
	}
	return root
}

func open(t *testing.T, root string, opts *mailbox.Options) *mailbox.Mailbox {
	t.Helper()
	mb, err := mailbox.Open(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	return mb
}

func start(t *testing.T, mb *mailbox.Mailbox, opts *ingest.Options) *ingest.Pipeline {
	t.Helper()
	p := ingest.New(mb, opts)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(ctx) })
	return p
}

// inboxFiles returns the names of the message files in every inbound folder.
func inboxFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, p := range schema.Implemented {
		ents, _ := os.ReadDir(filepath.Join(root, ".monoco/mailbox/inbound", string(p)))
		for _, e := range ents {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// source is a fake adapters.Source that replays a fixed history from its
// checkpoint, like an IMAP folder replayed from a UID.
type source struct {
	msgs  []*schema.Message
	batch int
}

func (s *source) Name() string { return "fake" }

func (s *source) Run(ctx context.Context, sink adapters.Sink) error {
	from := 0
	if v, ok, err := sink.Checkpoint(ctx, "fake/pos"); err != nil {
		return err
	} else if ok {
		fmt.Sscan(v, &from)
	}
	for i := from; i < len(s.msgs); i += s.batch {
		end := min(i+s.batch, len(s.msgs))
		var evs []adapters.Event
		for j := i; j < end; j++ {
			c := *s.msgs[j] // sources hand over fresh values
			evs = append(evs, adapters.Event{Message: &c})
		}
		evs[len(evs)-1].Checkpoint = &adapters.Checkpoint{Key: "fake/pos", Value: fmt.Sprint(end)}
		if err := sink.Deliver(ctx, evs...); err != nil {
			return err
		}
	}
	return nil
}

func history(n int) []*schema.Message {
	at := testutil.Time("2026-02-06T20:00:00Z")
	out := make([]*schema.Message, n)
	for i := range out {
		out[i] = testutil.Message(schema.Lark, fmt.Sprintf("om_%04d", i), at.Add(time.Duration(i)*time.Second), fmt.Sprintf("message %d", i))
	}
	return out
}

// Exactly once across restarts and redeliveries: the source runs, the
// pipeline restarts, the checkpoint is lost and the whole history is
// redelivered; every message is in the mailbox exactly once.
func TestExactlyOnceAcrossRestarts(t *testing.T) {
	root := setup(t)
	src := &source{msgs: history(120), batch: 7}

	mb := open(t, root, nil)
	p := start(t, mb, nil)
	src.msgs = src.msgs[:50]
	if err := src.Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Stop(ctx)
	if v, _, _ := mb.Checkpoint(ctx, "fake/pos"); v != "50" {
		t.Errorf("checkpoint = %q, want 50", v)
	}

	// Restart: the source resumes from its checkpoint.
	src.msgs = history(120)
	p = start(t, mb, nil)
	if err := src.Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Redelivery of everything (a lost checkpoint, a provider replaying).
	mb.SetCheckpoints(ctx, mailbox.Checkpoint{Key: "fake/pos", Value: "0"})
	if err := src.Run(ctx, p); err != nil {
		t.Fatal(err)
	}
	files := inboxFiles(t, root)
	if len(files) != 120 {
		t.Fatalf("%d files, want 120", len(files))
	}
	st := p.Stats()[schema.Lark]
	if st.Written != 70 || st.Duplicates != 120 {
		t.Errorf("stats after restart: %+v, want 70 written and 120 duplicates", st)
	}
}

// Debounce: messages of one sender in one session merge; another sender or
// thread starts its own group; a quiet window or max_wait flushes.
func TestDebounce(t *testing.T) {
	root := setup(t)
	clock := &testutil.Clock{T: testutil.Time("2026-02-06T20:00:00Z")}
	mb := open(t, root, nil)
	p := start(t, mb, &ingest.Options{Debounce: ingest.Debounce{Window: 5 * time.Second, MaxWait: 30 * time.Second}, Now: clock.Now})
	msg := func(uid, from, text string) adapters.Event {
		m := testutil.Message(schema.Slack, uid, clock.Now(), text)
		m.Participants.From = schema.Participant{ID: from, Name: from}
		if text == "@bob look" {
			m.Participants.Mentions = []schema.Mention{{Type: schema.MentionUser, Target: "U_BOB", Name: "bob", Offset: new(int)}}
		}
		return adapters.Event{Message: m, Debounce: true}
	}
	deliver := func(evs ...adapters.Event) {
		t.Helper()
		if err := p.Deliver(ctx, evs...); err != nil {
			t.Fatal(err)
		}
	}
	deliver(msg("C1_1_000001", "U_ANN", "hello"))
	clock.Advance(2 * time.Second)
	deliver(msg("C1_3_000001", "U_ANN", "@bob look"), msg("C1_2_000001", "U_CY", "other sender"))
	p.FlushDue(ctx)
	if files := inboxFiles(t, root); len(files) != 0 {
		t.Fatalf("flushed before the window closed: %v", files)
	}
	clock.Advance(5 * time.Second) // ann's group quiet for 5 s, cy's too
	if err := p.FlushDue(ctx); err != nil {
		t.Fatal(err)
	}
	files := inboxFiles(t, root)
	if len(files) != 2 {
		t.Fatalf("files = %v, want 2 (one per sender)", files)
	}
	m, _, err := mb.Message(ctx, "slack_C1_1_000001")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Metadata.Extra.MergedIDs, ","); got != "slack_C1_1_000001,slack_C1_3_000001" {
		t.Errorf("merged_ids = %s", got)
	}
	if m.Content.Text != "hello\n@bob look" || m.Body != "hello\n\n@bob look\n" {
		t.Errorf("merged content %q body %q", m.Content.Text, m.Body)
	}
	if off := m.Participants.Mentions[0].Offset; off == nil || *off != 6 {
		t.Errorf("mention offset not shifted into the merged text: %v", off)
	}
	if seen, _ := mb.Seen(ctx, "slack_C1_3_000001"); !seen {
		t.Error("merged id is not a dedupe key")
	}
	// Redelivery of a merged message is a duplicate.
	deliver(msg("C1_3_000001", "U_ANN", "@bob look"))
	clock.Advance(time.Minute)
	p.FlushDue(ctx)
	if files := inboxFiles(t, root); len(files) != 2 {
		t.Errorf("redelivered merged message written again: %v", files)
	}

	// max_wait: a sender who never stops is flushed 30 s after the first.
	for i := 0; i < 20; i++ {
		deliver(msg(fmt.Sprintf("C1_%d_000002", 100+i), "U_DAN", fmt.Sprint("chatty ", i)))
		clock.Advance(2 * time.Second)
		p.FlushDue(ctx)
	}
	m, _, err = mb.Message(ctx, "slack_C1_100_000002")
	if err != nil {
		t.Fatalf("no flush after max_wait: %v", err)
	}
	if n := len(m.Metadata.Extra.MergedIDs); n != 15 {
		t.Errorf("first group merged %d messages, want 15 (30 s at one every 2 s)", n)
	}
	p.Stop(ctx) // flushes the rest
	if _, _, err := mb.Message(ctx, "slack_C1_115_000002"); err != nil {
		t.Errorf("Stop did not flush the open group: %v", err)
	}
}

func child(root string) {
	mb, err := mailbox.Open(root, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	p := ingest.New(mb, &ingest.Options{Debounce: ingest.Debounce{Window: time.Hour, MaxWait: time.Hour}})
	if err := p.Start(context.Background()); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	for _, ev := range crashEvents() {
		if err := p.Deliver(context.Background(), ev); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
	}
	fmt.Println("STAGED")
	select {} // wait to be killed
}

func crashEvents() []adapters.Event {
	var evs []adapters.Event
	at := testutil.Time("2026-02-06T20:00:00Z")
	for i := 0; i < 3; i++ {
		m := testutil.Message(schema.Lark, fmt.Sprintf("om_crash_%d", i), at.Add(time.Duration(i)*time.Second), fmt.Sprint("part ", i))
		evs = append(evs, adapters.Event{Message: m, Debounce: true, Checkpoint: &adapters.Checkpoint{Key: "lark/ws", Value: fmt.Sprint(i + 1)}})
	}
	return evs
}

// A process killed (SIGKILL) after it acknowledged debounced messages and
// before it flushed them: after a restart the messages are delivered exactly
// once, and a redelivery by the source adds nothing.
func TestDebounceSurvivesKill(t *testing.T) {
	root := setup(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "COURIER_INGEST_CHILD="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "STAGED" {
		cmd.Process.Kill()
		t.Fatalf("child said %q", line)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if files := inboxFiles(t, root); len(files) != 0 {
		t.Fatalf("files before restart: %v", files)
	}

	mb := open(t, root, nil)
	if v, _, _ := mb.Checkpoint(ctx, "lark/ws"); v != "3" {
		t.Errorf("checkpoint = %q: the staged messages were acknowledged, so it must be 3", v)
	}
	p := start(t, mb, &ingest.Options{Debounce: ingest.Debounce{Window: time.Hour, MaxWait: time.Hour}})
	files := inboxFiles(t, root)
	if len(files) != 1 {
		t.Fatalf("files after restart = %v, want the one merged message", files)
	}
	m, _, err := mb.Message(ctx, "lark_om_crash_0")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Metadata.Extra.MergedIDs) != 3 || m.Content.Text != "part 0\npart 1\npart 2" {
		t.Errorf("merged = %v %q", m.Metadata.Extra.MergedIDs, m.Content.Text)
	}
	if err := p.Deliver(ctx, crashEvents()...); err != nil {
		t.Fatal(err)
	}
	p.Stop(ctx)
	if files := inboxFiles(t, root); len(files) != 1 {
		t.Errorf("redelivery after restart wrote more: %v", files)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, ".monoco/mailbox/.tmp/debounce")); len(ents) != 0 {
		t.Errorf("staging not cleaned: %d groups left", len(ents))
	}
}

// Correlation ids are inherited from the message answered, including one
// Courier sent; edits and recalls are new records that inherit too; the
// original file is never touched.
func TestEnrichment(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, &ingest.Options{Self: map[schema.Provider][]string{schema.Lark: {"ou_bot"}}})
	at := testutil.Time("2026-02-06T20:00:00Z")

	parent := testutil.Message(schema.Lark, "om_parent", at, "bug report")
	parent.CorrelationID = "bug_42"
	if err := p.Deliver(ctx, adapters.Event{Message: parent}); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(at, parent.ID)))

	reply := testutil.Message(schema.Lark, "om_reply", at.Add(time.Minute), "more details")
	reply.ReplyTo, reply.ThreadRoot, reply.Session.ThreadKey = "lark_om_parent", "lark_om_parent", "om_parent"
	edit := testutil.Message(schema.Lark, "om_parent_edit_1", at.Add(2*time.Minute), "bug report (edited)")
	edit.Metadata.Extra.Edits = "lark_om_parent"
	recall := testutil.Message(schema.Lark, "om_parent_recall", at.Add(3*time.Minute), "")
	recall.Metadata.Extra.Recalls = "lark_om_parent"
	recall.Content.Text, recall.Body = "", "(message recalled)\n"
	// A reply, in the same batch, to the reply: found in the batch.
	reply2 := testutil.Message(schema.Lark, "om_reply2", at.Add(4*time.Minute), "and more")
	reply2.ReplyTo = "lark_om_reply"
	echo := testutil.Message(schema.Lark, "om_echo", at, "I am the bot")
	echo.Participants.From = schema.Participant{ID: "ou_bot", Name: "Bot"}
	selfEv := testutil.Message(schema.Lark, "om_self", at, "also the bot")
	if err := p.Deliver(ctx, adapters.Event{Message: reply}, adapters.Event{Message: edit}, adapters.Event{Message: recall},
		adapters.Event{Message: reply2}, adapters.Event{Message: echo}, adapters.Event{Message: selfEv, Self: true}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"lark_om_reply", "lark_om_parent_edit_1", "lark_om_parent_recall", "lark_om_reply2"} {
		m, _, err := mb.Message(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.CorrelationID != "bug_42" {
			t.Errorf("%s: correlation_id = %q, want bug_42", id, m.CorrelationID)
		}
	}
	for _, id := range []string{"lark_om_echo", "lark_om_self"} {
		if _, err := mb.Get(ctx, id); err == nil {
			t.Errorf("%s: the bot's own message was ingested", id)
		}
	}
	now, _ := os.ReadFile(filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(at, parent.ID)))
	if string(now) != string(orig) {
		t.Error("an edit or recall rewrote the original file")
	}

	// A reply to a message Courier sent inherits the draft's correlation id.
	d := &schema.Draft{ID: "lark_out_00000000000000000000000000000001", Provider: schema.Lark, To: schema.Recipients{"oc_1"},
		CorrelationID: "task_9", CreatedAt: schema.TimePtr(at), Body: "done?\n", InboundID: "lark_om_sent1", // from the receipt
		Delivery: &schema.Delivery{Status: schema.DeliverySent, Attempts: 1, SentAt: schema.TimePtr(at), ProviderMessageID: "om_sent1"}}
	if _, err := mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	answer := testutil.Message(schema.Lark, "om_answer", at.Add(time.Hour), "yes")
	answer.ReplyTo = "lark_om_sent1"
	if err := p.Deliver(ctx, adapters.Event{Message: answer}); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := mb.Message(ctx, "lark_om_answer"); m == nil || m.CorrelationID != "task_9" {
		t.Errorf("answer to our message: %+v", m)
	}
}

// Email threads whose References are missing or start mid-thread are joined
// to the thread of a parent the mailbox knows.
func TestEmailReroot(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	top := testutil.Message(schema.Email, "0000000000000000000a", at, "top")
	top.Session = schema.Session{ID: "email-thread:a@x", Type: schema.Thread, ThreadKey: "email-thread:a@x"}
	mid := testutil.Message(schema.Email, "0000000000000000000b", at.Add(time.Minute), "reply")
	mid.Session = schema.Session{ID: "email-thread:a@x", Type: schema.Thread, ThreadKey: "email-thread:a@x"}
	mid.ReplyTo, mid.ThreadRoot = "email_0000000000000000000a", "email_0000000000000000000a"
	// In-Reply-To only: seed 003 keys it by its parent, b.
	deep := testutil.Message(schema.Email, "0000000000000000000c", at.Add(2*time.Minute), "deeper")
	deep.Session = schema.Session{ID: "email-thread:b@x", Type: schema.Thread, ThreadKey: "email-thread:b@x"}
	deep.ReplyTo, deep.ThreadRoot = "email_0000000000000000000b", "email_0000000000000000000b"
	// Parent unknown: keeps what the headers say.
	orphan := testutil.Message(schema.Email, "0000000000000000000d", at.Add(3*time.Minute), "orphan")
	orphan.Session = schema.Session{ID: "email-thread:z@x", Type: schema.Thread, ThreadKey: "email-thread:z@x"}
	orphan.ReplyTo, orphan.ThreadRoot = "email_0000000000000000000z", "email_0000000000000000000z"
	// The email adapter asks for this (Event.JoinKnownThread).
	join := func(m *schema.Message) adapters.Event { return adapters.Event{Message: m, JoinKnownThread: true} }
	if err := p.Deliver(ctx, join(top), join(mid)); err != nil {
		t.Fatal(err)
	}
	if err := p.Deliver(ctx, join(deep), join(orphan)); err != nil {
		t.Fatal(err)
	}
	m, _, _ := mb.Message(ctx, "email_0000000000000000000c")
	if m.Session.ThreadKey != "email-thread:a@x" || m.ThreadRoot != "email_0000000000000000000a" {
		t.Errorf("deep reply: key %q root %q, want the top's thread", m.Session.ThreadKey, m.ThreadRoot)
	}
	if m.Metadata.Extra.Other["thread_key_from_headers"] != "email-thread:b@x" {
		t.Errorf("the key the headers gave is not recorded: %v", m.Metadata.Extra.Other)
	}
	o, _, _ := mb.Message(ctx, "email_0000000000000000000d")
	if o.Session.ThreadKey != "email-thread:z@x" {
		t.Errorf("orphan rerooted to %q", o.Session.ThreadKey)
	}
	// A provider that does not ask keeps its own thread key, though its
	// parent is known and in another thread (a chat reply whose parent
	// is a channel message: moving it would take it out of its thread).
	own := testutil.Message(schema.Email, "0000000000000000000e", at.Add(4*time.Minute), "own")
	own.Session = schema.Session{ID: "email-thread:e@x", Type: schema.Thread, ThreadKey: "email-thread:e@x"}
	own.ReplyTo, own.ThreadRoot = "email_0000000000000000000a", "email_0000000000000000000a"
	if err := p.Deliver(ctx, adapters.Event{Message: own}); err != nil {
		t.Fatal(err)
	}
	if e, _, _ := mb.Message(ctx, own.ID); e.Session.ThreadKey != "email-thread:e@x" {
		t.Errorf("a message whose provider did not ask joined the thread %q", e.Session.ThreadKey)
	}
}

// Many concurrent small deliveries are written in fewer rounds (group
// commit), each exactly once.
func TestGroupCommit(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	msgs := history(200)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := i; j < len(msgs); j += 50 {
				for k := 0; k < 2; k++ { // and each twice
					c := *msgs[j]
					if err := p.Deliver(ctx, adapters.Event{Message: &c}); err != nil {
						t.Error(err)
					}
				}
			}
		}(i)
	}
	wg.Wait()
	if n := len(inboxFiles(t, root)); n != 200 {
		t.Fatalf("%d files, want 200", n)
	}
	st := p.Stats()[schema.Lark]
	if st.Written != 200 || st.Duplicates != 200 {
		t.Errorf("stats %+v", st)
	}
	if st.Batches >= 200 {
		t.Errorf("%d write rounds for 400 deliveries: no group commit", st.Batches)
	}
	t.Logf("400 deliveries in %d rounds", st.Batches)
}

// A chat reply names its thread, not the message it answers
// (Event.ThreadCorrelation): one in a thread where the agent posted for a
// task inherits the task's correlation id, the latest one of that session's
// thread; the same thread key in another session, or a message without
// the flag, inherits nothing.
func TestThreadCorrelation(t *testing.T) {
	root := setup(t)
	mb := open(t, root, nil)
	p := start(t, mb, nil)
	at := testutil.Time("2026-02-06T20:00:00Z")
	inThread := func(id, session string, when time.Time) *schema.Message {
		m := testutil.Message(schema.Slack, id, when, "in the thread")
		m.Session.ID, m.Session.ThreadKey = session, "1700000001.000100"
		m.ReplyTo, m.ThreadRoot = "slack_C1_1700000001_000100", "slack_C1_1700000001_000100"
		return m
	}
	root0 := testutil.Message(schema.Slack, "C1_1700000001_000100", at, "deploy failed")
	root0.Session.ID = "C1"
	if err := p.Deliver(ctx, adapters.Event{Message: root0}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"task_1", "task_2"} {
		d := &schema.Draft{ID: fmt.Sprintf("slack_out_%032d", i), Provider: schema.Slack, To: schema.Recipients{"C1"},
			ReplyTo: "slack_C1_1700000001_000100", ThreadKey: "1700000001.000100", CorrelationID: schema.NullString(c),
			CreatedAt: schema.TimePtr(at.Add(time.Duration(i+1) * time.Minute)), Body: "on it\n"}
		if _, err := mb.Queue(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	ann := inThread("C1_1700000009_000200", "C1", at.Add(time.Hour))
	other := inThread("C2_1700000009_000300", "C2", at.Add(time.Hour))
	plain := inThread("C1_1700000009_000400", "C1", at.Add(time.Hour))
	if err := p.Deliver(ctx, adapters.Event{Message: ann, ThreadCorrelation: true}, adapters.Event{Message: other, ThreadCorrelation: true},
		adapters.Event{Message: plain}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"slack_C1_1700000009_000200": "task_2", "slack_C2_1700000009_000300": "", "slack_C1_1700000009_000400": ""} {
		m, _, err := mb.Message(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.CorrelationID) != want {
			t.Errorf("%s: correlation_id %q, want %q", id, m.CorrelationID, want)
		}
	}
}
