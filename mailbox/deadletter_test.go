package mailbox_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// A raw dead letter is its payload and a .reason beside it in
// .deadletter/<provider>/, under a name of its time and hash, written
// read-only; it is journalled as a dead event whose id reads it back; the
// same payload again is the same file, and neither journalled nor counted
// twice. What agents failed for good sits beside it and stays a message:
// reindex, Count and list do not take a raw dead letter for one.
func TestDeadLetterPut(t *testing.T) {
	clock := &testutil.Clock{T: testutil.Time("2026-03-01T10:00:00Z")}
	mb, root := newMailbox(t, clock)
	m := testutil.Message(schema.Slack, "C1_1700000000_000100", testutil.Time("2026-02-28T00:00:00Z"), "failed by an agent")
	write(t, mb, m)
	mb.Claim(ctx, m.ID, "alice", 0)
	if _, err := mb.Fail(ctx, m.ID, "alice", "cannot", false); err != nil {
		t.Fatal(err)
	}
	last, _, _ := mb.LastEvent(ctx)

	dl := mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{})
	payload := []byte(`{"type":"event_callback","event":{"type":"message","text":"no ts"}}`)
	r := mailbox.RawDeadLetter{Provider: schema.Slack, Source: "slack events api, event Ev1", Reason: "slack: a message event\nwithout a ts", Payload: payload}
	rel, kept, err := dl.Put(ctx, r)
	if err != nil || !kept {
		t.Fatalf("%q %v %v", rel, kept, err)
	}
	if !regexp.MustCompile(`^\.monoco/mailbox/\.deadletter/slack/20260301T100000_raw_[0-9a-f]{16}\.json$`).MatchString(rel) {
		t.Errorf("path %q", rel)
	}
	got, _ := os.ReadFile(filepath.Join(root, rel))
	note, _ := os.ReadFile(filepath.Join(root, rel+".reason"))
	if string(got) != string(payload) {
		t.Errorf("payload %q", got)
	}
	if want := "slack: a message event without a ts\nset aside by courier at 2026-03-01T10:00:00Z from slack events api, event Ev1\n"; string(note) != want {
		t.Errorf("reason %q, want %q", note, want)
	}
	if fi, err := os.Stat(filepath.Join(root, rel)); err != nil || fi.Mode().Perm()&0o222 != 0 {
		t.Errorf("mode %v %v: want read-only", fi.Mode(), err)
	}
	evs, _ := mb.Events(ctx, last, 10)
	if len(evs) != 1 || evs[0].Kind != mailbox.EventDead || !mailbox.IsDeadLetterID(evs[0].ID) {
		t.Fatalf("journal %+v", evs)
	}
	info, err := mb.DeadLetter(evs[0].ID)
	if err != nil || info.Path != rel || info.Provider != schema.Slack || info.Reason != "slack: a message event without a ts" ||
		info.Source != "slack events api, event Ev1" || !info.At.Equal(clock.Now()) || info.Size != int64(len(payload)) {
		t.Errorf("%+v %v", info, err)
	}

	// A redelivery an hour later: the file it has, not counted again.
	clock.Advance(time.Hour)
	rel2, kept, err := dl.Put(ctx, r)
	if err != nil || !kept || rel2 != rel {
		t.Errorf("again: %q %v %v", rel2, kept, err)
	}
	if evs, _ := mb.Events(ctx, last, 10); len(evs) != 1 {
		t.Errorf("journalled twice: %+v", evs)
	}
	if st := dl.Stats()[schema.Slack]; st.SetAside != 1 || st.Kept != 1 || st.KeptBytes != int64(len(payload)) || st.Refused != 0 {
		t.Errorf("stats %+v", st)
	}

	// Beside the message failed for good, which stays one.
	if n := len(files(t, filepath.Join(root, ".monoco/mailbox/.deadletter/slack"))); n != 3 {
		t.Errorf("%d files in .deadletter/slack", n)
	}
	if rep, err := mb.Reindex(ctx); err != nil || len(rep.Invalid) != 0 || rep.Files != 1 {
		t.Errorf("reindex %+v %v", rep, err)
	}
	if counts, _ := mb.Count(ctx); counts[mailbox.StatusDead] != 1 {
		t.Errorf("dead %d, want 1 (the message failed)", counts[mailbox.StatusDead])
	}

	for _, bad := range []string{"slack_C1_1", ".deadletter/slack/x.json", ".deadletter/nope/20260301T100000_raw_0123456789abcdef.json", ".deadletter/slack/../../x"} {
		if _, err := mb.DeadLetter(bad); err == nil {
			t.Errorf("%q read as a dead letter", bad)
		}
	}
	if _, _, err := dl.Put(ctx, mailbox.RawDeadLetter{Provider: "nope", Payload: payload}); err == nil {
		t.Error("a dead letter of no provider kept")
	}
}

// Dead letters are bounded per provider, by count and by bytes: beyond,
// they are refused and counted; another provider has its own bounds; a
// letter removed by hand makes room once the folder is read again; what
// is in the folder at start counts.
func TestDeadLetterBounds(t *testing.T) {
	clock := &testutil.Clock{T: testutil.Time("2026-03-01T10:00:00Z")}
	mb, root := newMailbox(t, clock)
	dl := mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{MaxFiles: 3, MaxBytes: 100})
	put := func(p schema.Provider, payload string) (string, bool) {
		t.Helper()
		rel, kept, err := dl.Put(ctx, mailbox.RawDeadLetter{Provider: p, Reason: "bad", Source: "test", Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		return rel, kept
	}
	var first string
	for i := range 5 {
		rel, kept := put(schema.Lark, strings.Repeat("x", 10)+string(rune('a'+i)))
		if kept != (i < 3) {
			t.Errorf("letter %d kept %v", i, kept)
		}
		if i == 0 {
			first = rel
		}
	}
	if _, kept := put(schema.Lark, strings.Repeat("y", 200)); kept {
		t.Error("a letter over max_bytes kept")
	}
	if _, kept := put(schema.Slack, "other provider"); !kept {
		t.Error("slack refused for lark's bound")
	}
	if st := dl.Stats()[schema.Lark]; st.Kept != 3 || st.SetAside != 3 || st.Refused != 3 {
		t.Errorf("lark %+v", st)
	}
	if n := len(files(t, filepath.Join(root, ".monoco/mailbox/.deadletter/lark"))); n != 6 {
		t.Errorf("%d files, want 3 letters and their reasons", n)
	}
	// Removed by hand: room again once the folder is read again (at
	// most once a minute).
	os.Remove(filepath.Join(root, first))
	if _, kept := put(schema.Lark, "after removal"); kept {
		t.Error("kept before the folder was read again")
	}
	clock.Advance(2 * time.Minute)
	if _, kept := put(schema.Lark, "after removal"); !kept {
		t.Error("refused after a letter was removed and a minute passed")
	}
	// A new service counts what the folder holds.
	dl2 := mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{MaxFiles: 3, MaxBytes: 100})
	if st := dl2.Stats(schema.Lark)[schema.Lark]; st.Kept != 3 || st.SetAside != 0 {
		t.Errorf("after a restart %+v", st)
	}
	if _, kept, _ := dl2.Put(ctx, mailbox.RawDeadLetter{Provider: schema.Lark, Payload: []byte("one more")}); kept {
		t.Error("kept beyond the bound after a restart")
	}
}
