package lark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// The long connection's tests drive the SDK's ws client against larkfake
// with the real ingest pipeline. None waits on a clock: every wait is for
// a channel (the fake's acks, a Sink's entry) with a generous guard.

const (
	wsVerifToken = "vtok-ws-secret-0001"
	wsChat       = "oc_wschat"
	wsGuard      = 20 * time.Second // a guard against a hang, never an assertion
)

// wsLogBuf is a log the tests read back (secrets must never be in it).
type wsLogBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *wsLogBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *wsLogBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type wsWorld struct {
	fake *larkfake.Server
	a    *Adapter
	r    *receiver
	s    *wsSource
	ws   *wstest.Workspace
	log  *wsLogBuf
	// passes gets a value per catch-up pass (the default pass).
	passes chan struct{}
}

// wsNew is a Source on an adapter configured for the fake (secret is its
// app secret; "" for the fake's own), a workspace with the pipeline, and
// a catch-up that only counts. At the end no secret may be in the log.
func wsNew(t *testing.T, fo larkfake.Options, secret string) *wsWorld {
	t.Helper()
	if fo.AppID == "" {
		fo.AppID = testAppID
	}
	if fo.AppSecret == "" {
		fo.AppSecret = "ws-app-secret-" + t.Name()
	}
	fake := larkfake.New(t, fo)
	fake.AddUser(larkfake.User{OpenID: "ou_ann", Name: "Ann Lee"})
	fake.AddChat(larkfake.Chat{ChatID: wsChat, Name: "Launch"})
	if secret == "" {
		secret = fo.AppSecret
	}
	w := wstest.New(t, nil)
	lb := &wsLogBuf{}
	log := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{Enabled: true, AppID: fo.AppID, AppSecret: confkit.Secret(secret), Domain: fake.URL(),
		VerificationToken: confkit.Secret(wsVerifToken), EncryptKey: confkit.Secret("ws-encrypt-key-0001")}
	a, err := newAdapter(cfg, confkit.Limits{MaxArtifactBytes: 1 << 20}, w.DZ, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(a)
	wd := &wsWorld{fake: fake, a: a, r: r, s: newWS(r), ws: w, log: lb, passes: make(chan struct{}, 100)}
	wd.s.pass = func(ctx context.Context, sink adapters.Sink) error {
		wd.passes <- struct{}{}
		return nil
	}
	t.Cleanup(func() {
		a.tok.mu.Lock()
		tok := a.tok.token
		a.tok.mu.Unlock()
		text := lb.String()
		for name, secret := range map[string]string{"app secret": secret, "verification token": wsVerifToken,
			"encrypt key": "ws-encrypt-key-0001", "tenant token": tok} {
			if secret != "" && strings.Contains(text, secret) {
				t.Errorf("the %s is in the log:\n%s", name, text)
			}
		}
	})
	return wd
}

// wsRunning is a Run in progress; stop ends it and returns what it did.
type wsRunning struct {
	done   chan error
	cancel context.CancelFunc
	once   sync.Once
	err    error
}

func (rr *wsRunning) stop(t *testing.T) error {
	t.Helper()
	rr.once.Do(func() {
		rr.cancel()
		select {
		case rr.err = <-rr.done:
		case <-time.After(wsGuard):
			rr.err = errors.New("Run did not return after its context ended")
		}
	})
	return rr.err
}

// wsStart runs the Source until the test ends, and fails the test if Run
// then returns anything but nil.
func wsStart(t *testing.T, w *wsWorld, sink adapters.Sink) *wsRunning {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rr := &wsRunning{done: make(chan error, 1), cancel: cancel}
	go func() { rr.done <- w.s.Run(ctx, sink) }()
	t.Cleanup(func() {
		if err := rr.stop(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return rr
}

// wsEvent is an im.message.receive_v1 envelope as Lark sends it over the
// long connection (the header carries the verification token).
func wsEvent(msgID, senderType, senderOpenID, senderAppID, text string, createMs int64) json.RawMessage {
	content, _ := json.Marshal(map[string]string{"text": text})
	ev := map[string]any{
		"schema": "2.0",
		"header": map[string]any{"event_id": "ev_" + msgID, "token": wsVerifToken, "create_time": fmt.Sprint(createMs),
			"event_type": "im.message.receive_v1", "tenant_key": "tenant_fake", "app_id": testAppID},
		"event": map[string]any{
			"message": map[string]any{"message_id": msgID, "chat_id": wsChat, "chat_type": "group", "message_type": "text",
				"content": string(content), "create_time": fmt.Sprint(createMs)},
			"sender": map[string]any{"sender_id": map[string]any{"open_id": senderOpenID, "app_id": senderAppID},
				"sender_type": senderType, "tenant_key": "tenant_fake"},
		},
	}
	b, _ := json.Marshal(ev)
	return b
}

func wsUserEvent(msgID, text string, createMs int64) json.RawMessage {
	return wsEvent(msgID, "user", "ou_ann", "", text, createMs)
}

func wsSend(t *testing.T, fake *larkfake.Server, body json.RawMessage) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wsGuard)
	defer cancel()
	id, err := fake.SendEvent(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// wsAck waits for the client's answer to a frame.
func wsAck(t *testing.T, fake *larkfake.Server, id string) larkfake.Ack {
	t.Helper()
	select {
	case <-fake.Acked(id):
	case <-time.After(wsGuard):
		t.Fatalf("frame %s never answered", id)
	}
	ack, _ := fake.Ack(id)
	return ack
}

// wsFiles lists the ids of the Lark files in the mailbox (each checked
// against the schema).
func wsFiles(t *testing.T, w *wsWorld) []string {
	t.Helper()
	dir := w.ws.MB.Dir(mailbox.BoxInbound, schema.Lark)
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		testutil.ValidateInbound(t, e.Name(), data)
		m, err := schema.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		ids = append(ids, m.ID)
	}
	return ids
}

// wsSink is the pipeline with a hand on Deliver: it can hold each call
// until released, fail, and it counts the messages handed to it.
type wsSink struct {
	adapters.Sink
	entered chan string   // each message id as Deliver is entered (when set)
	hold    chan struct{} // Deliver waits for it to close (when set)

	mu        sync.Mutex
	fail      error
	delivered []string
}

func (s *wsSink) Deliver(ctx context.Context, evs ...adapters.Event) error {
	for _, ev := range evs {
		if ev.Message == nil {
			continue
		}
		if s.entered != nil {
			s.entered <- ev.Message.ID
		}
		if s.hold != nil {
			select {
			case <-s.hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		s.mu.Lock()
		fail := s.fail
		if fail == nil {
			s.delivered = append(s.delivered, ev.Message.ID)
		}
		s.mu.Unlock()
		if fail != nil {
			return fail
		}
	}
	return s.Sink.Deliver(ctx, evs...)
}

func (s *wsSink) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *wsSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.delivered)
}

// The ack comes only once the file is durable: while Deliver is held the
// frame stays unanswered and nothing is on disk; when the fake has the
// answer, it is 200 and the file is there.
func TestWSAckAfterDurable(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	w.s.budget = time.Hour // the order is under test here, not the budget
	sink := &wsSink{Sink: w.ws.Pipe, entered: make(chan string, 1), hold: make(chan struct{})}
	wsStart(t, w, sink)
	id := wsSend(t, w.fake, wsUserEvent("om_ws_durable", "durable first", 1700000000000))
	if got := <-sink.entered; got != "lark_om_ws_durable" {
		t.Fatalf("Deliver got %s", got)
	}
	select {
	case <-w.fake.Acked(id):
		t.Fatal("answered while the message was being stored")
	default:
	}
	if ids := wsFiles(t, w); len(ids) != 0 {
		t.Fatalf("files %v before Deliver returned", ids)
	}
	close(sink.hold)
	if ack := wsAck(t, w.fake, id); ack.Code != 200 {
		t.Fatalf("ack code %d, want 200", ack.Code)
	}
	if ids := wsFiles(t, w); len(ids) != 1 || ids[0] != "lark_om_ws_durable" {
		t.Fatalf("files %v when the ack came, want [lark_om_ws_durable]", ids)
	}
	if w.a.health.Health().LastEvent == nil {
		t.Error("no last_event on /health")
	}
}

// A redelivery (the same message_id, a new frame) is acked and writes
// nothing: one Deliver, one file.
func TestWSRedelivery(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	sink := &wsSink{Sink: w.ws.Pipe}
	wsStart(t, w, sink)
	body := wsUserEvent("om_ws_dup", "once", 1700000001000)
	for i := range 3 {
		if ack := wsAck(t, w.fake, wsSend(t, w.fake, body)); ack.Code != 200 {
			t.Fatalf("send %d: ack code %d, want 200", i, ack.Code)
		}
	}
	if n := sink.count(); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	if ids := wsFiles(t, w); len(ids) != 1 {
		t.Errorf("files %v, want one", ids)
	}
}

// An event that cannot be stored is answered 500 (Lark redelivers it),
// /health says why, a catch-up pass follows, and the next delivery of it
// stores it.
func TestWSHandlerErrorNotAcked(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	sink := &wsSink{Sink: w.ws.Pipe}
	sink.setFail(errors.New("ingest: disk full"))
	wsStart(t, w, sink)
	wsWaitPass(t, w.passes, "after connecting")
	gaps := wsGaps(w.r)
	body := wsUserEvent("om_ws_fail", "later", 1700000002000)
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, body)); ack.Code != 500 {
		t.Fatalf("ack code %d for an event not stored, want 500", ack.Code)
	}
	// Lark retries four times only: the failure is a gap the catch-up
	// reads again.
	if g := wsGaps(w.r); g <= gaps {
		t.Errorf("gaps %d after a failed event, want more than %d", g, gaps)
	}
	wsWaitPass(t, w.passes, "after the failed event")
	if h := w.a.health.Health(); !strings.Contains(h.LastError, "disk full") || h.Status != adapters.StatusError {
		t.Errorf("health %+v, want the failure", h)
	}
	if ids := wsFiles(t, w); len(ids) != 0 {
		t.Fatalf("files %v after a failed delivery", ids)
	}
	sink.setFail(nil)
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, body)); ack.Code != 200 {
		t.Fatalf("ack code %d on redelivery, want 200", ack.Code)
	}
	if ids := wsFiles(t, w); len(ids) != 1 || ids[0] != "lark_om_ws_fail" {
		t.Fatalf("files %v, want [lark_om_ws_fail]", ids)
	}
	if h := w.a.health.Health(); h.Status != adapters.StatusConnected || !strings.Contains(h.LastError, "disk full") {
		t.Errorf("health %+v, want connected again with the failure as last_error", h)
	}
}

