package testutil

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	t.Run("holds at once", func(t *testing.T) {
		calls := 0
		if !Poll(time.Hour, func() bool { calls++; return true }) || calls != 1 {
			t.Errorf("cond tried %d times", calls)
		}
	})
	t.Run("holds later", func(t *testing.T) {
		var n atomic.Int32
		if !Poll(10*time.Second, func() bool { return n.Add(1) == 5 }) {
			t.Error("Poll gave up before the fifth try")
		}
	})
	t.Run("never holds", func(t *testing.T) {
		start := time.Now()
		calls := 0
		if Poll(30*time.Millisecond, func() bool { calls++; return false }) {
			t.Fatal("Poll said a false condition held")
		}
		if took := time.Since(start); took < 30*time.Millisecond {
			t.Errorf("gave up after %v, before the timeout", took)
		}
		if calls < 3 {
			t.Errorf("cond tried %d times in 30 ms", calls)
		}
	})
}

// fakeTB records how a helper fails a test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestWaitForSaysWhat(t *testing.T) {
	tb := &fakeTB{TB: t}
	WaitFor(tb, 5*time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(tb.failed, "waiting for the moon") {
		t.Errorf("WaitFor failed with %q, want it to name what it waited for", tb.failed)
	}
	tb = &fakeTB{TB: t}
	WaitFor(tb, time.Hour, "the sun", func() bool { return true })
	if tb.failed != "" {
		t.Errorf("WaitFor failed on a true condition: %q", tb.failed)
	}
}
