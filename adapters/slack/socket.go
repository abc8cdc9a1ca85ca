package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/monoco/courier/adapters"
)

// Socket Mode, on slack-go's socketmode client, with what it leaves to us:
//
//   - Acks. socketmode never acks by itself; each events_api envelope is
//     acked here only once handle returned (the event durable, or
//     deliberately written nothing). An envelope whose event could not be
//     stored is not acked: Slack redelivers it.
//   - Events it cannot parse. An events_api envelope whose inner event
//     slackevents.ParseEvent does not know reaches us as
//     EventTypeErrorBadMessage with the raw frame, unacked; it is handled
//     from the raw frame like any other, so no event type is lost for
//     being new.
//   - Refusals. Its RunContext returns on invalid_auth, not_authed,
//     account_inactive and token_revoked, but retries every other refusal
//     (not_allowed_token_type, missing_scope, ...) forever; those are
//     recognised from its connection_error events and end the Run, which
//     returns them marked adapters.Refused: the service tries the Source
//     again minutes later, and runs the other providers meanwhile.
//   - Reconnect pacing. After a disconnect or a drop it reconnects at once,
//     and a server that accepts and drops every connection would be a
//     tight loop; every apps.connections.open goes through a gate that
//     waits a jittered, doubling delay when the last one was recent.

// maxFrame bounds one websocket frame read from Slack (socketmode's
// default is unlimited).
const maxFrame = 4 << 20

// socketWorkers is how many events are handled at once: events of
// several channels are then written in one round of fsyncs (the pipeline's
// group commit), and a slow one does not hold the reader, whose pings
// keep the connection alive.
const socketWorkers = 16

// fatalCodes are Slack's answers that no retry fixes: the token or the
// app's configuration must change first.
var fatalCodes = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true,
	"token_expired": true, "not_allowed_token_type": true, "missing_scope": true, "no_permission": true,
	"org_login_required": true, "ekm_access_denied": true, "team_access_not_granted": true,
	"invalid_token": true,
}

// isFatal reports whether err is a refusal of the credentials or their
// scopes.
func isFatal(err error) bool {
	var se slackapi.SlackErrorResponse
	if errors.As(err, &se) {
		return fatalCodes[se.Err]
	}
	var sc slackapi.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code == http.StatusUnauthorized || sc.Code == http.StatusForbidden || sc.Code == http.StatusNotFound
	}
	// socketmode's own fatal path returns the bare error; its text is
	// the code.
	return err != nil && fatalCodes[err.Error()]
}

// startCheck is every inbound Source's Start: the bot token must be
// accepted (auth.test). A refused token is an error marked
// adapters.Refused (the service starts without the Source and tries it
// again later; /health says why); a network error is none (Run retries,
// /health says why).
func startCheck(ctx context.Context, a *Adapter) error {
	if _, err := a.Identify(ctx); err != nil {
		if isFatal(err) {
			a.health.Error(err)
			return adapters.Refused(err)
		}
		a.health.Error(err)
		a.log.Warn("slack: auth.test failed; retrying in the background", "err", err)
	}
	return nil
}

// socketSource receives over Socket Mode, and catches up after every
// (re)connect and after an event it could not store.
type socketSource struct {
	r *receiver

	// pingInterval is socketmode's: no ping from Slack within it and the
	// connection is taken for dead (its default 30 s; tests shorten it).
	pingInterval time.Duration
	gate         *reconnectGate

	opens     atomic.Int64 // apps.connections.open calls made
	connected atomic.Bool  // a connection said hello and is not known to be lost
	// onAck, when set (tests), is told of each events_api envelope acked.
	onAck func(envelopeID string)
}

func newSocketSource(r *receiver) *socketSource {
	// The catch-up's first pass waits for the first hello; the passes
	// come from connections and failures, not from a clock.
	r.catchUp.OnKick = true
	return &socketSource{r: r,
		pingInterval: 30 * time.Second,
		gate:         &reconnectGate{min: time.Second, max: 2 * time.Minute, stable: time.Minute}}
}

func (s *socketSource) Name() string { return "slack/socket" }

// Start checks the tokens are there and the bot token is accepted.
func (s *socketSource) Start(ctx context.Context) error {
	if s.r.a.cfg.AppToken.Reveal() == "" {
		return errors.New("slack: socket mode needs app_token (xapp-...)")
	}
	return startCheck(ctx, s.r.a)
}

