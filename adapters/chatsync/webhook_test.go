package chatsync_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// hookWorld is a webhook of a provider whose requests are signed with a
// header, whose events name a conversation and a position, and whose
// handling is the tracker's Live, as a provider's handle is.
type hookWorld struct {
	tr      *chatsync.Tracker[int64, extra]
	catchUp *chatsync.CatchUp
	hook    *chatsync.Webhook
	sink    *memSink
	flights chatsync.Joiner[string]
	// block, when set, holds every handling until its context ends.
	block bool
	logs  *testutil.Buffer
	now   time.Time
}

type hookEvent struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge,omitempty"`
	ID        string `json:"id,omitempty"`
	Conv      string `json:"conv,omitempty"`
	Pos       int64  `json:"pos,omitempty"`
}

func newHookWorld() *hookWorld {
	w := &hookWorld{tr: newTracker(0), sink: newSink(), logs: &testutil.Buffer{}, now: time.Unix(1700000000, 0)}
	w.catchUp = &chatsync.CatchUp{Name: "test", Tracker: w.tr, Pass: func(context.Context, adapters.Sink) error { return nil }}
	w.hook = &chatsync.Webhook{
		Name: "test", TooLarge: "test: body over 1 MiB", JSONOnly: "test: JSON only", Budget: 2 * time.Second,
		Verify:     w.verify,
		Challenge:  challengeOf,
		Parse:      w.parse,
		FailStatus: http.StatusInternalServerError, NotStored: "test: event not stored", NotStoredInTime: "test: event not stored in time",
		NotStoredLog: "test: event not stored; the provider will retry",
		CatchUp:      w.catchUp, Health: &adapters.HealthTracker{},
		Log: slog.New(slog.NewTextHandler(w.logs, nil)), Now: func() time.Time { return w.now },
	}
	return w
}

func (w *hookWorld) verify(h http.Header, body []byte) ([]byte, *chatsync.Refusal) {
	if h.Get("X-Sig") != "ok" {
		return nil, chatsync.Refuse(http.StatusUnauthorized, "test: not verified")
	}
	return body, nil
}

func challengeOf(body []byte) (string, bool, *chatsync.Refusal) {
	var ev hookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return "", false, chatsync.Refuse(http.StatusBadRequest, "test: not JSON")
	}
	return ev.Challenge, ev.Type == "url_verification", nil
}

func (w *hookWorld) parse(body []byte) (chatsync.Delivery, *chatsync.Refusal) {
	var ev hookEvent
	_ = json.Unmarshal(body, &ev)
	switch ev.Type {
	case "ignored":
		return chatsync.Delivery{}, nil
	case "event":
	default:
		return chatsync.Delivery{}, chatsync.Refuse(http.StatusBadRequest, "test: not an event")
	}
	return chatsync.Delivery{ID: ev.ID, Handle: func(ctx context.Context, sink adapters.Sink) error {
		return w.flights.Do(ctx, ev.ID, func(ctx context.Context) error {
			if w.block {
				<-ctx.Done()
				return ctx.Err()
			}
			return w.tr.Live(ctx, sink, ev.Conv, ev.Pos, func(cp *adapters.Checkpoint, _ *extra) error {
				return sink.Deliver(ctx, adapters.Event{Message: &schema.Message{ID: msgID(ev.Conv, ev.Pos)}, Checkpoint: cp})
			})
		})
	}}, nil
}

