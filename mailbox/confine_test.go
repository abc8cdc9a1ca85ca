package mailbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Attack: inbound/lark is replaced by a link to a folder outside the
// workspace. Before, the message was written there. Now the write fails
// (the source retries), nothing lands outside, no checkpoint moves, and
// once the folder is back the same delivery is written.
func TestInboundFolderLinkedOut(t *testing.T) {
	mb, root := newMailbox(t, nil)
	outside := t.TempDir()
	dir := filepath.Join(root, ".monoco/mailbox/inbound/lark")
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	m := testutil.Message(schema.Lark, "om_out", testutil.Time("2026-04-01T08:00:00Z"), "secret plans")
	_, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: m}}, []mailbox.Checkpoint{{Key: "src", Value: "7"}})
	var ue *mailbox.UnsafePathError
	if !errors.As(err, &ue) || !errors.Is(err, mailbox.ErrUnsafePath) || ue.Path != ".monoco/mailbox/inbound/lark" || ue.What != "a symbolic link" {
		t.Fatalf("err = %v, want an UnsafePathError naming .monoco/mailbox/inbound/lark as a symbolic link", err)
	}
	if got := files(t, outside); len(got) != 0 {
		t.Errorf("written outside the workspace: %v", got)
	}
	if _, ok, _ := mb.Checkpoint(ctx, "src"); ok {
		t.Error("the checkpoint moved although the message was not written")
	}
	if got := files(t, filepath.Join(root, ".monoco/mailbox/.tmp")); len(got) != 0 {
		t.Errorf(".tmp not empty: %v", got)
	}
	// The operator puts the folder back: the redelivery is written.
	os.Remove(dir)
	os.Mkdir(dir, 0o750)
	if w := write(t, mb, m); !w[0] {
		t.Error("the redelivery was not written")
	}
	if got := files(t, dir); len(got) != 1 {
		t.Errorf("files = %v, want the message", got)
	}
}

// Attack: a link planted at the predictable name of the next message (its
// time and its id, both in the mail). Before, EEXIST counted as written:
// the source was told the message was durable while it was dropped. Now
// the file in the way is looked at: not the message, so the write fails
// and nothing is lost; the link and its target are untouched.
func TestLinkAtNextFileName(t *testing.T) {
	mb, root := newMailbox(t, nil)
	m := testutil.Message(schema.Lark, "om_next", testutil.Time("2026-04-01T09:00:00Z"), "the real message")
	dir := filepath.Join(root, ".monoco/mailbox/inbound/lark")
	name := mailbox.FileName(m.Timestamp.Time, m.ID)
	target := filepath.Join(t.TempDir(), "target")
	os.WriteFile(target, []byte("attacker's bytes\n"), 0o600)
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	_, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: m}}, []mailbox.Checkpoint{{Key: "src", Value: "1"}})
	var ue *mailbox.UnsafePathError
	if !errors.As(err, &ue) || !ue.Write || ue.What != "a symbolic link" || !strings.Contains(err.Error(), name) {
		t.Fatalf("err = %v, want an UnsafePathError: a symbolic link in the way of %s", err, name)
	}
	if _, err := mb.Get(ctx, m.ID); !errors.Is(err, mailbox.ErrNotFound) {
		t.Errorf("the message is indexed although it was not written (%v)", err)
	}
	if _, ok, _ := mb.Checkpoint(ctx, "src"); ok {
		t.Error("the checkpoint moved")
	}
	if b, _ := os.ReadFile(target); string(b) != "attacker's bytes\n" {
		t.Errorf("the link's target changed: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was not left alone: %v %v", fi, err)
	}
	// Cleared, the next delivery writes it.
	os.Remove(filepath.Join(dir, name))
	if w := write(t, mb, m); !w[0] {
		t.Fatal("not written once the way is clear")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, name)); !strings.Contains(string(b), "the real message") {
		t.Errorf("file = %q", b)
	}
}

// On EEXIST the content decides: the same bytes, or the same message
// normalised again (a redelivery after a crash; received_at differs), are
// a duplicate; another message, or a file that is no message, is in the
// way and fails the write.
func TestExistingNameComparedByContent(t *testing.T) {
	at := testutil.Time("2026-04-01T10:00:00Z")
	m := testutil.Message(schema.Lark, "om_cmp", at, "body")
	data, _ := schema.Encode(m)
	again := testutil.Message(schema.Lark, "om_cmp", at, "body")
	again.ReceivedAt = schema.NewTime(at.Add(time.Hour))
	other := testutil.Message(schema.Lark, "om_other", at, "another message")
	otherData, _ := schema.Encode(other)
	for _, tc := range []struct {
		name      string
		existing  []byte
		duplicate bool
	}{
		{"same bytes", data, true},
		{"same message, received again", data, true},
		{"another message", otherData, false},
		{"not a message", []byte("junk\n"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mb, root := newMailbox(t, nil)
			path := filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(at, m.ID))
			os.WriteFile(path, tc.existing, 0o440)
			msg := m
			if tc.name == "same message, received again" {
				msg = again
			}
			w, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: msg}}, nil)
			if tc.duplicate {
				if err != nil || !w[0] {
					t.Fatalf("written = %v, %v; want the file taken for the message", w, err)
				}
				if _, err := mb.Get(ctx, m.ID); err != nil {
					t.Errorf("not indexed: %v", err)
				}
			} else if !errors.Is(err, mailbox.ErrUnsafePath) || !strings.Contains(err.Error(), "a different file") {
				t.Fatalf("err = %v, want the different file reported in the way", err)
			}
			if b, _ := os.ReadFile(path); string(b) != string(tc.existing) {
				t.Error("the existing file was changed")
			}
		})
	}
}

