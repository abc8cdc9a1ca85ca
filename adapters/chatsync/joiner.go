package chatsync

import (
	"context"
	"sync"
)

// Joiner keeps one handling in flight per provider message: a redelivery
// that arrives while the first delivery is still being stored (a
// provider retries after a slow answer) joins it instead of normalising
// and writing a second time. An entry lives only while its handling runs,
// so the transport's own bound on what it handles at once bounds the map.
// The zero value is ready to use.
type Joiner[K comparable] struct {
	mu      sync.Mutex
	flights map[K]*Flight
}

// Flight is one handling under way.
type Flight struct {
	done    chan struct{}
	err     error // set before done is closed
	waiters int   // callers that joined it; guarded by Joiner.mu
}

// Done is closed when the handling is over.
func (f *Flight) Done() <-chan struct{} { return f.done }

// Err is the handling's outcome, once Done is closed.
func (f *Flight) Err() error { return f.err }

// Do runs fn as key's handling, or waits (within ctx) for the one under
// way: its success is this call's; after its failure, this call tries
// itself (or joins another retry begun meanwhile). The zero key joins
// nothing.
func (j *Joiner[K]) Do(ctx context.Context, key K, fn func(ctx context.Context) error) error {
	for {
		f, first := j.Begin(key)
		if first {
			err := fn(ctx)
			j.End(key, f, err)
			return err
		}
		select {
		case <-f.done:
			if f.err == nil {
				return nil
			}
			// The first try failed; this one tries again.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Begin registers a handling of key and returns it with first true; the
// caller runs it and calls End. When one is under way already, Begin
// returns that one, joined, with first false. The zero key is never
// registered: its handling is its own.
func (j *Joiner[K]) Begin(key K) (f *Flight, first bool) {
	var zero K
	if key == zero {
		return &Flight{done: make(chan struct{})}, true
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if f := j.flights[key]; f != nil {
		f.waiters++
		return f, false
	}
	f = &Flight{done: make(chan struct{})}
	if j.flights == nil {
		j.flights = map[K]*Flight{}
	}
	j.flights[key] = f
	return f, true
}

// Join returns the handling of key under way, joined, or nil: a caller
// that must take a slot before it begins one (Begin) looks first.
func (j *Joiner[K]) Join(key K) *Flight {
	var zero K
	if key == zero {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	f := j.flights[key]
	if f != nil {
		f.waiters++
	}
	return f
}

// End records err as the outcome of f, key's handling begun by Begin,
// and lets those who joined it go.
func (j *Joiner[K]) End(key K, f *Flight, err error) {
	var zero K
	if key != zero {
		j.mu.Lock()
		if j.flights[key] == f {
			delete(j.flights, key)
		}
		j.mu.Unlock()
	}
	f.err = err
	close(f.done)
}

// Waiters returns how many callers joined the handling of key under way
// (0 when none is).
func (j *Joiner[K]) Waiters(key K) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if f := j.flights[key]; f != nil {
		return f.waiters
	}
	return 0
}

// Len returns how many handlings are under way (with a key): none is
// left once every caller has returned.
func (j *Joiner[K]) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.flights)
}
