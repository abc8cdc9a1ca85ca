package adapters

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestErrorClasses: the classification survives wrapping (the engine sees
// errors wrapped by the adapters' own context), unmarked errors are
// temporary (a network error must not dead-letter a draft), and only a
// temporary error carries a Retry-After.
func TestErrorClasses(t *testing.T) {
	base := io.ErrUnexpectedEOF
	cases := []struct {
		name       string
		err        error
		permanent  bool
		retryAfter time.Duration
	}{
		{"unmarked", base, false, 0},
		{"temporary", Temporary(base), false, 0},
		{"temporary after", TemporaryAfter(base, 30*time.Second), false, 30 * time.Second},
		{"permanent", Permanent(base), true, 0},
		{"wrapped permanent", fmt.Errorf("smtp: RCPT TO: %w", Permanent(base)), true, 0},
		{"wrapped retry-after", fmt.Errorf("lark: %w", TemporaryAfter(base, time.Minute)), false, time.Minute},
		{"partial of temporary", &PartialError{Err: Temporary(base)}, false, 0},
	}
	for _, c := range cases {
		if IsPermanent(c.err) != c.permanent || IsTemporary(c.err) == c.permanent {
			t.Errorf("%s: IsPermanent %v IsTemporary %v, want permanent=%v", c.name, IsPermanent(c.err), IsTemporary(c.err), c.permanent)
		}
		d, ok := RetryAfter(c.err)
		if d != c.retryAfter || ok != (c.retryAfter > 0) {
			t.Errorf("%s: RetryAfter %v %v, want %v", c.name, d, ok, c.retryAfter)
		}
		if !errors.Is(c.err, base) {
			t.Errorf("%s: the cause is lost", c.name)
		}
	}
	if Temporary(nil) != nil || Permanent(nil) != nil || TemporaryAfter(nil, time.Second) != nil || IsTemporary(nil) {
		t.Error("nil must stay nil and not count as temporary")
	}
}

// TestHealthTracker: the zero value is connecting; an error sets the
// status and keeps the text; an event is timestamped.
func TestHealthTracker(t *testing.T) {
	var h HealthTracker
	if h.Health().Status != StatusConnecting {
		t.Errorf("zero value: %+v", h.Health())
	}
	h.Set(StatusConnected, "listening")
	h.Event()
	h.Error(errors.New("connection reset"))
	got := h.Health()
	if got.Status != StatusError || got.LastError != "connection reset" || got.LastErrorAt == nil || got.LastEvent == nil || got.Detail != "listening" {
		t.Errorf("after an error: %+v", got)
	}
	h.Error(nil)
	if h.Health().LastError != "connection reset" {
		t.Error("Error(nil) changed the health")
	}
}
