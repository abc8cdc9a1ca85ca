package main

import (
	"bytes"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// dropDraft writes a draft file straight into outbound/email/, as whoever
// can write that folder can (a prompt-injected agent with a shell), not
// through `courier send`. It is written beside and renamed in, so that
// the engine never reads half of it (an attacker's partial file would be
// set aside too, but that is another test's).
func dropDraft(t *testing.T, ws string, n int, frontMatter string) (id, messageID string) {
	t.Helper()
	id = fmt.Sprintf("email_out_%032x", n)
	messageID = fmt.Sprintf("<dropped-%d@corp.example>", n)
	at := time.Date(2026, 2, 6, 10, 0, n, 0, time.UTC)
	data := fmt.Sprintf("---\nid: %s\nprovider: email\nto: [ann@example.com]\nsubject: Invoice %d\ncreated_at: %s\nidempotency_key: %q\n%s---\nPlease pay the attached invoice.\n",
		id, n, at.Format(time.RFC3339), messageID, frontMatter)
	tmp := filepath.Join(ws, fmt.Sprintf("drop-%d.md", n))
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(ws, ".monoco/mailbox/outbound/email", mailbox.FileName(at, id))); err != nil {
		t.Fatal(err)
	}
	return id, messageID
}

// deadLetter returns the dead-lettered draft id and its delivery reason,
// or false while it is not there.
func deadLetter(t *testing.T, ws, id string) (string, bool) {
	files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/.deadletter/email", "*_"+id+".md"))
	if len(files) != 1 {
		return "", false
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return "", false
	}
	d, _, err := schema.DecodeDraft(data)
	if err != nil || d.Delivery == nil {
		return "", false
	}
	return string(d.Delivery.Reason), true
}

// TestServeRefusesDroppedForgeries: issue 9, item 6, against the real
// service and a real SMTP peer (Postfix's smtp-sink). Drafts dropped into
// outbound/email/ by hand skip `courier send`'s checks; the engine
// re-validates them and the email Sender sends only from the account's own
// addresses. A forged From, header injection through In-Reply-To, and an
// artifact given by local path (which only send may copy in) each go to
// .deadletter/email/ with a reason that names what is wrong, and nothing
// of them reaches the peer; the same draft from the account's own
// address is delivered.
func TestServeRefusesDroppedForgeries(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
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
          smtp: {host: %s, port: %d, tls: none}
`, web, sink.Host(), sink.Port()))
	secret := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o600)
	s := startServe(t, ws, web)

	forged := []struct {
		name, frontMatter string
		reason            []string
	}{
		{"a From that is not the account's", "email: {account: work, from: ceo@corp.test}\n",
			[]string{`email.from "ceo@corp.test" is not an address of account "work" (agent@corp.example)`}},
		{"a From of an account that does not exist", "email: {account: ceo, from: ceo@corp.test}\n",
			[]string{`no account named "ceo"`}},
		{"a header injected through In-Reply-To", "email: {account: work, from: agent@corp.example, in_reply_to: \"<q1@example.com>\\r\\nBcc: evil@x.test\"}\n",
			[]string{`email.in_reply_to "<q1@example.com>\r\nBcc: evil@x.test" is not a message id`}},
		{"an artifact by local path", "email: {account: work, from: agent@corp.example}\nartifacts:\n  - path: " + secret + "\n",
			[]string{"artifacts[0] names a local path (" + secret + ")", "courier send"}},
	}
	ids := make([]string, len(forged))
	for i, f := range forged {
		ids[i], _ = dropDraft(t, ws, i, f.frontMatter)
	}
	_, goodMID := dropDraft(t, ws, 99, "email: {account: work, from: agent@corp.example}\n")

	msgs := sink.WaitMessages(t, 1, 20*time.Second)
	for i, f := range forged {
		var reason string
		testutil.WaitFor(t, 20*time.Second, f.name+" dead-lettered", func() bool {
			var ok bool
			reason, ok = deadLetter(t, ws, ids[i])
			return ok
		})
		for _, w := range f.reason {
			if !strings.Contains(reason, w) {
				t.Errorf("%s: reason %q, want it to say %q", f.name, reason, w)
			}
		}
	}
	// Every forged draft is set aside, and the engine refuses before it
	// connects: what the peer has now is all it will ever get of them.
	msgs = sink.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("the peer got %d messages, want only the genuine draft's", len(msgs))
	}
	m, err := mail.ReadMessage(bytes.NewReader(msgs[0].Raw))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Message-Id") != goodMID || msgs[0].From != "agent@corp.example" || m.Header.Get("From") != "<agent@corp.example>" {
		t.Errorf("delivered Message-Id %q, MAIL FROM %q, From %q: want the genuine draft from agent@corp.example", m.Header.Get("Message-Id"), msgs[0].From, m.Header.Get("From"))
	}
	if strings.Contains(string(msgs[0].Raw), "evil@x.test") || strings.Contains(string(msgs[0].Raw), "ceo@corp.test") {
		t.Errorf("forged content reached the peer:\n%s", msgs[0].Raw)
	}
	testutil.WaitFor(t, 10*time.Second, "the genuine draft archived", func() bool {
		files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive/email/*_email_out_"+fmt.Sprintf("%032x", 99)+".md"))
		return len(files) == 1
	})
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d:\n%s", code, s.Log())
	}
}

// `courier send` says the same at the field: a draft's email.from must be
// one of its account's addresses (it may pick an alias).
func TestSendFromAddress(t *testing.T) {
	ws := newWorkspace(t)
	writeConfig(t, ws, `courier:
  adapters:
    email:
      enabled: true
      accounts:
        - name: work
          addresses: [agent@corp.example, ops@corp.example]
          smtp: {host: smtp.corp.example, port: 587}
`)
	dir := t.TempDir()
	forged := filepath.Join(dir, "forged.md")
	os.WriteFile(forged, []byte("---\nto: ann@example.com\nsubject: Invoice\nemail:\n  from: ceo@corp.test\n---\nPay it.\n"), 0o644)
	before := dirState(t, filepath.Join(ws, ".monoco/mailbox/outbound"))
	_, e, code := cli(t, ws, "", "send", forged)
	if code != exitDataErr || !strings.Contains(e, "forged.md:5: email.from: ceo@corp.test is not an address of account work (agent@corp.example, ops@corp.example)") {
		t.Errorf("forged from: exit %d %s", code, e)
	}
	if dirState(t, filepath.Join(ws, ".monoco/mailbox/outbound")) != before {
		t.Error("a refused draft was queued")
	}
	alias := filepath.Join(dir, "alias.md")
	os.WriteFile(alias, []byte("---\nto: ann@example.com\nsubject: Rota\nemail: {from: OPS@corp.example}\n---\nYours.\n"), 0o644)
	out, e, code := cli(t, ws, "", "send", alias, "--dry-run")
	if code != 0 || !strings.Contains(out, "from: ops@corp.example") {
		t.Errorf("alias: exit %d %s %s", code, out, e)
	}
}
