package agents

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// Claim, Done and Fail are the verbs on one message, for agent: the
// command line runs them on the mailbox without the service, and the
// service runs them for the agents that ask it. Their Result is what
// `courier claim --format json` prints of a success.

// Claim claims message id for agent, for timeout (0: the configured
// claim_timeout); claiming again renews it.
func Claim(ctx context.Context, mb *mailbox.Mailbox, id, agent string, timeout time.Duration) (agentapi.Result, error) {
	cl, err := mb.Claim(ctx, id, agent, timeout)
	if errors.Is(err, mailbox.ErrClaimTooLong) {
		return agentapi.Result{}, fault.Errorf(fault.Usage, "%w (courier.claims.max_timeout)", err)
	}
	if err != nil {
		return agentapi.Result{}, err
	}
	what := "claimed"
	if cl.Renewed {
		what = "renewed claim on"
	}
	return agentapi.Result{Status: "claimed", ClaimedBy: cl.Agent, ClaimedAt: &cl.ClaimedAt, ExpiresAt: &cl.ExpiresAt,
		Message: fmt.Sprintf("%s %s as %s until %s", what, id, agent, stamp(cl.ExpiresAt))}, nil
}

// Done marks message id processed: it moves to archive/.
func Done(ctx context.Context, mb *mailbox.Mailbox, id, agent string) (agentapi.Result, error) {
	rel, err := mb.Done(ctx, id, agent)
	if err != nil {
		return agentapi.Result{}, err
	}
	return agentapi.Result{Status: "done", Path: rel, Message: fmt.Sprintf("done %s -> %s", id, rel)}, nil
}

// Fail gives message id back: retried after a backoff when retryable,
// else (or after max_failures) set aside in .deadletter/.
func Fail(ctx context.Context, mb *mailbox.Mailbox, id, agent, reason string, retryable bool) (agentapi.Result, error) {
	r, err := mb.Fail(ctx, id, agent, reason, retryable)
	if err != nil {
		return agentapi.Result{}, err
	}
	msg := fmt.Sprintf("failed %s (%d time(s)); ", id, r.Failures)
	if r.Status == mailbox.StatusDead {
		msg += "set aside in " + r.Path
	} else {
		msg += "can be claimed again from " + stamp(*r.RetryAt)
	}
	return agentapi.Result{Status: string(r.Status), Failures: r.Failures, RetryAt: r.RetryAt, Path: r.Path, Message: msg}, nil
}

// Outcome is the answer for one id: the result of a verb, or what went
// wrong with it, and the exit code that goes with it.
func Outcome(id string, r agentapi.Result, err error) agentapi.Outcome {
	r.MessageID = id
	if err == nil {
		r.Success = true
		return agentapi.Outcome{Result: r}
	}
	r.Success = false
	r.Error = errorName(err)
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
	return agentapi.Outcome{Result: r, Code: fault.ExitCode(err)}
}

// Refused is the Outcome of a request refused before it reached the
// mailbox (a bad agent name, an argument that is not one, no way to
// write).
func Refused(id string, err error) agentapi.Outcome {
	return agentapi.Outcome{Result: agentapi.Result{MessageID: id, Error: "error", Message: err.Error()}, Code: fault.ExitCode(err)}
}

// errorName is the error field of a failed Result, as upstream names it.
func errorName(err error) string {
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