// Past its budget the handler answers 500 but the handling goes on: the
// file is written once, a redelivery meanwhile joins the handling under
// way (no second Deliver), and one after it is acked 200 without writing.
func TestWSBudget(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	w.s.budget = 10 * time.Millisecond // Deliver is held far past it
	sink := &wsSink{Sink: w.ws.Pipe, entered: make(chan string, 10), hold: make(chan struct{})}
	rr := wsStart(t, w, sink)
	body := wsUserEvent("om_ws_slow", "a large file, say", 1700000003000)
	first := wsSend(t, w.fake, body)
	<-sink.entered
	if ack := wsAck(t, w.fake, first); ack.Code != 500 {
		t.Fatalf("ack code %d past the budget, want 500", ack.Code)
	}
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, body)); ack.Code != 500 {
		t.Fatalf("redelivery during the handling: ack code %d, want 500", ack.Code)
	}
	close(sink.hold)
	testutil.WaitFor(t, wsGuard, "the file written by the handling that outlived its budget", func() bool {
		return len(wsFiles(t, w)) == 1
	})
	w.s.budget = time.Hour
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, body)); ack.Code != 200 {
		t.Fatalf("redelivery after: ack code %d, want 200", ack.Code)
	}
	if err := rr.stop(t); err != nil {
		t.Fatal(err)
	}
	// Run waited for every handling: none is left to deliver again.
	if n := sink.count(); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	if ids := wsFiles(t, w); len(ids) != 1 {
		t.Errorf("files %v, want one", ids)
	}
}

