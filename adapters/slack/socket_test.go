package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
)

// runningSocket is a socket Source running against the fake.
type runningSocket struct {
	s     *socketSource
	done  chan error
	acks  chan string // every envelope acked after handling
	close func()
}

// startSocket starts the Source with short timers (the fake pings every
// 20 ms; a connection silent for 200 ms is dead) and stops it when the
// test ends.
func startSocket(t *testing.T, w *inWorld, sink adapters.Sink) *runningSocket {
	t.Helper()
	s := newSocketSource(w.r)
	s.pingInterval = 200 * time.Millisecond
	s.gate = &reconnectGate{min: 5 * time.Millisecond, max: 50 * time.Millisecond, stable: time.Minute}
	rs := &runningSocket{s: s, done: make(chan error, 1), acks: make(chan string, 100)}
	s.onAck = func(id string) { rs.acks <- id }
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { rs.done <- s.Run(ctx, sink) }()
	var once sync.Once
	rs.close = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-rs.done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(rs.close)
	return rs
}

// waitAcked waits for the fake to receive the envelope's ack.
func waitAcked(t *testing.T, fake *slackfake.Server, env string) {
	t.Helper()
	select {
	case <-fake.Acked(env):
	case <-time.After(10 * time.Second):
		t.Fatalf("envelope %s not acked; unacked %v", env, fake.Unacked())
	}
}

func waitAck(t *testing.T, rs *runningSocket, env string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case id := <-rs.acks:
			if id == env {
				return
			}
		case <-timeout:
			t.Fatalf("no ack of %s", env)
		}
	}
}

func send(t *testing.T, fake *slackfake.Server, payload json.RawMessage) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := fake.SendEvent(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// The ack comes only once the file is durable: while the store is held
// the envelope stays unacked; when the fake sees the ack, the file is on
// disk.
func TestSocketAckAfterDurable(t *testing.T) {
	w := newInWorld(t, "socket")
	sink := &countingSink{Sink: w.pipe, entered: make(chan struct{}, 1), hold: make(chan struct{})}
	startSocket(t, w, sink)
	env := send(t, w.fake, callback("EvACK1", msgEvent("C0ACK0001", "U0ANN", "1700001000.000100", "durable first")))
	<-sink.entered
	if un := w.fake.Unacked(); len(un) != 1 || un[0] != env {
		t.Fatalf("while storing: unacked %v, want [%s]", un, env)
	}
	close(sink.hold)
	waitAcked(t, w.fake, env)
	if !w.hasFile(t, msgID("C0ACK0001", "1700001000.000100")) {
		t.Fatal("acked before the file was on disk")
	}
}

// An event that cannot be stored is not acked; Slack's redelivery stores
// it once.
func TestSocketNotStoredNotAcked(t *testing.T) {
	w := newInWorld(t, "socket")
	w.channel("C0FAIL001", "fail")
	sink := &countingSink{Sink: w.pipe, fail: fmt.Errorf("ingest: disk full"), failed: make(chan string, 10)}
	startSocket(t, w, sink)
	env := send(t, w.fake, callback("EvFAIL1", msgEvent("C0FAIL001", "U0ANN", "1700001100.000100", "later")))
	if id := <-sink.failed; id != msgID("C0FAIL001", "1700001100.000100") {
		t.Fatalf("failed delivery of %s", id)
	}
	testutil.WaitFor(t, 10*time.Second, "the failure on /health", func() bool {
		return strings.Contains(w.a.health.Health().LastError, "disk full")
	})
	if un := w.fake.Unacked(); len(un) != 1 || un[0] != env {
		t.Fatalf("unacked %v, want [%s]", un, env)
	}
	sink.mu.Lock()
	sink.fail = nil
	sink.mu.Unlock()
	if err := w.fake.Redeliver(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, w.fake, env)
	if ids := w.ids(t); len(ids) != 1 || ids[0] != msgID("C0FAIL001", "1700001100.000100") {
		t.Errorf("files %v", ids)
	}
	testutil.WaitFor(t, 10*time.Second, "health back to connected", func() bool {
		h := w.a.health.Health()
		return h.Status == adapters.StatusConnected && strings.Contains(h.LastError, "disk full")
	})
}

// A redelivered envelope (retry_attempt 1, same event_id) is acked and
// writes nothing twice.
func TestSocketRedelivery(t *testing.T) {
	w := newInWorld(t, "socket")
	sink := &countingSink{Sink: w.pipe}
	rs := startSocket(t, w, sink)
	env := send(t, w.fake, callback("EvDUP1", msgEvent("C0DUP0001", "U0ANN", "1700001200.000100", "once")))
	waitAck(t, rs, env)
	for range 2 {
		if err := w.fake.Redeliver(context.Background(), env); err != nil {
			t.Fatal(err)
		}
		waitAck(t, rs, env)
	}
	if n := len(sink.delivered()); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	if ids := w.ids(t); len(ids) != 1 {
		t.Errorf("files %v, want one", ids)
	}
}

// disconnect (each reason), a dropped connection and a silent one all
// reconnect, and the events sent after arrive.
func TestSocketReconnect(t *testing.T) {
	w := newInWorld(t, "socket")
	w.channel("C0RECON01", "reconnect")
	startSocket(t, w, w.pipe)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.fake.WaitConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		cut   func()
		after func()
	}{
		{"refresh_requested", func() { w.fake.Disconnect("refresh_requested") }, nil},
		{"warning", func() { w.fake.Disconnect("warning") }, nil},
		{"link_disabled", func() { w.fake.Disconnect("link_disabled") }, nil},
		{"drop", w.fake.Drop, nil},
		{"silence", func() { w.fake.SilencePings(true) }, func() { w.fake.SilencePings(false) }},
	}
	for i, c := range cases {
		n := w.fake.Connections()
		c.cut()
		if err := w.fake.WaitConnections(ctx, n+1); err != nil {
			t.Fatalf("%s: no reconnect: %v", c.name, err)
		}
		if c.after != nil {
			c.after()
		}
		ts := fmt.Sprintf("17000013%02d.000100", i)
		env := send(t, w.fake, callback("EvRC"+c.name, msgEvent("C0RECON01", "U0ANN", ts, "after "+c.name)))
		waitAcked(t, w.fake, env)
		if !w.hasFile(t, msgID("C0RECON01", ts)) {
			t.Errorf("%s: the event sent after the reconnect has no file", c.name)
		}
	}
	if h := w.a.health.Health(); h.Status != adapters.StatusConnected {
		t.Errorf("health %+v, want connected", h)
	}
}

