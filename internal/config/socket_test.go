package config_test

import (
	"strings"
	"testing"

	"github.com/monoco/courier/internal/config"
)

// The socket agents write through: inside the workspace by default, a
// relative path taken from the workspace, an absolute one as it is; a
// value that cannot be a socket's path is refused at its line.
func TestSocketPath(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"courier: {}\n", "/srv/ws/.monoco/run/courier.sock"},
		{"courier:\n  socket: {path: run/c.sock}\n", "/srv/ws/run/c.sock"},
		{"courier:\n  socket: {path: /run/courier/courier.sock}\n", "/run/courier/courier.sock"},
	} {
		cfg, err := config.Parse([]byte(tc.yaml), t.TempDir(), nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := cfg.SocketPath("/srv/ws"); got != tc.want {
			t.Errorf("%q: SocketPath = %q, want %q", tc.yaml, got, tc.want)
		}
	}
	if got := config.Default(nil).SocketPath("/srv/ws"); got != "/srv/ws/.monoco/run/courier.sock" {
		t.Errorf("embedded default: %q", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"courier:\n  socket: {path: ~/courier.sock}\n", `2: courier.socket.path: "~/courier.sock": ~ is not expanded`},
		{"courier:\n  socket: {path: /run/courier/}\n", `2: courier.socket.path: "/run/courier/" is not a file path`},
		{"courier:\n  socket: {path: /x, group: agents}\n", "group"},
	} {
		_, err := config.Parse([]byte(tc.yaml), t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