// Error records on /health an error Run returned.
func (s *socketSource) Error(err error) { s.r.a.health.Error(err) }

// Stop has nothing to release: Run's connection ends with its context.
func (s *socketSource) Stop(context.Context) error { return nil }

// socketRun is what one Run shares with its handlers.
type socketRun struct {
	ctx    context.Context // Run's, ended with it
	cancel context.CancelFunc
	smc    *socketmode.Client
	sink   adapters.Sink
	sem    chan struct{} // a slot per event in handling
	wg     sync.WaitGroup
	// fatal is a refusal seen on the way, which ends the connection;
	// Run's goroutine alone uses it.
	fatal error
}

// Run keeps a Socket Mode connection until ctx ends. A refusal of the
// credentials (by apps.connections.open, or by the catch-up's calls) ends
// it with an error marked adapters.Refused, so that the service tries
// again minutes later rather than at once.
func (s *socketSource) Run(ctx context.Context, sink adapters.Sink) error {
	s.r.a.health.Set(adapters.StatusConnecting, "")
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := &socketRun{ctx: rctx, cancel: cancel, smc: s.client(), sink: sink, sem: make(chan struct{}, socketWorkers)}
	runDone := make(chan error, 1)
	go func() { runDone <- run.smc.RunContext(rctx) }()
	caughtUp := make(chan error, 1)
	run.wg.Go(func() { caughtUp <- s.r.catchUp.Run(rctx, sink) })
	finish := func() {
		cancel()
		run.wg.Wait()
	}
	for {
		select {
		case <-ctx.Done():
			<-runDone
			finish()
			return nil
		case err := <-caughtUp:
			// The catch-up ends before rctx only when Slack refused it
			// the credentials (chatsync.CatchUp.Refused).
			caughtUp = nil
			if err == nil {
				continue // rctx ended: runDone follows
			}
			cancel()
			<-runDone
			finish()
			return err
		case err := <-runDone:
			finish()
			if run.fatal == nil && isFatal(err) {
				run.fatal = err
			}
			if run.fatal != nil {
				return adapters.Refused(fmt.Errorf("slack: socket mode: Slack refused the credentials: %w", run.fatal))
			}
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack: socket mode: %w", err)
		case evt := <-run.smc.Events:
			s.event(run, evt)
		}
	}
}

// client is a Run's socketmode client, its apps.connections.open calls
// paced by the gate.
func (s *socketSource) client() *socketmode.Client {
	a := s.r.a
	api := slackapi.New(a.cfg.BotToken.Reveal(), slackapi.OptionAPIURL(a.apiURL),
		slackapi.OptionHTTPClient(gatedClient{c: a.http, gate: s.gate, opens: &s.opens}),
		slackapi.OptionAppLevelToken(a.cfg.AppToken.Reveal()))
	return socketmode.New(api, socketmode.OptionPingInterval(s.pingInterval),
		socketmode.OptionReadLimit(maxFrame), socketmode.OptionLog(log.New(io.Discard, "", 0)))
}

// event handles one of socketmode's events.
func (s *socketSource) event(run *socketRun, evt socketmode.Event) {
	a := s.r.a
	switch evt.Type {
	case socketmode.EventTypeConnecting:
		s.connected.Store(false)
		a.health.Set(adapters.StatusConnecting, "")
	case socketmode.EventTypeConnectionError:
		if d, ok := evt.Data.(*slackapi.ConnectionErrorEvent); ok && d.ErrorObj != nil {
			if isFatal(d.ErrorObj) {
				run.fatal = d.ErrorObj
				run.cancel()
				return
			}
			a.health.Error(fmt.Errorf("slack: socket mode: connecting: %w", d.ErrorObj))
		}
	case socketmode.EventTypeInvalidAuth:
		run.fatal = errors.New("invalid_auth (apps.connections.open answered 404)")
		run.cancel()
	case socketmode.EventTypeHello:
		// A new connection: whatever was posted since the last one is a
		// gap until the catch-up read it. A pass under way saves only
		// what it read (chatsync.Pass.CaughtUp).
		s.r.track.Gap()
		s.connected.Store(true)
		a.health.Set(adapters.StatusConnected, "")
		s.r.catchUp.Kick()
	case socketmode.EventTypeEventsAPI:
		s.dispatch(run, evt.Request)
	case socketmode.EventTypeErrorBadMessage:
		// An envelope socketmode could not parse: handle it from the raw
		// frame when it is one.
		if d, ok := evt.Data.(*socketmode.ErrorBadMessage); ok {
			var req socketmode.Request
			if json.Unmarshal(d.Message, &req) == nil && req.EnvelopeID != "" {
				if req.Type == socketmode.RequestTypeEventsAPI {
					s.dispatch(run, &req)
				} else {
					a.ignored.Add("interactive")
					_ = run.smc.AckCtx(run.ctx, req.EnvelopeID, nil)
				}
			}
		}
	case socketmode.EventTypeSlashCommand, socketmode.EventTypeInteractive:
		// Not messages: acked at once, nothing written.
		if evt.Request != nil {
			a.ignored.Add("interactive")
			_ = run.smc.AckCtx(run.ctx, evt.Request.EnvelopeID, nil)
		}
	case socketmode.EventTypeErrorWriteFailed:
		// An ack lost: Slack redelivers, the dedupe drops it.
		a.log.Debug("slack: socket mode: an ack was not sent")
	}
}