// The app's own message (sender_type app, its app_id) is acked and
// written nowhere.
func TestWSOwnMessage(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	wsStart(t, w, w.ws.Pipe)
	own := wsEvent("om_ws_own", "app", "", testAppID, "my own reply", 1700000004000)
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, own)); ack.Code != 200 {
		t.Fatalf("ack code %d, want 200", ack.Code)
	}
	// A message of someone else after it: once it is in, the own one had
	// its turn.
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, wsUserEvent("om_ws_other", "hi", 1700000004500))); ack.Code != 200 {
		t.Fatalf("ack code %d, want 200", ack.Code)
	}
	if ids := wsFiles(t, w); len(ids) != 1 || ids[0] != "lark_om_ws_other" {
		t.Errorf("files %v, want only lark_om_ws_other", ids)
	}
}

// Event types Courier does not read are acked and write nothing.
func TestWSOtherEventTypes(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	sink := &wsSink{Sink: w.ws.Pipe}
	wsStart(t, w, sink)
	for _, typ := range []string{"im.message.message_read_v1", "im.chat.member.bot.added_v1", "im.message.reaction.created_v1"} {
		body, _ := json.Marshal(map[string]any{"schema": "2.0",
			"header": map[string]any{"event_id": "ev_" + typ, "event_type": typ, "token": wsVerifToken},
			"event":  map[string]any{"chat_id": wsChat, "message_id_list": []string{"om_x"}}})
		if ack := wsAck(t, w.fake, wsSend(t, w.fake, body)); ack.Code != 200 {
			t.Errorf("%s: ack code %d, want 200", typ, ack.Code)
		}
	}
	if n := sink.count(); n != 0 {
		t.Errorf("%d deliveries, want none", n)
	}
}

