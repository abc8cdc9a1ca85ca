package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
)

// The approval gate's verbs (docs/approval.md): a person approves or
// rejects a draft held for approval. POST /v1/approval is served when the
// Backend is an Approver.

// Approval verbs.
const (
	ApprovalApprove = "approve"
	ApprovalReject  = "reject"
)

// ApprovalRequest asks for a decision on a held draft.
type ApprovalRequest struct {
	Verb   string `json:"verb"` // approve or reject
	ID     string `json:"id"`
	Reason string `json:"reason,omitempty"` // why, for reject (required)
}

// Approver is what the service does for a person's decision on a held
// draft. A refusal is an *Error: 77 for a Caller that may not approve
// (not in courier.outbound.approvers, an MCP client, or the draft's own
// agent's user), 64 for a reject without a reason, 2 for a draft not
// awaiting approval.
type Approver interface {
	Approve(ctx context.Context, c Caller, id string) (*OutboundResult, error)
	Reject(ctx context.Context, c Caller, id, reason string) (*OutboundResult, error)
}

func (s *Server) approvalRoute(mux *http.ServeMux, ap Approver) {
	mux.HandleFunc("POST /v1/approval", func(w http.ResponseWriter, r *http.Request) {
		var req ApprovalRequest
		c, ok := s.decode(w, r, &req)
		if !ok {
			return
		}
		s.audit(c, req.Verb, req.ID, "")
		var res *OutboundResult
		var err error
		switch req.Verb {
		case ApprovalApprove:
			res, err = ap.Approve(r.Context(), c, req.ID)
		case ApprovalReject:
			res, err = ap.Reject(r.Context(), c, req.ID, req.Reason)
		default:
			err = &Error{Code: 64, Message: "approval: unknown verb " + req.Verb + " (approve or reject)"}
		}
		if err != nil {
			writeError(w, asError(err))
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
}

// Approval asks the service for a decision on a held draft; a refusal is
// an *Error.
func (c *Client) Approval(ctx context.Context, req ApprovalRequest) (*OutboundResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var res OutboundResult
	if err := c.do(ctx, http.MethodPost, "/v1/approval", "application/json", bytes.NewReader(body), &res); err != nil {
		return nil, err
	}
	return &res, nil
}
