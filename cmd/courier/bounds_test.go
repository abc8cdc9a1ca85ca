package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

	// The file is read with each list cut at schema.MaxReadItems (2,000;
	// issue 18, item 5: Courier writes 1,000 of a list now): the reply
	// counts those.
	_, e, code := cli(t, ws, "", "send", "--reply-to", m.ID, "--text", "ok")
	n := schema.MaxReadItems
	if code != exitDataErr || !strings.Contains(e, fmt.Sprintf("to: %d recipients (to %d)", n, n)) || !strings.Contains(e, "courier.outbound.max_recipients (50)") {
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

// `claim --timeout 876000h` held a message until 2126 (the socket took
// 2^63 ns). A claim longer than courier.claims.max_timeout (default 24h)
// is refused naming the key (exit 64) over the command line acting
// directly, over the service's socket and over MCP; 24h itself is fine.
func TestClaimTimeoutBounded(t *testing.T) {
	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n", web))
	for i, id := range []string{"om_c1", "om_c2", "om_c3"} {
		seed(t, ws, testutil.Message(schema.Lark, id, testutil.Time("2026-01-01T00:00:00Z").Add(time.Duration(i)*time.Minute), "x"))
	}
	refused := func(how string) {
		t.Helper()
		_, e, code := cli(t, ws, "", "claim", "lark_om_c1", "--agent", "a", "--timeout", "876000h")
		if code != exitUsage || !strings.Contains(e, "courier.claims.max_timeout") || !strings.Contains(e, "876000h0m0s is longer than 24h0m0s") {
			t.Errorf("%s: claim --timeout 876000h: exit %d\n%s", how, code, e)
		}
	}
	refused("directly")
	cmd := exec.Command(courierBin, "--root", ws, "--agent", "m", "mcp")
	cs := mcpConnect(t, &mcp.CommandTransport{Command: cmd}, nil)
	mcpRefused(t, cs, "claim", map[string]any{"id": "lark_om_c2", "timeout": "876000h"}, exitUsage, "courier.claims.max_timeout")
	if _, e, code := cli(t, ws, "", "claim", "lark_om_c3", "--agent", "a", "--timeout", "24h"); code != 0 {
		t.Errorf("claim --timeout 24h: exit %d\n%s", code, e)
	}

	s := startServe(t, ws, web)
	defer s.Stop(t)
	refused("through the service")
	mcpRefused(t, cs, "claim", map[string]any{"id": "lark_om_c2", "timeout": "876000h"}, exitUsage, "courier.claims.max_timeout")
}

// A secret under 8 bytes (Lark's test verification token "v") is redacted
// from the log only where it stands alone; doctor warns that it is weak,
// naming its key, without failing and without printing it.
func TestDoctorWarnsWeakSecret(t *testing.T) {
	ws := newWorkspace(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    lark: {enabled: false, verification_token: v, app_secret: a-long-enough-secret}\n", testutil.FreeAddr(t)))
	os.Chmod(filepath.Join(ws, ".monoco/config/courier.yaml"), 0o600)
	out, _, _ := cli(t, ws, "", "doctor")
	if !strings.Contains(out, "! secrets") || !strings.Contains(out, "courier.adapters.lark.verification_token is weak: 1 byte(s)") ||
		strings.Contains(out, "app_secret is weak") || strings.Contains(out, "✗ secrets") {
		t.Errorf("doctor on a one-letter verification token:\n%s", out)
	}
	out, _, _ = cli(t, ws, "", "doctor", "--format", "json")
	if !strings.Contains(out, `"warning": true`) {
		t.Errorf("doctor --format json: no warning:\n%s", out)
	}
}
