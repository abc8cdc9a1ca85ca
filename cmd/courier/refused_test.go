package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/internal/testutil/slackfake"
)

// Failures stay in their lane: a provider whose credentials are refused
// (at start or while serving) is degraded, not the service. The email
// receiver files mail all along, /health names the provider and why,
// `courier start` succeeds with a warning, doctor fails naming it, and the
// provider is tried again (after courier.restart.refused, a second here)
// until it is accepted.

// laneWorkspace is a workspace with the email receiver on smtp and the
// providers of adapters (YAML under courier.adapters:, indented four
// spaces), refused credentials tried again every second.
func laneWorkspace(t *testing.T, web, smtp, adapters string) string {
	t.Helper()
	ws := newWorkspace(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  debounce: {window_ms: 0}
  restart: {refused: 1s, refused_max: 1s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
%s`, web, smtp, adapters))
	return ws
}

// laneSlack is the Slack section for fake, in socket mode, the tokens inline.
func laneSlack(fake *slackfake.Server) string {
	o := fake.Options()
	return fmt.Sprintf("    slack: {enabled: true, mode: socket, api_url: %q, bot_token: %s, app_token: %s}\n", fake.APIURL(), o.BotToken, o.AppToken)
}

// laneHealth is the service's /health.
func laneHealth(t *testing.T, healthURL string) service.Report {
	t.Helper()
	resp, err := http.Get(healthURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep service.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// laneMailFiled sends a mail to the receiver and waits for its file.
func laneMailFiled(t *testing.T, ws, smtp, subject string) {
	t.Helper()
	before := len(countIDs(t, ws, "--provider", "email"))
	if err := sendMail(smtp, "ann@example.com", "agent@example.com", subject+"@example.com", subject, "body of "+subject); err != nil {
		t.Fatalf("send %s: %v", subject, err)
	}
	testutil.WaitFor(t, 10*time.Second, subject+" filed", func() bool { return len(countIDs(t, ws, "--provider", "email")) > before })
}

// waitAdapter waits until /health shows the adapter in status, and
// returns the report.
func waitAdapter(t *testing.T, s *testutil.Serve, name, status string) service.Report {
	t.Helper()
	var rep service.Report
	if !testutil.Poll(20*time.Second, func() bool {
		rep = laneHealth(t, s.Health)
		return rep.Adapters[name].Status == status
	}) {
		t.Fatalf("/health %s = %+v, want %s\n%s", name, rep.Adapters[name], status, s.Log())
	}
	return rep
}

// A Slack token refused at start: serve runs, email is filed, /health is
// degraded and names Slack's reason and when it is tried again, doctor
// fails naming Slack, and once Slack accepts the token the provider
// connects by itself and /health is healthy again. No token in the log.
func TestServeSlackRefusedAtStart(t *testing.T) {
	fake := newSlackFake(t)
	fake.RevokeTokens()
	web, smtp := testutil.FreeAddr(t), testutil.FreeAddr(t)
	ws := laneWorkspace(t, web, smtp, laneSlack(fake))
	s := startServe(t, ws, web)
	laneMailFiled(t, ws, smtp, "while-slack-refused")

	rep := laneHealth(t, s.Health)
	h := rep.Adapters["slack"]
	if rep.Status != "degraded" || h.Status != "error" || !strings.Contains(h.LastError, "token_revoked") || h.RetryAt == nil {
		t.Errorf("/health: status %q, slack %+v; want degraded, slack in error naming token_revoked with retry_at", rep.Status, h)
	}
	if e := rep.Adapters["email"]; e.Status == "error" {
		t.Errorf("/health email %+v", e)
	}
	// Tried again, slowly but not never: a second here.
	n := fake.Calls("auth.test")
	testutil.WaitFor(t, 10*time.Second, "auth.test asked again", func() bool { return fake.Calls("auth.test") >= n+2 })

	out, e, code := cli(t, ws, "", "doctor")
	if code != exitUnavailable || !strings.Contains(out, "slack (service)") || !strings.Contains(out, "slack is degraded: ") || !strings.Contains(out, "token_revoked") {
		t.Errorf("doctor: exit %d\n%s%s", code, out, e)
	}

	fake.AcceptTokens()
	waitAdapter(t, s, "slack", "connected")
	if rep := laneHealth(t, s.Health); rep.Status != "healthy" || rep.Adapters["slack"].RetryAt != nil {
		t.Errorf("/health once Slack accepts the token: %q, slack %+v", rep.Status, rep.Adapters["slack"])
	}
	for _, tok := range []string{fake.Options().BotToken, fake.Options().AppToken} {
		if strings.Contains(s.Log(), tok) {
			t.Error("a token in the log")
		}
	}
	s.Stop(t)
}

// A Slack token revoked while serving: Slack degraded with the reason,
// email goes on; accepted again, Slack recovers by itself (events filed
// again) and /health is healthy.
func TestServeSlackRevokedWhileServing(t *testing.T) {
	fake := newSlackFake(t)
	web, smtp := testutil.FreeAddr(t), testutil.FreeAddr(t)
	ws := laneWorkspace(t, web, smtp, laneSlack(fake))
	s := startServe(t, ws, web)
	waitAdapter(t, s, "slack", "connected")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env, err := sendSlack(ctx, fake, "EvLANE1", "C0OPS1234", "U0ANN1234", "1700000101.000100", "", "before")
	if err != nil {
		t.Fatal(err)
	}
	<-fake.Acked(env)

	// Slack closes the app's connections as it revokes its tokens.
	fake.RevokeTokens()
	fake.Disconnect("link_disabled")
	rep := waitAdapter(t, s, "slack", "error")
	if h := rep.Adapters["slack"]; rep.Status != "degraded" || !strings.Contains(h.LastError, "token_revoked") {
		t.Errorf("/health: status %q, slack %+v", rep.Status, h)
	}
	laneMailFiled(t, ws, smtp, "while-slack-revoked")

	fake.AcceptTokens()
	waitAdapter(t, s, "slack", "connected")
	env, err = sendSlack(ctx, fake, "EvLANE2", "C0OPS1234", "U0ANN1234", "1700000102.000100", "", "after")
	if err != nil {
		t.Fatal(err)
	}
	<-fake.Acked(env)
	if files := slackFiles(t, ws); files["slack_C0OPS1234_1700000101_000100"] == nil || files["slack_C0OPS1234_1700000102_000100"] == nil {
		t.Errorf("slack files %v", files)
	}
	if rep := laneHealth(t, s.Health); rep.Status != "healthy" {
		t.Errorf("/health once Slack recovered: %q %+v", rep.Status, rep.Adapters)
	}
	s.Stop(t)
}

// Lark refusing the app's keys: serve runs, email is filed, /health names
// Lark's refusal, the long connection's endpoint is asked again, and the
// secret is in neither /health nor the log.
func TestServeLarkRefused(t *testing.T) {
	fake := larkfake.New(t, larkfake.Options{AppID: larkAppID, AppSecret: "the-right-secret-0004"})
	web, smtp := testutil.FreeAddr(t), testutil.FreeAddr(t)
	ws := laneWorkspace(t, web, smtp, fmt.Sprintf("    lark: {enabled: true, mode: ws, domain: %q, app_id: %s, app_secret: not-the-secret-0004}\n", fake.URL(), larkAppID))
	s := startServe(t, ws, web)
	laneMailFiled(t, ws, smtp, "while-lark-refused")
	rep := laneHealth(t, s.Health)
	h := rep.Adapters["lark"]
	if rep.Status != "degraded" || h.Status != "error" || !strings.Contains(h.LastError, "app_id and app_secret") {
		t.Errorf("/health: status %q, lark %+v", rep.Status, h)
	}
	n := fake.Calls(larkfake.RouteWSEndpoint)
	testutil.WaitFor(t, 10*time.Second, "Lark asked again", func() bool { return fake.Calls(larkfake.RouteWSEndpoint) >= n+2 })
	if b, _ := json.Marshal(laneHealth(t, s.Health)); strings.Contains(string(b)+s.Log(), "not-the-secret-0004") {
		t.Error("the secret is in /health or the log")
	}
	s.Stop(t)
}

// `courier start` with Slack refusing the token: exit 0, the service
// running, and a warning on stderr naming Slack and why.
func TestStartDegraded(t *testing.T) {
	fake := newSlackFake(t)
	fake.RevokeTokens()
	web, smtp := testutil.FreeAddr(t), testutil.FreeAddr(t)
	ws := laneWorkspace(t, web, smtp, laneSlack(fake))
	svCleanup(t, ws)
	out, e, code := svRun(t, ws, nil, "start")
	if code != 0 || !strings.Contains(out, "courier started") {
		t.Fatalf("start: exit %d\n%s%s", code, out, e)
	}
	if !strings.Contains(e, "courier: warning: slack is degraded: ") || !strings.Contains(e, "token_revoked") {
		t.Errorf("start's stderr does not name Slack and why:\n%s", e)
	}
	laneMailFiled(t, ws, smtp, "after-start")
	if _, e, code := svRun(t, ws, nil, "stop"); code != 0 {
		t.Errorf("stop: exit %d %s", code, e)
	}
}