// runEnds waits for a Run that ends by itself and returns its error; the
// runningSocket's close then finds nothing more to wait for.
func runEnds(t *testing.T, rs *runningSocket) error {
	t.Helper()
	select {
	case err := <-rs.done:
		rs.done <- nil
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end")
	}
	return nil
}

// A refused token ends Run with the reason, marked adapters.Refused (the
// service then tries again minutes later, the others running meanwhile)
// and on /health: slack-go's own fatal codes (token_revoked) as those it
// would retry forever (not_allowed_token_type), at Start, and in the
// catch-up. A Run started again (the service's restart) connects once the
// token is accepted again. A missing scope in the catch-up does not end
// Run: live events go on.
func TestSocketRefused(t *testing.T) {
	refused := func(t *testing.T, err error, code string) {
		t.Helper()
		if !adapters.IsRefused(err) || !strings.Contains(err.Error(), code) {
			t.Errorf("Run: %v, want a refusal naming %s", err, code)
		}
	}
	t.Run("token_revoked", func(t *testing.T) {
		w := newInWorld(t, "socket")
		w.channel("C0REVOKE1", "revoke")
		rs := startSocket(t, w, w.pipe)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.fake.WaitConnections(ctx, 1); err != nil {
			t.Fatal(err)
		}
		w.fake.RevokeTokens()
		w.fake.Disconnect("link_disabled")
		// Run ends at the refused reconnect, or at the catch-up's refused
		// pass that the lost connection asked for, whichever comes first.
		refused(t, runEnds(t, rs), "token_revoked")
		opens := w.fake.Calls("apps.connections.open")
		if opens > 2 {
			t.Errorf("%d apps.connections.open calls, want at most 2 (the first, the refused one)", opens)
		}
		// The service's restart while the token is still refused: one
		// call, refused again.
		refused(t, rs.s.Run(ctx, w.pipe), "token_revoked")
		if n := w.fake.Calls("apps.connections.open"); n != opens+1 {
			t.Errorf("%d apps.connections.open calls, want %d", n, opens+1)
		}
		// Accepted again: the next Run connects, and events are stored.
		w.fake.AcceptTokens()
		rctx, rcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- rs.s.Run(rctx, w.pipe) }()
		defer func() { rcancel(); <-done }()
		testutil.WaitFor(t, 10*time.Second, "connected again", func() bool { return w.a.health.Health().Status == adapters.StatusConnected })
		env := send(t, w.fake, callback("EvBACK1", msgEvent("C0REVOKE1", "U0ANN", "1700001500.000100", "back")))
		waitAcked(t, w.fake, env)
		if !w.hasFile(t, msgID("C0REVOKE1", "1700001500.000100")) {
			t.Error("no file for the event after the token was accepted again")
		}
	})
	t.Run("not_allowed_token_type", func(t *testing.T) {
		w := newInWorld(t, "socket")
		w.fake.Fail("apps.connections.open", slackfake.Failure{Error: "not_allowed_token_type", Times: 1000})
		rs := startSocket(t, w, w.pipe)
		refused(t, runEnds(t, rs), "not_allowed_token_type")
		if n := w.fake.Calls("apps.connections.open"); n > 2 {
			t.Errorf("%d apps.connections.open calls: retried a refused token", n)
		}
		if n := w.fake.Connections(); n != 0 {
			t.Errorf("%d connections", n)
		}
	})
	t.Run("catch-up", func(t *testing.T) {
		w := newInWorld(t, "socket")
		w.fake.Fail("users.conversations", slackfake.Failure{Error: "invalid_auth", Times: 1000})
		rs := startSocket(t, w, w.pipe)
		refused(t, runEnds(t, rs), "invalid_auth")
		if h := w.a.health.Health(); h.Status != adapters.StatusError || !strings.Contains(h.LastError, "invalid_auth") {
			t.Errorf("health %+v, want an error naming invalid_auth", h)
		}
	})
	t.Run("missing scope", func(t *testing.T) {
		w := newInWorld(t, "socket")
		w.channel("C0SCOPE01", "scope")
		w.fake.Fail("conversations.history", slackfake.Failure{Error: "missing_scope", Times: 1000})
		rs := startSocket(t, w, w.pipe)
		testutil.WaitFor(t, 10*time.Second, "the failed pass on /health", func() bool {
			return strings.Contains(w.a.health.Health().LastError, "missing_scope")
		})
		env := send(t, w.fake, callback("EvSCOPE1", msgEvent("C0SCOPE01", "U0ANN", "1700001600.000100", "live")))
		waitAcked(t, w.fake, env)
		select {
		case err := <-rs.done:
			t.Errorf("Run ended on a missing scope: %v", err)
			rs.done <- nil
		default:
		}
	})
	t.Run("start", func(t *testing.T) {
		w := newInWorld(t, "socket")
		w.fake.RevokeTokens()
		err := newSocketSource(w.r).Start(context.Background())
		if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "token_revoked") {
			t.Errorf("Start with a revoked token: %v", err)
		}
		for _, secret := range []string{w.fake.Options().BotToken, w.fake.Options().AppToken} {
			if strings.Contains(w.a.health.Health().LastError, secret) {
				t.Error("health quotes a token")
			}
		}
	})
}