// post sends body, signed unless hdr says otherwise.
func (w *hookWorld) post(method string, hdr http.Header, body []byte) (int, http.Header, string) {
	req := httptest.NewRequest(method, "/webhook/test", bytes.NewReader(body))
	req.Header.Set("X-Sig", "ok")
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	w.hook.Handler(w.sink).ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

func (w *hookWorld) event(conv string, pos int64) (int, string) {
	b, _ := json.Marshal(hookEvent{Type: "event", ID: fmt.Sprintf("Ev%s%d", conv, pos), Conv: conv, Pos: pos})
	code, _, body := w.post(http.MethodPost, nil, b)
	return code, body
}

// The second Slack loss window: an event the webhook could not store
// (answered 5xx; the provider retries a few times, then gives up), later
// events stored, and a crash before the next pass. The failed message
// must still be read by the pass after the crash: the failure marks a
// gap (CatchUp.Failed), so the later events do not move the checkpoint
// past it.
func TestWebhookGapFailedStoreThenLaterEventsThenCrash(t *testing.T) {
	w := newHookWorld()
	c, d := &chat{id: "c"}, &chat{id: "d"}
	c.post(100)
	d.post(100)
	passOver(t, w.tr, w.sink, c, d)

	c.post(105)
	w.sink.setFail(errDisk)
	if code, body := w.event("c", 105); code != http.StatusInternalServerError || strings.Contains(body, "disk") {
		t.Fatalf("store failed: %d %q, want 500 without the cause", code, body)
	}
	w.sink.setFail(nil)
	c.post(110)
	d.post(111)
	for _, ev := range []struct {
		conv string
		pos  int64
	}{{"c", 110}, {"d", 111}} {
		if code, _ := w.event(ev.conv, ev.pos); code != http.StatusOK {
			t.Fatalf("%s %d: status %d", ev.conv, ev.pos, code)
		}
	}
	if got := w.sink.saved("test/c"); got != "100" {
		t.Errorf("checkpoint %q after the later events, want 100: the failed 105 is before them", got)
	}

	// A crash: a new process reads from what the mailbox saved.
	tr := newTracker(0)
	passOver(t, tr, w.sink, c, d)
	if l := lost(w.sink, c); len(l) > 0 {
		t.Errorf("the message that failed was lost: %v", l)
	}
	if h := w.hook.Health.Health(); h.Status != adapters.StatusError || !strings.Contains(h.LastError, "disk full") {
		t.Errorf("health %+v, want the failure", h)
	}
}

// Every answer and its text: the method (405 with Allow), the content
// type (415), the body's bound (413), the verification (the provider's
// refusal), the challenge echoed as JSON, an event not parsed (400), a
// type with nothing to store (200), an event stored (OK's answer), and a
// failure past the budget (503 and its own text).
func TestWebhookAnswers(t *testing.T) {
	w := newHookWorld()
	ev, _ := json.Marshal(hookEvent{Type: "event", ID: "Ev1", Conv: "c", Pos: 1})
	big := append([]byte(`{"type":"event","x":"`), bytes.Repeat([]byte("a"), chatsync.DefaultMaxBody)...)
	for _, c := range []struct {
		name   string
		method string
		hdr    http.Header
		body   []byte
		code   int
		text   string
	}{
		{"GET", http.MethodGet, nil, ev, 405, "test: POST only\n"},
		{"form", http.MethodPost, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, ev, 415, "test: JSON only\n"},
		{"too large", http.MethodPost, nil, big, 413, "test: body over 1 MiB\n"},
		{"unsigned", http.MethodPost, http.Header{"X-Sig": {"forged"}}, ev, 401, "test: not verified\n"},
		{"challenge", http.MethodPost, nil, []byte(`{"type":"url_verification","challenge":"abc"}`), 200, "{\"challenge\":\"abc\"}\n"},
		{"not JSON", http.MethodPost, nil, []byte(`x`), 400, "test: not JSON\n"},
		{"not an event", http.MethodPost, nil, []byte(`{"type":"other"}`), 400, "test: not an event\n"},
		{"ignored", http.MethodPost, nil, []byte(`{"type":"ignored"}`), 200, ""},
		{"stored", http.MethodPost, http.Header{"Content-Type": {"application/json; charset=utf-8"}}, ev, 200, ""},
	} {
		code, hdr, body := w.post(c.method, c.hdr, c.body)
		if code != c.code || body != c.text {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, body, c.code, c.text)
		}
		if c.code == 405 && hdr.Get("Allow") != http.MethodPost {
			t.Errorf("%s: Allow %q", c.name, hdr.Get("Allow"))
		}
	}
	w.hook.OK = func(rw http.ResponseWriter) { _, _ = rw.Write([]byte(`{"msg":"success"}`)) }
	ev2, _ := json.Marshal(hookEvent{Type: "event", ID: "Ev2", Conv: "c", Pos: 2})
	if code, _, body := w.post(http.MethodPost, nil, ev2); code != 200 || body != `{"msg":"success"}` {
		t.Errorf("stored with OK: %d %q", code, body)
	}
	w.block, w.hook.Budget = true, 20*time.Millisecond
	ev3, _ := json.Marshal(hookEvent{Type: "event", ID: "Ev3", Conv: "c", Pos: 3})
	if code, _, body := w.post(http.MethodPost, nil, ev3); code != 503 || body != "test: event not stored in time\n" {
		t.Errorf("past the budget: %d %q, want 503", code, body)
	}
	if !strings.Contains(w.logs.String(), "test: event not stored; the provider will retry") || !strings.Contains(w.logs.String(), "event_id=Ev3") {
		t.Errorf("the failure is not in the log: %s", w.logs.String())
	}
	// The default failure status is 503.
	w.hook.FailStatus, w.block = 0, false
	w.sink.setFail(errDisk)
	if code, body := w.event("c", 4); code != 503 || body != "test: event not stored\n" {
		t.Errorf("default failure: %d %q, want 503", code, body)
	}
}

