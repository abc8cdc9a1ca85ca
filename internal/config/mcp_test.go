package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/config"
)

// /mcp is served by default with bounded sessions and bodies; http: false
// turns it off; a bound that cannot be one, or a token path with ~, is
// refused at its line.
func TestMCPConfig(t *testing.T) {
	cfg, err := config.Parse([]byte("courier: {}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Courier.MCP
	if !m.Enabled() || m.MaxSessions != 32 || m.SessionTimeout.D() != 30*time.Minute || m.MaxRequestBytes != 8<<20 || m.TokenFile != "" {
		t.Errorf("defaults: %+v", m)
	}
	cfg, err = config.Parse([]byte("courier:\n  mcp: {http: false, token_file: /run/credentials/courier/mcp, max_sessions: 4}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Courier.MCP; m.Enabled() || m.TokenFile != "/run/credentials/courier/mcp" || m.MaxSessions != 4 {
		t.Errorf("set: %+v", m)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"courier:\n  mcp: {max_sessions: -1}\n", "courier.mcp: max_sessions, session_timeout and max_request_bytes must not be negative"},
		{"courier:\n  mcp:\n    token_file: ~/mcp-token\n", `3: courier.mcp.token_file: "~/mcp-token": ~ is not expanded`},
		{"courier:\n  mcp: {tokens: x}\n", "tokens"},
	} {
		_, err := config.Parse([]byte(tc.yaml), t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
