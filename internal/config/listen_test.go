package config

import (
	"strings"
	"testing"
)

// Every address a server listens on is checked as serve would use it: a
// port out of range, zero or missing, and a host no listener takes, are
// config errors naming the key, not a failure (or a panic) at start.
func TestListenAddresses(t *testing.T) {
	for _, tc := range []struct {
		key, yaml string
		ok        bool
	}{
		{"courier.http.listen", `courier: {http: {listen: "127.0.0.1:8644"}}`, true},
		{"courier.http.listen", `courier: {http: {listen: ":8644"}}`, true},
		{"courier.http.listen", `courier: {http: {listen: "localhost:8644"}}`, true},
		{"courier.http.listen", `courier: {http: {listen: "[::1]:8644"}}`, true},
		{"courier.http.listen", `courier: {http: {listen: "127.0.0.1:70000"}}`, false},
		{"courier.http.listen", `courier: {http: {listen: "127.0.0.1:-1"}}`, false},
		{"courier.http.listen", `courier: {http: {listen: "127.0.0.1:0"}}`, false},
		{"courier.http.listen", `courier: {http: {listen: "127.0.0.1:"}}`, false},
		{"courier.http.listen", `courier: {http: {listen: "127.0.0.1:http"}}`, false},
		{"courier.http.listen", `courier: {http: {listen: "8644"}}`, false},
		{"courier.http.listen", `courier: {http: {listen: "a b:8644"}}`, false},
		{"courier.adapters.email.receiver.smtp", `courier: {adapters: {email: {receiver: {smtp: "127.0.0.1:99999"}}}}`, false},
		{"courier.adapters.email.receiver.lmtp", `courier: {adapters: {email: {receiver: {lmtp: "127.0.0.1:0"}}}}`, false},
		{"courier.adapters.email.receiver.lmtp", `courier: {adapters: {email: {receiver: {lmtp: "unix:/run/courier/lmtp.sock"}}}}`, true},
	} {
		_, err := Parse([]byte(tc.yaml), t.TempDir())
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.yaml, err)
		case !tc.ok && err == nil:
			t.Errorf("%s: accepted", tc.yaml)
		case !tc.ok && !strings.Contains(err.Error(), tc.key):
			t.Errorf("%s: %v (want it to name %s)", tc.yaml, err, tc.key)
		}
	}
}
