package service

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
)

// TestSourceBackoffResets: the restart backoff grows while a source keeps
// failing, and starts again from a second after a Run that stayed healthy
// (lasted healthyRun); a Run just short of that does not reset it. The
// clock is fake: each Run moves it by the time the script says the run
// lasted, and the waits are recorded, not slept.
func TestSourceBackoffResets(t *testing.T) {
	s := time.Second
	lasted := []time.Duration{0, 0, 0, 0, 0, 0, 0, 0, 2 * time.Minute, 0, 0, 59 * s, 0}
	want := []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s, 1 * s, 2 * s, 4 * s, 8 * s, 16 * s}

	var (
		mu    sync.Mutex
		now   = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		waits []time.Duration
	)
	clk := clock{
		now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		after: func(d time.Duration) <-chan time.Time {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			ch := make(chan time.Time, 1)
			ch <- now
			return ch
		},
	}
	runs := 0
	done := make(chan struct{})
	src := adapters.SourceFunc{SourceName: "flaky", Func: func(ctx context.Context, _ adapters.Sink) error {
		if runs == len(lasted) {
			close(done)
			<-ctx.Done()
			return ctx.Err()
		}
		mu.Lock()
		now = now.Add(lasted[runs])
		mu.Unlock()
		runs++
		return errors.New("connection lost")
	}}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { runSource(ctx, src, nil, slog.New(slog.DiscardHandler), clk); close(finished) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the source was not run through its script")
	}
	cancel()
	<-finished
	if !slices.Equal(waits, want) {
		t.Errorf("waits %v\nwant  %v", waits, want)
	}
}
