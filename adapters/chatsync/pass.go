package chatsync

import (
	"context"
	"errors"

	"github.com/monoco/courier/adapters"
)

// Pass is one catch-up pass over the conversations, from StartPass to
// EndPass. Its methods are for the one goroutine that runs the pass.
type Pass[P comparable, X any] struct {
	t *Tracker[P, X]
	// gen is Tracker.gaps when the pass began: a gap since makes its
	// CaughtUp save only what it read.
	gen   uint64
	round *round
	fresh bool
}

// Reading is where a pass reads a conversation from.
type Reading[P comparable] struct {
	// Saved is the saved position; the zero P when there is none (a
	// conversation met for the first time: the provider records where it
	// is now rather than reading its past).
	Saved P
	// PassedTo is where the last pass read up to, in this process; the
	// zero P when none did.
	PassedTo P
	// From is the older of the two: live events may have moved the
	// checkpoint past a message that never arrived, which only reading
	// again over what they covered finds. A provider may bound how far
	// back it goes (Lark: a window).
	From P
}

// StartPass begins a catch-up pass. It begins a new round when none is
// under way or a gap came since the round began.
func (t *Tracker[P, X]) StartPass() *Pass[P, X] {
	t.mu.Lock()
	defer t.mu.Unlock()
	fresh := false
	if t.round == nil || t.round.gen != t.gaps {
		t.round, fresh = &round{gen: t.gaps, done: map[string]bool{}}, true
	}
	return &Pass[P, X]{t: t, gen: t.gaps, round: t.round, fresh: fresh}
}

// EndPass ends p with the pass's outcome. ErrIncomplete (a pass stopped
// at its bounds) leaves the round to the next pass; any other outcome
// ends it (read whole, or failed: the next pass starts a round anew). A
// round that read every conversation with no error and no gap since it
// began makes the tracker live: a conversation first met from then on is
// caught up.
func (t *Tracker[P, X]) EndPass(p *Pass[P, X], err error) {
	if errors.Is(err, ErrIncomplete) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.round == p.round {
		t.round = nil
	}
	if err == nil && t.gaps == p.round.gen {
		t.live = true
	}
}

// RunPass runs pass between StartPass and EndPass, and returns its
// outcome.
func (t *Tracker[P, X]) RunPass(pass func(p *Pass[P, X]) error) error {
	p := t.StartPass()
	err := pass(p)
	t.EndPass(p, err)
	return err
}

// NewRound reports whether the pass begins a round: a provider resets
// what it keeps of a round of its own (Lark: where its list of chats
// goes on).
func (p *Pass[P, X]) NewRound() bool { return p.fresh }

// Done reports whether conv was read by an earlier pass of the round:
// the pass skips it, so that the conversations early in the list cannot
// use every pass's budget and starve the rest.
func (p *Pass[P, X]) Done(conv string) bool {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	return p.round.done[conv]
}

// Finish marks conv as done for the round without catching it up: a
// conversation the provider may not read (the bot left it). CaughtUp
// marks the conversations it catches up.
func (p *Pass[P, X]) Finish(conv string) {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	p.round.done[conv] = true
}

// Begin starts the reading of conv: conv is not caught up until CaughtUp
// (what is delivered meanwhile, read or live, must not move the
// checkpoint past what is not read yet). It returns where to read from;
// with, when set, is called with conv's extra state while conv is held.
func (p *Pass[P, X]) Begin(ctx context.Context, sink adapters.Sink, conv string, with func(x *X)) (Reading[P], error) {
	t := p.t
	e := t.acquire(conv)
	defer t.release(e)
	if err := t.load(ctx, e, sink, conv); err != nil {
		return Reading[P]{}, err
	}
	e.caughtUp = false
	r := Reading[P]{Saved: e.saved, PassedTo: e.passedTo, From: e.saved}
	if e.passedTo != t.zero && t.c.Compare(e.passedTo, e.saved) < 0 {
		r.From = e.passedTo
	}
	if with != nil {
		with(&e.x)
	}
	return r, nil
}

// CaughtUp records that the pass read conv up to readTo, everything
// before it included. With no gap since the pass began, it saves the
// newer of readTo and what was delivered meanwhile, when newer than the
// saved position, and conv is caught up: live events move its checkpoint
// from then on. After a gap, it saves readTo alone (what it read is
// durable; what live events delivered may lie beyond the new gap) and
// leaves conv not caught up until a later pass.
func (p *Pass[P, X]) CaughtUp(ctx context.Context, sink adapters.Sink, conv string, readTo P) error {
	t := p.t
	e := t.acquire(conv)
	defer t.release(e)
	if err := t.load(ctx, e, sink, conv); err != nil {
		return err
	}
	e.passedTo = t.newer(readTo, e.passedTo)
	t.mu.Lock()
	gapSince := t.gaps != p.gen
	t.mu.Unlock()
	pos := readTo
	if !gapSince {
		pos = t.newer(e.delivered, readTo)
	}
	if t.after(pos, e.saved) {
		if err := t.save(ctx, e, sink, conv, pos); err != nil {
			return err
		}
	}
	if gapSince {
		return nil
	}
	e.caughtUp = true
	e.delivered = t.zero
	p.Finish(conv)
	return nil
}

// Advance saves conv's position at pos, when newer than the saved one,
// without marking conv caught up: a pass stopped at its bounds (or at a
// message that failed) read everything before pos, in order, and the
// next pass, or a restart, goes on from there.
func (p *Pass[P, X]) Advance(ctx context.Context, sink adapters.Sink, conv string, pos P) error {
	t := p.t
	e := t.acquire(conv)
	defer t.release(e)
	if err := t.load(ctx, e, sink, conv); err != nil {
		return err
	}
	e.passedTo = t.newer(pos, e.passedTo)
	if !t.after(pos, e.saved) {
		return nil
	}
	return t.save(ctx, e, sink, conv, pos)
}
