package config_test

import (
	"fmt"
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

// A provider endpoint in plain http to a host off loopback would carry
// its token in clear text: Slack's api_url and Lark's domain are refused
// there, naming the key, as IMAP/SMTP refuse a plaintext login. Loopback
// (127.0.0.0/8, ::1, localhost: the fakes) and https stay allowed.
func TestPlainHTTPEndpointsRefused(t *testing.T) {
	slack := "courier:\n  adapters:\n    slack: {enabled: true, bot_token: xoxb-1, app_token: xapp-1, api_url: %q}\n"
	lark := "courier:\n  adapters:\n    lark: {enabled: true, app_id: cli_1, app_secret: s3cret-value, domain: %q}\n"
	for _, u := range []string{"http://slack.example.com/api/", "http://10.0.0.5:8080/api/", "HTTP://[2001:db8::1]/api/"} {
		parseErr(t, fmt.Sprintf(slack, u), "courier.adapters.slack.api_url: \""+u+"\" is plain http to a host off loopback")
	}
	for _, u := range []string{"http://open.example.com", "http://192.168.1.2:9000"} {
		parseErr(t, fmt.Sprintf(lark, u), "courier.adapters.lark.domain: \""+u+"\" is plain http to a host off loopback")
	}
	for _, y := range []string{
		fmt.Sprintf(slack, "http://127.0.0.1:8080/api/"), fmt.Sprintf(slack, "http://[::1]:8080/api/"),
		fmt.Sprintf(slack, "http://localhost:8080/api/"), fmt.Sprintf(slack, "https://slack.example.com/api/"),
		fmt.Sprintf(lark, "http://127.0.0.2:9000"), fmt.Sprintf(lark, "https://open.example.com"), fmt.Sprintf(lark, "lark"),
	} {
		if _, err := config.Parse([]byte(y), t.TempDir(), adapters); err != nil {
			t.Errorf("%q: %v", y, err)
		}
	}
}
