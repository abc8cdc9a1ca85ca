package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/agents"
)

// verb is one of claim, done and fail on one id, on a connection that
// goes to the service or to the mailbox (agents.Local).
type verb func(ctx context.Context, c *agents.Conn, id string) (agentapi.Outcome, error)

// each runs v on every id, through the service while it runs (package
// agents), prints a result per id, and returns the exit status of the
// first failure.
func (a *app) each(ctx context.Context, args []string, format string, v verb) error {
	ids, c, err := a.dialIDs(ctx, args, format)
	if err != nil {
		return err
	}
	defer c.Close()
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	first := 0
	for _, id := range ids {
		o, err := v(ctx, c, id)
		if err != nil {
			return err
		}
		r := o.Result
		if o.Code != 0 && first == 0 {
			first = o.Code
		}
		if format == "json" {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		if r.Success {
			fmt.Fprintln(a.stdout, r.Message)
		} else {
			fmt.Fprintf(a.stderr, "%s%s\n", errPrefix, r.Message)
		}
	}
	if first != 0 {
		return &exitError{code: first}
	}
	return nil
}

// dialIDs checks --format (text or json), reads the ids args name, and
// opens the connection a writing verb goes through: the service's socket,
// or the mailbox.
func (a *app) dialIDs(ctx context.Context, args []string, format string) ([]string, *agents.Conn, error) {
	if err := checkFormat(format, []string{"text", "json"}); err != nil {
		return nil, nil, err
	}
	ids, err := a.ids(args)
	if err != nil {
		return nil, nil, err
	}
	l, err := a.local()
	if err != nil {
		return nil, nil, err
	}
	c, err := l.Dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	return ids, c, nil
}

func (a *app) claimCommand() *cobra.Command {
	var timeout time.Duration
	var format string
	c := &cobra.Command{
		Use:   "claim ID... | claim -",
		Short: "Claim messages for this agent (exit 2 if another agent holds one)",
		Long: `Claim messages for this agent. A claim lasts --timeout (default 300 s);
an agent that holds it renews it by claiming again; once it runs out any
agent may take the message. Exit codes: 1 not found, 2 held by another
agent (or done, or failed and waiting to be retried), 4 database timeout.`,
		Example: `  courier claim lark_om_abc123
  courier list --status new --format id | courier claim -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.each(cmd.Context(), args, format, func(ctx context.Context, c *agents.Conn, id string) (agentapi.Outcome, error) {
				return c.Claim(ctx, agentapi.ClaimRequest{ID: id, Agent: a.explicitAgent(), Timeout: timeout})
			})
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 0, "how long the claim holds (default from config, 300s)")
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

func (a *app) doneCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "done ID... | done -",
		Short: "Mark claimed messages processed: they move to archive/ with processed_at",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.each(cmd.Context(), args, format, func(ctx context.Context, c *agents.Conn, id string) (agentapi.Outcome, error) {
				return c.Done(ctx, agentapi.DoneRequest{ID: id, Agent: a.explicitAgent()})
			})
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

func (a *app) failCommand() *cobra.Command {
	var reason, format string
	var retryable bool
	var permanent bool
	c := &cobra.Command{
		Use:   "fail ID... --reason TEXT",
		Short: "Give back claimed messages that could not be processed",
		Long: `Give back claimed messages that could not be processed. A retryable
failure (the default) releases the message for another try after a backoff
of 1 s, 2 s, 4 s...; after max_failures (3) failures, or with --permanent,
it is set aside in .deadletter/<provider>/ with the reason in the file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if permanent {
				retryable = false
			}
			return a.each(cmd.Context(), args, format, func(ctx context.Context, c *agents.Conn, id string) (agentapi.Outcome, error) {
				return c.Fail(ctx, agentapi.FailRequest{ID: id, Agent: a.explicitAgent(), Reason: reason, Retryable: retryable})
			})
		},
	}
	fl := c.Flags()
	fl.StringVar(&reason, "reason", "", "why (recorded with the message)")
	fl.BoolVar(&retryable, "retryable", true, "whether another try may succeed")
	fl.BoolVar(&permanent, "permanent", false, "do not retry: set the message aside at once (same as --retryable=false)")
	fl.StringVar(&format, "format", "text", "text or json")
	return c
}
