package main

import (
	"bytes"
	"encoding/json"
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

// outboundWS is a workspace whose email replies go to sink, with the
// outbound settings given and more of courier: (indented two spaces).
func outboundWS(t *testing.T, sink *testutil.SMTPSink, outbound string, more ...string) (ws, web string) {
	t.Helper()
	ws, web = newWorkspace(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s, %s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
%s`, web, outbound, sink.Host(), sink.Port(), strings.Join(more, "")))
	return ws, web
}

// outList is `courier outbound list --format json`, by id.
func outList(t *testing.T, ws string) map[string]mailbox.OutboundDraft {
	t.Helper()
	out, e, code := cli(t, ws, "", "outbound", "list", "--format", "json")
	if code != 0 {
		t.Fatalf("outbound list: %d %s", code, e)
	}
	var ds []mailbox.OutboundDraft
	if err := json.Unmarshal([]byte(out), &ds); err != nil {
		t.Fatalf("outbound list: %v\n%s", err, out)
	}
	m := map[string]mailbox.OutboundDraft{}
	for _, d := range ds {
		m[d.ID] = d
	}
	return m
}

// sendReply queues an email with `courier send` and returns its id.
func sendReply(t *testing.T, ws, subject string) string {
	t.Helper()
	out, e, code := cli(t, ws, "", "send", "--provider", "email", "--to", "ann@example.com", "--subject", subject, "--text", "numbers attached", "--format", "json")
	var res struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.ID == "" {
		t.Fatalf("send: %d %s %s", code, out, e)
	}
	return res.ID
}

func headerOf(t *testing.T, raw []byte, name string) string {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return m.Header.Get(name)
}

// A reply dead-lettered by a failing SMTP peer is listed dead with the
// peer's reason; requeued once the peer is fixed, it reaches the peer
// exactly once, with its Message-ID (the idempotency key) unchanged.
// Through the service's socket, and on the mailbox with no service.
func TestOutboundRequeueDelivers(t *testing.T) {
	for _, via := range []string{"service", "direct"} {
		t.Run(via, func(t *testing.T) {
			sink := testutil.StartSMTPSink(t, &testutil.SMTPSinkOptions{PermFail: []string{"RCPT"}})
			ws, web := outboundWS(t, sink, "backoff_base: 50ms")
			s := startServe(t, ws, web)
			id := sendReply(t, ws, "Report")
			testutil.WaitFor(t, 20*time.Second, "the reply dead-lettered", func() bool { return outList(t, ws)[id].Status == mailbox.OutDead })
			d := outList(t, ws)[id]
			if !strings.Contains(d.Reason, "500 Error: command failed") || d.FailedAt == nil || !strings.HasPrefix(d.Path, ".monoco/mailbox/.deadletter/email/") {
				t.Errorf("listed as %+v", d)
			}
			table, _, _ := cli(t, ws, "", "outbound", "list")
			if !strings.Contains(table, id) || !strings.Contains(table, "dead") || !strings.Contains(table, "500 Error: command failed") {
				t.Errorf("list:\n%s", table)
			}
			// status counts it as a dead reply, not a dead inbound message.
			st, _, _ := cli(t, ws, "", "status")
			if !strings.Contains(st, "dead 0\n") || !strings.Contains(st, "email  queued 0 (due 0, sending 0, retrying 0, scheduled 0); dead 1 (`courier outbound list` says why)") {
				t.Errorf("status:\n%s", st)
			}
			dead, err := os.ReadFile(filepath.Join(ws, d.Path))
			if err != nil {
				t.Fatal(err)
			}
			draft, _, err := schema.DecodeDraft(dead)
			if err != nil || draft.IdempotencyKey == "" {
				t.Fatalf("dead letter: %v %+v", err, draft)
			}
			sink.Restart(t, nil) // the peer is fixed
			if via == "direct" {
				s.Stop(t)
			}
			out, e, code := cli(t, ws, "", "outbound", "requeue", id)
			if code != 0 || !strings.Contains(out, "queued again") {
				t.Fatalf("requeue: %d %s %s", code, out, e)
			}
			if via == "direct" {
				if st := outList(t, ws)[id].Status; st != mailbox.OutQueued {
					t.Errorf("after requeue, %s", st)
				}
				s = startServe(t, ws, web)
			} else if !strings.Contains(s.Log(), "outbound requeue") {
				t.Errorf("the requeue did not go through the socket:\n%s", s.Log())
			}
			testutil.WaitFor(t, 20*time.Second, "the reply archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 1 })
			msgs := sink.Messages(t)
			if len(msgs) != 1 || headerOf(t, msgs[0].Raw, "Message-Id") != draft.IdempotencyKey {
				t.Errorf("the peer got %d messages; want 1 with Message-ID %s", len(msgs), draft.IdempotencyKey)
			}
			if len(outList(t, ws)) != 0 {
				t.Errorf("queue not empty: %v", outList(t, ws))
			}
		})
	}
}

// cancel takes a waiting draft out for good; retry sends another at once
// instead of after its hour of backoff. Both paths.
func TestOutboundCancelAndRetry(t *testing.T) {
	for _, via := range []string{"service", "direct"} {
		t.Run(via, func(t *testing.T) {
			sink := testutil.StartSMTPSink(t, &testutil.SMTPSinkOptions{TempFail: []string{"RCPT"}})
			ws, web := outboundWS(t, sink, "backoff_base: 1h, backoff_max: 1h")
			s := startServe(t, ws, web)
			drop, keep := sendReply(t, ws, "Drop me"), sendReply(t, ws, "Keep me")
			testutil.WaitFor(t, 20*time.Second, "both waiting", func() bool {
				l := outList(t, ws)
				return l[drop].Status == mailbox.OutWaiting && l[keep].Status == mailbox.OutWaiting
			})
			w := outList(t, ws)[keep]
			if !strings.Contains(w.Reason, "450 Error: command failed") || w.NextAt == nil || time.Until(*w.NextAt) < 20*time.Minute || w.Attempts != 1 {
				t.Errorf("waiting draft listed as %+v", w)
			}
			if via == "direct" {
				s.Stop(t)
			}
			out, e, code := cli(t, ws, "", "outbound", "cancel", drop)
			if code != 0 || !strings.Contains(out, "cancelled") {
				t.Fatalf("cancel: %d %s %s", code, out, e)
			}
			c := outList(t, ws)[drop]
			if c.Status != mailbox.OutDead || !strings.HasPrefix(c.Reason, "cancelled by ") {
				t.Errorf("cancelled draft listed as %+v", c)
			}
			sink.Restart(t, nil)
			if out, e, code := cli(t, ws, "", "outbound", "retry", keep); code != 0 || !strings.Contains(out, "backoff is skipped") {
				t.Fatalf("retry: %d %s %s", code, out, e)
			}
			if via == "direct" {
				s = startServe(t, ws, web)
			}
			testutil.WaitFor(t, 20*time.Second, "the retried draft archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 1 })
			// Give the engine time to send the cancelled one, were it to.
			time.Sleep(1500 * time.Millisecond)
			msgs := sink.Messages(t)
			if len(msgs) != 1 || headerOf(t, msgs[0].Raw, "Subject") != "Keep me" {
				t.Errorf("the peer got %d messages", len(msgs))
			}
			if _, e, code := cli(t, ws, "", "outbound", "cancel", keep); code != 2 || !strings.Contains(e, "sent already") {
				t.Errorf("cancel of a sent draft: %d %s", code, e)
			}
			if _, e, code := cli(t, ws, "", "outbound", "retry", "email_out_nope"); code != 1 || !strings.Contains(e, "not found") {
				t.Errorf("retry of an unknown id: %d %s", code, e)
			}
		})
	}
}
