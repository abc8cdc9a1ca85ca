package outbound_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
)

// secretDraft is a secret file shaped so that a parse error would quote
// it, as the .reason file and the log once did.
const secretDraft = "---\nprovider: lark\nto: [oc_1\nsubject: SECRET-hunter2\n---\nSECRET-hunter2\n"

// Attack: a link planted in outbound/lark/ under a draft's name, pointing
// at a secret file. Before, the engine read the target and copied what its
// parse error quoted into a world-readable .reason file and the log. Now
// the link is set aside as it is, unread: the reason names the path and
// says it is a link, the log says no more, and the .reason is not
// readable by others.
func TestLinkedDraftSetAsideUnread(t *testing.T) {
	e := setup(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(secretDraft), 0o600)
	name := "20260101T000000_lark_out_linked.md"
	link := filepath.Join(e.root, ".monoco/mailbox/outbound/lark", name)
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	var log testutil.Buffer
	rec := newRecorder(nil)
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec},
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	dead := filepath.Join(e.root, ".monoco/mailbox/.deadletter/lark", name)
	testutil.WaitFor(t, 10*time.Second, "the link set aside", func() bool {
		fi, err := os.Lstat(dead)
		return err == nil && fi.Mode()&os.ModeSymlink != 0
	})
	note, err := os.ReadFile(dead + ".reason")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(note), "SECRET") || !strings.Contains(string(note), "a symbolic link") {
		t.Errorf(".reason = %q; want the link named, nothing of its target", note)
	}
	if fi, _ := os.Stat(dead + ".reason"); fi.Mode().Perm()&0o007 != 0 {
		t.Errorf(".reason mode %v is readable by others", fi.Mode().Perm())
	}
	testutil.WaitFor(t, 10*time.Second, "the set-aside logged", func() bool { return strings.Contains(log.String(), "set a file aside") })
	if strings.Contains(log.String(), "SECRET") {
		t.Errorf("the log quotes the link's target:\n%s", log.String())
	}
	if b, _ := os.ReadFile(secret); string(b) != secretDraft {
		t.Error("the target was changed")
	}
}

// Attack: a draft queued by `courier send` is replaced by a link before
// it is sent. The engine refuses to read it, sets it aside unread and
// never hands it to the sender, nor retries it.
func TestQueuedDraftReplacedByLink(t *testing.T) {
	e := setup(t)
	d := e.queue(t, schema.Lark)
	ent, _ := e.mb.Get(ctx, d.ID)
	path := filepath.Join(e.root, ent.Path)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(secretDraft), 0o600)
	os.Remove(path)
	os.Symlink(secret, path)
	good := e.queue(t, schema.Lark)
	var log testutil.Buffer
	rec := newRecorder(nil)
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec},
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	testutil.WaitFor(t, 10*time.Second, "good sent", func() bool { return e.status(t, good.ID) == mailbox.StatusSent })
	dead := filepath.Join(e.root, ".monoco/mailbox/.deadletter/lark", filepath.Base(path))
	testutil.WaitFor(t, 10*time.Second, "the link set aside", func() bool { _, err := os.Lstat(dead); return err == nil })
	note, _ := os.ReadFile(dead + ".reason")
	if strings.Contains(string(note), "SECRET") || !strings.Contains(string(note), "a symbolic link") {
		t.Errorf(".reason = %q", note)
	}
	if strings.Contains(log.String(), "SECRET") {
		t.Errorf("the log quotes the link's target:\n%s", log.String())
	}
	if n := len(rec.callsFor(d.ID)); n != 0 {
		t.Errorf("the linked draft was handed to the sender %d time(s)", n)
	}
	// The file is moved first and then dropped from the index: wait for
	// the second step, which a draft that would be retried never takes.
	testutil.WaitFor(t, 10*time.Second, "the set-aside draft to leave the index (else it would be retried)", func() bool {
		_, err := e.mb.Get(ctx, d.ID)
		return err != nil
	})
}
