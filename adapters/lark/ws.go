package lark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkevent "github.com/larksuite/oapi-sdk-go/v3/event"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/schema"
)

// The long connection (mode ws), on the SDK's ws client (v3.11.0), with
// what it leaves to us:
//
//   - Acks. The client answers each event frame with the handler's
//     outcome: {"code":200} when it returned nil, {"code":500} when it
//     returned an error (ws/client_message.go, writeEventResponse), and
//     Lark redelivers an event not answered 200 (after 15 s, 5 min, 1 h,
//     6 h). The handler returns nil only once r.handle did, that is once
//     the file is durable or staged (or the event deliberately writes
//     nothing), so an event is acked only after it is safe.
//   - The 3 s budget. Lark takes an event not answered within 3 s as
//     failed. The handler waits at most wsBudget (2.5 s) for the event's
//     handling and then answers 500; the handling itself is not cancelled
//     but goes on (bounded by wsMaxInflight at once, and by the download
//     and pipeline timeouts of its own), so a message with a large file
//     is stored by it, and Lark's redelivery finds it in the mailbox and
//     is acked without writing it again. A redelivery that arrives while
//     the first handling still runs waits for that one, never starts a
//     second.
//   - Event types. The dispatcher answers a type it has no handler for
//     with an error (NotFoundEventHandlerErr, acked 500, so redelivered);
//     the im types Courier does not read are registered to be acked and
//     ignored. An app subscribed to other types gets them retried by Lark
//     four times, logged at debug by the SDK.
//   - Refusals. The client takes an endpoint answer with a code it does
//     not know (bad app_id/app_secret: 10003, 10014), a 403 and a
//     handshake refused with ExceedConnLimit as final (*larkws.ClientError)
//     and Start returns it; Run then returns a named error marked
//     adapters.Refused, and the service runs it again minutes later (not
//     at once: no loop of refused connections), the other providers
//     running meanwhile. Every other failure (network, 5xx, a used ticket)
//     the client retries itself, at the interval Lark's ClientConfig
//     sets.
//   - Connects. v3.11.0 has lifecycle callbacks (OnReady for the first
//     connection, OnReconnecting, OnReconnected, OnDisconnected, OnError),
//     run on its coordinator goroutine; they drive /health and the
//     catch-up (see onConnect and onDisconnect).
//   - Its logs. Its debug lines print each event's payload, whose header
//     holds the verification token: they are dropped; the others go to our
//     logger with every secret redacted.

// wsBudget is how long an event's handler waits for the event to be
// durable before answering Lark: under Lark's 3 s, with room for the
// answer to travel.
const wsBudget = 2500 * time.Millisecond

// wsMaxInflight bounds the events being handled at once (each may be
// downloading a resource); one more waits for a slot within its budget,
// else is answered 500 and redelivered by Lark.
const wsMaxInflight = 64

// wsPassStop bounds how long a lost connection waits for the catch-up
// pass in flight to stop before the client reconnects.
const wsPassStop = 10 * time.Second

// wsEndpointTimeout bounds the call to /callback/ws/endpoint.
const wsEndpointTimeout = 15 * time.Second

// wsIgnored are the event types an app receiving messages may be
// subscribed to that write nothing: acked at once.
var wsIgnored = []string{
	"im.message.message_read_v1", "im.message.reaction.created_v1", "im.message.reaction.deleted_v1",
	"im.chat.member.bot.added_v1", "im.chat.member.bot.deleted_v1", "im.chat.member.user.added_v1",
	"im.chat.member.user.deleted_v1", "im.chat.member.user.withdrawn_v1", "im.chat.updated_v1",
	"im.chat.disbanded_v1", "im.chat.access_event.bot_p2p_chat_entered_v1", "application.bot.menu_v6",
	"p2p_chat_create", "add_bot", "remove_bot", "message_read", "chat_disband", "add_user_to_chat",
	"remove_user_from_chat", "revoke_add_user_from_chat", "group_setting_update",
}

