package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/mailbox"
)

// result is one line of a claim, done or fail answer, shaped like
// upstream's API responses; the service answers with the same.
type result = agentapi.Result

// verb is one of claim, done and fail, both ways: acting on the mailbox
// (direct), or asking the service (remote).
type verb struct {
	direct func(ctx context.Context, mb *mailbox.Mailbox, id string) (result, error)
	remote func(ctx context.Context, c *agentapi.Client, id string) (agentapi.Outcome, error)
}

// each runs v on every id, through the service while it runs (see
// agents.go), prints a result per id, and returns the exit status of the
// first failure.
func (a *app) each(ctx context.Context, args []string, format string, v verb) error {
	if err := checkFormat(format, []string{"text", "json"}); err != nil {
		return err
	}
	ids, err := a.ids(args)
	if err != nil {
		return err
	}
	svc, err := a.service(ctx, true)
	if err != nil {
		return err
	}
	var mb *mailbox.Mailbox
	if svc != nil {
		defer svc.Close()
	} else if mb, err = a.mailbox(); err != nil {
		return err
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	first := 0
	for _, id := range ids {
		var o agentapi.Outcome
		if svc != nil {
			if o, err = v.remote(ctx, svc, id); err != nil {
				return serviceError(err)
			}
		} else {
			r, err := v.direct(ctx, mb, id)
			o = outcome(id, r, err)
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
		return &exitError{code: first, silent: true}
	}
	return nil
}

// outcome is the answer for one id: the result of an operation, or what
// went wrong with it, and the exit code that goes with it.
func outcome(id string, r result, err error) agentapi.Outcome {
	r.MessageID = id
	if err == nil {
		r.Success = true
		return agentapi.Outcome{Result: r}
	}
	r.Success = false
	r.Error = errorKind(err)
	r.Message = err.Error()
	var ce *mailbox.ConflictError
	if errors.As(err, &ce) {
		r.Status = string(ce.Status)
		r.ClaimedBy = ce.Holder
		if !ce.ExpiresAt.IsZero() {
			r.ExpiresAt = &ce.ExpiresAt
		}
		if !ce.RetryAt.IsZero() {
			r.RetryAt = &ce.RetryAt
		}
	}
	return agentapi.Outcome{Result: r, Code: exitCode(err)}
}

func errorKind(err error) string {
	var ce *mailbox.ConflictError
	switch {
	case errors.As(err, &ce) && ce.Status == mailbox.StatusClaimed:
		return "already_claimed"
	case errors.As(err, &ce):
		return "conflict"
	case errors.Is(err, mailbox.ErrNotFound):
		return "not_found"
	case errors.Is(err, mailbox.ErrBusy):
		return "timeout"
	}
	return "error"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

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
			return a.each(cmd.Context(), args, format, verb{
				direct: func(ctx context.Context, mb *mailbox.Mailbox, id string) (result, error) {
					return claimOne(ctx, mb, id, a.agent(), timeout)
				},
				remote: func(ctx context.Context, c *agentapi.Client, id string) (agentapi.Outcome, error) {
					return c.Claim(ctx, agentapi.ClaimRequest{ID: id, Agent: a.explicitAgent(), Timeout: timeout})
				},
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
			return a.each(cmd.Context(), args, format, verb{
				direct: func(ctx context.Context, mb *mailbox.Mailbox, id string) (result, error) {
					return doneOne(ctx, mb, id, a.agent())
				},
				remote: func(ctx context.Context, c *agentapi.Client, id string) (agentapi.Outcome, error) {
					return c.Done(ctx, agentapi.DoneRequest{ID: id, Agent: a.explicitAgent()})
				},
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
			return a.each(cmd.Context(), args, format, verb{
				direct: func(ctx context.Context, mb *mailbox.Mailbox, id string) (result, error) {
					return failOne(ctx, mb, id, a.agent(), reason, retryable)
				},
				remote: func(ctx context.Context, c *agentapi.Client, id string) (agentapi.Outcome, error) {
					return c.Fail(ctx, agentapi.FailRequest{ID: id, Agent: a.explicitAgent(), Reason: reason, Retryable: retryable})
				},
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

// claimOne, doneOne and failOne are the verbs on one message, for agent:
// the command line runs them on the mailbox without the service, and the
// service runs them for the agents that ask it.
func claimOne(ctx context.Context, mb *mailbox.Mailbox, id, agent string, timeout time.Duration) (result, error) {
	cl, err := mb.Claim(ctx, id, agent, timeout)
	if err != nil {
		return result{}, err
	}
	what := "claimed"
	if cl.Renewed {
		what = "renewed claim on"
	}
	return result{Status: "claimed", ClaimedBy: cl.Agent, ClaimedAt: &cl.ClaimedAt, ExpiresAt: &cl.ExpiresAt,
		Message: fmt.Sprintf("%s %s as %s until %s", what, id, agent, stamp(cl.ExpiresAt))}, nil
}

func doneOne(ctx context.Context, mb *mailbox.Mailbox, id, agent string) (result, error) {
	rel, err := mb.Done(ctx, id, agent)
	if err != nil {
		return result{}, err
	}
	return result{Status: "done", Path: rel, Message: fmt.Sprintf("done %s -> %s", id, rel)}, nil
}

func failOne(ctx context.Context, mb *mailbox.Mailbox, id, agent, reason string, retryable bool) (result, error) {
	r, err := mb.Fail(ctx, id, agent, reason, retryable)
	if err != nil {
		return result{}, err
	}
	msg := fmt.Sprintf("failed %s (%d time(s)); ", id, r.Failures)
	if r.Status == mailbox.StatusDead {
		msg += "set aside in " + r.Path
	} else {
		msg += "can be claimed again from " + stamp(*r.RetryAt)
	}
	return result{Status: string(r.Status), Failures: r.Failures, RetryAt: r.RetryAt, Path: r.Path, Message: msg}, nil
}
