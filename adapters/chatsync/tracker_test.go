package chatsync_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
)

// A live event moves its conversation's checkpoint once the conversation
// is caught up, never backwards, and not at all before; the catch-up then
// saves the newest position delivered meanwhile; a gap stops the live
// stream's checkpoint again; a fresh tracker reads the saved one back.
func TestLiveCheckpoint(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(0)
	if err := live(t, tr, sink, "c", 105); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/c"); got != "" {
		t.Fatalf("checkpoint %q saved before the conversation was caught up", got)
	}
	p := tr.StartPass()
	if err := p.CaughtUp(ctx, sink, "c", 104); err != nil {
		t.Fatal(err)
	}
	tr.EndPass(p, nil)
	if got := sink.saved("test/c"); got != "105" {
		t.Fatalf("after the catch-up, checkpoint %q, want the newest delivered 105", got)
	}
	for _, pos := range []int64{107, 106} {
		if err := live(t, tr, sink, "c", pos); err != nil {
			t.Fatal(err)
		}
	}
	if got := sink.saved("test/c"); got != "107" {
		t.Errorf("checkpoint %q, want 107 (never backwards)", got)
	}
	tr.Gap()
	if err := live(t, tr, sink, "c", 109); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/c"); got != "107" {
		t.Errorf("checkpoint %q moved during a gap, want 107", got)
	}
	fresh := newTracker(0)
	if got, err := fresh.Saved(ctx, sink, "c"); err != nil || got != 107 {
		t.Errorf("a fresh tracker reads %d, %v; want 107", got, err)
	}
	p = fresh.StartPass()
	if err := p.CaughtUp(ctx, sink, "c", 101); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/c"); got != "107" {
		t.Errorf("a catch-up with an older position moved the checkpoint to %q", got)
	}
}

// The first Slack loss window: the connection is lost while a pass reads
// a conversation (Socket Mode's hello mid-pass), the pass ends, a live
// event of the new connection comes, and Courier crashes before the next
// pass. What was posted while there was no connection must still be
// read: the pass that began before the gap saves only what it read and
// leaves the conversation not caught up, so the live event does not move
// the checkpoint past the window.
func TestGapDuringPassThenLiveThenCrash(t *testing.T) {
	sink := newSink()
	tr := newTracker(0)
	c := &chat{id: "c"}
	c.post(100)
	passOver(t, tr, sink, c) // caught up at 100
	c.post(101, 102, 103)

	p := tr.StartPass()
	read(t, p, tr, sink, c, func() {
		// The pass has read to 103 when the connection is lost: what is
		// posted meanwhile reaches Courier by no event.
		tr.Gap()
		c.post(104, 105)
	})
	tr.EndPass(p, nil)
	// A new connection; its first event.
	c.post(106)
	if err := live(t, tr, sink, "c", 106); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/c"); got != "103" {
		t.Errorf("checkpoint %q before the crash, want 103 (what the pass read), not past the window", got)
	}

	// A crash: a new process, only what the mailbox saved.
	tr = newTracker(0)
	passOver(t, tr, sink, c)
	if l := lost(sink, c); len(l) > 0 {
		t.Errorf("posted during the disconnect and lost: %v", l)
	}
}

// A connection lost during a pass, without a crash: the pass after the
// reconnect reads the window, and the conversation is caught up again
// (the live stream moves its checkpoint).
func TestCaughtUpAgainByTheNextPass(t *testing.T) {
	sink := newSink()
	tr := newTracker(0)
	c := &chat{id: "c"}
	c.post(100)
	passOver(t, tr, sink, c)
	c.post(101)
	p := tr.StartPass()
	read(t, p, tr, sink, c, func() {
		tr.Gap()
		c.post(102)
	})
	tr.EndPass(p, nil)
	passOver(t, tr, sink, c)
	if l := lost(sink, c); len(l) > 0 {
		t.Fatalf("lost %v", l)
	}
	if err := live(t, tr, sink, "c", 110); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/c"); got != "110" {
		t.Errorf("checkpoint %q, want 110: caught up after the next pass", got)
	}
}

