package chatsync

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
)

// Gapper is what marks a gap: a Tracker.
type Gapper interface{ Gap() }

// Defaults of CatchUp.
const (
	// DefaultRetry is the wait after a failed pass, doubled after each
	// failure in a row up to the interval (or DefaultMaxRetry): a pass
	// fails on what lasts (a rate limit past its retries, the provider
	// down), and a conversation's checkpoint stays where it is until a
	// pass completes.
	DefaultRetry    = time.Minute
	DefaultMaxRetry = 30 * time.Minute
	// DefaultAgain is the pause after a pass that stopped at its bounds.
	DefaultAgain = time.Second
	// MaxFetchPasses bounds FetchOnce: a gap larger than this many passes
	// is left to the service.
	MaxFetchPasses = 100
)

// CatchUp runs a provider's catch-up passes: what was posted while
// Courier was away (a restart, a lost connection, deliveries that
// failed), read back from the provider's history. Set its fields before
// Run; Pass, Tracker and Name are required.
//
// Run makes a pass at once (or, with OnKick, at the first Kick), again
// after Again when one stopped at its bounds (ErrIncomplete), every
// Interval, and after a failure once Retry has passed, doubling up to the
// interval. Kick asks for a pass now (a connection came up); Failed tells
// it a store failed: every conversation is marked (Tracker.Gap), and a
// pass runs AfterFailure later, giving the provider's own redeliveries
// their chance first.
type CatchUp struct {
	// Name starts the log lines ("slack").
	Name string
	// Pass makes one pass over every conversation; ErrIncomplete when a
	// bound stopped it.
	Pass func(ctx context.Context, sink adapters.Sink) error
	// Tracker is marked at each failure (Failed).
	Tracker Gapper
	// Interval is between passes that read everything; 0: none, passes
	// come from Kick and Failed alone.
	Interval time.Duration
	// Again is the pause after a pass that stopped at its bounds
	// (DefaultAgain when 0).
	Again time.Duration
	// AfterFailure is how long after Failed the pass runs.
	AfterFailure time.Duration
	// Retry is the first wait after a failed pass (DefaultRetry when
	// 0), doubled up to MaxRetry (Interval, or DefaultMaxRetry when
	// that is 0).
	Retry, MaxRetry time.Duration
	// OnKick makes Run wait for the first Kick before its first pass (a
	// connection's catch-up starts once it is up).
	OnKick bool
	// Refused reports an error of the provider refusing the credentials
	// (a revoked token): Run records it on Health and returns it, marked
	// adapters.Refused, and the Source that runs it ends its Run with it,
	// so that the service tries again minutes later. Other failures are
	// tried again by Run itself, after Retry.
	Refused func(error) bool
	// Health records the passes' errors; Healthy, when set, is called
	// after a pass that read everything.
	Health  *adapters.HealthTracker
	Healthy func()
	// Log is where failures are told; nil discards.
	Log *slog.Logger

	once         sync.Once
	kick, failed chan struct{}
}

func (c *CatchUp) init() {
	c.once.Do(func() {
		c.kick, c.failed = make(chan struct{}, 1), make(chan struct{}, 1)
		if c.Log == nil {
			c.Log = slog.New(slog.DiscardHandler)
		}
	})
}

// Kick asks for a pass as soon as the one running, if any, is over.
func (c *CatchUp) Kick() {
	c.init()
	select {
	case c.kick <- struct{}{}:
	default: // a pass is wanted already: it reads everything
	}
}

// Failed records that an event could not be stored: until a pass reads
// the conversations again, live events must not move a checkpoint past
// it (a crash would lose it), so every conversation is marked at once;
// and a pass is asked for, since the provider's redeliveries may all
// fail too. It does not block.
func (c *CatchUp) Failed() {
	c.init()
	c.Tracker.Gap()
	select {
	case c.failed <- struct{}{}:
	default:
	}
}

// Run makes passes until ctx ends, and returns nil then; or until the
// provider refuses the credentials (Refused), and returns that.
func (c *CatchUp) Run(ctx context.Context, sink adapters.Sink) error {
	c.init()
	retry := c.retry()
	wait, forever := time.Duration(0), c.OnKick
	for {
		if !c.sleep(ctx, wait, forever) {
			return nil
		}
		err := c.Pass(ctx, sink)
		forever = false
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrIncomplete):
			wait = c.again()
		case err != nil && c.Refused != nil && c.Refused(err):
			c.error(err)
			return adapters.Refused(err)
		case err != nil:
			wait, retry = retry, min(2*retry, c.maxRetry())
			c.error(err)
			c.Log.Warn(c.Name+": catch-up failed; tried again later", "err", err, "in", wait)
		default:
			retry = c.retry()
			if c.Healthy != nil {
				c.Healthy()
			}
			wait, forever = c.Interval, c.Interval <= 0
		}
	}
}

// sleep waits d (forever: until a signal) or a Kick, or, after Failed,
// AfterFailure; false when ctx ended first.
func (c *CatchUp) sleep(ctx context.Context, d time.Duration, forever bool) bool {
	if d <= 0 && !forever {
		return ctx.Err() == nil
	}
	var timeout <-chan time.Time
	if !forever {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-timeout:
		return true
	case <-c.kick:
		return true
	case <-c.failed:
	}
	// A possible gap: until the pass reads it, live events must not move
	// the checkpoints past it. Failed marked them already; marking again
	// here costs a lock per conversation and keeps the round anew
	// whatever ran between.
	c.Tracker.Gap()
	return Sleep(ctx, c.AfterFailure) == nil
}

// Sleep waits d, or until ctx ends (its error then): the wait of a
// catch-up's call before it tries again (a rate limit's Retry-After).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// FetchOnce is `courier fetch`: passes until every conversation is
// caught up, MaxFetchPasses at most (ErrIncomplete then).
func (c *CatchUp) FetchOnce(ctx context.Context, sink adapters.Sink) error {
	for range MaxFetchPasses {
		if err := c.Pass(ctx, sink); !errors.Is(err, ErrIncomplete) {
			return err
		}
	}
	return ErrIncomplete
}

func (c *CatchUp) error(err error) {
	if c.Health != nil {
		c.Health.Error(err)
	}
}

func (c *CatchUp) retry() time.Duration {
	if c.Retry > 0 {
		return min(c.Retry, c.maxRetry())
	}
	return min(DefaultRetry, c.maxRetry())
}

func (c *CatchUp) maxRetry() time.Duration {
	switch {
	case c.MaxRetry > 0:
		return c.MaxRetry
	case c.Interval > 0:
		return c.Interval
	}
	return DefaultMaxRetry
}

func (c *CatchUp) again() time.Duration {
	if c.Again > 0 {
		return c.Again
	}
	return DefaultAgain
}