// wsGaps is how many gaps the receiver was told of.
func wsGaps(r *receiver) uint64 { return r.track.Gaps() }

func wsWaitPass(t *testing.T, passes <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-passes:
	case <-time.After(wsGuard):
		t.Fatalf("no catch-up pass %s", what)
	}
}

// A dropped connection is reconnected: /health goes to connecting and
// back to connected, naming the reconnect; the chats are marked as having
// a gap before the new connection's catch-up pass, and events sent after
// the reconnect land.
func TestWSReconnect(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	states := make(chan adapters.Health, 100)
	w.s.observe = func(h adapters.Health) {
		select {
		case states <- h:
		default:
		}
	}
	wsStart(t, w, w.ws.Pipe)
	wsWaitPass(t, w.passes, "after the first connection")
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, wsUserEvent("om_ws_before", "before", 1700000005000))); ack.Code != 200 {
		t.Fatalf("ack code %d", ack.Code)
	}
	gaps := wsGaps(w.r)
	// Drain what the first connection reported.
	for len(states) > 0 {
		<-states
	}
	w.fake.Drop()
	wsWaitPass(t, w.passes, "after the reconnect")
	if g := wsGaps(w.r); g <= gaps {
		t.Errorf("gaps %d after a reconnect, want more than %d", g, gaps)
	}
	var seen []string
	connecting := false
	for len(states) > 0 {
		h := <-states
		seen = append(seen, h.Status+" "+h.Detail)
		if h.Status == adapters.StatusConnecting {
			connecting = true
		}
	}
	if !connecting || !strings.Contains(seen[len(seen)-1], adapters.StatusConnected+" reconnects: 1,") {
		t.Errorf("health went %q, want connecting, then connected naming the reconnect", seen)
	}
	if h := w.a.health.Health(); h.Status != adapters.StatusConnected || !strings.Contains(h.Detail, "reconnects: 1,") {
		t.Errorf("health %+v", h)
	}
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, wsUserEvent("om_ws_after", "after", 1700000006000))); ack.Code != 200 {
		t.Fatalf("ack code %d after the reconnect", ack.Code)
	}
	if ids := wsFiles(t, w); len(ids) != 2 {
		t.Errorf("files %v, want both messages", ids)
	}
	if n := w.fake.Connections(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// The catch-up runs one pass at a time; a pass under way when the
// connection is lost is stopped (its context ends) before the reconnect,
// the next connection runs a new one; a pass's error goes to /health and
// the Source goes on.
func TestWSCatchUpPasses(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	var running, most atomic.Int32
	calls := make(chan int, 10)
	stopped := make(chan error, 10)
	var n atomic.Int32
	w.s.pass = func(ctx context.Context, sink adapters.Sink) error {
		now := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		i := int(n.Add(1))
		calls <- i
		switch i {
		case 1: // the first pass lasts until it is stopped
			<-ctx.Done()
			stopped <- ctx.Err()
			return ctx.Err()
		case 2:
			return errors.New("lark: im/v1/chats answered 500")
		}
		return nil
	}
	wsStart(t, w, w.ws.Pipe)
	if i := <-calls; i != 1 {
		t.Fatalf("pass %d", i)
	}
	w.fake.Drop()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the pass in flight ended with %v", err)
		}
	case <-time.After(wsGuard):
		t.Fatal("the pass in flight was not stopped when the connection was lost")
	}
	select {
	case i := <-calls:
		if i != 2 {
			t.Fatalf("pass %d", i)
		}
	case <-time.After(wsGuard):
		t.Fatal("no pass after the reconnect")
	}
	testutil.WaitFor(t, wsGuard, "the pass's error on /health", func() bool {
		return strings.Contains(w.a.health.Health().LastError, "im/v1/chats answered 500")
	})
	if ack := wsAck(t, w.fake, wsSend(t, w.fake, wsUserEvent("om_ws_on", "still running", 1700000007000))); ack.Code != 200 {
		t.Fatalf("ack code %d after a failed pass", ack.Code)
	}
	if most.Load() != 1 {
		t.Errorf("%d passes at once, want 1", most.Load())
	}
}

