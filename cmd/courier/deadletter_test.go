package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
)

// dlHook is the config of an exec hook on dead events that leaves each
// call's environment and stdin in dir, named by its delivery id, and says
// "ran" on the fifo dir/ran (its lines returned); with a bound of
// max_files raw dead letters.
func dlHook(t *testing.T, dir string, maxFiles int) (string, <-chan string) {
	t.Helper()
	ran := ntFifo(t, filepath.Join(dir, "ran"))
	script := filepath.Join(dir, "hook.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
env > "$OUT/$COURIER_DELIVERY_ID.env"
cat > "$OUT/$COURIER_DELIVERY_ID.json"
echo "ran $COURIER_EVENT $COURIER_PROVIDER" > "$OUT/ran"
`), 0o755)
	return fmt.Sprintf(`  mailbox: {deadletter: {max_files: %d}}
  notify:
    - name: dead
      exec: [%s]
      env: {OUT: %s}
      on: [dead]
`, maxFiles, script, dir), ran
}

// dlKept returns the raw dead letters of provider in ws: payload and
// reason by payload path.
func dlKept(t *testing.T, ws, provider string) map[string][2]string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/.deadletter", provider, "*_raw_*.json"))
	out := map[string][2]string{}
	for _, n := range names {
		p, _ := os.ReadFile(n)
		r, _ := os.ReadFile(n + ".reason")
		out[n] = [2]string{string(p), string(r)}
	}
	return out
}

// dlStats is what /health says of a provider's dead letters.
type dlStats struct {
	SetAside uint64 `json:"set_aside"`
	Refused  uint64 `json:"refused"`
	Kept     int    `json:"kept"`
}

// dlHealth is /health's account of provider's dead letters and ignored
// events.
func dlHealth(t *testing.T, s *testutil.Serve, provider string) (dlStats, map[string]uint64) {
	t.Helper()
	var rep struct {
		Status     string
		DeadLetter map[string]dlStats           `json:"deadletter"`
		Ignored    map[string]map[string]uint64 `json:"ignored"`
	}
	resp, err := http.Get(s.Health)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep.DeadLetter[provider], rep.Ignored[provider]
}

// dlMetrics fails unless /metrics says each of want.
func dlMetrics(t *testing.T, web string, want ...string) {
	t.Helper()
	resp, err := http.Get("http://" + web + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, w := range want {
		if !strings.Contains(string(b), w+"\n") {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

// dlHookRuns checks the hook's n calls: each a dead event of provider
// whose COURIER_MESSAGE_PATH is a kept payload and whose stdin says why.
func dlHookRuns(t *testing.T, s *testutil.Serve, ran <-chan string, dir, provider string, n int, kept map[string][2]string) {
	t.Helper()
	for range n {
		if got := ntLine(t, ran, 10*time.Second, "the dead hook", s); got != "ran dead "+provider {
			t.Errorf("hook said %q", got)
		}
	}
	envs, _ := filepath.Glob(filepath.Join(dir, "*.env"))
	if len(envs) != n {
		t.Fatalf("%d hook calls, want %d", len(envs), n)
	}
	for _, e := range envs {
		env := ntEnv(e)
		k, ok := kept[env["COURIER_MESSAGE_PATH"]]
		if !ok || env["COURIER_EVENT"] != "dead" || !strings.HasPrefix(env["COURIER_MESSAGE_ID"], ".deadletter/"+provider+"/") {
			t.Errorf("hook env %v", env)
			continue
		}
		var info struct{ Reason string }
		b, _ := os.ReadFile(strings.TrimSuffix(e, ".env") + ".json")
		if err := json.Unmarshal(b, &info); err != nil || !strings.HasPrefix(k[1], info.Reason+"\n") || info.Reason == "" {
			t.Errorf("hook stdin %s (%v)", b, err)
		}
	}
}

// Slack events that cannot be placed, through the real service in Socket
// Mode: each is acked once set aside in .deadletter/slack/ (the bot token
// and the verification token scrubbed), beyond the bound (2 here) counted
// and not kept; /health, /metrics and status count them; the dead hook
// runs for each one kept. The same through the Events API endpoint.
func TestServeSlackDeadLetters(t *testing.T) {
	fake := newSlackFake(t)
	web := testutil.FreeAddr(t)
	dir := t.TempDir()
	hook, ran := dlHook(t, dir, 2)
	ws := slackWorkspace(t, fake, "socket", web, hook)
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bot := fake.Options().BotToken
	for i, inner := range []string{
		`{"type":"message","user":"U0ANN1234","text":"no channel; the token is ` + bot + `","ts":"1700000001.000100"}`,
		`{"type":"message","channel":"C0OPS1234","user":"U0ANN1234","text":"no ts"}`,
		`{"type":"message","subtype":"message_deleted","channel":"C0OPS1234","ts":"1700000001.000300","hidden":true}`,
	} {
		b, _ := json.Marshal(map[string]any{"token": "verification-token", "type": "event_callback", "team_id": "T0FAKE",
			"event_id": fmt.Sprintf("EvDEAD%d", i), "event": json.RawMessage(inner)})
		env, err := fake.SendEvent(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-fake.Acked(env):
		case <-ctx.Done():
			t.Fatalf("event %d not acked\n%s", i, s.Log())
		}
	}
	kept := dlKept(t, ws, "slack")
	if len(kept) != 2 {
		t.Fatalf("kept %d dead letters, want 2 (max_files)", len(kept))
	}
	for _, k := range kept {
		if strings.Contains(k[0], bot) || strings.Contains(k[0], "verification-token") || !strings.Contains(k[1], "from slack socket mode, event EvDEAD") {
			t.Errorf("dead letter\n%s\n%s", k[0], k[1])
		}
	}
	if ids := countIDs(t, ws); len(ids) != 0 {
		t.Errorf("messages %v", ids)
	}
	dlHookRuns(t, s, ran, dir, "slack", 2, kept)
	if st, _ := dlHealth(t, s, "slack"); st.SetAside != 2 || st.Refused != 1 || st.Kept != 2 {
		t.Errorf("/health deadletter %+v", st)
	}
	dlMetrics(t, web, `courier_deadletter_total{provider="slack"} 2`, `courier_deadletter_refused_total{provider="slack"} 1`, `courier_deadletter_kept{provider="slack"} 2`)
	if out, _, _ := cli(t, ws, "", "status"); !strings.Contains(out, "Unfiled:   slack  2 in .monoco/mailbox/.deadletter/slack/ (2 set aside since the start, 1 refused beyond the bound)") {
		t.Errorf("status:\n%s", out)
	}
	if strings.Contains(s.Log(), bot) {
		t.Error("the bot token is in the log")
	}
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}

	// The Events API endpoint.
	web = testutil.FreeAddr(t)
	ws = slackWorkspace(t, fake, "events", web, "")
	s = startServe(t, ws, web)
	body := []byte(`{"token":"verification-token","type":"event_callback","team_id":"T0FAKE","event_id":"EvHTTPDEAD","event":{"type":"app_mention","user":"U0ANN1234","text":"where?"}}`)
	ts := time.Now().Unix()
	req, _ := http.NewRequest(http.MethodPost, "http://"+web+"/webhook/slack", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", fmt.Sprint(ts))
	req.Header.Set("X-Slack-Signature", signSlack(slackSigningSecret, ts, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d\n%s", resp.StatusCode, s.Log())
	}
	kept = dlKept(t, ws, "slack")
	if len(kept) != 1 {
		t.Fatalf("kept %v", kept)
	}
	for _, k := range kept {
		if !strings.HasPrefix(k[1], "slack: the event (app_mention) has no channel and no ts: it cannot be placed\n") || !strings.Contains(k[1], "from slack events api, event EvHTTPDEAD") ||
			strings.Contains(k[0], "verification-token") {
			t.Errorf("dead letter\n%s\n%s", k[0], k[1])
		}
	}
	if st, _ := dlHealth(t, s, "slack"); st.SetAside != 1 || st.Kept != 1 {
		t.Errorf("/health deadletter %+v", st)
	}
	dlMetrics(t, web, `courier_deadletter_total{provider="slack"} 1`)
}

// A Lark event that cannot be placed, through the real service on the
// long connection: acked once set aside in .deadletter/lark/ without its
// verification token, counted on /health and /metrics, the dead hook run;
// an event type Courier does not read is counted as ignored.
func TestServeLarkDeadLetters(t *testing.T) {
	fake := newLarkFake(t)
	web := testutil.FreeAddr(t)
	dir := t.TempDir()
	ws := larkWorkspace(t, fake, "ws", web)
	cfg := filepath.Join(ws, ".monoco/config/courier.yaml")
	b, _ := os.ReadFile(cfg)
	hook, ran := dlHook(t, dir, 10)
	writeConfig(t, ws, string(b)+hook)
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noChat, _ := json.Marshal(map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": "ev_dead_nochat", "event_type": "im.message.receive_v1", "token": larkVerificationToken, "app_id": larkAppID},
		"event": map[string]any{"message": map[string]any{"message_id": "om_nochat", "message_type": "text", "content": `{"text":"where?"}`},
			"sender": map[string]any{"sender_id": map[string]any{"open_id": "ou_ann"}, "sender_type": "user"}}})
	read, _ := json.Marshal(map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": "ev_read", "event_type": "im.message.message_read_v1", "token": larkVerificationToken, "app_id": larkAppID},
		"event":  map[string]any{"message_id_list": []string{"om_x"}}})
	for _, body := range [][]byte{noChat, read} {
		id, err := fake.SendEvent(ctx, body)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-fake.Acked(id):
		case <-ctx.Done():
			t.Fatalf("not acked\n%s", s.Log())
		}
	}
	kept := dlKept(t, ws, "lark")
	if len(kept) != 1 {
		t.Fatalf("kept %v", kept)
	}
	for _, k := range kept {
		if !strings.HasPrefix(k[1], "lark: an im.message.receive_v1 event without a chat_id: it cannot be placed\n") || !strings.Contains(k[1], "from lark ws, event ev_dead_nochat") ||
			strings.Contains(k[0], larkVerificationToken) || !strings.Contains(k[0], `"message_id": "om_nochat"`) {
			t.Errorf("dead letter\n%s\n%s", k[0], k[1])
		}
	}
	dlHookRuns(t, s, ran, dir, "lark", 1, kept)
	st, ignored := dlHealth(t, s, "lark")
	if st.SetAside != 1 || st.Kept != 1 || ignored["event_type"] != 1 {
		t.Errorf("/health deadletter %+v, ignored %v", st, ignored)
	}
	dlMetrics(t, web, `courier_deadletter_total{provider="lark"} 1`, `courier_events_ignored_total{provider="lark",reason="event_type"} 1`)
}
