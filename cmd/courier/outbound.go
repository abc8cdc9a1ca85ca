package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/mailbox"
)

// outboundCommand is `courier outbound list|retry|requeue|cancel`: the
// operator's view of the drafts being delivered and of those that failed.
func (a *app) outboundCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "outbound",
		Short: "See and fix the outbound queue: list, retry, requeue, cancel",
		Long: `See and fix the drafts on their way out. list shows each queued draft
(queued, waiting with its last error and the end of its backoff, scheduled,
sending) and each dead-lettered one with its reason; retry sends a waiting
draft now; requeue puts a dead letter back in the queue with its idempotency
key; cancel takes a queued draft out, filing it in .deadletter/<provider>/ as
"cancelled by <user>". While the service runs, retry, requeue and cancel go
through its socket; a user other than the service's may act only on the
drafts its own agents queued.`,
		Args: cobra.NoArgs,
	}
	c.AddCommand(a.outboundListCommand())
	for _, v := range []struct{ verb, short string }{
		{agentapi.OutboundRetry, "Send waiting drafts now, skipping their backoff"},
		{agentapi.OutboundRequeue, "Put dead-lettered drafts back in the queue (their idempotency key kept)"},
		{agentapi.OutboundCancel, "Take queued drafts out so they are never sent (filed in .deadletter/ as cancelled)"},
	} {
		c.AddCommand(a.outboundVerbCommand(v.verb, v.short))
	}
	return c
}

func (a *app) outboundListCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "list",
		Short: "List the queued and dead-lettered drafts with their status and reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"table", "json"}); err != nil {
				return err
			}
			mb, err := a.Mailbox()
			if err != nil {
				return err
			}
			ds, err := mb.OutboundDrafts(cmd.Context())
			if err != nil {
				return err
			}
			if format == "json" {
				if ds == nil {
					ds = []mailbox.OutboundDraft{}
				}
				enc := json.NewEncoder(a.stdout)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(ds)
			}
			if len(ds) == 0 {
				fmt.Fprintln(a.stdout, "No draft is queued or dead-lettered.")
				return nil
			}
			t := &tableWriter{w: a.stdout}
			t.row("ID", "PROVIDER", "STATUS", "ATTEMPTS", "TO", "DETAIL")
			for i := range ds {
				d := &ds[i]
				t.row(d.ID, string(d.Provider), d.Status, fmt.Sprint(d.Attempts), cell(mailview.SafeText(d.To), 30), outboundDetail(d))
			}
			return t.flush()
		},
	}
	c.Flags().StringVar(&format, "format", "table", "table or json")
	return c
}

// outboundDetail is the DETAIL column: until when a draft waits, and why.
func outboundDetail(d *mailbox.OutboundDraft) string {
	s := ""
	if d.NextAt != nil {
		s = "until " + d.NextAt.Format(time.RFC3339)
	}
	if d.Reason != "" {
		if s != "" {
			s += ": "
		}
		s += mailview.OneLine(mailview.SafeText(d.Reason))
	}
	return s
}

func (a *app) outboundVerbCommand(verb, short string) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   verb + " ID... | " + verb + " -",
		Short: short,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachDraft(cmd.Context(), args, format, func(conn *agents.Conn, id string) (*agentapi.OutboundResult, error) {
				return conn.Outbound(cmd.Context(), agentapi.OutboundRequest{Verb: verb, ID: id})
			})
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}