// Bad credentials: Start fails naming the keys, and Run (started anyway)
// returns a named error after one call to the endpoint, both marked
// adapters.Refused (the service starts without the Source and runs it
// again minutes later). A later Run asks Lark once again, and is refused
// the same way. The secret is in no error.
func TestWSBadCredentials(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "not-the-secret-0001")
	err := w.s.Start(context.Background())
	if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "app_id and app_secret") || !strings.HasPrefix(err.Error(), "lark: ") {
		t.Fatalf("Start: %v, want a refusal naming app_id and app_secret", err)
	}
	w2 := &wsSource{r: w.r, pass: w.s.pass, budget: wsBudget} // a Source that skipped Start
	before := w.fake.Calls(larkfake.RouteWSEndpoint)
	run := func() error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- w2.Run(context.Background(), w.ws.Pipe) }()
		select {
		case err := <-done:
			return err
		case <-time.After(wsGuard):
			t.Fatal("Run went on with refused credentials")
		}
		return nil
	}
	err = run()
	if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "app_id and app_secret") || !strings.Contains(err.Error(), "10014") {
		t.Fatalf("Run: %v, want a refusal naming the keys and Lark's code", err)
	}
	if n := w.fake.Calls(larkfake.RouteWSEndpoint) - before; n != 1 {
		t.Errorf("%d endpoint calls, want 1", n)
	}
	if n := w.fake.Connections(); n != 0 {
		t.Errorf("%d connections", n)
	}
	for _, e := range []error{err, errors.New(w.a.health.Health().LastError)} {
		if strings.Contains(e.Error(), "not-the-secret-0001") {
			t.Errorf("the secret is in %q", e)
		}
	}
	// The service's restart, minutes later: one more call, refused again.
	if err := run(); !adapters.IsRefused(err) {
		t.Errorf("Run again: %v, want the refusal", err)
	}
	if n := w.fake.Calls(larkfake.RouteWSEndpoint) - before; n != 2 {
		t.Errorf("%d endpoint calls after the restart, want 2", n)
	}
}

