package chatsync

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// Step is one thing a draft shows in the chat: a part of its text, a
// file or a batch of files.
type Step struct {
	// Label names the step, unique within the draft ("text 2/3").
	Label string
	// Upload, when set, runs before anything of the draft is posted: an
	// upload shows nowhere until a post names it, so a failed upload
	// posts nothing, and the engine's gate is held only for the quick
	// calls that post.
	Upload func(ctx context.Context) error
	// Post shows the step and returns what the provider answered (a ts,
	// a message id, file ids), recorded as the step's reply.
	Post func(ctx context.Context) (reply string, err error)
}

// Poster posts a draft's steps, each once across attempts and crashes.
// Every step done is an accepted "recipient" of the attempt (a
// RecipientResult whose Address is To and the step's label, "C024BE91L
// text 2/3"): recorded at once through Attempt.Reached when more steps
// follow, reported in a PartialError when a later step fails, and
// skipped by the next attempt, which finds it in Attempt.Accepted.
type Poster struct {
	// Name starts the error of a gate not entered ("slack: waiting to
	// post: ...").
	Name string
	// Log is told of a step posted but not recorded; nil discards.
	Log *slog.Logger
	// Unrecorded is that warning's text.
	Unrecorded string
}

// Posted is what the steps became, in the order of the steps.
type Posted struct {
	// Replies are each step's reply, this attempt's or an earlier one's.
	Replies []string
	// Results are the steps this attempt posted.
	Results []schema.RecipientResult
}

// Post uploads then posts the steps of at's draft not done by an earlier
// attempt, all at To. The uploads come first, then Attempt.EnterCommit,
// then the posts in order. An error after a post is a PartialError with
// what was posted.
func (p Poster) Post(ctx context.Context, at *adapters.Attempt, to string, steps []Step) (Posted, error) {
	done := map[string]string{} // address → reply
	for _, r := range at.Accepted {
		done[r.Address] = string(r.Reply)
	}
	addr := func(st Step) string { return to + " " + st.Label }
	for _, st := range steps {
		if _, ok := done[addr(st)]; ok || st.Upload == nil {
			continue
		}
		if err := st.Upload(ctx); err != nil {
			return Posted{}, err
		}
	}
	if err := at.EnterCommit(ctx); err != nil {
		return Posted{}, adapters.Temporary(fmt.Errorf("%s: waiting to post: %w", p.Name, err))
	}
	var out Posted
	for n, st := range steps {
		if _, ok := done[addr(st)]; ok {
			continue
		}
		reply, err := st.Post(ctx)
		if err != nil {
			if len(out.Results) > 0 {
				return Posted{}, &adapters.PartialError{Accepted: out.Results, Err: err}
			}
			return Posted{}, err
		}
		done[addr(st)] = reply
		r := schema.RecipientResult{Address: addr(st), Status: "sent", Reply: schema.Text(reply)}
		out.Results = append(out.Results, r)
		// Recorded at once when more steps follow: a crash before the
		// last step repeats only the step in flight, not the parts
		// already posted (the last is recorded with the receipt).
		if n == len(steps)-1 {
			continue
		}
		if err := at.Reached(ctx, r); err != nil && p.Log != nil {
			p.Log.Warn(p.Unrecorded, "draft", at.Draft.ID, "step", st.Label, "error", err)
		}
	}
	for _, st := range steps {
		out.Replies = append(out.Replies, done[addr(st)])
	}
	return out, nil
}
