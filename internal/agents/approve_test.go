package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// The backend's Approve and Reject (the socket's, the web viewer's): an
// MCP client, a user not listed and a listed user on its own agent's
// draft are refused (77); a reject needs a reason (64); a decision on a
// draft not held is a conflict (2). An approved draft is due; a rejected
// one is dead with who, when and why.
func TestApproveAndRejectRules(t *testing.T) {
	ctx := context.Background()
	w := wstest.Mailbox(t)
	cfg := &config.Config{}
	cfg.Courier.Outbound.Approvers = config.Approvers{Users: []string{"alice"}}
	b := &Backend{Mailbox: w.MB, Config: cfg}
	queue := func(i int, agent string) string {
		d := &schema.Draft{ID: fmt.Sprintf("lark_out_%032x", i), Provider: schema.Lark, To: schema.Recipients{"oc_1"},
			CreatedAt: schema.TimePtr(time.Now()), IdempotencyKey: fmt.Sprint("key-", i), Body: "hi\n", Agent: agent,
			Approval: &schema.Approval{Status: schema.ApprovalAwaiting}}
		if _, err := w.MB.Queue(ctx, d); err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	alice := agentapi.Caller{UID: 1001, GID: 1001, User: "alice"}
	bob := agentapi.Caller{UID: 1002, GID: 1002, User: "bob"}
	mcp := agentapi.Caller{UID: ^uint32(0), GID: ^uint32(0), User: "alice"}
	byBot, byAlice, byAliceReviewer := queue(1, "bot@bob"), queue(2, "alice"), queue(3, "reviewer@alice")
	code := func(err error) int {
		var e *agentapi.Error
		if !errors.As(err, &e) {
			return 0
		}
		return e.Code
	}
	for _, c := range []struct {
		who  agentapi.Caller
		id   string
		code int
		why  string
	}{
		{mcp, byBot, 77, "an MCP client is an agent"},
		{bob, byBot, 77, "not in courier.outbound.approvers"},
		{alice, byAlice, 77, "nobody approves their own draft"},
		{alice, byAliceReviewer, 77, "nobody approves their own draft"},
		{alice, "lark_out_nope", 1, ""},
	} {
		_, err := b.Approve(ctx, c.who, c.id)
		if code(err) != c.code || !strings.Contains(fmt.Sprint(err), c.why) {
			t.Errorf("%s approves %s: %v", c.who.User, c.id, err)
		}
		_, err = b.Reject(ctx, c.who, c.id, "no")
		if code(err) != c.code {
			t.Errorf("%s rejects %s: %v", c.who.User, c.id, err)
		}
	}
	if _, err := b.Reject(ctx, alice, byBot, "  "); code(err) != 64 {
		t.Errorf("reject without a reason: %v", err)
	}
	ds, _ := w.MB.OutboundDrafts(ctx)
	for _, d := range ds {
		if d.Status != mailbox.OutAwaitingApproval {
			t.Errorf("after the refusals: %+v", d)
		}
	}
	res, err := b.Approve(ctx, alice, byBot)
	if err != nil || res.Status != mailbox.OutQueued {
		t.Fatalf("alice approves: %+v %v", res, err)
	}
	if _, err := b.Approve(ctx, alice, byBot); code(err) != 2 || !strings.Contains(err.Error(), "is not awaiting approval") {
		t.Errorf("approved twice: %v", err)
	}
	if _, err := b.Reject(ctx, alice, byBot, "late"); code(err) != 2 {
		t.Errorf("rejected once approved: %v", err)
	}
	due, _ := w.MB.DueDrafts(ctx, []schema.Provider{schema.Lark}, time.Now(), 10, nil)
	if len(due) != 1 || due[0].ID != byBot {
		t.Errorf("due after the approval: %+v", due)
	}
	// bob's own draft, by another user's approver: rejected, with the reason.
	byBob := queue(4, "bob")
	res, err = b.Reject(ctx, alice, byBob, "wrong\ntone")
	if err != nil || res.Status != mailbox.OutDead {
		t.Fatalf("alice rejects: %+v %v", res, err)
	}
	d, e, _ := w.MB.Draft(ctx, byBob)
	if e.Status != mailbox.StatusDead || d.Delivery == nil || string(d.Delivery.Reason) != "rejected by alice: wrong tone" ||
		d.Delivery.Approval == nil || d.Delivery.Approval.Status != schema.ApprovalRejected || d.Delivery.Approval.By != "alice" ||
		string(d.Delivery.Approval.Reason) != "wrong tone" || d.Delivery.Approval.At == nil || d.Approval != nil {
		t.Errorf("rejected draft: %+v %+v", d.Delivery, d.Delivery.Approval)
	}
}