// More connections than Lark allows: the handshake's ExceedConnLimit
// ends Run with a named error, marked adapters.Refused.
func TestWSExceedConnLimit(t *testing.T) {
	w := wsNew(t, larkfake.Options{MaxConnections: 1}, "")
	wsStart(t, w, w.ws.Pipe)
	wsWaitPass(t, w.passes, "of the first Source")
	// The first pass runs as Run starts, before the handshake: wait for
	// the first Source's connection, or the two race for the one place.
	ctx, cancel := context.WithTimeout(context.Background(), wsGuard)
	defer cancel()
	if err := w.fake.WaitConnections(ctx, 1); err != nil {
		t.Fatalf("the first Source did not connect: %v", err)
	}
	r2 := newReceiver(w.a)
	s2 := newWS(r2)
	s2.pass = func(context.Context, adapters.Sink) error { return nil }
	if err := s2.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v (the credentials are fine)", err)
	}
	done := make(chan error, 2) // one for the check, one for the stop
	// A Run that went on is stopped, so that it is no leak in the tests after.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer func() {
		cancel2()
		select {
		case <-done:
		case <-time.After(wsGuard):
		}
	}()
	go func() { err := s2.Run(ctx2, w.ws.Pipe); done <- err; done <- err }()
	select {
	case err := <-done:
		if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "too many connections") {
			t.Fatalf("Run: %v, want ExceedConnLimit named", err)
		}
	case <-time.After(wsGuard):
		t.Fatalf("Run went on past ExceedConnLimit (%d connections accepted, %d open)\n%s", w.fake.Connections(), w.fake.OpenConnections(), w.log.String())
	}
}

// wsLeaks lists the goroutines of the ws client or of this Source.
func wsLeaks() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "oapi-sdk-go/v3/ws.") || strings.Contains(g, "adapters/lark.(*wsSource)") {
			out = append(out, g)
		}
	}
	return out
}

// On cancel Run returns nil, the connection is closed and no goroutine
// of the client or the Source is left: Run waits for a handling that
// outlived its budget (here still normalising, as a download would) to
// end.
func TestWSCancel(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	w.s.budget = 10 * time.Millisecond
	entered, left, linger := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})
	w.r.normalize = func(ctx context.Context, ev event) (*adapters.Event, error) {
		entered <- struct{}{}
		<-ctx.Done()
		<-linger // slow to notice the cancel
		left <- struct{}{}
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.s.Run(ctx, w.ws.Pipe) }()
	wsWaitPass(t, w.passes, "after connecting")
	id := wsSend(t, w.fake, wsUserEvent("om_ws_cancel", "in flight", 1700000008000))
	<-entered
	if ack := wsAck(t, w.fake, id); ack.Code != 500 {
		t.Fatalf("ack code %d", ack.Code)
	}
	if len(wsLeaks()) == 0 {
		t.Fatal("no goroutine of the client seen while running: the leak check sees nothing")
	}
	cancel()
	// The client stops; Run must then wait for the handling.
	testutil.WaitFor(t, wsGuard, "Run to return or to wait for the handling", func() bool {
		if len(done) > 0 {
			return true
		}
		for _, g := range wsLeaks() {
			if strings.Contains(g, "(*wsSource).Run(") && strings.Contains(g, "sync.(*WaitGroup).Wait") &&
				!strings.Contains(g, "oapi-sdk-go") {
				return true
			}
		}
		return false
	})
	if len(done) > 0 {
		t.Fatal("Run returned while a handling was still under way")
	}
	close(linger)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(wsGuard):
		t.Fatal("Run did not return after cancel")
	}
	select {
	case <-left:
	default:
		t.Fatal("Run returned while a handling was still under way")
	}
	testutil.WaitFor(t, wsGuard, "the fake to see the connection closed", func() bool { return w.fake.OpenConnections() == 0 })
	// The SDK's last endpoint fetch (its reconnect, begun as the
	// connection closed) ends on the cancelled context a moment after
	// Start returns: what must not be is a goroutine that stays.
	if !testutil.Poll(wsGuard, func() bool { return len(wsLeaks()) == 0 }) {
		t.Fatalf("goroutines left after Run returned:\n%s", strings.Join(wsLeaks(), "\n\n"))
	}
}

