package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
)

// Backoff is a wait that doubles after each failure in a row: First, then
// twice as long, up to Max.
type Backoff struct {
	First, Max time.Duration
}

// Restart is how long the service waits before it starts a Source again.
// A Run that stayed healthy, that is lasted at least healthyRun before it
// failed, starts both backoffs again from their first step: a source that
// ran for hours and lost its connection reconnects after a second, not
// after the minute its failures at start once reached. A source that fails
// sooner than healthyRun each time is failing, and its waits go on
// growing.
type Restart struct {
	// Failed is the wait after a Run that failed: its connection lost,
	// its server down or unreachable.
	Failed Backoff
	// Refused is the wait after a Start or a Run whose provider refused
	// the credentials or their scopes (adapters.IsRefused): trying again
	// at once would fail the same way, but the provider's side may be
	// fixed at any time.
	Refused Backoff
}

// DefaultRestart: a failed Run is restarted after a second, doubling up
// to a minute; refused credentials are tried again after two minutes,
// doubling up to ten (courier.restart.refused and refused_max).
var DefaultRestart = Restart{
	Failed:  Backoff{First: time.Second, Max: time.Minute},
	Refused: Backoff{First: 2 * time.Minute, Max: 10 * time.Minute},
}

// healthyRun is how long a Run must last for its failure to start the
// backoffs again.
const healthyRun = time.Minute

// clock is what the restart loop reads time from; tests give a fake one.
type clock struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

var realClock = clock{now: time.Now, after: time.After}

// backoff is the state of one Backoff: the next wait.
type backoff struct {
	Backoff
	next time.Duration
}

func (b *backoff) wait() time.Duration {
	if b.next <= 0 {
		b.next = b.First
	}
	d := b.next
	b.next = min(2*d, b.Max)
	return d
}

func (b *backoff) reset() { b.next = 0 }

// sourceRun is one Source in the service: its Start is part of the
// service's start, and its Run loop is restarted after a backoff whenever
// it returns. A Start that fails because the provider refused the
// credentials (adapters.Refused) does not fail the service's start: the
// service runs without the Source, which is started again after the
// Refused backoff, until it starts. Only the loop's goroutine uses the
// backoffs; retryAt is read by /health.
type sourceRun struct {
	src  adapters.Source
	sink adapters.Sink
	log  *slog.Logger
	clk  clock

	failures, refusals backoff

	mu      sync.Mutex
	retryAt time.Time // when the Source is started again; zero while it runs
}

func newSourceRun(src adapters.Source, sink adapters.Sink, log *slog.Logger, r Restart, clk clock) *sourceRun {
	return &sourceRun{src: src, sink: sink, log: log.With("source", src.Name()), clk: clk,
		failures: backoff{Backoff: r.Failed}, refusals: backoff{Backoff: r.Refused}}
}

// RetryAt is when the Source is started again after a failure; zero while
// it runs.
func (r *sourceRun) RetryAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retryAt
}

func (r *sourceRun) setRetryAt(t time.Time) {
	r.mu.Lock()
	r.retryAt = t
	r.mu.Unlock()
}

func (r *sourceRun) start(ctx context.Context) error {
	if s, ok := r.src.(adapters.Starter); ok {
		return s.Start(ctx)
	}
	return nil
}

// component is the Source's part of the service's lifetime.
func (r *sourceRun) component() Component {
	var (
		cancel context.CancelFunc
		wg     sync.WaitGroup
	)
	return Component{
		Name: r.src.Name(),
		Start: func(ctx context.Context) error {
			wait := time.Duration(-1) // Run at once
			if err := r.start(ctx); err != nil {
				if !adapters.IsRefused(err) {
					return err
				}
				// Reported before the service says it is ready, so that
				// /health, and `courier start`, show it from the first.
				wait = r.failed(err)
			}
			var rctx context.Context
			rctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.loop(rctx, wait)
			}()
			return nil
		},
		Stop: func(ctx context.Context) error {
			if cancel != nil {
				cancel()
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				return fmt.Errorf("did not stop in time")
			}
			if s, ok := r.src.(adapters.Stopper); ok {
				return s.Stop(ctx)
			}
			return nil
		},
	}
}

// loop runs the Source until ctx ends, restarting it after each return. A
// wait of 0 or more comes first: the Source's Start was refused, and is
// tried again after it, until it succeeds.
func (r *sourceRun) loop(ctx context.Context, wait time.Duration) {
	unstarted := wait >= 0
	for {
		if wait >= 0 {
			select {
			case <-ctx.Done():
				return
			case <-r.clk.after(wait):
			}
			r.setRetryAt(time.Time{})
			if unstarted {
				if err := r.start(ctx); err != nil {
					if ctx.Err() != nil {
						return
					}
					wait = r.failed(err)
					continue
				}
				unstarted = false
			}
		}
		began := r.clk.now()
		err := r.src.Run(ctx, r.sink)
		if ctx.Err() != nil {
			return
		}
		if r.clk.now().Sub(began) >= healthyRun {
			r.failures.reset()
			r.refusals.reset()
		}
		if err == nil {
			err = errors.New("source stopped on its own")
		}
		wait = r.failed(err)
	}
}

// failed records a failure of the Source (the log, its ErrorReporter,
// retryAt) and returns the wait before it is started again.
func (r *sourceRun) failed(err error) time.Duration {
	b, msg := &r.failures, "source failed; restarting"
	if adapters.IsRefused(err) {
		b, msg = &r.refusals, "the provider refused the credentials; the source is tried again later, the others run meanwhile"
	}
	wait := b.wait()
	r.log.Error(msg, "err", err, "in", wait)
	if h, ok := r.src.(adapters.ErrorReporter); ok {
		h.Error(err)
	}
	r.setRetryAt(r.clk.now().Add(wait))
	return wait
}
