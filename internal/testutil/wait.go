package testutil

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, and fails tb, saying what it waited
// for, if timeout passes first. It is for a state only a poll can see: a
// file on disk, a row another process wrote, a line in a server's log.
// Where the code under test can tell (a channel, a callback, a fake that
// signals), wait on that instead; where time itself is under test, use a
// Clock.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Poll(timeout, cond) {
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Poll is WaitFor for callers that report a timeout themselves (with the
// state last seen, a server's log) or that are not tests: it returns
// whether cond held before timeout. cond is tried at once, then at
// intervals growing from 1 ms to 20 ms, and a last time at the deadline.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, 20*time.Millisecond)
	}
	return true
}
