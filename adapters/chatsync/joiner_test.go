package chatsync_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/internal/testutil"
)

// A redelivery joins the handling under way and shares its success; after
// a failure, the one waiting tries itself; a waiter's own context bounds
// its wait; the zero key joins nothing.
func TestJoiner(t *testing.T) {
	var j chatsync.Joiner[string]
	ctx := context.Background()
	hold := make(chan struct{})
	var runs atomic.Int64
	first := make(chan error, 1)
	go func() {
		first <- j.Do(ctx, "k", func(context.Context) error { runs.Add(1); <-hold; return errors.New("disk full") })
	}()
	testutil.WaitFor(t, 5*time.Second, "the first handling", func() bool { return runs.Load() == 1 })
	second := make(chan error, 1)
	go func() {
		second <- j.Do(ctx, "k", func(context.Context) error { runs.Add(1); return nil })
	}()
	testutil.WaitFor(t, 5*time.Second, "the redelivery to join", func() bool { return j.Waiters("k") == 1 })
	short, cancel := context.WithCancel(ctx)
	cancel()
	if err := j.Do(short, "k", func(context.Context) error { t.Error("ran beside the handling under way"); return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended: %v", err)
	}
	close(hold)
	if err := <-first; err == nil {
		t.Error("the first handling's failure was lost")
	}
	if err := <-second; err != nil || runs.Load() != 2 {
		t.Errorf("after the first failed, the redelivery returned %v after %d runs; want it to try itself", err, runs.Load())
	}
	if j.Waiters("k") != 0 || j.Len() != 0 {
		t.Errorf("a flight outlived its handling (%d under way)", j.Len())
	}
	var wg sync.WaitGroup
	var zero atomic.Int64
	block := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			_ = j.Do(ctx, "", func(context.Context) error { zero.Add(1); <-block; return nil })
		})
	}
	testutil.WaitFor(t, 5*time.Second, "both handlings of the zero key", func() bool { return zero.Load() == 2 })
	close(block)
	wg.Wait()
}

// Begin, Join and End: a transport that takes a slot before it begins a
// handling (Lark's long connection) looks for one under way first, and
// its handling outlives the caller's wait.
func TestJoinerBeginJoinEnd(t *testing.T) {
	var j chatsync.Joiner[string]
	if j.Join("k") != nil {
		t.Fatal("joined a handling that is not there")
	}
	f, first := j.Begin("k")
	if !first {
		t.Fatal("the first Begin did not lead")
	}
	if n := j.Len(); n != 1 {
		t.Errorf("%d handlings under way, want 1", n)
	}
	g, first := j.Begin("k")
	if first || g != f || j.Join("k") != f || j.Waiters("k") != 2 {
		t.Fatalf("a second Begin led (%v) or joined another; waiters %d", first, j.Waiters("k"))
	}
	errStore := errors.New("disk full")
	j.End("k", f, errStore)
	select {
	case <-g.Done():
		if !errors.Is(g.Err(), errStore) {
			t.Errorf("joined outcome %v", g.Err())
		}
	default:
		t.Fatal("End did not release the joined")
	}
	if _, first := j.Begin("k"); !first {
		t.Error("a Begin after End joined the ended handling")
	}
}
