package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// An unverified mail whose Reply-To lists 5,000 addresses, answered with
// `courier send --reply-to ID --text ok`, made one SMTP transaction with
// 5,000 RCPTs. send refuses a draft past courier.outbound.max_recipients
// (default 50, to, cc and bcc together): exit 65, naming the field and the
// count, nothing queued. A bound raised in the config lets it through.
func TestSendRefusesTooManyRecipients(t *testing.T) {
	ws := newWorkspace(t)
	os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(workConfig), 0o644)
	m := testutil.Message(schema.Email, "0123456789abcdef0123", testutil.Time("2026-02-06T10:00:00Z"), "Please confirm.")
	m.Metadata.Extra.Account = "work"
	victims := make([]any, 5000)
	for i := range victims {
		victims[i] = fmt.Sprintf("victim%d@victims.example", i)
	}
	m.Metadata.ProviderRaw = map[string]any{"message_id": "<q5000@example.com>", "subject": "Confirm", "reply_to": victims}
	seed(t, ws, m)

	_, e, code := cli(t, ws, "", "send", "--reply-to", m.ID, "--text", "ok")
	if code != exitDataErr || !strings.Contains(e, "to: 5000 recipients (to 5000)") || !strings.Contains(e, "courier.outbound.max_recipients (50)") {
		t.Errorf("a reply to 5,000 Reply-To addresses: exit %d\n%s", code, e)
	}
	if q, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/outbound/email/*")); len(q) != 0 {
		t.Errorf("queued anyway: %v", q)
	}

	// A draft naming them in cc and bcc is counted whole.
	draft := filepath.Join(t.TempDir(), "d.md")
	os.WriteFile(draft, []byte("---\nprovider: email\nto: [a@example.com]\ncc: [b@example.com, c@example.com]\nbcc: [d@example.com]\nsubject: Hi\nemail: {account: work}\n---\nok\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(workConfig+"  outbound: {max_recipients: 3}\n"), 0o644)
	_, e, code = cli(t, ws, "", "send", draft)
	if code != exitDataErr || !strings.Contains(e, "4 recipients (to 1, cc 2, bcc 1), more than courier.outbound.max_recipients (3)") {
		t.Errorf("4 recipients over a bound of 3: exit %d\n%s", code, e)
	}

	os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(workConfig+"  outbound: {max_recipients: 5000}\n"), 0o644)
	if _, e, code := cli(t, ws, "", "send", "--reply-to", m.ID, "--text", "ok"); code != 0 {
		t.Errorf("with max_recipients 5000: exit %d\n%s", code, e)
	}
}