// wsSource is the long connection: one SDK client per Run.
type wsSource struct {
	r *receiver
	// pass is r.pass, run by r.catchUp through catchUpPass; tests swap
	// it.
	pass func(ctx context.Context, sink adapters.Sink) error
	// budget is wsBudget; tests change it.
	budget time.Duration
	// observe, when set (tests), is told of every health change the
	// Source makes, as it makes it.
	observe func(adapters.Health)

	connects   atomic.Int64 // connections made, over every Run
	reconnects atomic.Int64 // connections after the first

	// The catch-up: one pass at a time, started only while connected.
	pmu        sync.Mutex
	connected  bool
	passCancel context.CancelFunc // of the pass in flight
	passDone   chan struct{}      // closed when it returns
}

func newWSSource(r *receiver) adapters.Source {
	return newWS(r)
}

// newWS is the long connection, its catch-up a pass per connection
// (Kick), after an event not stored (Failed) and after a failed pass
// (after a minute, doubling up to 30 minutes: a pass fails on what
// lasts, a rate limit past its retries, Lark down, and a chat's
// checkpoint stays where it was until a pass completes).
func newWS(r *receiver) *wsSource {
	s := &wsSource{r: r, pass: r.pass, budget: wsBudget}
	r.catchUp.Pass, r.catchUp.OnKick = s.catchUpPass, true
	return s
}

func (s *wsSource) Name() string { return "lark/ws" }

// Error records on /health an error Run returned.
func (s *wsSource) Error(err error) { s.setError(err) }

// Stop has nothing to release: Run's connection ends with its context.
func (s *wsSource) Stop(context.Context) error { return nil }

var (
	_ adapters.Starter       = (*wsSource)(nil)
	_ adapters.Stopper       = (*wsSource)(nil)
	_ adapters.ErrorReporter = (*wsSource)(nil)
)

// Start checks the credentials with the call the client makes first
// (/callback/ws/endpoint): a refusal is an error naming the keys, marked
// adapters.Refused (the service starts without the Source and tries it
// again later; /health says why); a network error or a busy Lark is none
// (Run's client retries, /health says why).
func (s *wsSource) Start(ctx context.Context) error {
	a := s.r.a
	if a.cfg.AppID == "" || a.cfg.AppSecret.Reveal() == "" {
		err := errors.New("lark: the long connection (mode ws) needs courier.adapters.lark.app_id and app_secret")
		s.setError(err)
		return err
	}
	err := s.checkEndpoint(ctx)
	var refused *wsRefused
	switch {
	case err == nil:
	case errors.As(err, &refused):
		s.setError(err)
		return adapters.Refused(err)
	default:
		s.setError(err)
		a.log.Warn("lark: the long connection endpoint could not be asked; Run retries", "err", err)
	}
	return nil
}

// wsRefused is Lark refusing the app: no retry succeeds before
// the config changes.
type wsRefused struct{ msg string }

func (e *wsRefused) Error() string { return e.msg }

// checkEndpoint asks /callback/ws/endpoint for a connection, as the
// client does, and classifies the answer as the client does: code 0
// fine; 1 (busy), 1000040343 (internal) and HTTP errors temporary; any
// other code a refusal.
func (s *wsSource) checkEndpoint(ctx context.Context) error {
	a := s.r.a
	ctx, cancel := context.WithTimeout(ctx, wsEndpointTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"AppID": a.cfg.AppID, "AppSecret": a.cfg.AppSecret.Reveal()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+larkws.GenEndpointUri, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("lark: long connection endpoint: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.apiClient().Do(req)
	if err != nil {
		return fmt.Errorf("lark: long connection endpoint: %s", s.r.a.redact(err.Error()))
	}
	defer resp.Body.Close()
	var r struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	derr := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&r)
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("lark: long connection endpoint answered %s", resp.Status)
	case derr != nil:
		return fmt.Errorf("lark: long connection endpoint: %s, body not Lark's JSON", resp.Status)
	case r.Code == larkws.OK:
		return nil
	case r.Code == larkws.SystemBusy || r.Code == larkws.InternalError:
		return fmt.Errorf("lark: long connection endpoint busy (code %d)", r.Code)
	}
	return s.refusal(&larkws.ClientError{Code: r.Code, Msg: r.Msg})
}

