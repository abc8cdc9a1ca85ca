package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/schema"
)

// TestReceiverLimits: the receiver's caps have safe defaults when unset,
// take the values given, and a value no receiver can work with is an
// error naming the key, its line and the default.
func TestReceiverLimits(t *testing.T) {
	c, err := config.Parse([]byte("courier:\n  adapters:\n    email:\n      enabled: true\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := c.Courier.Adapters.Email.Receiver
	if r.MaxSessions != 100 || r.MaxSessionsPerIP != 10 || r.MaxSessionTime.D() != 10*time.Minute || r.ReadTimeout.D() != 5*time.Minute {
		t.Errorf("defaults: %d sessions, %d per IP, %v, %v", r.MaxSessions, r.MaxSessionsPerIP, r.MaxSessionTime.D(), r.ReadTimeout.D())
	}
	if d := config.Default().Courier.Adapters.Email.Receiver; d.MaxSessions != 100 || d.ReadTimeout.D() != 5*time.Minute {
		t.Errorf("the embedded default lacks the caps: %+v", d)
	}

	c, err = config.Parse([]byte(`courier:
  adapters:
    email:
      receiver: {smtp: 127.0.0.1:2525, max_sessions: 20, max_sessions_per_ip: 2, max_session_time: 90s, read_timeout: 1m}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r = c.Courier.Adapters.Email.Receiver
	if r.MaxSessions != 20 || r.MaxSessionsPerIP != 2 || r.MaxSessionTime.D() != 90*time.Second || r.ReadTimeout.D() != time.Minute {
		t.Errorf("values given: %d, %d, %v, %v", r.MaxSessions, r.MaxSessionsPerIP, r.MaxSessionTime.D(), r.ReadTimeout.D())
	}

	for _, tc := range []struct{ key, value, msg string }{
		{"max_sessions", "-1", "must be at least 1 (or 0 for the default, 100)"},
		{"max_sessions_per_ip", "-5", "must be at least 1 (or 0 for the default, 10)"},
		{"max_session_time", "500ms", "must be at least 1s (or 0 for the default, 10m)"},
		{"read_timeout", "-1m", "must be at least 1s (or 0 for the default, 5m)"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			yaml := "courier:\n  adapters:\n    email:\n      receiver:\n        " + tc.key + ": " + tc.value + "\n"
			_, err := config.Parse([]byte(yaml), t.TempDir())
			var errs schema.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("%s: %s: err = %v, want a field error", tc.key, tc.value, err)
			}
			for _, e := range errs {
				if e.Line == 5 && e.Path == "courier.adapters.email.receiver."+tc.key && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want line 5, courier.adapters.email.receiver.%s, ~%q; got:\n%v", tc.key, tc.msg, err)
		})
	}
}
