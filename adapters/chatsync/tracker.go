package chatsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/monoco/courier/adapters"
)

// ErrIncomplete reports a catch-up pass that stopped at its bounds with
// more to read: the round goes on, and another pass is due soon.
var ErrIncomplete = errors.New("chatsync: catch-up stopped at its bounds; more to read")

// DefaultMaxConversations bounds the conversations a Tracker keeps in
// memory when Config.Max is 0.
const DefaultMaxConversations = 10000

// Config is what a Tracker needs of its provider. Key, Format, Parse and
// Compare are required.
type Config[P comparable, X any] struct {
	// Name starts the tracker's error messages ("slack").
	Name string
	// Key is where a conversation's position is saved ("slack/C024BE91L").
	Key func(conv string) string
	// Format is a position as it is saved; Parse reads a saved value back,
	// the zero P when it is unreadable (the provider says why in its log:
	// the catch-up then reads the conversation as one without a
	// position).
	Format func(P) string
	Parse  func(key, value string) P
	// Compare orders positions, negative when a is before b. The zero P
	// is no position: before every position.
	Compare func(a, b P) int
	// Max bounds the conversations kept in memory
	// (DefaultMaxConversations when 0): past it, the entries that can be
	// read back from the Sink are dropped.
	Max int
	// Load, when set, reads a conversation's extra state from the Sink,
	// after its position, when the tracker first meets it (and again
	// after it was dropped past Max).
	Load func(ctx context.Context, sink adapters.Sink, conv string, x *X) error
}

// Tracker keeps each conversation's position: the saved checkpoint, and
// whether it may move with live events. The zero value is not usable;
// NewTracker makes one. Its methods are safe for concurrent use.
//
// A conversation is caught up when nothing was missed since a catch-up
// last read it. Only then does a live event move its checkpoint (forward,
// never back); otherwise the event is delivered without one and its
// position kept as delivered, and the catch-up saves the newer of what it
// read and what was delivered once it has read the gap. A gap (Gap: a
// lost connection, a failed store) marks every conversation not caught up
// and makes the live stream's checkpoint wait for the next catch-up.
type Tracker[P comparable, X any] struct {
	c Config[P, X]

	mu    sync.Mutex
	convs map[string]*entry[P, X]
	// live is set once a round of catch-up passes read every
	// conversation with no gap since it began: a conversation first met
	// then (new, or dropped past Max) has missed nothing.
	live  bool
	gaps  uint64 // how many times Gap was called
	round *round // the round of passes under way; nil between rounds
	zero  P      // no position
}

// entry is one conversation. Its mutex is held while an event of it is
// delivered and while a catch-up saves its position, so that the live
// stream and the catch-up never save an older position after a newer one.
type entry[P comparable, X any] struct {
	mu sync.Mutex
	// users are the goroutines holding or waiting for mu (and Gap's
	// marking): an entry in use is never dropped. Guarded by Tracker.mu.
	users     int
	loaded    bool // saved and x hold what the Sink has
	saved     P    // the position saved as the checkpoint
	caughtUp  bool // no gap since a catch-up last read it
	delivered P    // the newest position delivered since
	// passedTo is where the last catch-up read up to: the next one reads
	// from the older of it and saved, since live events may have moved
	// the checkpoint past a message that never arrived. In memory only.
	passedTo P
	x        X
}

// round is a series of passes that, together, read every conversation
// once: a pass that stops at its bounds leaves the rest to the next, which
// skips the conversations done. A gap since the round began starts a new
// one.
type round struct {
	gen  uint64 // Tracker.gaps when the round began
	done map[string]bool
}

// NewTracker returns a Tracker of the provider's positions.
func NewTracker[P comparable, X any](c Config[P, X]) *Tracker[P, X] {
	if c.Max <= 0 {
		c.Max = DefaultMaxConversations
	}
	return &Tracker[P, X]{c: c, convs: map[string]*entry[P, X]{}}
}

// acquire returns conv's entry, locked; release unlocks it. Past Max,
// entries not in use that can be rebuilt from the Sink are dropped first.
func (t *Tracker[P, X]) acquire(conv string) *entry[P, X] {
	t.mu.Lock()
	e := t.convs[conv]
	if e == nil {
		if len(t.convs) >= t.c.Max {
			t.evict()
		}
		e = &entry[P, X]{caughtUp: t.live}
		t.convs[conv] = e
	}
	e.users++
	t.mu.Unlock()
	e.mu.Lock()
	return e
}

func (t *Tracker[P, X]) release(e *entry[P, X]) {
	e.mu.Unlock()
	t.mu.Lock()
	e.users--
	t.mu.Unlock()
}

// evict drops the entries that hold nothing the Sink does not: not in
// use, and whose caught-up mark a new entry would have (caught up, or not
// while the tracker is not live). An entry whose passedTo lies before its
// checkpoint is kept too, unless nothing else could be dropped: then it
// goes, and the next catch-up of it reads from the checkpoint, as after a
// restart. What is dropped is read back from the Sink when next met. t.mu
// must be held; the entries' fields are stable since none is in use.
func (t *Tracker[P, X]) evict() {
	var passed []string
	for k, e := range t.convs {
		switch {
		case e.users > 0, !e.caughtUp && t.live:
			// In use, or not caught up where a new entry would be.
		case e.passedTo != t.zero && t.c.Compare(e.passedTo, e.saved) < 0:
			passed = append(passed, k)
		default:
			delete(t.convs, k)
		}
	}
	if len(t.convs) >= t.c.Max {
		for _, k := range passed {
			delete(t.convs, k)
		}
	}
}