// Live events during a pass are saved with its CaughtUp; Advance saves
// what a bounded pass read without catching up.
func TestAdvance(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(0)
	c := &chat{id: "c"}
	c.post(100)
	passOver(t, tr, sink, c)
	c.post(101, 102, 103)
	p := tr.StartPass()
	if _, err := p.Begin(ctx, sink, "c", nil); err != nil {
		t.Fatal(err)
	}
	if err := live(t, tr, sink, "c", 101); err != nil {
		t.Fatal(err)
	}
	if err := p.Advance(ctx, sink, "c", 101); err != nil {
		t.Fatal(err)
	}
	tr.EndPass(p, chatsync.ErrIncomplete)
	if err := live(t, tr, sink, "c", 103); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/c"); got != "101" {
		t.Errorf("checkpoint %q, want 101: advanced, not caught up", got)
	}
	p = tr.StartPass()
	if p.NewRound() {
		t.Error("a pass after one that stopped at its bounds began a new round")
	}
	rd, err := p.Begin(ctx, sink, "c", nil)
	if err != nil || rd.Saved != 101 || rd.From != 101 {
		t.Fatalf("Begin: %+v, %v; want from 101", rd, err)
	}
	if err := p.CaughtUp(ctx, sink, "c", 102); err != nil {
		t.Fatal(err)
	}
	tr.EndPass(p, nil)
	if got := sink.saved("test/c"); got != "103" {
		t.Errorf("checkpoint %q, want 103 (delivered live during the pass)", got)
	}
}

// passedTo: after live events moved the checkpoint past what the last
// pass read, the next pass reads from where that one read up to (an
// event the provider never delivered is found only so).
func TestPassedTo(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(0)
	c := &chat{id: "c"}
	c.post(100)
	passOver(t, tr, sink, c)
	for _, pos := range []int64{102, 103} {
		if err := live(t, tr, sink, "c", pos); err != nil {
			t.Fatal(err)
		}
	}
	p := tr.StartPass()
	rd, err := p.Begin(ctx, sink, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rd.Saved != 103 || rd.PassedTo != 100 || rd.From != 100 {
		t.Errorf("Begin: %+v, want saved 103, passed to 100, from 100", rd)
	}
	tr.EndPass(p, nil)
}

// Rounds: a pass after one that stopped at its bounds skips what the
// round read; a gap starts a new round; a round read whole with no gap
// makes the tracker live, so a conversation first met then is caught up.
func TestRounds(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(0)
	p := tr.StartPass()
	if !p.NewRound() {
		t.Error("the first pass did not begin a round")
	}
	if err := p.CaughtUp(ctx, sink, "a", 1); err != nil {
		t.Fatal(err)
	}
	p.Finish("gone")
	tr.EndPass(p, chatsync.ErrIncomplete)
	p = tr.StartPass()
	if p.NewRound() || !p.Done("a") || !p.Done("gone") || p.Done("b") {
		t.Errorf("the round's second pass: new %v, done a %v, gone %v, b %v", p.NewRound(), p.Done("a"), p.Done("gone"), p.Done("b"))
	}
	tr.Gap()
	tr.EndPass(p, chatsync.ErrIncomplete)
	p = tr.StartPass()
	if !p.NewRound() || p.Done("a") {
		t.Error("a gap did not start a new round")
	}
	if err := p.CaughtUp(ctx, sink, "a", 1); err != nil {
		t.Fatal(err)
	}
	tr.EndPass(p, nil)
	// Live: a conversation first met now moves its checkpoint at once.
	if err := live(t, tr, sink, "new", 5); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/new"); got != "5" {
		t.Errorf("a conversation met after a complete round: checkpoint %q, want 5", got)
	}
	// A round that failed, or saw a gap, does not make it live.
	for _, c := range []struct {
		name string
		gap  bool
		err  error
	}{{"gap", true, nil}, {"failed", false, errDisk}} {
		tr := newTracker(0)
		p := tr.StartPass()
		if c.gap {
			tr.Gap()
		}
		tr.EndPass(p, c.err)
		if err := live(t, tr, sink, "new-"+c.name, 5); err != nil {
			t.Fatal(err)
		}
		if got := sink.saved("test/new-" + c.name); got != "" {
			t.Errorf("%s: a conversation met after the round moved its checkpoint to %q", c.name, got)
		}
	}
}

