package main

import (
	"bytes"
	"fmt"
	"net/mail"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// A mail from josé@exämple.com (SMTPUTF8) on the real service: the
// receiver files it with no participants.from.email (the protocol's
// schema takes none that is not ASCII), and `courier send --reply-to`
// answers the address as it was written, delivered with SMTPUTF8 through
// an account whose server offers it. Through an account whose server
// does not (Postfix's smtp-sink), the reply goes to .deadletter/ at its
// first attempt, the reason naming the address and SMTPUTF8.
func TestReplyToSMTPUTF8Sender(t *testing.T) {
	fake := testutil.StartSMTPFakeWith(t, testutil.SMTPFakeOptions{SMTPUTF8: true})
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s, addresses: [agent@corp.example]}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
        - name: plain
          addresses: [bot@corp.example]
          smtp: {host: %s, port: %d, tls: none}
`, web, recv, fake.Host(), fake.Port(), sink.Host(), sink.Port()))
	s := startServe(t, ws, web)

	// net/smtp says SMTPUTF8 when the receiver offers it, as it does.
	msg := "From: José <josé@exämple.com>\r\nTo: agent@corp.example\r\nSubject: Réunion\r\nMessage-ID: <q1@exämple.com>\r\n" +
		"Date: " + time.Now().Format(time.RFC1123Z) + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nOn se voit demain ?\r\n"
	if err := smtp.SendMail(recv, nil, "josé@exämple.com", []string{"agent@corp.example"}, []byte(msg)); err != nil {
		t.Fatalf("send to the receiver: %v\n%s", err, s.Log())
	}
	ids := countIDs(t, ws)
	if len(ids) != 1 {
		t.Fatalf("after the 250, list shows %v", ids)
	}
	out, _, _ := cli(t, ws, "", "read", ids[0], "--raw")
	m, err := schema.Decode([]byte(out))
	if err != nil {
		t.Fatalf("read --raw: %v\n%s", err, out)
	}
	if f := m.Participants.From; f.Email != "" || f.PlatformID != "josé@exämple.com" {
		t.Fatalf("filed from %+v; this test wants no email and the address as platform_id", f)
	}

	if _, e, code := cli(t, ws, "", "send", "--reply-to", ids[0], "--text", "Oui, à 10 h."); code != 0 {
		t.Fatalf("send --reply-to: %d %s", code, e)
	}
	if !testutil.Poll(20*time.Second, func() bool { return len(fake.Messages()) == 1 }) {
		t.Fatalf("the reply was not sent\n%s", s.Log())
	}
	got := fake.Messages()[0]
	if !got.UTF8 || strings.Join(got.To, ",") != "josé@exämple.com" || got.From != "agent@corp.example" {
		t.Errorf("sent with SMTPUTF8 %v from %q to %v; want SMTPUTF8 to josé@exämple.com", got.UTF8, got.From, got.To)
	}
	if h, err := mail.ReadMessage(bytes.NewReader(got.Raw)); err != nil || h.Header.Get("To") != "<josé@exämple.com>" || h.Header.Get("In-Reply-To") != "<q1@exämple.com>" {
		t.Errorf("the reply's header: %v %v", err, h)
	}

	// Through a server without SMTPUTF8: dead at once, with the reason.
	if _, e, code := cli(t, ws, "", "send", "--reply-to", ids[0], "--account", "plain", "--text", "Oui."); code != 0 {
		t.Fatalf("send --account plain: %d %s", code, e)
	}
	testutil.WaitFor(t, 20*time.Second, "the draft dead", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "dead")) == 1 })
	dead, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/.deadletter/email/*.md"))
	if len(dead) != 1 {
		t.Fatalf("dead drafts %v", dead)
	}
	b, _ := os.ReadFile(dead[0])
	d, _, err := schema.ParseDraft(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.Delivery == nil || d.Delivery.Attempts != 1 || !strings.Contains(string(d.Delivery.Reason), "does not offer SMTPUTF8") ||
		!strings.Contains(string(d.Delivery.Reason), "josé@exämple.com") {
		t.Errorf("dead draft's delivery %+v; want one attempt and the reason", d.Delivery)
	}
	if n := len(sink.Messages(t)); n != 0 {
		t.Errorf("smtp-sink got %d transactions, want none", n)
	}
	s.Stop(t)
}
