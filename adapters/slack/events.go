package slack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"sync/atomic"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// maxWebhookBody bounds an Events API request. Slack's events are a few
// KiB; a message with many blocks stays well under this.
const maxWebhookBody = 1 << 20

// webhookTimeout is how long a request may take to make its event
// durable. Slack waits 3 s for an answer and retries otherwise; answering
// 503 before that says "not stored" plainly, where a 200 after the fact
// could not be trusted and a late one would be a retry anyway.
const webhookTimeout = 2500 * time.Millisecond

var challengeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// envelope is an Events API request body (and a Socket Mode events_api
// payload, which is the same object).
type envelope struct {
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	EventID   string          `json:"event_id"`
	Event     json.RawMessage `json:"event"`
}

// webhook is the Events API endpoint (/webhook/slack). Every request is
// verified before anything else is read from it, with slack-go's
// SecretsVerifier: it checks the v0 HMAC-SHA256 of "v0:{ts}:{body}" in
// constant time and refuses a timestamp more than five minutes from now
// in either direction. Responses and logs never quote the request.
func (r *receiver) webhook(sink adapters.Sink) http.Handler {
	secret := r.a.cfg.SigningSecret.Reveal()
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "slack: POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxWebhookBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				http.Error(w, "slack: request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "slack: request body unreadable", http.StatusBadRequest)
			return
		}
		// Nothing unsigned is ever accepted (with no signing_secret, the
		// Source's Start has refused to start already).
		var sv slackapi.SecretsVerifier
		err = errors.New("slack: signing_secret is not set")
		if secret != "" {
			if sv, err = slackapi.NewSecretsVerifier(req.Header, secret); err == nil {
				_, _ = sv.Write(body)
				err = sv.Ensure()
			}
		}
		if err != nil {
			// Anyone can send these: logged at most once a minute.
			if r.refusedLog.allow(time.Now()) {
				r.a.log.Warn("slack: events API requests refused: bad or missing signature (logged once a minute)")
			}
			http.Error(w, "slack: request not verified", http.StatusUnauthorized)
			return
		}
		var env envelope
		if err := json.Unmarshal(body, &env); err != nil {
			http.Error(w, "slack: body is not an Events API payload", http.StatusBadRequest)
			return
		}
		switch env.Type {
		case "url_verification":
			// The one thing echoed, as the protocol wants; Slack's
			// challenges are short and alphanumeric.
			if !challengeRE.MatchString(env.Challenge) {
				http.Error(w, "slack: url_verification without a valid challenge", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(struct {
				Challenge string `json:"challenge"`
			}{env.Challenge})
		case "event_callback":
			if len(env.Event) == 0 || env.Event[0] != '{' {
				http.Error(w, "slack: event_callback without an event", http.StatusBadRequest)
				return
			}
			ctx, cancel := context.WithTimeout(req.Context(), r.webhookTimeout())
			defer cancel()
			if err := r.handleOnce(ctx, sink, event{ID: env.EventID, Inner: env.Event}); err != nil {
				// Slack retries a 5xx; the retry finds the event
				// durable if this attempt finishes after all.
				r.a.log.Warn("slack: event not stored; Slack will retry", "event_id", env.EventID, "err", err)
				r.a.health.Error(err)
				select {
				case r.failed <- struct{}{}:
				default:
				}
				http.Error(w, "slack: event not stored", http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		default:
			// app_rate_limited and the types Courier does not ingest.
			w.WriteHeader(http.StatusOK)
		}
	})
}

func (r *receiver) webhookTimeout() time.Duration {
	if r.timeout > 0 {
		return r.timeout
	}
	return webhookTimeout
}

// inflight is one event being handled; a redelivery of the same event_id
// that arrives meanwhile (X-Slack-Retry-Num after a slow answer) waits for
// it instead of normalising and writing a second time.
type inflight struct {
	done    chan struct{}
	err     error
	waiters int // redeliveries waiting on it; guarded by flightMu
}

// handleOnce is handle, with concurrent calls for one event id joined.
// Redeliveries of an event already stored are answered at once.
func (r *receiver) handleOnce(ctx context.Context, sink adapters.Sink, ev event) error {
	if ev.ID == "" {
		return r.handle(ctx, sink, ev)
	}
	r.flightMu.Lock()
	if f := r.flights[ev.ID]; f != nil {
		f.waiters++
		r.flightMu.Unlock()
		select {
		case <-f.done:
			if f.err == nil {
				return nil
			}
			// The first try failed; this one tries again.
			return r.handleOnce(ctx, sink, ev)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &inflight{done: make(chan struct{})}
	if r.flights == nil {
		r.flights = map[string]*inflight{}
	}
	r.flights[ev.ID] = f
	r.flightMu.Unlock()
	defer func() {
		r.flightMu.Lock()
		delete(r.flights, ev.ID)
		r.flightMu.Unlock()
		close(f.done)
	}()
	if seen, err := sink.Seen(ctx, schema.EventKey(schema.Slack, ev.ID)); err == nil && seen {
		return nil
	}
	f.err = r.handle(ctx, sink, ev)
	return f.err
}

// rateLog lets a log line through at most once a minute.
type rateLog struct{ last atomic.Int64 }

func (l *rateLog) allow(now time.Time) bool {
	last := l.last.Load()
	if last != 0 && now.UnixNano()-last < int64(time.Minute) {
		return false
	}
	return l.last.CompareAndSwap(last, now.UnixNano())
}
