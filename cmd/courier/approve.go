package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/agents"
)

// approvalCommands are `courier approve` and `courier reject`: a person's
// decision on drafts held by courier.outbound.approval (docs/approval.md).
func (a *app) approvalCommands() []*cobra.Command {
	approve := a.approvalCommand(agentapi.ApprovalApprove, "Approve drafts held for approval: they are sent",
		`Approve drafts that wait with status awaiting_approval (courier.outbound.approval):
each is sent as it was queued, its delivery record naming who approved it and
when. Only a user in courier.outbound.approvers (or in one of its groups) may,
and not for a draft its own agents queued. While the service runs this goes
through its socket, which names the user; otherwise it acts on the mailbox.`)
	reject := a.approvalCommand(agentapi.ApprovalReject, "Reject drafts held for approval (--reason required): never sent",
		`Reject drafts that wait with status awaiting_approval: each is filed in
.deadletter/<provider>/, never sent, its delivery record naming who rejected it,
when and why (a dead event for hooks). --reason is required. Who may: as for
approve.`)
	return []*cobra.Command{approve, reject}
}

func (a *app) approvalCommand(verb, short, long string) *cobra.Command {
	var format, reason string
	c := &cobra.Command{
		Use:   verb + " ID... | " + verb + " -",
		Short: short,
		Long:  long,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if verb == agentapi.ApprovalReject && reason == "" {
				return usageError("reject needs --reason TEXT: it is filed with the draft and tells its agent why")
			}
			return a.eachDraft(cmd.Context(), args, format, func(conn *agents.Conn, id string) (*agentapi.OutboundResult, error) {
				return conn.Approval(cmd.Context(), agentapi.ApprovalRequest{Verb: verb, ID: id, Reason: reason})
			})
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	if verb == agentapi.ApprovalReject {
		c.Flags().StringVar(&reason, "reason", "", "why the draft is rejected (required; filed with it)")
	}
	return c
}

// eachDraft runs a verb on each draft of args (ids, or - for ids on
// stdin), through the service or on the mailbox, printing each result (or
// each refusal, on stderr) and going on; the exit code is the first
// refusal's.
func (a *app) eachDraft(ctx context.Context, args []string, format string, verb func(*agents.Conn, string) (*agentapi.OutboundResult, error)) error {
	ids, conn, err := a.dialIDs(ctx, args, format)
	if err != nil {
		return err
	}
	defer conn.Close()
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	var first error
	for _, id := range ids {
		res, err := verb(conn, id)
		if err != nil {
			fmt.Fprintf(a.stderr, "%s%v\n", errPrefix, err)
			first = cmp.Or(first, err)
			continue
		}
		if format == "json" {
			enc.Encode(res)
		} else {
			fmt.Fprintln(a.stdout, res.Message)
		}
	}
	if first != nil {
		return &exitError{code: exitCode(first)}
	}
	return nil
}
