package config

import (
	"strings"
	"testing"
)

// Every address a server listens on is checked as serve would use it: a
// port out of range, zero or missing, and a host no listener takes, are
// config errors naming the key, not a failure (or a panic) at start. (The
// email receiver's addresses: adapters/email's TestReceiverListen.)
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
	} {
		_, err := Parse([]byte(tc.yaml), t.TempDir(), nil)
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
