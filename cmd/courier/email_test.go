package main

import (
	"bytes"
	"context"
	"fmt"
	"net/mail"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
)

func rawMail(i int) []byte {
	return []byte(fmt.Sprintf("From: Ann <ann@example.com>\r\nTo: agent@corp.example\r\nSubject: note %d\r\nMessage-ID: <note-%d@example.com>\r\nDate: Fri, 06 Feb 2026 10:%02d:00 +0000\r\n\r\nbody %d\r\n", i, i, i%60, i))
}

// courier fetch: one pass of every account against a real Dovecot, then
// exit; a second pass finds nothing new.
func TestFetch(t *testing.T) {
	d := testutil.StartDovecot(t)
	d.DeliverMany(t, "INBOX", rawMail, 40)
	ws := newWorkspace(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          imap: {host: %s, port: %d, tls: none, username: %s, password: %s}
`, d.Host, d.Port, d.User, d.Password))
	out, e, code := cli(t, ws, "", "fetch")
	if code != 0 || !strings.Contains(out, "fetched 40 new message(s)") {
		t.Fatalf("fetch: %d %s %s", code, out, e)
	}
	if ids := countIDs(t, ws); len(ids) != 40 {
		t.Errorf("%d messages listed, want 40", len(ids))
	}
	if strings.Contains(e, "messages (") {
		t.Errorf("backfill progress printed into a pipe: %q", e)
	}
	out, _, _ = cli(t, ws, "", "fetch")
	if !strings.Contains(out, "fetched 0 new message(s)") {
		t.Errorf("second fetch: %s", out)
	}
	// Nothing changed on the server: no message was marked seen.
	if flags := d.Doveadm(t, "fetch", "-u", d.User, "flags", "mailbox", "INBOX", "all"); strings.Contains(flags, "Seen") {
		t.Errorf("fetch changed flags on the server:\n%s", flags)
	}
}

// A reply sent over SMTP with append_sent is copied to the IMAP Sent
// folder, and when the source syncs that folder the copy is recognised as
// Courier's own and not ingested.
func TestSentCopyNotIngested(t *testing.T) {
	d := testutil.StartDovecot(t)
	sink := testutil.StartSMTPSink(t, nil)
	d.CreateFolder(t, "Sent")
	d.Deliver(t, "INBOX", rawMail(1))
	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          imap: {host: %s, port: %d, tls: none, username: %s, password: %s, folders: [INBOX, Sent], mode: poll, poll_interval: 1s, sent_folder: Sent}
          smtp: {host: %s, port: %d, tls: none, append_sent: true}
`, web, d.Host, d.Port, d.User, d.Password, sink.Host(), sink.Port()))
	s := startServe(t, ws, web)
	testutil.WaitFor(t, 20*time.Second, "the inbox message ingested", func() bool { return len(countIDs(t, ws)) == 1 })
	id := countIDs(t, ws)[0]
	if _, e, code := cli(t, ws, "", "send", "--reply-to", id, "--text", "Noted."); code != 0 {
		t.Fatalf("send: %s", e)
	}
	msgs := sink.WaitMessages(t, 1, 20*time.Second)
	m, _ := mail.ReadMessage(bytes.NewReader(msgs[0].Raw))
	mid := m.Header.Get("Message-Id")
	testutil.WaitFor(t, 20*time.Second, "the copy in Sent", func() bool {
		return strings.Contains(d.Doveadm(t, "fetch", "-u", d.User, "hdr.message-id", "mailbox", "Sent", "all"), strings.Trim(mid, "<>"))
	})
	// Once the source's checkpoint for Sent (imap/<account>/<folder>,
	// "UIDVALIDITY:UID") has passed the copy, the source has looked at it
	// and made up its mind: a checkpoint moves only after the files it
	// covers are written.
	var copyUID int
	if _, err := fmt.Sscanf(d.Doveadm(t, "fetch", "-u", d.User, "uid", "mailbox", "Sent", "all"), "uid: %d", &copyUID); err != nil {
		t.Fatalf("the copy's UID in Sent: %v", err)
	}
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("the source's checkpoint for Sent to pass UID %d", copyUID), func() bool {
		v, _, err := mb.Checkpoint(context.Background(), "imap/work/Sent")
		_, uid, _ := strings.Cut(v, ":")
		n, _ := strconv.Atoi(uid)
		return err == nil && n >= copyUID
	})
	if n := len(countIDs(t, ws, "--all")); n != 1 {
		t.Errorf("%d inbound messages, want 1: our own sent copy was ingested", n)
	}
	files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound/email/*.md"))
	if len(files) != 1 {
		t.Errorf("inbound files: %v", files)
	}
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d:\n%s", code, s.Log())
	}
}
