package chatsync

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
)

// DefaultMaxBody bounds a webhook request's body when Webhook.MaxBody is
// 0: a chat event is a few KiB.
const DefaultMaxBody = 1 << 20

// Refusal is a request refused: its status and the response's text,
// fixed by the provider and never quoting the request. The log gives the
// text as the reason.
type Refusal struct {
	Status int
	Text   string
}

// Refuse returns a Refusal.
func Refuse(status int, text string) *Refusal { return &Refusal{Status: status, Text: text} }

// Delivery is what a verified request asks of the provider.
type Delivery struct {
	// ID names it in the log (its event id, as short as the provider
	// makes it).
	ID string
	// Handle makes the event durable, and returns nil only then (or when
	// there is deliberately nothing to write). Nil: nothing to store (a
	// type not ingested), answered as a success.
	Handle func(ctx context.Context, sink adapters.Sink) error
}

// Webhook is the HTTP endpoint of a chat provider's event subscription,
// mounted at /webhook/<provider>. A request goes through, in order: the
// method (POST, else 405 with Allow), the content type (JSONOnly), the
// body's bound (413), Verify, Challenge (answered {"challenge": ...}),
// Parse, and the Delivery's Handle within Budget. The answer is a success
// only once the event is durable; a failure is a 5xx (503 past the
// budget), a gap on the tracker and a catch-up pass asked for
// (CatchUp.Failed), since the provider's retries may all fail. Refused
// requests are logged at most once a minute, with how many were not.
// Verify, Challenge, Parse and CatchUp are required.
type Webhook struct {
	// Name starts the fixed texts ("slack: POST only") and the log lines.
	Name string
	// MaxBody bounds the body (DefaultMaxBody when 0); TooLarge is the
	// 413's text.
	MaxBody  int64
	TooLarge string
	// JSONOnly, when set, refuses with 415 and this text a request whose
	// Content-Type is set and is not application/json.
	JSONOnly string
	// Budget bounds the handling of a request (read at each request).
	// A provider waits a few seconds for the answer and retries
	// otherwise; a 503 before that says "not stored" plainly, where a
	// success after its deadline would not be read.
	Budget time.Duration
	// Verify checks the request (a signature, a token) before anything
	// of it is read and returns its plaintext body (decrypted when the
	// provider encrypts), or why it is refused.
	Verify func(h http.Header, body []byte) ([]byte, *Refusal)
	// Challenge recognises the provider's URL check: ok with the
	// challenge to echo (the one thing echoed), or a refusal.
	Challenge func(body []byte) (challenge string, ok bool, rf *Refusal)
	// Parse reads the event a request carries.
	Parse func(body []byte) (Delivery, *Refusal)
	// OK answers an event stored; nil: an empty 200.
	OK func(w http.ResponseWriter)
	// FailStatus is the answer to a failure within the budget (503 when
	// 0); NotStored its text, NotStoredInTime the 503's past the budget.
	FailStatus                 int
	NotStored, NotStoredInTime string
	// NotStoredLog is the warning logged at a failure.
	NotStoredLog string
	// CatchUp is told of each failure.
	CatchUp *CatchUp
	// Health records each failure; may be nil.
	Health *adapters.HealthTracker
	// Log is where refusals and failures are told; nil discards.
	Log *slog.Logger
	// Now is the clock of the paced log (time.Now when nil).
	Now func() time.Time

	refused Pacer
}

// Handler serves the endpoint, handing verified events to sink.
func (wh *Webhook) Handler(sink adapters.Sink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { wh.serve(w, req, sink) })
}

