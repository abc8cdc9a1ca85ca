package agents

import (
	"context"
	"fmt"
	"strings"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// The operator's verbs on the outbound queue (`courier outbound retry|
// requeue|cancel`), run by the service for a request on its socket, or by
// the command line on the mailbox when no service runs.
//
// Who may: through the socket, the Owner (the service's user, root) acts
// on every draft; any other user only on the drafts its own agents queued
// (agent name the user's name, or "<name>@<user>", as Caller.Agent names
// them), so that one user's agent cannot cancel, requeue or hurry another
// user's draft. Without the service, whoever may write the mailbox may do
// anything to it anyway, and is not asked.

// OutboundVerb runs req on mb for by (who is named as having cancelled a
// draft). wake tells the service to look at the queue at once (nil: no
// service runs).
func OutboundVerb(ctx context.Context, mb *mailbox.Mailbox, req agentapi.OutboundRequest, by string, wake func()) (*agentapi.OutboundResult, error) {
	res := &agentapi.OutboundResult{ID: req.ID, Verb: req.Verb, Status: mailbox.OutQueued}
	when := "the service sends it when it starts"
	if wake != nil {
		when = "the service sends it now"
	}
	switch req.Verb {
	case agentapi.OutboundRetry:
		changed, err := mb.RetryNow(ctx, req.ID)
		if err != nil {
			return nil, err
		}
		res.Message = fmt.Sprintf("%s was due already: %s", req.ID, when)
		if changed {
			res.Message = fmt.Sprintf("%s: its backoff is skipped; %s", req.ID, when)
		}
	case agentapi.OutboundRequeue:
		rel, err := mb.Requeue(ctx, req.ID)
		if err != nil {
			return nil, err
		}
		res.Path = rel
		res.Message = fmt.Sprintf("%s is queued again in %s, with its idempotency key; %s", req.ID, rel, when)
	case agentapi.OutboundCancel:
		rel, err := mb.CancelQueued(ctx, req.ID, by)
		if err != nil {
			return nil, err
		}
		res.Status, res.Path = mailbox.OutDead, rel
		res.Message = fmt.Sprintf("%s is cancelled, never to be sent: filed in %s (`courier outbound requeue %s` queues it again)", req.ID, rel, req.ID)
		return res, nil
	default:
		return nil, fault.Errorf(fault.Usage, "outbound: unknown verb %q (retry, requeue or cancel)", req.Verb)
	}
	if wake != nil {
		wake()
	}
	return res, nil
}

// mayTouch refuses a Caller other than the Owner a draft its own agents
// did not queue.
func mayTouch(ctx context.Context, mb *mailbox.Mailbox, c agentapi.Caller, id string) error {
	if c.Owner {
		return nil
	}
	e, err := mb.Get(ctx, id)
	if err != nil {
		return err
	}
	if a := e.From.ID; a == c.User || strings.HasSuffix(a, "@"+c.User) {
		return nil
	}
	return fault.Errorf(fault.NoPermission, "outbound: %s was queued by agent %q, not one of user %s's: only the service's user (or root) may act on another user's draft", id, e.From.ID, c.User)
}

// Outbound implements agentapi.Operator.
func (b *Backend) Outbound(ctx context.Context, c agentapi.Caller, req agentapi.OutboundRequest) (*agentapi.OutboundResult, error) {
	res, err := b.outbound(ctx, c, req)
	if err != nil {
		return nil, refusal(err)
	}
	return res, nil
}

func (b *Backend) outbound(ctx context.Context, c agentapi.Caller, req agentapi.OutboundRequest) (*agentapi.OutboundResult, error) {
	if err := mayTouch(ctx, b.Mailbox, c, req.ID); err != nil {
		return nil, err
	}
	wake := b.Wake
	if wake == nil {
		wake = func() {}
	}
	return OutboundVerb(ctx, b.Mailbox, req, c.User, wake)
}

// Outbound runs an outbound verb through the service, or on the mailbox.
func (c *Conn) Outbound(ctx context.Context, req agentapi.OutboundRequest) (*agentapi.OutboundResult, error) {
	if c.svc != nil {
		res, err := c.svc.Outbound(ctx, req)
		return res, c.remoteError(err)
	}
	return OutboundVerb(ctx, c.mb, req, c.l.User, nil)
}