// load reads conv's position (and extra state) from the Sink the first
// time. e must be held.
func (t *Tracker[P, X]) load(ctx context.Context, e *entry[P, X], sink adapters.Sink, conv string) error {
	if e.loaded {
		return nil
	}
	key := t.c.Key(conv)
	v, ok, err := sink.Checkpoint(ctx, key)
	if err != nil {
		return fmt.Errorf("%s: checkpoint of %s: %w", t.c.Name, conv, err)
	}
	e.saved = t.zero
	if ok {
		e.saved = t.c.Parse(key, v)
	}
	if t.c.Load != nil {
		var x X
		if err := t.c.Load(ctx, sink, conv, &x); err != nil {
			return err
		}
		e.x = x
	}
	e.loaded = true
	return nil
}

// save delivers conv's checkpoint at pos. e must be held.
func (t *Tracker[P, X]) save(ctx context.Context, e *entry[P, X], sink adapters.Sink, conv string, pos P) error {
	cp := &adapters.Checkpoint{Key: t.c.Key(conv), Value: t.c.Format(pos)}
	if err := sink.Deliver(ctx, adapters.Event{Checkpoint: cp}); err != nil {
		return fmt.Errorf("%s: save the position of %s: %w", t.c.Name, conv, err)
	}
	e.saved = pos
	return nil
}

func (t *Tracker[P, X]) after(a, b P) bool { return t.c.Compare(a, b) > 0 }

func (t *Tracker[P, X]) newer(a, b P) P {
	if t.after(a, b) {
		return a
	}
	return b
}

// Live is the way of a live event of conversation conv at position pos
// into the Sink. With conv held, it calls deliver with the checkpoint the
// event carries, nil unless conv is caught up and pos is newer than its
// saved position, and conv's extra state; deliver hands the event (and
// the checkpoint, in the same Deliver) to the Sink and returns nil once
// they are durable, changing x only then. pos is then recorded as
// delivered. Live returns deliver's error as it is.
func (t *Tracker[P, X]) Live(ctx context.Context, sink adapters.Sink, conv string, pos P,
	deliver func(cp *adapters.Checkpoint, x *X) error) error {
	e := t.acquire(conv)
	defer t.release(e)
	if err := t.load(ctx, e, sink, conv); err != nil {
		return err
	}
	newer := e.caughtUp && t.after(pos, e.saved)
	var cp *adapters.Checkpoint
	if newer {
		cp = &adapters.Checkpoint{Key: t.c.Key(conv), Value: t.c.Format(pos)}
	}
	if err := deliver(cp, &e.x); err != nil {
		return err
	}
	if newer {
		e.saved = pos
	}
	e.delivered = t.newer(pos, e.delivered)
	return nil
}

// Saved returns conv's saved position (the zero P for none), reading it
// from the Sink the first time.
func (t *Tracker[P, X]) Saved(ctx context.Context, sink adapters.Sink, conv string) (P, error) {
	e := t.acquire(conv)
	defer t.release(e)
	if err := t.load(ctx, e, sink, conv); err != nil {
		return t.zero, err
	}
	return e.saved, nil
}

// Gap marks every conversation as having missed events: a connection was
// lost, or a store failed. Their checkpoints wait for the next catch-up,
// the round of passes under way starts anew, and a pass begun before
// saves only what it read. Gap waits for the deliveries in flight of each
// conversation (not for downloads: the lock is held only while an event
// is handed to the Sink), so that an event that comes after it finds its
// conversation marked.
func (t *Tracker[P, X]) Gap() {
	t.mu.Lock()
	t.live = false
	t.gaps++
	all := make([]*entry[P, X], 0, len(t.convs))
	for _, e := range t.convs {
		e.users++
		all = append(all, e)
	}
	t.mu.Unlock()
	for _, e := range all {
		e.mu.Lock()
		e.caughtUp = false
		e.mu.Unlock()
	}
	t.mu.Lock()
	for _, e := range all {
		e.users--
	}
	t.mu.Unlock()
}

// Gaps returns how many gaps were marked (Gap) since the tracker was
// made: a provider's tests and diagnostics tell a gap marked from none.
func (t *Tracker[P, X]) Gaps() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gaps
}

// AllCaughtUp reports whether a round of passes read every conversation
// with no gap since it began (and none since): a conversation first met
// now starts caught up.
func (t *Tracker[P, X]) AllCaughtUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

// Known returns the conversations the tracker has in memory, sorted: a
// catch-up reads them besides those the provider lists.
func (t *Tracker[P, X]) Known() []string {
	t.mu.Lock()
	out := make([]string, 0, len(t.convs))
	for k := range t.convs {
		out = append(out, k)
	}
	t.mu.Unlock()
	slices.Sort(out)
	return out
}