// dispatch handles an events_api envelope on a worker, and acks it once
// the event is durable.
func (s *socketSource) dispatch(run *socketRun, req *socketmode.Request) {
	if req == nil {
		return
	}
	ctx, smc, sink := run.ctx, run.smc, run.sink
	var env envelope
	if err := json.Unmarshal(req.Payload, &env); err != nil || env.Type != "event_callback" ||
		len(env.Event) == 0 || env.Event[0] != '{' {
		// app_rate_limited and the like: nothing to store.
		s.r.otherPayload(env.Type)
		_ = smc.AckCtx(ctx, req.EnvelopeID, nil)
		return
	}
	select {
	case run.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	id := req.EnvelopeID
	run.wg.Go(func() {
		defer func() { <-run.sem }()
		if err := s.r.handleOnce(ctx, sink, event{ID: env.EventID, Inner: env.Event, Raw: req.Payload, Via: "socket mode"}); err != nil {
			if ctx.Err() == nil {
				s.r.a.health.Error(fmt.Errorf("slack: event %s not stored: %w", env.EventID, err))
				s.r.a.log.Warn("slack: event not stored; not acked, Slack will redeliver", "event_id", env.EventID, "err", err)
				// Slack redelivers it, a few times only: later events
				// must not move the checkpoint past it, and a pass reads
				// it from history if every redelivery fails too.
				s.r.catchUp.Failed()
			}
			return
		}
		if smc.AckCtx(ctx, id, nil) == nil && s.onAck != nil {
			s.onAck(id)
		}
		// An event stored shows the way in works again after a
		// failure (the error stays as last_error).
		if s.connected.Load() && s.r.a.health.Health().Status == adapters.StatusError {
			s.r.a.health.Set(adapters.StatusConnected, "")
		}
	})
}

// reconnectGate paces apps.connections.open: the first call, and one
// after a connection that lasted, goes at once; one soon after the last
// waits min, doubling to max, each jittered by up to half.
type reconnectGate struct {
	min, max, stable time.Duration

	mu      sync.Mutex
	last    time.Time
	attempt int
}

func (g *reconnectGate) wait(ctx context.Context) error {
	g.mu.Lock()
	d := g.delay(time.Now())
	g.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	g.mu.Lock()
	g.last = time.Now()
	g.mu.Unlock()
	return nil
}

// delay is how long an open at now waits. g.mu must be held.
func (g *reconnectGate) delay(now time.Time) time.Duration {
	if g.last.IsZero() || now.Sub(g.last) >= g.stable {
		g.attempt = 0
		return 0
	}
	d := g.min << min(g.attempt, 30)
	if d <= 0 || d > g.max {
		d = g.max
	}
	g.attempt++
	return d/2 + rand.N(d/2+1)
}

// gatedClient is the socketmode client's HTTP client: its
// apps.connections.open calls pass the gate first.
type gatedClient struct {
	c     *http.Client
	gate  *reconnectGate
	opens *atomic.Int64
}

func (g gatedClient) Do(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/apps.connections.open") {
		if err := g.gate.wait(req.Context()); err != nil {
			return nil, err
		}
		g.opens.Add(1)
	}
	return g.c.Do(req)
}

var (
	_ adapters.Starter       = (*socketSource)(nil)
	_ adapters.Stopper       = (*socketSource)(nil)
	_ adapters.ErrorReporter = (*socketSource)(nil)
)
