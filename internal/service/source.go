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

// The restart backoff of a Source whose Run returns: a second after the
// first failure, doubling up to a minute. A Run that stayed healthy, that
// is lasted at least healthyRun before it failed, starts the backoff again
// from its first step: a source that ran for hours and lost its connection
// reconnects after a second, not after the minute its failures at start
// once reached. A source that fails sooner than healthyRun each time is
// failing, and its waits go on growing.
const (
	minSourceBackoff = time.Second
	maxSourceBackoff = time.Minute
	healthyRun       = maxSourceBackoff
)

// clock is what the restart loop reads time from; tests give a fake one.
type clock struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

var realClock = clock{now: time.Now, after: time.After}

// SourceComponent runs a Source: its Start (connect, check credentials)
// is part of the service's start; its Run loop is restarted with a
// backoff whenever it returns.
func SourceComponent(src adapters.Source, sink adapters.Sink, log *slog.Logger) Component {
	return sourceComponent(src, sink, log, realClock)
}

func sourceComponent(src adapters.Source, sink adapters.Sink, log *slog.Logger, clk clock) Component {
	log = log.With("source", src.Name())
	var (
		cancel context.CancelFunc
		wg     sync.WaitGroup
	)
	return Component{
		Name: src.Name(),
		Start: func(ctx context.Context) error {
			if s, ok := src.(adapters.Starter); ok {
				if err := s.Start(ctx); err != nil {
					return err
				}
			}
			var rctx context.Context
			rctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
			wg.Add(1)
			go func() {
				defer wg.Done()
				runSource(rctx, src, sink, log, clk)
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
			if s, ok := src.(adapters.Stopper); ok {
				return s.Stop(ctx)
			}
			return nil
		},
	}
}

// runSource runs src until ctx ends, restarting it after each return.
func runSource(ctx context.Context, src adapters.Source, sink adapters.Sink, log *slog.Logger, clk clock) {
	backoff := minSourceBackoff
	for {
		began := clk.now()
		err := src.Run(ctx, sink)
		if ctx.Err() != nil {
			return
		}
		if clk.now().Sub(began) >= healthyRun {
			backoff = minSourceBackoff
		}
		if err == nil {
			err = errors.New("source stopped on its own")
		}
		log.Error("source failed; restarting", "err", err, "in", backoff)
		if h, ok := src.(adapters.ErrorReporter); ok {
			h.Error(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.after(backoff):
		}
		backoff = min(backoff*2, maxSourceBackoff)
	}
}