// refusal names a final refusal of the client.
func (s *wsSource) refusal(ce *larkws.ClientError) error {
	msg := clip(s.r.a.redact(ce.Msg), 200)
	if ce.Code == larkws.AuthFailed {
		// The handshake's only final 514 is ExceedConnLimit.
		return &wsRefused{fmt.Sprintf("lark: the long connection was refused: the app has too many connections open (Lark's ExceedConnLimit, at most 50 per app: %s); stop the other instances using app_id %s (tried again later)", msg, clip(s.r.a.cfg.AppID, 64))}
	}
	return &wsRefused{fmt.Sprintf("lark: the long connection was refused (code %d: %s): check courier.adapters.lark.app_id and app_secret", ce.Code, msg)}
}

// setHealth and setError change /health (and tell observe).
func (s *wsSource) setHealth(status, detail string) {
	s.r.a.health.Set(status, detail)
	if s.observe != nil {
		s.observe(s.r.a.health.Health())
	}
}

func (s *wsSource) setError(err error) {
	s.r.a.health.Error(err)
	if s.observe != nil {
		s.observe(s.r.a.health.Health())
	}
}

// wsRun is what one Run shares with its handlers.
type wsRun struct {
	ctx  context.Context // Run's: a handling lives as long as Run, past its frame's budget
	sink adapters.Sink
	sem  chan struct{} // a slot per event in handling
	wg   sync.WaitGroup
	// flights are the events in handling, by flightKey: a redelivery
	// joins the handling of its message under way.
	flights chatsync.Joiner[string]
}

// Run keeps the long connection until ctx ends. It returns nil then, and
// a named error marked adapters.Refused when Lark refuses the app.
func (s *wsSource) Run(ctx context.Context, sink adapters.Sink) error {
	a := s.r.a
	// Whatever was posted since the last Run (the service restarting a
	// failed one) is a gap until a catch-up read it. The first Run's
	// chats start not caught up anyway.
	s.r.track.Gap()
	s.setHealth(adapters.StatusConnecting, "")

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := &wsRun{ctx: rctx, sink: sink, sem: make(chan struct{}, wsMaxInflight)}
	run.wg.Go(func() { _ = s.r.catchUp.Run(rctx, sink) })

	log := wsLogger{log: a.log, redact: s.r.a.redact}
	d := dispatcher.NewEventDispatcher("", "")
	d.InitConfig(larkevent.WithLogger(log), larkevent.WithLogLevel(larkcore.LogLevelInfo))
	handler := func(hctx context.Context, req *larkevent.EventReq) error { return s.onEvent(hctx, run, req) }
	d.OnCustomizedEvent("im.message.receive_v1", handler)
	d.OnCustomizedEvent("im.message.recalled_v1", handler)
	for _, t := range wsIgnored {
		d.OnCustomizedEvent(t, func(context.Context, *larkevent.EventReq) error { a.ignored.Add("event_type"); return nil })
	}
	hc := a.apiClient()
	hc.Timeout = wsEndpointTimeout
	cli := larkws.NewClient(a.cfg.AppID, a.cfg.AppSecret.Reveal(),
		larkws.WithEventHandler(d),
		larkws.WithDomain(a.base),
		larkws.WithLogger(log),
		larkws.WithAutoReconnect(true),
		larkws.WithHttpClient(hc),
		larkws.WithOnReady(s.onConnect),
		larkws.WithOnReconnected(s.onConnect),
		larkws.WithOnDisconnected(func() { s.onDisconnect(run) }),
		larkws.WithOnReconnecting(func() {
			s.setHealth(adapters.StatusConnecting, "reconnecting: the long connection was lost")
		}),
		larkws.WithOnError(func(err error) {
			// A connection attempt that failed (the client retries) or
			// the final refusal (Start returns it too).
			if rctx.Err() == nil {
				s.setError(fmt.Errorf("lark: long connection: %s", clip(s.r.a.redact(err.Error()), 300)))
			}
		}),
	)
	err := cli.Start(rctx)
	// The client returns once its own goroutines (the reader, the ping,
	// each frame's handler) are done; the catch-up and the handlings that
	// outlived their budget end with rctx.
	cancel()
	run.wg.Wait()
	s.pmu.Lock()
	s.connected = false
	s.pmu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	var ce *larkws.ClientError
	if errors.As(err, &ce) {
		ferr := s.refusal(ce)
		s.setError(ferr)
		return adapters.Refused(ferr)
	}
	if err == nil {
		return errors.New("lark: the long connection stopped on its own")
	}
	return fmt.Errorf("lark: the long connection stopped: %s", clip(s.r.a.redact(err.Error()), 300))
}

