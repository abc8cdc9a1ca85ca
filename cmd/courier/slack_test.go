package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
	"github.com/monoco/courier/schema"
)

// slackWorkspace is a workspace whose config enables Slack against fake,
// in mode (socket or events), with the tokens in files as an operator
// keeps them; extra goes under courier:.
func slackWorkspace(t *testing.T, fake *slackfake.Server, mode, web, extra string) string {
	t.Helper()
	ws := newWorkspace(t)
	secrets := t.TempDir()
	o := fake.Options()
	for name, v := range map[string]string{"bot": o.BotToken, "app": o.AppToken, "signing": slackSigningSecret} {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
  debounce: {window_ms: 0}
%s  adapters:
    email: {enabled: false}
    slack:
      enabled: true
      mode: %s
      api_url: %s
      bot_token_file: %s
      app_token_file: %s
      signing_secret_file: %s
`, web, extra, mode, fake.APIURL(), filepath.Join(secrets, "bot"), filepath.Join(secrets, "app"), filepath.Join(secrets, "signing")))
	return ws
}

const slackSigningSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// slackMessage is an Events API callback for a message event.
func slackMessage(eventID, channel, channelType, user, ts, threadTS, text string) json.RawMessage {
	ev := map[string]any{"type": "message", "channel": channel, "channel_type": channelType, "user": user, "ts": ts, "text": text, "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	b, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T0FAKE", "api_app_id": "A0FAKE",
		"event_id": eventID, "event_time": 1700000000, "event": ev})
	return b
}

// sendSlack sends a message event through the fake's socket, the message
// being in the channel's history first, as on Slack.
func sendSlack(ctx context.Context, fake *slackfake.Server, eventID, channel, user, ts, threadTS, text string) (string, error) {
	fake.AddMessage(channel, slackapi.Message{Msg: slackapi.Msg{Type: "message", User: user, Timestamp: ts, ThreadTimestamp: threadTS, Text: text}})
	return fake.SendEvent(ctx, slackMessage(eventID, channel, "channel", user, ts, threadTS, text))
}

func newSlackFake(t *testing.T) *slackfake.Server {
	fake := slackfake.New(t, slackfake.Options{PingInterval: time.Second})
	fake.AddUser(slackapi.User{ID: "U0ANN1234", Name: "ann", RealName: "Ann Lee", Profile: slackapi.UserProfile{DisplayName: "Ann", RealName: "Ann Lee"}})
	fake.AddConversation(slackapi.Channel{GroupConversation: slackapi.GroupConversation{Name: "ops", Conversation: slackapi.Conversation{ID: "C0OPS1234"}}, IsMember: true})
	return fake
}

func slackFiles(t *testing.T, ws string) map[string]*schema.Message {
	t.Helper()
	dir := filepath.Join(ws, ".monoco/mailbox/inbound/slack")
	names, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	out := map[string]*schema.Message{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if out[m.ID] != nil {
			t.Errorf("%s written twice", m.ID)
		}
		out[m.ID] = m
	}
	return out
}

// The Slack loop on the real service in Socket Mode: an event in becomes a
// file before it is acked; an agent's reply is posted in the thread as
// mrkdwn and archived with its ts; Slack's echo of that post writes
// nothing; a person's answer in the thread inherits the draft's
// correlation id; /health says connected; doctor checks the tokens.
func TestServeSlackSocket(t *testing.T) {
	fake := newSlackFake(t)
	web := testutil.FreeAddr(t)
	ws := slackWorkspace(t, fake, "socket", web, "")
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	env, err := sendSlack(ctx, fake, "Ev01", "C0OPS1234", "U0ANN1234", "1700000001.000100", "", "*Deploy* failed, <@U0BOT> can you look?")
	if err != nil {
		t.Fatalf("send the event: %v\n%s", err, s.Log())
	}
	select {
	case <-fake.Acked(env):
	case <-ctx.Done():
		t.Fatalf("the event was not acked\n%s", s.Log())
	}
	// Acked means durable: the file is there now, not eventually.
	files := slackFiles(t, ws)
	m := files["slack_C0OPS1234_1700000001_000100"]
	if m == nil {
		t.Fatalf("after the ack, files %v", files)
	}
	if m.Session.Name != "ops" || m.Participants.From.Name != "Ann" || !strings.Contains(m.Body, "**Deploy** failed") {
		t.Errorf("the file: session %q, from %q, body %q", m.Session.Name, m.Participants.From.Name, m.Body)
	}

	draft := filepath.Join(t.TempDir(), "reply.md")
	os.WriteFile(draft, []byte("---\nreply_to: "+m.ID+"\ncorrelation_id: task-7\n---\nOn it: **rolling back** now, see [the runbook](https://example.com/rb).\n"), 0o600)
	if _, e, code := cli(t, ws, "", "send", draft); code != 0 {
		t.Fatalf("send: %d %s", code, e)
	}
	if !testutil.Poll(20*time.Second, func() bool { return len(fake.Posts()) == 1 }) {
		t.Fatalf("the reply was not posted\n%s", s.Log())
	}
	p := fake.Posts()[0]
	if p.Channel != "C0OPS1234" || p.ThreadTS != "1700000001.000100" || !strings.Contains(p.Text, "*rolling back*") || !strings.Contains(p.Text, "<https://example.com/rb|the runbook>") {
		t.Errorf("posted %+v", p)
	}
	testutil.WaitFor(t, 10*time.Second, "the draft archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 1 })
	archived, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive/slack/*.md"))
	if len(archived) != 1 {
		t.Fatalf("archived drafts %v", archived)
	}
	if b, _ := os.ReadFile(archived[0]); !strings.Contains(string(b), "provider_message_id: \""+p.TS+"\"") && !strings.Contains(string(b), "provider_message_id: "+p.TS) {
		t.Errorf("the archived draft does not record the ts %s:\n%s", p.TS, b)
	}

	// Slack sends our own post back as an event: nothing is written.
	env, _ = fake.SendEvent(ctx, slackMessage("Ev02", "C0OPS1234", "channel", "U0BOT", p.TS, "1700000001.000100", p.Text))
	<-fake.Acked(env)
	// Ann answers in the thread: her message inherits task-7.
	env, _ = sendSlack(ctx, fake, "Ev03", "C0OPS1234", "U0ANN1234", "1700000009.000200", "1700000001.000100", "thanks")
	<-fake.Acked(env)
	files = slackFiles(t, ws)
	if len(files) != 2 {
		t.Logf("%s", s.Log())
		t.Errorf("%d files, want Ann's two (the echo of our post dropped)", len(files))
	}
	if a := files["slack_C0OPS1234_1700000009_000200"]; a == nil || a.CorrelationID.String() != "task-7" || a.ReplyTo.String() != m.ID {
		t.Errorf("Ann's answer: %v", a != nil && a.CorrelationID.String() == "task-7")
		if a != nil {
			t.Errorf("correlation %q reply_to %q", a.CorrelationID, a.ReplyTo)
		}
	}

	var rep struct {
		Adapters map[string]struct{ Status string }
	}
	resp, err := http.Get(s.Health)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if rep.Adapters["slack"].Status != "connected" {
		t.Errorf("/health slack = %+v", rep.Adapters["slack"])
	}
	if strings.Contains(s.Log(), fake.Options().BotToken) || strings.Contains(s.Log(), fake.Options().AppToken) {
		t.Errorf("a token in the log")
	}
	if out, e, code := cli(t, ws, "", "doctor"); code != 0 || !strings.Contains(out+e, "auth.test") {
		t.Errorf("doctor: %d\n%s%s", code, out, e)
	}
	s.Stop(t)
}

// signSlack signs body as Slack signs a request to the Events API.
func signSlack(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:%s", ts, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// The Events API on the real service: /webhook/slack on the HTTP listener
// answers url_verification, writes a signed event once (its retry
// nothing), and refuses an unsigned, a stale or a forged request with 401
// writing nothing.
func TestServeSlackEvents(t *testing.T) {
	fake := newSlackFake(t)
	web := testutil.FreeAddr(t)
	ws := slackWorkspace(t, fake, "events", web, "")
	s := startServe(t, ws, web)
	url := "http://" + web + "/webhook/slack"
	post := func(body []byte, ts int64, sig string, retry int) (int, string) {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if ts != 0 {
			req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
		}
		if sig != "" {
			req.Header.Set("X-Slack-Signature", sig)
		}
		if retry > 0 {
			req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
			req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	now := time.Now().Unix()

	challenge := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	if code, body := post(challenge, now, signSlack(slackSigningSecret, now, challenge), 0); code != 200 || !strings.Contains(body, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P") {
		t.Errorf("url_verification: %d %q", code, body)
	}
	ev := slackMessage("Ev10", "C0OPS1234", "channel", "U0ANN1234", "1700000002.000100", "", "hello from the Events API")
	for _, tc := range []struct {
		name string
		ts   int64
		sig  string
	}{
		{"unsigned", now, ""},
		{"no timestamp", 0, signSlack(slackSigningSecret, now, ev)},
		{"stale", now - 6*60, signSlack(slackSigningSecret, now-6*60, ev)},
		{"future", now + 6*60, signSlack(slackSigningSecret, now+6*60, ev)},
		{"another secret", now, signSlack("not-the-secret", now, ev)},
		{"another body", now, signSlack(slackSigningSecret, now, append([]byte(" "), ev...))},
	} {
		if code, _ := post(ev, tc.ts, tc.sig, 0); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", tc.name, code)
		}
	}
	if n := len(slackFiles(t, ws)); n != 0 {
		t.Fatalf("%d files after refused requests", n)
	}
	if code, body := post(ev, now, signSlack(slackSigningSecret, now, ev), 0); code != 200 {
		t.Fatalf("a signed event: %d %q\n%s", code, body, s.Log())
	}
	if files := slackFiles(t, ws); files["slack_C0OPS1234_1700000002_000100"] == nil {
		t.Fatalf("after the 200, files %v", files)
	}
	if code, _ := post(ev, now, signSlack(slackSigningSecret, now, ev), 1); code != 200 {
		t.Errorf("the retry: %d", code)
	}
	if n := len(slackFiles(t, ws)); n != 1 {
		t.Errorf("%d files after the retry, want 1", n)
	}
	s.Stop(t)
}

// kill -9 during a burst of Socket Mode events: Slack redelivers what was
// not acked (the fake is told to, as Slack's timer would), and every event
// ends up in exactly one file.
func TestCrashDuringSlackBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the service")
	}
	fake := newSlackFake(t)
	web := testutil.FreeAddr(t)
	ws := slackWorkspace(t, fake, "socket", web, "")
	const n, kills = 300, 3
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inbound := filepath.Join(ws, ".monoco/mailbox/inbound/slack")

	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			ts := fmt.Sprintf("1700001000.%06d", i)
			if _, err := sendSlack(ctx, fake, fmt.Sprintf("Ev%04d", i), "C0OPS1234", "U0ANN1234", ts, "", fmt.Sprintf("message %d", i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for k := 1; k <= kills; k++ {
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%d files", k*n/4), func() bool {
			files, _ := filepath.Glob(filepath.Join(inbound, "*.md"))
			return len(files) >= k*n/4
		})
		s.Kill()
		files, _ := filepath.Glob(filepath.Join(inbound, "*.md"))
		if len(files) >= n {
			t.Fatalf("kill %d came after every event was in", k)
		}
		s = startServe(t, ws, web)
		// Slack redelivers what the killed connection did not ack.
		for _, env := range fake.Unacked() {
			if err := fake.Redeliver(ctx, env); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// What is still unacked is redelivered, as Slack retries it, until
	// every envelope is acked.
	for un := fake.Unacked(); len(un) > 0; un = fake.Unacked() {
		if ctx.Err() != nil {
			t.Fatalf("%d envelopes never acked\n%s", len(un), s.Log())
		}
		for _, env := range un {
			fake.Redeliver(ctx, env)
		}
		wait, stop := context.WithTimeout(ctx, 2*time.Second)
		for _, env := range un {
			select {
			case <-fake.Acked(env):
			case <-wait.Done():
			}
		}
		stop()
	}
	s.Stop(t)
	files := slackFiles(t, ws)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("slack_C0OPS1234_1700001000_%06d", i)
		if files[id] == nil {
			t.Errorf("event %d lost", i)
		}
	}
	if len(files) != n {
		t.Errorf("%d files, want %d", len(files), n)
	}
	if ids := countIDs(t, ws); len(ids) != n {
		t.Errorf("index lists %d, want %d", len(ids), n)
	}
}
