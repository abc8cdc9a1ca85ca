package email

import (
	"errors"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/threading"
)

// want451 fails t unless err is the 451 an MTA retries on.
func want451(t *testing.T, err error) {
	t.Helper()
	var te *textproto.Error
	if !errors.As(err, &te) || te.Code != 451 {
		t.Fatalf("end of DATA = %v, want 451 (try again later), never a 250 for a message not written", err)
	}
}

// Attack: inbound/email is replaced by a link to a folder outside the
// workspace. Before, the receiver wrote the mail there and answered 250.
// Now it writes nothing outside and answers 451, so the MTA keeps the mail
// and retries; once the folder is back the retry is written.
func TestReceiverInboundFolderLinkedOut(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{})
	outside := t.TempDir()
	if err := os.Remove(ws.dir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, ws.dir()); err != nil {
		t.Fatal(err)
	}
	want451(t, sendSMTP(t, r.Addr(), receiverMail))
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("mail written outside the workspace: %v", ents)
	}
	if h := r.Health(); !strings.Contains(h.LastError, "inbound/email is a symbolic link") {
		t.Errorf("health last error = %q, want the link named", h.LastError)
	}
	os.Remove(ws.dir())
	os.Mkdir(ws.dir(), 0o750)
	if err := sendSMTP(t, r.Addr(), receiverMail); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files after the retry, want 1", n)
	}
}

// Attack: a link planted at the name the next mail will take (its Date in
// UTC and the hash of its Message-ID, both chosen by the sender). Before,
// EEXIST counted as "already written": 250, and the mail was dropped. Now
// the file in the way is compared: a link is not the message, so 451, the
// link and its target are left alone, and the retry after the link is
// gone is written.
func TestReceiverLinkAtNextFileName(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{})
	name := mailbox.FileName(testutil.Time("2026-02-06T17:31:15Z"), threading.EmailID("<receiver-1@example.com>"))
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte("not the mail\n"), 0o600)
	link := filepath.Join(ws.dir(), name)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	want451(t, sendSMTP(t, r.Addr(), receiverMail))
	if b, _ := os.ReadFile(target); string(b) != "not the mail\n" {
		t.Errorf("the link's target changed: %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was not left alone: %v", err)
	}
	os.Remove(link)
	if err := sendSMTP(t, r.Addr(), receiverMail); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	data, err := os.ReadFile(link)
	if err != nil || !strings.Contains(string(data), "two leading dots") {
		t.Errorf("after the retry %s = %q, %v; want the mail", name, data, err)
	}
}