// onConnect runs on the client's coordinator once a connection is up (the
// first, or a reconnect): /health says so, and a catch-up pass reads what
// the chats got while there was no connection.
func (s *wsSource) onConnect() {
	n := s.connects.Add(1)
	detail := ""
	if n > 1 {
		r := s.reconnects.Add(1)
		detail = fmt.Sprintf("reconnects: %d, the last at %s", r, time.Now().UTC().Format(time.RFC3339))
	}
	s.setHealth(adapters.StatusConnected, detail)
	s.pmu.Lock()
	s.connected = true
	s.pmu.Unlock()
	s.r.catchUp.Kick()
}

// onDisconnect runs on the coordinator when a connection is lost (or Run
// ends), before any reconnect. The pass in flight is stopped and waited
// for (within wsPassStop), then every chat is marked as having a gap: a
// pass that read a chat before the loss must not mark it caught up after
// it, and no pass starts again until a connection is back, so the gap is
// read by a pass begun after the reconnect. Events of the new connection
// (its reader starts before OnReconnected) find the chats already marked,
// and move no checkpoint past the gap. (Tracker.Gap takes each chat's
// lock, held only while an event of the chat is handed to the Sink: the
// reconnect waits for those writes, not for downloads.) The gap is marked at the
// loss rather than at the reconnect because one marked once the new
// connection is up would come after its first events.
func (s *wsSource) onDisconnect(run *wsRun) {
	s.pmu.Lock()
	s.connected = false
	cancel, done := s.passCancel, s.passDone
	s.pmu.Unlock()
	if cancel != nil {
		cancel()
		t := time.NewTimer(wsPassStop)
		select {
		case <-done:
		case <-t.C:
			s.r.a.log.Warn("lark: the catch-up did not stop within its bound after the connection was lost; reconnecting anyway")
		}
		t.Stop()
	}
	s.r.track.Gap()
	if run.ctx.Err() == nil {
		s.setHealth(adapters.StatusConnecting, "the long connection was lost")
	}
}

