package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/config"
)

// parseErr parses y, with the providers' sections, and says whether its
// error holds want.
func parseErr(t *testing.T, y, want string) {
	t.Helper()
	_, err := config.Parse([]byte(y), t.TempDir(), adapters)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%q: error %v, want %q", y, err, want)
	}
}

// courier.outbound.max_recipients bounds a draft's to, cc and bcc
// together: 50 by default, at least 1.
func TestMaxRecipientsConfig(t *testing.T) {
	cfg, err := config.Parse([]byte("courier: {}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Courier.Outbound.MaxRecipients; n != 50 {
		t.Errorf("default max_recipients %d, want 50", n)
	}
	cfg, err = config.Parse([]byte("courier:\n  outbound: {max_recipients: 200}\n"), t.TempDir(), nil)
	if err != nil || cfg.Courier.Outbound.MaxRecipients != 200 {
		t.Errorf("max_recipients 200: %v", err)
	}
	parseErr(t, "courier:\n  outbound: {max_recipients: -1}\n", "courier.outbound.max_recipients: must be at least 1")
}

// courier.claims.max_timeout bounds the claim an agent may ask for: 24h
// by default; the default claim (mailbox.claim_timeout) may not pass it.
func TestClaimsMaxTimeoutConfig(t *testing.T) {
	cfg, err := config.Parse([]byte("courier: {}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Courier.Claims.MaxTimeout.D(); d != 24*time.Hour {
		t.Errorf("default claims.max_timeout %v, want 24h", d)
	}
	parseErr(t, "courier:\n  claims: {max_timeout: -1s}\n", "courier.claims.max_timeout: must not be negative")
	parseErr(t, "courier:\n  claims: {max_timeout: 1h}\n  mailbox: {claim_timeout: 2h}\n", "courier.mailbox.claim_timeout: 2h0m0s is longer than courier.claims.max_timeout (1h0m0s)")
}
