package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/schema"
)

// The text bound and the normalising concurrency: defaults, and bad values
// refused with the key, the line and what is wrong.
func TestTextLimits(t *testing.T) {
	c, err := config.Parse([]byte("courier:\n  http: {listen: 127.0.0.1:1}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Courier.Limits; l.MaxTextBytes != 4<<20 || l.NormalizeConcurrency != 0 {
		t.Errorf("defaults: max_text_bytes %d, normalize_concurrency %d; want 4194304, 0 (one a CPU)", l.MaxTextBytes, l.NormalizeConcurrency)
	}
	c, err = config.Parse([]byte("courier:\n  limits: {max_text_bytes: 65536, normalize_concurrency: 3}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Courier.Limits; l.MaxTextBytes != 65536 || l.NormalizeConcurrency != 3 {
		t.Errorf("set: %+v", l)
	}
	for _, tc := range []struct{ yaml, path, msg string }{
		{"courier:\n  limits:\n    max_text_bytes: 100\n", "courier.limits.max_text_bytes", "100 is not between 4096 and 16777216"},
		{"courier:\n  limits:\n    max_text_bytes: 33554432\n", "courier.limits.max_text_bytes", "33554432 is not between 4096 and 16777216"},
		{"courier:\n  limits:\n    max_text_bytes: -1\n", "courier.limits.max_text_bytes", "is not between"},
		{"courier:\n  limits:\n    normalize_concurrency: -2\n", "courier.limits.normalize_concurrency", "must not be negative"},
	} {
		_, err := config.Parse([]byte(tc.yaml), t.TempDir(), nil)
		var errs schema.Errors
		if !errors.As(err, &errs) {
			t.Fatalf("%q: err = %v", tc.yaml, err)
		}
		found := false
		for _, e := range errs {
			found = found || (e.Path == tc.path && e.Line == 3 && strings.Contains(e.Msg, tc.msg))
		}
		if !found {
			t.Errorf("%q: want %s on line 3 saying %q; got %v", tc.yaml, tc.path, tc.msg, err)
		}
	}
}

// The dead letters' bounds: 0 (the mailbox's defaults) unless set, and a
// negative one refused with the key and the line.
func TestDeadLetterLimits(t *testing.T) {
	c, err := config.Parse([]byte("courier:\n  mailbox:\n    deadletter: {max_files: 10, max_bytes: 4096}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Courier.Mailbox.DeadLetter; d.MaxFiles != 10 || d.MaxBytes != 4096 {
		t.Errorf("set: %+v", d)
	}
	_, err = config.Parse([]byte("courier:\n  mailbox:\n    deadletter:\n      max_files: -1\n"), t.TempDir(), nil)
	var errs schema.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "courier.mailbox.deadletter" || !strings.Contains(errs[0].Msg, "must not be negative") {
		t.Errorf("a negative bound: %v", err)
	}
}