// catchUpPass is r.catchUp's pass on the long connection: one only while
// connected (a kick that came before the connection was lost is for the
// reconnect's pass, which is kicked again), stopped by onDisconnect. A
// pass stopped so is no failure: the next connection runs a new one, and
// a pass still running past the gap marks nothing caught up
// (chatsync.Pass.CaughtUp). A pass's error is named for /health and the
// log (redacted: a server may echo what it was sent).
func (s *wsSource) catchUpPass(ctx context.Context, sink adapters.Sink) error {
	s.pmu.Lock()
	if !s.connected {
		s.pmu.Unlock()
		return nil
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.passCancel, s.passDone = cancel, done
	s.pmu.Unlock()

	err := s.pass(pctx, sink)

	s.pmu.Lock()
	s.passCancel, s.passDone = nil, nil
	s.pmu.Unlock()
	stopped := pctx.Err() != nil
	cancel()
	close(done)
	switch {
	case stopped:
		return nil
	case err == nil, errors.Is(err, chatsync.ErrIncomplete):
		return err
	}
	return fmt.Errorf("lark: catch-up after connecting: %s", clip(s.r.a.redact(err.Error()), 500))
}

// onEvent is the dispatcher's handler of message events: nil (acked 200)
// once the event is durable, an error (acked 500: Lark redelivers) when it
// could not be stored or was not within the budget.
func (s *wsSource) onEvent(hctx context.Context, run *wsRun, req *larkevent.EventReq) error {
	ev, err := parseEvent(req.Body)
	if err != nil {
		// Nothing a retry fixes: set aside (acked once it is kept).
		return adapters.SetAside(hctx, run.sink, s.r.a.log, adapters.DeadLetter{Provider: schema.Lark, Source: "lark ws", Reason: err.Error(), Payload: req.Body})
	}
	ev.via = "ws"
	bctx, cancel := context.WithTimeout(hctx, s.budget)
	defer cancel()
	f, err := s.start(bctx, run, ev)
	if err != nil {
		return err
	}
	select {
	case <-f.Done():
		return f.Err()
	case <-bctx.Done():
		if hctx.Err() != nil {
			return hctx.Err()
		}
		s.r.a.log.Warn("lark: event not stored within its budget; answered as failed so that Lark redelivers it, while its handling goes on",
			"event_id", clip(ev.Header.EventID, 100), "budget", s.budget)
		return fmt.Errorf("lark: event %s not stored within %v; handling goes on", clip(ev.Header.EventID, 100), s.budget)
	}
}

// start begins the handling of ev, or joins the handling of the same
// message already under way (a redelivery). It waits for a slot until
// ctx ends.
func (s *wsSource) start(ctx context.Context, run *wsRun, ev event) (*chatsync.Flight, error) {
	key := flightKey(ev)
	if f := run.flights.Join(key); f != nil {
		return f, nil
	}
	select {
	case run.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("lark: event %s not started within its budget: %d events in handling already", clip(ev.Header.EventID, 100), wsMaxInflight)
	}
	f, first := run.flights.Begin(key)
	if !first {
		// Begun by another delivery while this one waited for its slot.
		<-run.sem
		return f, nil
	}
	run.wg.Go(func() {
		defer func() { <-run.sem }()
		err := s.r.handle(run.ctx, run.sink, ev)
		if err != nil && run.ctx.Err() == nil {
			s.failed(ev, err)
		} else if err == nil {
			s.recovered()
		}
		run.flights.End(key, f, err)
	})
	return f, nil
}

// failed records an event not stored. Lark redelivers it, but four times
// only: the chats are marked as having a gap and a catch-up pass is asked
// for (chatsync.CatchUp.Failed), which reads the message from the history
// if every retry fails too.
func (s *wsSource) failed(ev event, err error) {
	s.setError(fmt.Errorf("lark: event %s not stored: %s", clip(ev.Header.EventID, 100), clip(s.r.a.redact(err.Error()), 500)))
	s.r.a.log.Warn("lark: event not stored; answered as failed, Lark redelivers it", "event_id", clip(ev.Header.EventID, 100), "err", err)
	s.r.catchUp.Failed()
}

// recovered puts /health back to connected after an event was stored,
// when an error had set it (the error stays as last_error).
func (s *wsSource) recovered() {
	s.pmu.Lock()
	connected := s.connected
	s.pmu.Unlock()
	if h := s.r.a.health.Health(); connected && h.Status == adapters.StatusError {
		s.setHealth(adapters.StatusConnected, h.Detail)
	}
}

// wsLogger is the ws client's logger on ours (client.go has the REST
// client's). Debug lines are dropped: the ws client prints each event's
// payload there (message text, and the verification token of the
// header). The rest is redacted and clipped.
type wsLogger struct {
	log    *slog.Logger
	redact func(string) string
}

func (l wsLogger) line(args []any) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, a)
	}
	return clip(l.redact(b.String()), 1000)
}

func (l wsLogger) Debug(context.Context, ...any) {}

func (l wsLogger) Info(_ context.Context, args ...any) {
	l.log.Info("lark: sdk: " + l.line(args))
}

func (l wsLogger) Warn(_ context.Context, args ...any) {
	l.log.Warn("lark: sdk: " + l.line(args))
}

func (l wsLogger) Error(_ context.Context, args ...any) {
	l.log.Error("lark: sdk: " + l.line(args))
}
