package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/approval"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// sendAs queues an email as agent ("" for the user's name) with `courier
// send` and returns its id.
func sendAs(t *testing.T, ws, agent, to string) string {
	t.Helper()
	args := []string{"send", "--provider", "email", "--to", to, "--subject", "Quote", "--text", "as discussed", "--format", "json"}
	if agent != "" {
		args = append([]string{"--agent", agent}, args...)
	}
	out, e, code := cli(t, ws, "", args...)
	var res struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.ID == "" {
		t.Fatalf("send: %d %s %s", code, out, e)
	}
	return res.ID
}

// filedDraft reads the draft id filed in box (archive or .deadletter).
func filedDraft(t *testing.T, ws, box, id string) *schema.Draft {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox", box, "email", "*_"+id+".md"))
	if len(m) != 1 {
		t.Fatalf("%s in %s/: %v", id, box, m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := schema.DecodeDraft(b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stillHeld checks, past a rescan of the queue, that id is still held
// and that the peer got nothing.
func stillHeld(t *testing.T, ws, id string, sink *testutil.SMTPSink, when string) {
	t.Helper()
	time.Sleep(1500 * time.Millisecond) // rescan_interval 1s
	if st := outList(t, ws)[id].Status; st != mailbox.OutAwaitingApproval {
		t.Errorf("%s: %s is %s, want %s", when, id, st, mailbox.OutAwaitingApproval)
	}
	if n := len(sink.Messages(t)); n != 0 {
		t.Errorf("%s: the peer got %d messages", when, n)
	}
}

// approval: all holds a reply: listed awaiting_approval, nothing reaches
// the SMTP peer, not after a restart either; approved (through the
// socket, or on the mailbox with the service stopped), it is delivered
// exactly once and archived with who approved it and when.
func TestApprovalAllHoldsUntilApproved(t *testing.T) {
	me := agents.UserName()
	for _, via := range []string{"service", "direct"} {
		t.Run(via, func(t *testing.T) {
			sink := testutil.StartSMTPSink(t, nil)
			ws, web := outboundWS(t, sink, fmt.Sprintf("approval: all, approvers: {users: [%s]}", me))
			s := startServe(t, ws, web)
			id := sendAs(t, ws, "bot", "ann@example.com")
			table, _, _ := cli(t, ws, "", "outbound", "list")
			if !strings.Contains(table, id) || !strings.Contains(table, "awaiting_approval") {
				t.Errorf("list:\n%s", table)
			}
			if st, _, _ := cli(t, ws, "", "status"); !strings.Contains(st, "email  queued 1 (due 0, sending 0, retrying 0, scheduled 0); awaiting approval 1") {
				t.Errorf("status:\n%s", st)
			}
			stillHeld(t, ws, id, sink, "queued")
			s.Stop(t)
			s = startServe(t, ws, web)
			stillHeld(t, ws, id, sink, "after a restart")
			if via == "direct" {
				s.Stop(t)
			}
			before := time.Now()
			out, e, code := cli(t, ws, "", "approve", id)
			if code != 0 || !strings.Contains(out, "is approved by "+me) {
				t.Fatalf("approve: %d %s %s", code, out, e)
			}
			if via == "direct" {
				if st := outList(t, ws)[id].Status; st != mailbox.OutQueued {
					t.Errorf("approved with no service: %s", st)
				}
				s = startServe(t, ws, web)
			} else {
				// The service's log is read as it comes: wait for the line.
				testutil.WaitFor(t, 10*time.Second, "the approval through the socket", func() bool { return strings.Contains(s.Log(), "approve") })
			}
			testutil.WaitFor(t, 20*time.Second, "the reply archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 1 })
			testutil.WaitFor(t, 10*time.Second, "the reply at the peer", func() bool { return len(sink.Messages(t)) > 0 })
			time.Sleep(500 * time.Millisecond)
			if n := len(sink.Messages(t)); n != 1 {
				t.Errorf("the peer got %d messages, want 1", n)
			}
			d := filedDraft(t, ws, "archive", id)
			a := d.Delivery.Approval
			if d.Delivery.Status != schema.DeliverySent || a == nil || a.Status != schema.ApprovalApproved || a.By != me || a.At == nil ||
				a.At.Before(before.Add(-time.Second)) || d.Approval != nil {
				t.Errorf("archived delivery %+v, approval %+v", d.Delivery, a)
			}
			if _, e, code := cli(t, ws, "", "approve", id); code != 2 || !strings.Contains(e, "sent already") {
				t.Errorf("approved again: %d %s", code, e)
			}
		})
	}
}

// approval: external sends a reply to internal addresses only at once and
// holds one to anyone else, a subdomain of an internal domain included.
func TestApprovalExternal(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws, web := outboundWS(t, sink, fmt.Sprintf("approval: external, internal: {email: [corp.example]}, approvers: {users: [%s]}", agents.UserName()))
	startServe(t, ws, web)
	inside := sendAs(t, ws, "bot", "bob@corp.example")
	outside := sendAs(t, ws, "bot", "ann@example.com")
	sub := sendAs(t, ws, "bot", "eve@mail.corp.example")
	// send says so, in text and in JSON (the MCP send tool's result).
	for to, want := range map[string]bool{"zed@example.com": true, "zoe@corp.example": false} {
		out, _, _ := cli(t, ws, "", "--agent", "bot", "send", "--provider", "email", "--to", to, "--subject", "x", "--text", "y")
		js, _, _ := cli(t, ws, "", "--agent", "bot", "send", "--provider", "email", "--to", to, "--subject", "x", "--text", "y", "--format", "json")
		if strings.Contains(out, "(awaiting approval: it is sent once a person approves it)") != want || strings.Contains(js, `"awaiting_approval":true`) != want {
			t.Errorf("send to %s says:\n%s%s", to, out, js)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "the internal replies sent", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 3 })
	if sent := strings.Join(countIDs(t, ws, "--outbound", "--status", "sent"), " "); !strings.Contains(sent, inside) {
		t.Errorf("sent %v, want %s among them", sent, inside)
	}
	l := outList(t, ws)
	for _, id := range []string{outside, sub} {
		if l[id].Status != mailbox.OutAwaitingApproval {
			t.Errorf("%s: %+v", id, l[id])
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the replies at the peer", func() bool { return len(sink.Messages(t)) >= 3 })
	if n := len(sink.Messages(t)); n != 3 {
		t.Errorf("the peer got %d messages, want 3", n)
	}
}

// A rejected reply is dead-lettered with the reason and who rejected it,
// and never sent; hooks get awaiting_approval when it is held and dead
// when it is rejected. A reject without --reason is a usage error.
func TestApprovalRejectFiresHooks(t *testing.T) {
	me := agents.UserName()
	type ev struct {
		event string
		d     schema.Draft
	}
	events := make(chan ev, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d schema.Draft
		json.NewDecoder(r.Body).Decode(&d)
		events <- ev{r.Header.Get("X-Courier-Event"), d}
	}))
	defer srv.Close()
	sink := testutil.StartSMTPSink(t, nil)
	ws, web := outboundWS(t, sink, fmt.Sprintf("approval: all, approvers: {groups: [%s]}", primaryGroup(t)),
		fmt.Sprintf("  notify:\n    - {name: approvals, url: %s, secret: k, on: [awaiting_approval, dead]}\n", srv.URL))
	s := startServe(t, ws, web)
	id := sendAs(t, ws, "bot", "ann@example.com")
	next := func(what string) ev {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s event:\n%s", what, s.Log())
		}
		return ev{}
	}
	if e := next("awaiting_approval"); e.event != "awaiting_approval" || e.d.ID != id || !e.d.Awaiting() {
		t.Errorf("first event %s %s %+v", e.event, e.d.ID, e.d.Approval)
	}
	if _, e, code := cli(t, ws, "", "reject", id); code != 64 || !strings.Contains(e, "--reason") {
		t.Errorf("reject without a reason: %d %s", code, e)
	}
	out, e, code := cli(t, ws, "", "reject", id, "--reason", "promises a discount we do not give")
	if code != 0 || !strings.Contains(out, "is rejected") {
		t.Fatalf("reject: %d %s %s", code, out, e)
	}
	want := "rejected by " + me + ": promises a discount we do not give"
	if e := next("dead"); e.event != "dead" || e.d.ID != id || e.d.Delivery == nil || string(e.d.Delivery.Reason) != want {
		t.Errorf("dead event %s %s %+v", e.event, e.d.ID, e.d.Delivery)
	}
	d := filedDraft(t, ws, ".deadletter", id)
	if a := d.Delivery.Approval; a == nil || a.Status != schema.ApprovalRejected || a.By != me || a.At == nil || string(a.Reason) != "promises a discount we do not give" {
		t.Errorf("dead letter's approval %+v", a)
	}
	if l := outList(t, ws)[id]; l.Status != mailbox.OutDead || l.Reason != want {
		t.Errorf("listed as %+v", l)
	}
	if n := len(sink.Messages(t)); n != 0 {
		t.Errorf("the peer got %d messages", n)
	}
}

func primaryGroup(t *testing.T) string {
	t.Helper()
	gs := approval.SelfIdentity().Groups
	if len(gs) == 0 {
		t.Skip("this process's group has no name")
	}
	return gs[0]
}

// Who may not approve gets 77, through the socket and on the mailbox: a
// user not listed, and a listed user on a draft its own agents queued
// (its name, or <name>@<user>). A member of a listed group may.
func TestApprovalRefused(t *testing.T) {
	me := agents.UserName()
	for _, c := range []struct {
		name, approvers, agent string
		code                   int
	}{
		{"not listed", "users: [nobody-listed]", "bot", 77},
		{"own draft", "users: [" + me + "]", "", 77},
		{"own agent's draft", "users: [" + me + "]", "reviewer@" + me, 77},
		{"by group", "groups: [" + primaryGroup(t) + "]", "bot", 0},
	} {
		for _, via := range []string{"service", "direct"} {
			t.Run(c.name+"/"+via, func(t *testing.T) {
				sink := testutil.StartSMTPSink(t, nil)
				ws, web := outboundWS(t, sink, "approval: all, approvers: {"+c.approvers+"}")
				s := startServe(t, ws, web)
				id := sendAs(t, ws, c.agent, "ann@example.com")
				if via == "direct" {
					s.Stop(t)
				}
				_, e, code := cli(t, ws, "", "approve", id)
				if code != c.code {
					t.Fatalf("approve: %d %s, want %d", code, e, c.code)
				}
				if code == 0 {
					return
				}
				if _, e2, code := cli(t, ws, "", "reject", id, "--reason", "no"); code != 77 {
					t.Errorf("reject: %d %s", code, e2)
				}
				if st := outList(t, ws)[id].Status; st != mailbox.OutAwaitingApproval {
					t.Errorf("after the refusals (%s): %s", e, st)
				}
			})
		}
	}
}

// watch --outbound prints drafts as they are sent or dead, not as they
// are held: a held draft approved and sent is printed once, sent.
func TestWatchOutboundSkipsHeld(t *testing.T) {
	ws := newWorkspace(t)
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, lines := ntWatch(t, ws, []string{watchGateEnv + "=" + gate}, "--outbound")
	g, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteString("go\n")
	g.Close()
	mb, err := mailbox.Open(ws, &mailbox.Options{Hold: func(*schema.Draft) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	ctx := context.Background()
	d := &schema.Draft{ID: "lark_out_" + strings.Repeat("b", 32), Provider: schema.Lark, To: schema.Recipients{"oc_1"}, CreatedAt: schema.TimePtr(time.Now()), Body: "x\n"}
	rel, err := mb.Queue(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the held event journaled, read by the watch
	if err := mb.Approve(ctx, d.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	d.Delivery = &schema.Delivery{Status: schema.DeliverySent, Attempts: 1, SentAt: schema.TimePtr(time.Now()), ProviderMessageID: "om_1"}
	if _, err := mb.FinishDelivery(ctx, d, rel, mailbox.BoxArchive); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		var e mailbox.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.ID != d.ID || e.Status != mailbox.StatusSent {
			t.Errorf("printed %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sent draft was not printed")
	}
	ntInterrupt(t, cmd)
}