// Attack: the file of a message is replaced by a link to a secret (`read
// --raw` printed the link's target). ReadFile refuses it unread; a FIFO
// in its place is refused without blocking.
func TestReadFileRefusesLinks(t *testing.T) {
	mb, root := newMailbox(t, nil)
	m := testutil.Message(schema.Lark, "om_read", testutil.Time("2026-04-01T11:00:00Z"), "hello")
	write(t, mb, m)
	path := filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(m.Timestamp.Time, m.ID))
	secret := filepath.Join(t.TempDir(), "id_rsa")
	os.WriteFile(secret, []byte("-----BEGIN PRIVATE KEY-----\n"), 0o600)
	os.Remove(path)
	os.Symlink(secret, path)
	b, _, err := mb.ReadFile(ctx, m.ID)
	if !errors.Is(err, mailbox.ErrUnsafePath) || strings.Contains(string(b), "PRIVATE") || !strings.Contains(err.Error(), "a symbolic link") {
		t.Fatalf("ReadFile = %q, %v; want it refused as a symbolic link", b, err)
	}
	if _, _, err := mb.Message(ctx, m.ID); !errors.Is(err, mailbox.ErrUnsafePath) {
		t.Errorf("Message: err = %v", err)
	}
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, _, err := mb.ReadFile(ctx, m.ID); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, mailbox.ErrUnsafePath) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO: err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile blocked on a FIFO")
	}
}

// A link in a box, where a message file or a provider folder should be, is
// reported by reindex and not followed.
func TestReindexSkipsLinks(t *testing.T) {
	mb, root := newMailbox(t, nil)
	outside := t.TempDir()
	m := testutil.Message(schema.Lark, "om_elsewhere", testutil.Time("2026-04-01T12:00:00Z"), "planted")
	data, _ := schema.Encode(m)
	target := filepath.Join(outside, "msg.md")
	os.WriteFile(target, data, 0o600)
	os.Symlink(target, filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(m.Timestamp.Time, m.ID)))
	os.Symlink(outside, filepath.Join(root, ".monoco/mailbox/archive/discord"))
	st, err := mb.Reindex(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(st.Invalid, "\n")
	if st.Indexed != 0 || !strings.Contains(joined, "a symbolic link") || !strings.Contains(joined, "archive/discord") {
		t.Errorf("indexed %d, invalid %q; want the links reported and nothing indexed", st.Indexed, st.Invalid)
	}
	if _, err := mb.Get(ctx, m.ID); !errors.Is(err, mailbox.ErrNotFound) {
		t.Errorf("the linked file was indexed (%v)", err)
	}
}

// Modes do not depend on the umask of whoever runs Courier: with umask
// 022, folders are 0750, files 0440 and the state database 0640, so
// nothing is readable by others.
func TestModesUnderUmask022(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	mb, root := newMailbox(t, nil)
	write(t, mb, testutil.Message(schema.Lark, "om_mode", testutil.Time("2026-04-01T13:00:00Z"), "x"))
	// A write in the database makes the WAL and its index.
	if err := mb.SetCheckpoints(ctx, mailbox.Checkpoint{Key: "k", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		".monoco":                               0o750,
		".monoco/mailbox":                       0o750,
		".monoco/mailbox/inbound/lark":          0o750,
		".monoco/mailbox/.deadletter/email":     0o750,
		".monoco/mailbox/.tmp":                  0o750,
		".monoco/mailbox/.state":                0o750,
		".monoco/dropzone":                      0o750,
		".monoco/config":                        0o750,
		".monoco/mailbox/.state/courier.db":     0o640,
		".monoco/mailbox/.state/courier.db-wal": 0o640,
		".monoco/mailbox/.state/courier.db-shm": 0o640,
		".monoco/mailbox/inbound/lark/20260401T130000_lark_om_mode.md": 0o440,
	}
	for p, mode := range want {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), mode)
		}
	}
}

// A database left readable by others by an earlier version loses those
// bits when the mailbox is opened by its owner.
func TestOpenTightensDatabaseMode(t *testing.T) {
	mb, root := newMailbox(t, nil)
	mb.Close()
	db := filepath.Join(root, ".monoco/mailbox/.state/courier.db")
	os.Chmod(db, 0o644)
	mb2, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb2.Close()
	if fi, _ := os.Stat(db); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640", fi.Mode().Perm())
	}
}

// The state database replaced by a link: Open refuses it, instead of
// letting SQLite write wherever it points.
func TestOpenRefusesLinkedDatabase(t *testing.T) {
	mb, root := newMailbox(t, nil)
	mb.Close()
	db := filepath.Join(root, ".monoco/mailbox/.state/courier.db")
	elsewhere := filepath.Join(t.TempDir(), "courier.db")
	os.Rename(db, elsewhere)
	os.Symlink(elsewhere, db)
	if _, err := mailbox.Open(root, nil); !errors.Is(err, mailbox.ErrUnsafePath) {
		t.Errorf("Open: err = %v, want ErrUnsafePath", err)
	}
}