// Refused requests are logged at most once a minute, each logged line
// with how many were refused since the last.
func TestWebhookRefusalsPaced(t *testing.T) {
	w := newHookWorld()
	for range 3 {
		w.post(http.MethodGet, nil, nil)
	}
	w.now = w.now.Add(61 * time.Second)
	w.post(http.MethodPost, http.Header{"X-Sig": {"no"}}, []byte(`{}`))
	lines := strings.Split(strings.TrimSpace(w.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines logged, want 2: %q", len(lines), lines)
	}
	for i, want := range []string{"status=405 reason=\"test: POST only\" refused_since_last_logged=0", "status=401 reason=\"test: not verified\" refused_since_last_logged=2"} {
		if !strings.Contains(lines[i], "test: webhook request refused (logged at most once a minute)") || !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q, want %q", i, lines[i], want)
		}
	}
}

// A redelivery that arrives while the first try is storing joins it: one
// Deliver, both answered 200.
func TestWebhookRedeliveryJoins(t *testing.T) {
	w := newHookWorld()
	hold := make(chan struct{})
	entered := make(chan struct{}, 2)
	var delivers int
	var mu sync.Mutex
	w.hook.Parse = func([]byte) (chatsync.Delivery, *chatsync.Refusal) {
		return chatsync.Delivery{ID: "EvJ", Handle: func(ctx context.Context, _ adapters.Sink) error {
			return w.flights.Do(ctx, "EvJ", func(context.Context) error {
				entered <- struct{}{}
				<-hold
				mu.Lock()
				delivers++
				mu.Unlock()
				return nil
			})
		}}, nil
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	wg.Go(func() { codes[0], _, _ = w.post(http.MethodPost, nil, []byte(`{}`)) })
	<-entered
	wg.Go(func() { codes[1], _, _ = w.post(http.MethodPost, nil, []byte(`{}`)) })
	testutil.WaitFor(t, 5*time.Second, "the redelivery to join", func() bool { return w.flights.Waiters("EvJ") == 1 })
	close(hold)
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 || delivers != 1 {
		t.Errorf("codes %v, %d deliveries; want 200 200 and 1", codes, delivers)
	}
}

// URLVerification echoes only a challenge of the provider's shape, from a
// url_verification; any other type is no challenge, and what is not a
// JSON object is refused with the provider's text.
func TestURLVerification(t *testing.T) {
	check := chatsync.URLVerification(regexp.MustCompile(`^[a-z0-9-]{1,16}$`), "x: not JSON", "x: bad challenge")
	for _, c := range []struct {
		body, want string
		ok         bool
		status     int
		text       string
	}{
		{body: `{"type":"url_verification","challenge":"c0ffee-1"}`, want: "c0ffee-1", ok: true},
		{body: `{"type":"event_callback","challenge":"c0ffee-1"}`},
		{body: `{"type":"url_verification","challenge":"<script>"}`, status: 400, text: "x: bad challenge"},
		{body: `{"type":"url_verification"}`, status: 400, text: "x: bad challenge"},
		{body: `[1]`, status: 400, text: "x: not JSON"},
		{body: `{"type":5}`, status: 400, text: "x: not JSON"},
	} {
		got, ok, rf := check([]byte(c.body))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %q %v, want %q %v", c.body, got, ok, c.want, c.ok)
		}
		switch {
		case c.status == 0 && rf != nil:
			t.Errorf("%s: refused %+v", c.body, rf)
		case c.status != 0 && (rf == nil || rf.Status != c.status || rf.Text != c.text):
			t.Errorf("%s: refusal %+v, want %d %q", c.body, rf, c.status, c.text)
		}
	}
}
