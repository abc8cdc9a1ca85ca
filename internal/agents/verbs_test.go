package agents

import (
	"errors"
	"testing"
	"time"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// An Outcome carries the exit code of its error's kind and upstream's
// error name, and a claim held by another agent names the holder and
// when the claim runs out.
func TestOutcome(t *testing.T) {
	exp := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	for _, c := range []struct {
		err  error
		code int
		name string
	}{
		{nil, 0, ""},
		{&mailbox.NotFoundError{ID: "x"}, 1, "not_found"},
		{&mailbox.ConflictError{ID: "x", Status: mailbox.StatusClaimed, Holder: "ann", ExpiresAt: exp}, 2, "already_claimed"},
		{&mailbox.ConflictError{ID: "x", Status: mailbox.StatusDone}, 2, "conflict"},
		{mailbox.ErrBusy, 4, "timeout"},
		{errors.New("disk on fire"), 70, "error"},
	} {
		o := Outcome("x", agentapi.Result{Status: "claimed"}, c.err)
		if o.Code != c.code || o.Result.Error != c.name || o.Result.Success != (c.err == nil) || o.Result.MessageID != "x" {
			t.Errorf("%v: %+v, want exit %d, error %q", c.err, o, c.code, c.name)
		}
	}
	o := Outcome("x", agentapi.Result{}, &mailbox.ConflictError{ID: "x", Status: mailbox.StatusClaimed, Holder: "ann", ExpiresAt: exp})
	if o.Result.ClaimedBy != "ann" || o.Result.ExpiresAt == nil || !o.Result.ExpiresAt.Equal(exp) || o.Result.Status != "claimed" {
		t.Errorf("a held claim: %+v", o.Result)
	}
	if r := Refused("x", fault.Errorf(fault.Usage, "bad name")); r.Code != 64 || r.Result.Message != "bad name" || r.Result.Error != "error" {
		t.Errorf("Refused: %+v", r)
	}
}
