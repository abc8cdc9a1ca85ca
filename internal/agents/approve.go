package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/approval"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// The approval gate's verbs (`courier approve`, `courier reject`, the web
// viewer), run by the service for a request on its socket, or by the
// command line on the mailbox when no service runs.
//
// Who may: a user listed in courier.outbound.approvers, or in one of its
// groups, as the kernel names the socket's peer (the user and its groups
// from the user and group databases); never for a draft one of its own
// agents queued (agent its user name, or "<name>@<user>"), and never an
// MCP client, which is an agent. The service's user and root are not
// approvers unless listed. Without the service, the same rule holds for
// this process's own user and groups, and only a user who may write the
// mailbox gets that far (Dial): such a user could change the state
// database anyway, so the check there is no weaker than the service's.

var _ agentapi.Approver = (*Backend)(nil)

// maxReasonBytes bounds a rejection's reason, filed in the draft's
// delivery block.
const maxReasonBytes = 1000

// decideOn checks who, then runs req on mb. by names who decided; wake
// tells the service to look at the queue (nil: no service runs).
func decideOn(ctx context.Context, mb *mailbox.Mailbox, cfg *config.Config, who approval.Identity, req agentapi.ApprovalRequest, wake func()) (*agentapi.OutboundResult, error) {
	reason := strings.Join(strings.Fields(req.Reason), " ")
	switch {
	case req.Verb == agentapi.ApprovalReject && reason == "":
		return nil, fault.Errorf(fault.Usage, "reject: a reason is required (--reason TEXT): it is filed with the draft and told to its agent")
	case len(reason) > maxReasonBytes:
		return nil, fault.Errorf(fault.Usage, "reject: the reason is %d bytes, more than %d", len(reason), maxReasonBytes)
	case req.Verb != agentapi.ApprovalApprove && req.Verb != agentapi.ApprovalReject:
		return nil, fault.Errorf(fault.Usage, "approval: unknown verb %q (approve or reject)", req.Verb)
	}
	e, err := mb.Get(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	if err := approval.Check(&cfg.Courier.Outbound.Approvers, who, req.ID, e.From.ID); err != nil {
		return nil, err
	}
	res := &agentapi.OutboundResult{ID: req.ID, Verb: req.Verb}
	if req.Verb == agentapi.ApprovalReject {
		rel, err := mb.Reject(ctx, req.ID, who.User, reason)
		if err != nil {
			return nil, err
		}
		res.Status, res.Path = mailbox.OutDead, rel
		res.Message = fmt.Sprintf("%s is rejected, never to be sent: filed in %s with the reason", req.ID, rel)
		return res, nil
	}
	if err := mb.Approve(ctx, req.ID, who.User); err != nil {
		return nil, err
	}
	res.Status, res.Path = mailbox.OutQueued, e.Path
	res.Message = fmt.Sprintf("%s is approved by %s; the service sends it when it starts", req.ID, who.User)
	if wake != nil {
		wake()
		res.Message = fmt.Sprintf("%s is approved by %s; the service sends it now", req.ID, who.User)
	}
	return res, nil
}

// Approve implements agentapi.Approver: c approves the held draft id.
func (b *Backend) Approve(ctx context.Context, c agentapi.Caller, id string) (*agentapi.OutboundResult, error) {
	return b.decide(ctx, c, agentapi.ApprovalRequest{Verb: agentapi.ApprovalApprove, ID: id})
}

// Reject implements agentapi.Approver: c rejects the held draft id, for
// reason.
func (b *Backend) Reject(ctx context.Context, c agentapi.Caller, id, reason string) (*agentapi.OutboundResult, error) {
	return b.decide(ctx, c, agentapi.ApprovalRequest{Verb: agentapi.ApprovalReject, ID: id, Reason: reason})
}

// mcpUID is the uid of the MCP server's Caller (mcpserver.HTTPCaller):
// no user's, and an agent's.
const mcpUID = ^uint32(0)

func (b *Backend) decide(ctx context.Context, c agentapi.Caller, req agentapi.ApprovalRequest) (*agentapi.OutboundResult, error) {
	if c.UID == mcpUID {
		return nil, refusal(fault.Errorf(fault.NoPermission, "approval: an MCP client is an agent, and agents do not approve or reject drafts"))
	}
	wake := b.Wake
	if wake == nil {
		wake = func() {}
	}
	res, err := decideOn(ctx, b.Mailbox, b.Config, approval.PeerIdentity(c.UID, c.GID, c.User), req, wake)
	if err != nil {
		return nil, refusal(err)
	}
	return res, nil
}

// Approval runs a decision through the service, or on the mailbox as
// this process's user.
func (c *Conn) Approval(ctx context.Context, req agentapi.ApprovalRequest) (*agentapi.OutboundResult, error) {
	if c.svc != nil {
		res, err := c.svc.Approval(ctx, req)
		return res, c.remoteError(err)
	}
	return decideOn(ctx, c.mb, c.l.Config, approval.SelfIdentity(), req, nil)
}

// AwaitingNote is what the command line adds to "queued ID -> PATH" for
// a draft held for approval ("" for any other).
func AwaitingNote(res *agentapi.SendResult) string {
	var d struct {
		Approval *schema.Approval `json:"approval"`
	}
	if res.DryRun || json.Unmarshal(res.Draft, &d) != nil || d.Approval == nil || d.Approval.Status != schema.ApprovalAwaiting {
		return ""
	}
	return " (awaiting approval: it is sent once a person approves it)"
}

// MayApprove says whether c is listed in courier.outbound.approvers (by
// user or group): the web viewer lets such a user in, to approve and
// reject. An MCP client never is.
func (b *Backend) MayApprove(c agentapi.Caller) bool {
	if c.UID == mcpUID {
		return false
	}
	return approval.Listed(&b.Config.Courier.Outbound.Approvers, approval.PeerIdentity(c.UID, c.GID, c.User))
}