// Slash commands and interactive payloads are acked at once and write
// nothing; every corpus envelope and Events API payload sent over the
// socket ends as its file, acked only once the file is there.
func TestSocketCorpus(t *testing.T) {
	corpus := filepath.Join(testutil.CorpusDir(t), "chat", "slack")
	w := newInWorld(t, "socket")
	startSocket(t, w, w.sink)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var payloads []struct {
		name, typ string
		payload   json.RawMessage
	}
	frames, _ := filepath.Glob(filepath.Join(corpus, "socket-mode", "*.json"))
	bodies, _ := filepath.Glob(filepath.Join(corpus, "events-api", "*.json"))
	if len(frames) == 0 || len(bodies) == 0 {
		t.Fatal("no corpus frames")
	}
	for _, p := range frames {
		var f struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		}
		data, err := os.ReadFile(p)
		if err != nil || json.Unmarshal(data, &f) != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if f.Type == "hello" || f.Type == "disconnect" || len(f.Payload) == 0 {
			continue // the fake's own frames
		}
		payloads = append(payloads, struct {
			name, typ string
			payload   json.RawMessage
		}{filepath.Base(p), f.Type, f.Payload})
	}
	for _, p := range bodies {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), `"url_verification"`) {
			continue // Events API over HTTP only
		}
		payloads = append(payloads, struct {
			name, typ string
			payload   json.RawMessage
		}{filepath.Base(p), "events_api", data})
	}
	payloads = append(payloads, struct {
		name, typ string
		payload   json.RawMessage
	}{"interactive", "interactive", json.RawMessage(`{"type":"block_actions","user":{"id":"U0ANN"},"actions":[]}`)})

	want := map[string]bool{}
	dead := 0
	contents := map[string][]byte{}
	stored := 0 // artifacts checked byte for byte
	defer func() {
		if len(contents) == 0 || stored == 0 {
			t.Errorf("the corpus files: %d hosted, %d stored and checked; want some of each", len(contents), stored)
		}
	}()
	for i, p := range payloads {
		payload := hostFiles(t, w.fake, p.payload, contents)
		var env envelope
		if p.typ == "events_api" {
			// One event id per sample (the corpus reuses "Ev111").
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(payload, &obj); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			obj["event_id"], _ = json.Marshal(fmt.Sprintf("EvSOCK%02d", i))
			payload, _ = json.Marshal(obj)
			json.Unmarshal(payload, &env)
		}
		id, err := w.fake.SendEnvelope(ctx, p.typ, payload)
		if err != nil {
			t.Fatal(err)
		}
		var out *adapters.Event
		var nerr error
		if p.typ == "events_api" && env.Type == "event_callback" {
			out, nerr = w.a.normalize(ctx, event{ID: env.EventID, Inner: env.Event})
		}
		if _, ok := adapters.UndeliverableReason(nerr); ok {
			dead++ // set aside, then acked
		} else if nerr != nil {
			t.Errorf("%s: normalize fails: %v", p.name, nerr)
			continue
		}
		waitAcked(t, w.fake, id)
		if out != nil && out.Message != nil && !out.Self {
			want[out.Message.ID] = true
			if !w.hasFile(t, out.Message.ID) {
				t.Errorf("%s: acked, and no file for %s", p.name, out.Message.ID)
			}
			stored += checkArtifacts(t, w, p.name, out.Message.ID, contents)
		}
	}
	files := w.files(t)
	if len(files) != len(want) || len(want) < 5 {
		t.Errorf("%d files, want %d: %v", len(files), len(want), w.ids(t))
	}
	if n := len(w.deadLetters(t)); n != dead || dead == 0 {
		t.Errorf("%d dead letters, want %d (and some)", n, dead)
	}
	for id := range files {
		if !want[id] {
			t.Errorf("unexpected file %s", id)
		}
	}
}

// The reconnect gate: the first open and one after a connection that
// lasted go at once; opens in quick succession wait a doubling delay,
// jittered within its upper half, capped.
func TestReconnectGate(t *testing.T) {
	g := &reconnectGate{min: time.Second, max: 8 * time.Second, stable: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if d := g.delay(now); d != 0 {
		t.Fatalf("first open waits %v", d)
	}
	g.last = now
	for i, top := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second} {
		now = now.Add(time.Second)
		d := g.delay(now)
		if d < top/2 || d > top {
			t.Errorf("open %d soon after the last waits %v, want within [%v, %v]", i+2, d, top/2, top)
		}
		g.last = now.Add(d)
		now = g.last
	}
	now = now.Add(2 * time.Minute)
	if d := g.delay(now); d != 0 {
		t.Errorf("an open after a connection that lasted waits %v", d)
	}
	g.last = now
	if d := g.delay(now.Add(time.Second)); d < 500*time.Millisecond || d > time.Second {
		t.Errorf("after the reset the delay starts again at min: %v", d)
	}
}