// Gaps counts the gaps marked; AllCaughtUp says whether the last round
// read everything with no gap since, and turns false at the next gap.
func TestGapsAndAllCaughtUp(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(0)
	if tr.Gaps() != 0 || tr.AllCaughtUp() {
		t.Fatalf("a new tracker: %d gaps, all caught up %v", tr.Gaps(), tr.AllCaughtUp())
	}
	p := tr.StartPass()
	if err := p.CaughtUp(ctx, sink, "a", 1); err != nil {
		t.Fatal(err)
	}
	tr.EndPass(p, chatsync.ErrIncomplete)
	if tr.AllCaughtUp() {
		t.Error("all caught up after a pass that stopped at its bounds")
	}
	p = tr.StartPass()
	tr.EndPass(p, nil)
	if !tr.AllCaughtUp() {
		t.Error("not all caught up after the round read everything")
	}
	tr.Gap()
	tr.Gap()
	if tr.Gaps() != 2 || tr.AllCaughtUp() {
		t.Errorf("after two gaps: %d gaps, all caught up %v", tr.Gaps(), tr.AllCaughtUp())
	}
}

// Past Max, the entries that hold only what the Sink has are dropped and
// read back when met again; an entry whose passedTo matters, and one not
// caught up while the tracker is live, are kept; passedTo goes only when
// nothing else can.
func TestEviction(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(3)
	a, b := &chat{id: "a"}, &chat{id: "b"}
	a.post(100)
	b.post(100)
	passOver(t, tr, sink, a, b) // live; both caught up, passed to 100
	if err := live(t, tr, sink, "a", 105); err != nil {
		t.Fatal(err) // a's checkpoint moves past what the pass read
	}
	p := tr.StartPass()
	if _, err := p.Begin(ctx, sink, "b", nil); err != nil {
		t.Fatal(err) // b is being read: not caught up
	}
	for i := range 3 {
		if err := live(t, tr, sink, fmt.Sprintf("x%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := live(t, tr, sink, "b", 106); err != nil {
		t.Fatal(err)
	}
	if got := sink.saved("test/b"); got != "100" {
		t.Errorf("b, not caught up, was dropped and met again caught up: checkpoint %q", got)
	}
	rd, err := p.Begin(ctx, sink, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rd.PassedTo != 100 || rd.From != 100 {
		t.Errorf("a after eviction: %+v, want passed to 100 (kept)", rd)
	}
	tr.EndPass(p, errDisk)

	// Only entries kept for passedTo, and the map full: they go.
	tr = newTracker(2)
	for _, c := range []string{"p", "q"} {
		ch := &chat{id: c}
		ch.post(100)
		passOver(t, tr, sink, ch)
		if err := live(t, tr, sink, c, 200); err != nil {
			t.Fatal(err)
		}
	}
	if err := live(t, tr, sink, "r", 1); err != nil {
		t.Fatal(err)
	}
	p = tr.StartPass()
	rd, err = p.Begin(ctx, sink, "p", nil)
	if err != nil || rd.PassedTo != 0 || rd.From != 200 {
		t.Errorf("p after the bound: %+v, %v; want read from its checkpoint 200", rd, err)
	}
	tr.EndPass(p, nil)
}

// The extra state is read with the position, once, and again after the
// entry was dropped.
func TestLoadExtra(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(1)
	var loads []int
	p := tr.StartPass()
	for _, c := range []string{"a", "a", "b", "a"} {
		if _, err := p.Begin(ctx, sink, c, func(x *extra) { loads = append(loads, x.loads) }); err != nil {
			t.Fatal(err)
		}
		if err := p.CaughtUp(ctx, sink, c, 1); err != nil {
			t.Fatal(err)
		}
	}
	tr.EndPass(p, nil)
	if fmt.Sprint(loads) != "[1 1 1 1]" {
		t.Errorf("loads seen %v, want each entry loaded once", loads)
	}
}

// The live stream and a catch-up of the same conversation at once, with
// gaps: the checkpoint never goes back.
func TestConcurrentNeverBackwards(t *testing.T) {
	ctx := context.Background()
	sink := newSink()
	tr := newTracker(0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				pos := int64(1000 + i*4 + g)
				_ = tr.Live(ctx, sink, "c", pos, func(cp *adapters.Checkpoint, _ *extra) error {
					return sink.Deliver(ctx, adapters.Event{Checkpoint: cp})
				})
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			_ = tr.RunPass(func(p *chatsync.Pass[int64, extra]) error {
				if _, err := p.Begin(ctx, sink, "c", nil); err != nil {
					return err
				}
				if i%10 == 0 {
					tr.Gap()
				}
				return p.CaughtUp(ctx, sink, "c", int64(1000+i*8))
			})
		}
	})
	wg.Wait()
	if !sink.monotonic("test/c") {
		t.Errorf("a checkpoint went back: %v", sink.history["test/c"])
	}
}
