package chatsync_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/internal/testutil"
)

// passes is a scripted Pass: each call takes the next outcome (nil when
// the script is over) and is told on calls with when it ran.
type passes struct {
	mu      sync.Mutex
	script  []error
	calls   chan time.Time
	gapper  *countGaps
	atPass  []uint64 // the gaps counted when each pass ran
	healthy atomic.Int64
}

func newPasses(script ...error) *passes {
	return &passes{script: script, calls: make(chan time.Time, 100), gapper: &countGaps{}}
}

func (p *passes) pass(context.Context, adapters.Sink) error {
	p.mu.Lock()
	var err error
	if len(p.script) > 0 {
		err, p.script = p.script[0], p.script[1:]
	}
	p.atPass = append(p.atPass, p.gapper.n.Load())
	p.mu.Unlock()
	p.calls <- time.Now()
	return err
}

func (p *passes) next(t *testing.T, what string) time.Time {
	t.Helper()
	select {
	case at := <-p.calls:
		return at
	case <-time.After(10 * time.Second):
		t.Fatalf("no pass: %s", what)
	}
	return time.Time{}
}

func (p *passes) none(t *testing.T, what string) {
	t.Helper()
	select {
	case <-p.calls:
		t.Fatalf("a pass: %s", what)
	default:
	}
}

type countGaps struct{ n atomic.Uint64 }

func (g *countGaps) Gap() { g.n.Add(1) }

func run(t *testing.T, c *chatsync.CatchUp) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, nil) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// A pass at once; again after Again when one stopped at its bounds;
// after a failure, Retry doubling, reset by a success; with no
// Interval, the next pass only at a Kick.
func TestCatchUpRun(t *testing.T) {
	errAPI := errors.New("test: history: HTTP 500")
	p := newPasses(chatsync.ErrIncomplete, errAPI, errAPI, nil, errAPI)
	health := &adapters.HealthTracker{}
	const again, retry = 5 * time.Millisecond, 20 * time.Millisecond
	c := &chatsync.CatchUp{Name: "test", Pass: p.pass, Tracker: p.gapper, Again: again, Retry: retry, MaxRetry: time.Hour,
		Health: health, Healthy: func() { p.healthy.Add(1) }}
	run(t, c)
	first := p.next(t, "at once")
	second := p.next(t, "after the pass that stopped at its bounds")
	if d := second.Sub(first); d < again {
		t.Errorf("%v after a pass that stopped at its bounds, want at least %v", d, again)
	}
	third := p.next(t, "after the first failure")
	if d := third.Sub(second); d < retry {
		t.Errorf("%v after a failure, want at least %v", d, retry)
	}
	if h := health.Health(); h.Status != adapters.StatusError || h.LastError != errAPI.Error() {
		t.Errorf("health %+v, want the failure", h)
	}
	fourth := p.next(t, "after the second failure")
	if d := fourth.Sub(third); d < 2*retry {
		t.Errorf("%v after a second failure, want at least %v (doubled)", d, 2*retry)
	}
	// A success: Healthy; no interval, so nothing until a Kick.
	testutil.WaitFor(t, 10*time.Second, "Healthy after a success", func() bool { return p.healthy.Load() == 1 })
	p.none(t, "with no interval, before a kick")
	c.Kick()
	fifth := p.next(t, "after a kick")
	sixth := p.next(t, "after a failure following a success")
	if d := sixth.Sub(fifth); d < retry || d >= 2*retry+time.Second {
		t.Errorf("%v after a failure following a success, want the first retry again (%v)", d, retry)
	}
}

// Failed marks a gap at once and runs a pass AfterFailure later; OnKick
// waits for the first Kick.
func TestCatchUpFailed(t *testing.T) {
	p := newPasses()
	const after = 20 * time.Millisecond
	c := &chatsync.CatchUp{Name: "test", Pass: p.pass, Tracker: p.gapper, AfterFailure: after, OnKick: true}
	run(t, c)
	c.Kick()
	p.next(t, "the first kick")
	at := time.Now()
	c.Failed()
	if n := p.gapper.n.Load(); n < 1 {
		t.Errorf("Failed marked %d gaps, want one at once", n)
	}
	if got := p.next(t, "after a failure"); got.Sub(at) < after {
		t.Errorf("the pass after a failure came %v after it, want at least %v", got.Sub(at), after)
	}
	p.mu.Lock()
	if n := p.atPass[len(p.atPass)-1]; n < 1 {
		t.Errorf("the pass after a failure ran with %d gaps marked", n)
	}
	p.mu.Unlock()
}

// Failures before the pass they ask for are one pass: Failed never
// blocks (a webhook's handler calls it), and each marks its gap at once.
func TestCatchUpFailedCoalesces(t *testing.T) {
	p := newPasses()
	c := &chatsync.CatchUp{Name: "test", Pass: p.pass, Tracker: p.gapper, AfterFailure: time.Millisecond, OnKick: true}
	for range 3 {
		c.Failed()
	}
	if n := p.gapper.n.Load(); n != 3 {
		t.Errorf("three failures marked %d gaps, want 3", n)
	}
	run(t, c)
	p.next(t, "after the failures")
	time.Sleep(50 * time.Millisecond)
	p.none(t, "a second one for the failures before the first")
}

// A refusal of the credentials ends Run with it, marked adapters.Refused
// (the Source's Run ends with it, and the service tries again minutes
// later), and /health says why; a missing scope or any other failure is
// tried again by Run itself.
func TestCatchUpRefused(t *testing.T) {
	errRefused := errors.New("test: invalid_auth")
	errScope := errors.New("test: missing_scope")
	p := newPasses(errScope, errRefused)
	health := &adapters.HealthTracker{}
	c := &chatsync.CatchUp{Name: "test", Pass: p.pass, Tracker: p.gapper, Retry: time.Millisecond,
		Refused: func(err error) bool { return errors.Is(err, errRefused) }, Health: health}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), nil) }()
	p.next(t, "the first pass")
	p.next(t, "the pass after the missing scope")
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the refusal")
	}
	if !adapters.IsRefused(err) || !errors.Is(err, errRefused) {
		t.Errorf("Run: %v, want the refusal marked Refused", err)
	}
	p.none(t, "after a refusal")
	if h := health.Health(); h.Status != adapters.StatusError || !strings.Contains(h.LastError, "invalid_auth") {
		t.Errorf("health %+v", h)
	}
}

// FetchOnce makes passes until one reads everything, MaxFetchPasses at
// most.
func TestFetchOnce(t *testing.T) {
	p := newPasses(chatsync.ErrIncomplete, chatsync.ErrIncomplete, nil)
	c := &chatsync.CatchUp{Name: "test", Pass: p.pass, Tracker: p.gapper}
	if err := c.FetchOnce(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(p.calls); n != 3 {
		t.Errorf("%d passes, want 3", n)
	}
	n := 0
	c.Pass = func(context.Context, adapters.Sink) error { n++; return chatsync.ErrIncomplete }
	if err := c.FetchOnce(context.Background(), nil); !errors.Is(err, chatsync.ErrIncomplete) || n != chatsync.MaxFetchPasses {
		t.Errorf("endless: %v after %d passes", err, n)
	}
}
