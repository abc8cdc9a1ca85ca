package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Through the socket, an outbound verb on a draft is the operator's (the
// service's user, root) or its own user's: bob's agent can neither cancel,
// requeue nor hurry a draft alice's agents queued, whatever it calls
// itself.
func TestOutboundVerbsAreTheOwnersOrTheUsers(t *testing.T) {
	ctx := context.Background()
	w := wstest.Mailbox(t)
	b := &Backend{Mailbox: w.MB}
	queue := func(i int, agent string) string {
		d := &schema.Draft{ID: fmt.Sprintf("lark_out_%032x", i), Provider: schema.Lark, To: schema.Recipients{"oc_1"},
			CreatedAt: schema.TimePtr(time.Now()), IdempotencyKey: fmt.Sprint("key-", i), Body: "hi\n", Agent: agent}
		if _, err := w.MB.Queue(ctx, d); err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	alice := agentapi.Caller{UID: 1001, User: "alice"}
	bob := agentapi.Caller{UID: 1002, User: "bob"}
	ops := agentapi.Caller{UID: 999, User: "courier", Owner: true}
	byAlice, byReviewer, byBob := queue(1, "alice"), queue(2, "reviewer@alice"), queue(3, "bob")
	for _, verb := range []string{agentapi.OutboundCancel, agentapi.OutboundRetry, agentapi.OutboundRequeue} {
		for _, id := range []string{byAlice, byReviewer} {
			_, err := b.Outbound(ctx, bob, agentapi.OutboundRequest{Verb: verb, ID: id})
			var e *agentapi.Error
			if !errors.As(err, &e) || e.Code != 77 || !strings.Contains(e.Message, "only the service's user") {
				t.Errorf("bob %s %s: %v", verb, id, err)
			}
		}
	}
	if ds, _ := w.MB.OutboundDrafts(ctx); len(ds) != 3 || ds[0].Status != mailbox.OutQueued || ds[1].Status != mailbox.OutQueued {
		t.Fatalf("after bob's refusals: %+v", ds)
	}
	// alice's agents may, on theirs; bob on his; the operator on any.
	for _, c := range []struct {
		who agentapi.Caller
		id  string
	}{{alice, byReviewer}, {bob, byBob}, {ops, byAlice}} {
		res, err := b.Outbound(ctx, c.who, agentapi.OutboundRequest{Verb: agentapi.OutboundCancel, ID: c.id})
		if err != nil || res.Status != mailbox.OutDead || !strings.Contains(res.Message, "cancelled") {
			t.Fatalf("%s cancels %s: %+v %v", c.who.User, c.id, res, err)
		}
		d, _, _ := w.MB.Draft(ctx, c.id)
		if d.Delivery == nil || string(d.Delivery.Reason) != "cancelled by "+c.who.User {
			t.Errorf("cancelled %s: %+v", c.id, d.Delivery)
		}
		if _, err := b.Outbound(ctx, c.who, agentapi.OutboundRequest{Verb: agentapi.OutboundRequeue, ID: c.id}); err != nil {
			t.Errorf("%s requeues %s: %v", c.who.User, c.id, err)
		}
	}
	if _, err := b.Outbound(ctx, ops, agentapi.OutboundRequest{Verb: "delete", ID: byAlice}); err == nil || !strings.Contains(err.Error(), "unknown verb") {
		t.Errorf("unknown verb: %v", err)
	}
	if _, err := b.Outbound(ctx, ops, agentapi.OutboundRequest{Verb: agentapi.OutboundCancel, ID: "lark_out_nope"}); err == nil || err.(*agentapi.Error).Code != 1 {
		t.Errorf("unknown id: %v", err)
	}
}