// Every corpus event with its envelope, sent over the long connection,
// is acked 200 and makes its file; the header's token reaches no log.
func TestWSCorpus(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "lark", "events")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	w := wsNew(t, larkfake.Options{}, "")
	wsStart(t, w, w.ws.Pipe)
	want := map[string]bool{}
	var tokens []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Header *struct {
				Token string `json:"token"`
			} `json:"header"`
			Event struct {
				Message struct {
					MessageID string `json:"message_id"`
				} `json:"message"`
			} `json:"event"`
		}
		if err := json.Unmarshal(data, &env); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if env.Header == nil {
			continue // a body without its envelope: never sent over the long connection
		}
		tokens = append(tokens, env.Header.Token)
		if ack := wsAck(t, w.fake, wsSend(t, w.fake, data)); ack.Code != 200 {
			t.Errorf("%s: ack code %d", filepath.Base(p), ack.Code)
		}
		want[threading.LarkID(env.Event.Message.MessageID)] = true
	}
	if len(want) == 0 {
		t.Fatalf("no event with an envelope in %s", dir)
	}
	got := wsFiles(t, w)
	for _, id := range got {
		delete(want, id)
	}
	if len(want) != 0 {
		t.Errorf("no file for %v (files %v)", want, got)
	}
	for _, tok := range tokens {
		if tok != "" && strings.Contains(w.log.String(), tok) {
			t.Errorf("the event's token %q is in the log", tok)
		}
	}
}

// The SDK's log lines reach ours redacted, its debug lines (event
// payloads, with the verification token) not at all; a config without
// credentials fails Start naming the keys.
func TestWSLogAndConfig(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	secret := w.a.cfg.AppSecret.Reveal()
	l := wsLogger{log: w.a.log, redact: w.a.redact}
	l.Debug(context.Background(), "receive message, payload: {\"token\":\""+wsVerifToken+"\"} debug-marker")
	l.Info(context.Background(), "info-marker", secret)
	l.Warn(context.Background(), "warn-marker "+wsVerifToken)
	l.Error(context.Background(), "error-marker ws-encrypt-key-0001")
	text := w.log.String()
	if strings.Contains(text, "debug-marker") {
		t.Errorf("a debug line of the SDK was logged:\n%s", text)
	}
	for _, m := range []string{"info-marker", "warn-marker", "error-marker"} {
		if !strings.Contains(text, m) {
			t.Errorf("%s not logged:\n%s", m, text)
		}
	}
	if n := strings.Count(text, "[redacted]"); n != 3 {
		t.Errorf("%d secrets redacted, want 3:\n%s", n, text)
	}

	for _, cfg := range []Config{{Enabled: true, AppID: testAppID, Domain: w.fake.URL()},
		{Enabled: true, AppSecret: confkit.Secret(secret), Domain: w.fake.URL()}} {
		a, err := newAdapter(cfg, confkit.Limits{}, w.ws.DZ, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = newWS(newReceiver(a)).Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "app_id and app_secret") {
			t.Errorf("Start without credentials: %v", err)
		}
	}
	if n := w.fake.Calls(larkfake.RouteWSEndpoint); n != 0 {
		t.Errorf("%d endpoint calls without credentials", n)
	}
}

// A Lark that is busy when the service starts does not fail the start:
// /health says why and Run connects once Lark answers.
func TestWSStartBusy(t *testing.T) {
	w := wsNew(t, larkfake.Options{}, "")
	w.fake.Fail(larkfake.RouteWSEndpoint, larkfake.Failure{Status: 503})
	if err := w.s.Start(context.Background()); err != nil {
		t.Fatalf("Start with Lark busy: %v", err)
	}
	if h := w.a.health.Health(); h.Status != adapters.StatusError || !strings.Contains(h.LastError, "503") {
		t.Errorf("health %+v, want the 503", h)
	}
	wsStart(t, w, w.ws.Pipe)
	wsWaitPass(t, w.passes, "once connected")
	if h := w.a.health.Health(); h.Status != adapters.StatusConnected {
		t.Errorf("health %+v once connected", h)
	}
}
