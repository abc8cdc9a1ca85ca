package config_test

import (
	"strings"
	"testing"

	"github.com/monoco/courier/internal/config"
)

// The log of a service `courier start` runs: in .monoco/logs/ by default,
// always bounded (10 MB, 5 rotated files unless set), a relative path
// taken from the workspace; a negative bound, a path that cannot be a
// file's and a unit name that cannot be systemd's are refused at their
// line.
func TestDaemonLogAndSystemd(t *testing.T) {
	for _, tc := range []struct {
		yaml, path  string
		size, files int
		unit        string
		user        bool
	}{
		{"courier: {}\n", "/srv/ws/.monoco/logs/courier.log", 10, 5, "", false},
		{"courier:\n  log: {file: logs/c.log, max_size_mb: 1, max_files: 2}\n", "/srv/ws/logs/c.log", 1, 2, "", false},
		{"courier:\n  log: {file: /var/log/courier/courier.log}\n  systemd: {unit: courier@work.service, user: true}\n", "/var/log/courier/courier.log", 10, 5, "courier@work.service", true},
	} {
		cfg, err := config.Parse([]byte(tc.yaml), t.TempDir(), nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		l, s := cfg.Courier.Log, cfg.Courier.Systemd
		if got := cfg.LogPath("/srv/ws"); got != tc.path || l.MaxSizeMB != tc.size || l.MaxFiles != tc.files || s.Unit != tc.unit || s.User != tc.user {
			t.Errorf("%q: LogPath %q, log %+v, systemd %+v", tc.yaml, got, l, s)
		}
	}
	if got := config.Default(nil).LogPath("/srv/ws"); got != "/srv/ws/.monoco/logs/courier.log" {
		t.Errorf("embedded default: %q", got)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"courier:\n  log: {max_files: -1}\n", "2: courier.log: max_size_mb and max_files must not be negative"},
		{"courier:\n  log: {max_size_mb: -5}\n", "2: courier.log: max_size_mb and max_files must not be negative"},
		{"courier:\n  log: {file: ~/courier.log}\n", `2: courier.log.file: "~/courier.log" is not a file path`},
		{"courier:\n  log: {file: /var/log/}\n", `courier.log.file: "/var/log/" is not a file path`},
		{"courier:\n  systemd: {unit: ../courier.service}\n", `2: courier.systemd.unit: "../courier.service" is not a unit name`},
		{"courier:\n  systemd: {unit: --user}\n", `courier.systemd.unit: "--user" is not a unit name`},
		{"courier:\n  systemd: {unit: courier.service, scope: user}\n", "scope"},
	} {
		_, err := config.Parse([]byte(tc.yaml), t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
