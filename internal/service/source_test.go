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
	go func() {
		newSourceRun(src, nil, slog.New(slog.DiscardHandler), DefaultRestart, clk).loop(ctx, -1)
		close(finished)
	}()
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

// gateClock is a fake clock whose waits the test sees and ends, one at a
// time: each after sends its duration on waits and fires when the test
// sends on fire.
type gateClock struct {
	mu    sync.Mutex
	now   time.Time
	waits chan time.Duration
	fire  chan struct{}
}

func newGateClock() *gateClock {
	return &gateClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), waits: make(chan time.Duration), fire: make(chan struct{})}
}

func (g *gateClock) clock() clock {
	return clock{
		now: func() time.Time { g.mu.Lock(); defer g.mu.Unlock(); return g.now },
		after: func(d time.Duration) <-chan time.Time {
			g.waits <- d
			ch := make(chan time.Time, 1)
			go func() {
				<-g.fire
				g.mu.Lock()
				g.now = g.now.Add(d)
				ch <- g.now
				g.mu.Unlock()
			}()
			return ch
		},
	}
}

func (g *gateClock) wait(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-g.waits:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no wait")
	}
	return 0
}

// refusingSource is a Source whose Start and Run fail as told: each
// call takes the next error of its list (nil: Start succeeds, Run waits
// for its context).
type refusingSource struct {
	mu       sync.Mutex
	starts   []error
	runs     []error
	started  int
	ran      chan struct{}
	reported []string
	adapters.HealthTracker
}

func (s *refusingSource) Name() string { return "test/refusing" }

func (s *refusingSource) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	if len(s.starts) == 0 {
		return nil
	}
	err := s.starts[0]
	s.starts = s.starts[1:]
	return err
}

func (s *refusingSource) Run(ctx context.Context, _ adapters.Sink) error {
	s.mu.Lock()
	var err error
	if len(s.runs) > 0 {
		err, s.runs = s.runs[0], s.runs[1:]
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	close(s.ran)
	<-ctx.Done()
	return nil
}

func (s *refusingSource) Error(err error) {
	s.mu.Lock()
	s.reported = append(s.reported, err.Error())
	s.mu.Unlock()
	s.HealthTracker.Error(err)
}

// A Start refused by the provider does not fail the service's start: the
// Source reports the reason at once (before the service says it is
// ready), says when it is tried again, is started again after the
// refused backoff (2m, 4m, ...) until its Start succeeds, and then runs.
// A Start that fails otherwise (a port in use) still fails the start.
func TestSourceRefusedAtStart(t *testing.T) {
	refused := adapters.Refused(errors.New("test: auth.test: invalid_auth"))
	src := &refusingSource{starts: []error{refused, refused}, ran: make(chan struct{})}
	g := newGateClock()
	restart := Restart{Failed: DefaultRestart.Failed, Refused: Backoff{First: 2 * time.Minute, Max: 10 * time.Minute}}
	r := newSourceRun(src, nil, slog.New(slog.DiscardHandler), restart, g.clock())
	c := r.component()
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("Start with refused credentials failed the service's start: %v", err)
	}
	defer c.Stop(context.Background())
	if h := src.Health(); h.Status != adapters.StatusError || h.LastError != refused.Error() {
		t.Errorf("health right after the start: %+v", h)
	}
	if at := r.RetryAt(); !at.Equal(time.Date(2026, 3, 1, 0, 2, 0, 0, time.UTC)) {
		t.Errorf("retry at %v, want in 2m", at)
	}
	if d := g.wait(t); d != 2*time.Minute {
		t.Errorf("first wait %v, want 2m", d)
	}
	g.fire <- struct{}{}
	if d := g.wait(t); d != 4*time.Minute {
		t.Errorf("second wait %v, want 4m", d)
	}
	g.fire <- struct{}{}
	select {
	case <-src.ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the Source did not run once its Start succeeded")
	}
	if !r.RetryAt().IsZero() {
		t.Errorf("retry at %v while running", r.RetryAt())
	}
	if src.started != 3 || len(src.reported) != 2 {
		t.Errorf("%d starts, %d reported errors; want 3, 2", src.started, len(src.reported))
	}

	other := &refusingSource{starts: []error{errors.New("listen on 127.0.0.1:25: address in use")}}
	if err := newSourceRun(other, nil, slog.New(slog.DiscardHandler), restart, g.clock()).component().Start(context.Background()); err == nil {
		t.Error("a Start that failed for another reason than refused credentials did not fail the start")
	}
}

// A Run refused by the provider (a token revoked while serving) waits the
// refused backoff, a Run that failed otherwise the ordinary one: each
// grows on its own.
func TestSourceRefusedRun(t *testing.T) {
	refused := adapters.Refused(errors.New("test: token_revoked"))
	lost := errors.New("test: connection lost")
	src := &refusingSource{runs: []error{refused, refused, lost, refused, lost}, ran: make(chan struct{})}
	g := newGateClock()
	r := newSourceRun(src, nil, slog.New(slog.DiscardHandler), DefaultRestart, g.clock())
	c := r.component()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	want := []time.Duration{2 * time.Minute, 4 * time.Minute, time.Second, 8 * time.Minute, 2 * time.Second}
	var got []time.Duration
	for range want {
		got = append(got, g.wait(t))
		g.fire <- struct{}{}
	}
	<-src.ran
	if !slices.Equal(got, want) {
		t.Errorf("waits %v\nwant  %v", got, want)
	}
	if len(src.reported) != 5 || src.reported[0] != refused.Error() {
		t.Errorf("reported %q", src.reported)
	}
}