func (wh *Webhook) serve(w http.ResponseWriter, req *http.Request, sink adapters.Sink) {
	raw, rf := wh.read(w, req)
	if rf != nil {
		wh.refuse(w, rf)
		return
	}
	plain, rf := wh.Verify(req.Header, raw)
	if rf != nil {
		wh.refuse(w, rf)
		return
	}
	challenge, ok, rf := wh.Challenge(plain)
	if rf != nil {
		wh.refuse(w, rf)
		return
	}
	if ok {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Challenge string `json:"challenge"`
		}{challenge})
		return
	}
	d, rf := wh.Parse(plain)
	if rf != nil {
		wh.refuse(w, rf)
		return
	}
	if d.Handle != nil && !wh.handle(w, req.Context(), sink, d) {
		return
	}
	if wh.OK != nil {
		wh.OK(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// read checks the method and the content type, and reads the body within
// its bound.
func (wh *Webhook) read(w http.ResponseWriter, req *http.Request) ([]byte, *Refusal) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, Refuse(http.StatusMethodNotAllowed, wh.Name+": POST only")
	}
	if ct := req.Header.Get("Content-Type"); ct != "" && wh.JSONOnly != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, Refuse(http.StatusUnsupportedMediaType, wh.JSONOnly)
		}
	}
	max := wh.MaxBody
	if max <= 0 {
		max = DefaultMaxBody
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, req.Body, max))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, Refuse(http.StatusRequestEntityTooLarge, wh.TooLarge)
		}
		return nil, Refuse(http.StatusBadRequest, wh.Name+": request body unreadable")
	}
	return raw, nil
}

// handle runs d within the budget; on failure it answers the request, and
// returns false.
func (wh *Webhook) handle(w http.ResponseWriter, rctx context.Context, sink adapters.Sink, d Delivery) bool {
	ctx, cancel := context.WithTimeout(rctx, wh.Budget)
	defer cancel()
	err := d.Handle(ctx, sink)
	if err == nil {
		return true
	}
	// The provider retries a 5xx, and the retry finds the event durable
	// if this try finishes after all; the catch-up is told too, since
	// the retries may all fail.
	wh.logger().Warn(wh.NotStoredLog, "event_id", d.ID, "err", err)
	if wh.Health != nil {
		wh.Health.Error(err)
	}
	wh.CatchUp.Failed()
	status, text := wh.FailStatus, wh.NotStored
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	if ctx.Err() != nil {
		status, text = http.StatusServiceUnavailable, wh.NotStoredInTime
	}
	http.Error(w, text, status)
	return false
}

// refuse answers a refused request and logs it, at most once a minute:
// anyone can send these.
func (wh *Webhook) refuse(w http.ResponseWriter, rf *Refusal) {
	now := time.Now
	if wh.Now != nil {
		now = wh.Now
	}
	if n, ok := wh.refused.Allow(now()); ok {
		wh.logger().Warn(wh.Name+": webhook request refused (logged at most once a minute)",
			"status", rf.Status, "reason", rf.Text, "refused_since_last_logged", n)
	}
	http.Error(w, rf.Text, rf.Status)
}

func (wh *Webhook) logger() *slog.Logger {
	if wh.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return wh.Log
}

// Pacer lets a log line through at most once a minute and counts those
// it held back. The zero value is ready to use.
type Pacer struct {
	mu     sync.Mutex
	last   time.Time
	missed int // held back since last
}

// Allow reports whether to log now, and how many were held back before.
func (p *Pacer) Allow(now time.Time) (missed int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := now.Sub(p.last); !p.last.IsZero() && d >= 0 && d < time.Minute {
		p.missed++
		return 0, false
	}
	n := p.missed
	p.last, p.missed = now, 0
	return n, true
}

// URLVerification is the Challenge of a provider whose URL check is a body
// {"type": "url_verification", "challenge": ...} (Slack's Events API,
// Lark's event subscription): the challenge is the one thing echoed, and
// only one of shape, the provider's. notJSON refuses a body that is not
// such an object (400), bad a url_verification whose challenge is not of
// that shape (400); another type is no challenge.
func URLVerification(shape *regexp.Regexp, notJSON, bad string) func(body []byte) (string, bool, *Refusal) {
	return func(body []byte) (string, bool, *Refusal) {
		var b struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return "", false, Refuse(http.StatusBadRequest, notJSON)
		}
		if b.Type != "url_verification" {
			return "", false, nil
		}
		if !shape.MatchString(b.Challenge) {
			return "", false, Refuse(http.StatusBadRequest, bad)
		}
		return b.Challenge, true, nil
	}
}
