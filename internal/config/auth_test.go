package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/schema"
)

// The keys of sender authenticity: read as written, and a bad value is an
// error naming its key and line.
func TestSenderAuthKeys(t *testing.T) {
	c, err := config.Parse([]byte(`courier:
  adapters:
    email:
      enabled: true
      receiver:
        smtp: 0.0.0.0:2525
        allow_from: [192.0.2.0/24, "2001:db8::/32", 198.51.100.7]
      authserv_ids: [mx.example.com]
      trust_unverified: true
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := c.Courier.Adapters.Email
	if strings.Join(e.Receiver.AllowFrom, ",") != "192.0.2.0/24,2001:db8::/32,198.51.100.7" ||
		strings.Join(e.AuthservIDs, ",") != "mx.example.com" || !e.TrustUnverified {
		t.Errorf("read %+v", e)
	}
	if d := config.Default().Courier.Adapters.Email; d.TrustUnverified || len(d.AuthservIDs) != 0 || len(d.Receiver.AllowFrom) != 0 {
		t.Errorf("defaults: %+v (unverified senders are not trusted, no host is)", d)
	}
	for in, want := range map[string]string{"198.51.100.7": "198.51.100.7/32", "192.0.2.9/24": "192.0.2.0/24", "::ffff:192.0.2.1": "192.0.2.1/32", "2001:db8::1": "2001:db8::1/128"} {
		if p, err := config.ParsePrefix(in); err != nil || p.String() != want {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %s", in, p, err, want)
		}
	}

	for _, tc := range []struct {
		name, yaml string
		line       int
		path, msg  string
	}{
		{"bad network", "courier:\n  adapters:\n    email:\n      receiver:\n        allow_from: [192.0.2.0/24, 10.0.0.0/33]\n", 5,
			"courier.adapters.email.receiver.allow_from[1]", `"10.0.0.0/33" is neither a network`},
		{"a name is not a network", "courier:\n  adapters:\n    email:\n      receiver:\n        allow_from: [mx.example.com]\n", 5,
			"courier.adapters.email.receiver.allow_from[0]", "neither a network"},
		{"authserv-id with a space", "courier:\n  adapters:\n    email:\n      authserv_ids: [\"mx.example.com; spf=pass\"]\n", 4,
			"courier.adapters.email.authserv_ids[0]", "not an authserv-id"},
		{"empty authserv-id", "courier:\n  adapters:\n    email:\n      authserv_ids: [\"\"]\n", 4,
			"courier.adapters.email.authserv_ids[0]", "not an authserv-id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), t.TempDir())
			var errs schema.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			for _, e := range errs {
				if e.Line == tc.line && e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want line %d path %q msg ~%q; got:\n%v", tc.line, tc.path, tc.msg, err)
		})
	}
}
