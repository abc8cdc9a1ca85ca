package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
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

// newWebhook is the Events API endpoint (/webhook/slack), on
// chatsync.Webhook. Every request is verified before anything else is
// read from it, with slack-go's SecretsVerifier: it checks the v0
// HMAC-SHA256 of "v0:{ts}:{body}" in constant time and refuses a
// timestamp more than five minutes from now in either direction.
// Responses and logs never quote the request. An event not stored is
// answered 503 (Slack retries), marks a gap and asks the catch-up for a
// pass, which reads it from history if Slack gives up.
func (r *receiver) newWebhook() *chatsync.Webhook {
	return &chatsync.Webhook{
		Name: "slack", MaxBody: maxWebhookBody, TooLarge: "slack: request body too large",
		Budget: webhookTimeout, Verify: r.verify, Parse: r.parse,
		Challenge: chatsync.URLVerification(challengeRE, "slack: body is not an Events API payload",
			"slack: url_verification without a valid challenge"),
		FailStatus: http.StatusServiceUnavailable, NotStored: "slack: event not stored", NotStoredInTime: "slack: event not stored",
		NotStoredLog: "slack: event not stored; Slack will retry",
		CatchUp:      r.catchUp, Health: &r.a.health, Log: r.a.log,
	}
}

// webhook is the Events API endpoint's handler, handing events to sink.
func (r *receiver) webhook(sink adapters.Sink) http.Handler { return r.hook.Handler(sink) }

// verify checks a request's signature. Nothing unsigned is ever accepted
// (with no signing_secret, the Source's Start has refused to start
// already).
func (r *receiver) verify(h http.Header, body []byte) ([]byte, *chatsync.Refusal) {
	secret := r.a.cfg.SigningSecret.Reveal()
	err := errors.New("slack: signing_secret is not set")
	if secret != "" {
		var sv slackapi.SecretsVerifier
		if sv, err = slackapi.NewSecretsVerifier(h, secret); err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
	}
	if err != nil {
		return nil, chatsync.Refuse(http.StatusUnauthorized, "slack: request not verified")
	}
	return body, nil
}

// parse reads an event_callback; app_rate_limited and the types Courier
// does not ingest are answered 200 with nothing to store (counted).
func (r *receiver) parse(body []byte) (chatsync.Delivery, *chatsync.Refusal) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return chatsync.Delivery{}, chatsync.Refuse(http.StatusBadRequest, "slack: body is not an Events API payload")
	}
	if env.Type != "event_callback" {
		r.otherPayload(env.Type)
		return chatsync.Delivery{}, nil
	}
	if len(env.Event) == 0 || env.Event[0] != '{' {
		return chatsync.Delivery{}, chatsync.Refuse(http.StatusBadRequest, "slack: event_callback without an event")
	}
	ev := event{ID: env.EventID, Inner: env.Event, Raw: body, Via: "events api"}
	return chatsync.Delivery{ID: env.EventID, Handle: func(ctx context.Context, sink adapters.Sink) error {
		return r.handleOnce(ctx, sink, ev)
	}}, nil
}

// handleOnce is handle, with concurrent calls for one event id joined: a
// redelivery of the same event_id that arrives meanwhile waits for the
// handling under way instead of normalising and writing a second time.
// Redeliveries of an event already stored are answered at once.
func (r *receiver) handleOnce(ctx context.Context, sink adapters.Sink, ev event) error {
	return r.flights.Do(ctx, ev.ID, func(ctx context.Context) error {
		if ev.ID != "" {
			if seen, err := sink.Seen(ctx, schema.EventKey(schema.Slack, ev.ID)); err == nil && seen {
				return nil
			}
		}
		return r.handle(ctx, sink, ev)
	})
}
