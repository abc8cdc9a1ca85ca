package adapters

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/monoco/courier/schema"
)

// Event is one normalised inbound message, as a Source hands it to a Sink.
type Event struct {
	// Message is the normalised message. Its artifacts are already in the
	// dropzone.
	Message *schema.Message
	// Keys are extra dedupe keys besides the message id, such as a Slack
	// event_id. A message whose id or any key was seen before is dropped.
	Keys []string
	// Checkpoint, when set, is saved once this event and every event
	// delivered before it are durable.
	Checkpoint *Checkpoint
	// Debounce lets the pipeline merge this message with others from the
	// same sender in the same session and thread (IM only).
	Debounce bool
	// Self marks a message the bot itself sent; it is dropped, so that
	// Courier never answers its own echo.
	Self bool
	// JoinKnownThread asks the pipeline to put the message in the thread
	// of its parent (ReplyTo), else of its root (ThreadRoot), when the
	// mailbox knows them and their thread differs from the message's own,
	// making that thread the message's session. For providers whose thread
	// keys come from headers that may be missing or start mid-thread
	// (email: seed 003 alone splits such threads).
	JoinKnownThread bool
	// UnverifiedSender marks a message whose sender the provider could
	// not authenticate: anyone can write an email's From (email: no DKIM
	// or SPF pass aligned with the From domain, see metadata.extra.auth).
	// Such a message inherits a correlation id only from a message its
	// sender took part in (the parent's From, To, Cc or Bcc), so that a
	// stranger cannot steer an agent's task by replying to it. Chat
	// providers leave it false: the platform authenticates their senders.
	UnverifiedSender bool
	// SenderNotAligned, with UnverifiedSender, says why the sender may not
	// inherit a correlation id at all, not even from a message its From
	// took part in: nothing backs the From (email: the envelope sender is
	// not aligned with the From domain, or is unknown). A message refused
	// an id for it gets this reason in metadata.extra.auth.correlation.
	SenderNotAligned string
	// ThreadCorrelation marks a message that answers its thread as a
	// whole (chat threads: a Slack or Lark reply names the thread, not the
	// message it answers). When neither its parent nor its root carries a
	// correlation id, it inherits the one of the latest message or draft
	// of its session and thread that does: a person answering in a thread
	// where the agent posted for a task stays with that task.
	ThreadCorrelation bool
	// Content, when set, makes the message's content part of its identity,
	// for providers whose ids the sender chooses (email: the Message-ID,
	// which anyone can write). See Content.
	Content *Content
}

// Content ties a message's id to its content, metadata.extra.digest. A
// message whose id is already filed is the same message only when a
// message of the same digest is filed (received within Window of it, when
// Window is set); else it is a message of its own: it gets the id Derive
// makes, a note names the message filed under the id it came with, and it
// inherits nothing from that message. A message filed before digests were
// recorded is compared by id alone (or, with a Window, by its time
// received), as it was filed.
type Content struct {
	// Window, when set, bounds how far apart two copies of one content
	// may be received and still be one message (email without a
	// Message-ID: a client's retry is one message, the same alert an hour
	// later another). Zero: any time apart.
	Window time.Duration
	// Derive returns the id of a message that cannot have its own: salt
	// tells it apart from the message filed under that id (its digest, or
	// its time received). The same salt gives the same id.
	Derive func(salt string) string
}

// Checkpoint is a Source's position, stored under a key of its own (for
// example "imap/work/INBOX").
type Checkpoint struct {
	Key   string
	Value string
}

// Sink receives events from Sources.
type Sink interface {
	// Deliver makes events durable; see the package doc for the contract.
	Deliver(ctx context.Context, events ...Event) error
	// Checkpoint returns the value last saved under key.
	Checkpoint(ctx context.Context, key string) (value string, ok bool, err error)
	// Seen reports whether a message id or dedupe key is already in the
	// mailbox, so that a Source can skip fetching what it would drop.
	Seen(ctx context.Context, key string) (bool, error)
}

// Source delivers inbound messages from one provider account until ctx is
// done. Run returns nil when ctx ends it and an error when it cannot go on.
type Source interface {
	Name() string
	Run(ctx context.Context, sink Sink) error
}

// SourceFunc makes a Source of a function (for tests and small adapters).
type SourceFunc struct {
	SourceName string
	Func       func(ctx context.Context, sink Sink) error
}

// Name returns the source's name.
func (f SourceFunc) Name() string { return f.SourceName }

// Run calls the function.
func (f SourceFunc) Run(ctx context.Context, sink Sink) error { return f.Func(ctx, sink) }

// Receipt is what a provider said when it accepted a message. Each field
// says what it holds; nothing is packed into a string for another package
// to parse.
type Receipt struct {
	// ProviderMessageID is the provider's own id of the sent message, as
	// the provider writes it: email the Message-ID, Lark the message_id
	// (om_...), Slack the ts.
	ProviderMessageID string
	// Channel is where the message went, for providers whose message ids
	// are unique only within a channel (Slack's channel id); empty
	// otherwise.
	Channel string
	// InboundID is the id the message has in Courier's inbound id space
	// (slack_<channel>_<ts>, lark_<message_id>): a copy of it seen inbound
	// (Slack's echo, an IMAP Sent folder) is then recognised as our own.
	// Empty when the draft's InboundID was already known at queue time.
	InboundID string
	// ThreadKey is the thread the provider put the message in when that
	// is not the draft's thread_key (Lark: the thread_id, omt_…, of a
	// reply that opened a thread at its parent, seed 004 §5.2); the
	// archived draft then names it, as the thread's later messages do.
	// Empty otherwise.
	ThreadKey string
	// Recipients holds per-recipient outcomes where the provider gives
	// them.
	Recipients []schema.RecipientResult
}

// Attempt is one try at delivering a queued draft. The engine makes one
// per try; what earlier tries achieved travels in it, not in the context.
type Attempt struct {
	// Draft is the draft as queued (its IdempotencyKey is the same on
	// every attempt).
	Draft *schema.Draft
	// Accepted are the recipients earlier attempts reached (a PartialError
	// reported them); a Sender leaves them out this time, so that nobody
	// gets the message twice.
	Accepted []schema.RecipientResult
	// Gate, when set, bounds the duplicates a crash can cause; a Sender
	// passes through it with EnterCommit.
	Gate Gate
	// Progress, when set, records at once what this attempt has reached
	// so far (a recipient, a part of a message posted in several), before
	// Send returns: a crash in the middle of a send then repeats only the
	// step in flight, and the next attempt finds the others in Accepted.
	// A Sender still reports them in its Receipt or PartialError; the
	// engine keeps each address once.
	Progress func(ctx context.Context, reached ...schema.RecipientResult) error
}

// Reached records reached through the attempt's Progress, if it has one.
func (a *Attempt) Reached(ctx context.Context, reached ...schema.RecipientResult) error {
	if a.Progress == nil {
		return nil
	}
	return a.Progress(ctx, reached...)
}

// EnterCommit waits for the engine's leave to hand the message over for
// good. A Sender calls it just before that step (the final "." of SMTP
// DATA, the API call that posts). It returns at once when the attempt has
// no Gate.
func (a *Attempt) EnterCommit(ctx context.Context) error {
	if a.Gate == nil {
		return nil
	}
	return a.Gate.Enter(ctx)
}

// Gate lets one send at a time past the point of no return, and the next
// one in only once the first is recorded as sent. A crash can then leave
// at most one message delivered but not recorded: at most one duplicate
// per crash, whatever the number of sends in flight.
type Gate interface {
	Enter(ctx context.Context) error
}

// Sender delivers drafts to one provider. Send is called with the same
// draft (same IdempotencyKey) again after a crash or a temporary error.
type Sender interface {
	Send(ctx context.Context, a *Attempt) (Receipt, error)
}

// SenderFunc makes a Sender of a function, as http.HandlerFunc does.
type SenderFunc func(ctx context.Context, a *Attempt) (Receipt, error)

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, a *Attempt) (Receipt, error) { return f(ctx, a) }

// deliveryError classifies an error as temporary or permanent.
type deliveryError struct {
	err        error
	temporary  bool
	retryAfter time.Duration
}

func (e *deliveryError) Error() string { return e.err.Error() }
func (e *deliveryError) Unwrap() error { return e.err }

// Temporary marks err as worth retrying (SMTP 4xx, HTTP 429 and 5xx,
// network errors).
func Temporary(err error) error {
	if err == nil {
		return nil
	}
	return &deliveryError{err: err, temporary: true}
}

// TemporaryAfter marks err as worth retrying no sooner than after d (a
// Retry-After the provider gave).
func TemporaryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &deliveryError{err: err, temporary: true, retryAfter: d}
}

// Permanent marks err as final: retrying would fail the same way (SMTP
// 5xx, a bad recipient, an invalid token).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &deliveryError{err: err}
}

// IsPermanent reports whether err was marked Permanent. Unmarked errors are
// not permanent.
func IsPermanent(err error) bool {
	var de *deliveryError
	return errors.As(err, &de) && !de.temporary
}

// IsTemporary reports whether err is worth retrying: marked Temporary, or
// not marked at all.
func IsTemporary(err error) bool { return err != nil && !IsPermanent(err) }

// RetryAfter returns the delay a provider asked for, if any.
func RetryAfter(err error) (time.Duration, bool) {
	var de *deliveryError
	if errors.As(err, &de) && de.temporary && de.retryAfter > 0 {
		return de.retryAfter, true
	}
	return 0, false
}

// refusedError marks a refusal of a provider's credentials or scopes.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// Refused marks err as the provider refusing Courier's credentials or
// their scopes (a wrong password, a revoked token, app keys Lark does not
// know, a scope the app was not granted): trying again soon fails the same
// way, but the credentials may be fixed on the provider's side at any
// time. A Source's Start or Run returns such an error; the service then
// runs the other providers, shows the reason on /health, and starts the
// Source again after a slow backoff (minutes, not seconds). Its text must
// hold no secret.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	return &refusedError{err: err}
}

// IsRefused reports whether err was marked Refused.
func IsRefused(err error) bool {
	var re *refusedError
	return errors.As(err, &re)
}

// Starter is implemented by parts that must do something before the service
// counts as started (connect, check credentials); the service starts them in
// order and rolls back when one fails, unless a Source's Start failed
// because its provider refused the credentials (Refused): the service then
// starts without it and tries it again later.
type Starter interface {
	Start(ctx context.Context) error
}

// Stopper is implemented by parts that release something at shutdown.
type Stopper interface {
	Stop(ctx context.Context) error
}

// Health statuses, as upstream's /health names them.
const (
	StatusConnected  = "connected"
	StatusConnecting = "connecting"
	StatusError      = "error"
	StatusDisabled   = "disabled"
	// StatusDegraded: connected, but lacking something it needs (a
	// scope the token was not granted): some of its work will fail.
	StatusDegraded = "degraded"
)

// Health is what an adapter reports about itself on /health.
type Health struct {
	Status      string     `json:"status"`
	LastEvent   *time.Time `json:"last_event,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	Detail      string     `json:"detail,omitempty"`
	// RetryAt is when the service starts a failed Source of the provider
	// again (set by the service, not the adapter).
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// HealthReporter is implemented by adapters that report their health.
type HealthReporter interface {
	Health() Health
}

// HealthTracker keeps an adapter's health; adapters embed one. It is safe
// for concurrent use. The zero value reports "connecting".
type HealthTracker struct {
	mu      sync.Mutex
	h       Health
	lacking string
}

// Health returns the current health: connected but lacking something
// (Lacking) is degraded, the lack in Detail.
func (t *HealthTracker) Health() Health {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.h
	if h.Status == "" {
		h.Status = StatusConnecting
	}
	if h.Status == StatusConnected && t.lacking != "" {
		h.Status, h.Detail = StatusDegraded, strings.TrimPrefix(h.Detail+"; "+t.lacking, "; ")
	}
	return h
}

// Lacking records what the adapter lacks while it runs (its text must
// hold no secret), "" when nothing: connected, it reports degraded.
func (t *HealthTracker) Lacking(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lacking = what
}

// Set sets the status and detail.
func (t *HealthTracker) Set(status, detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.h.Status, t.h.Detail = status, detail
}

// Event records that something arrived or was sent now.
func (t *HealthTracker) Event() {
	now := time.Now().UTC()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.h.LastEvent = &now
}

// Error records an error (its text must hold no secret) and sets the
// status to error.
func (t *HealthTracker) Error(err error) {
	if err == nil {
		return
	}
	now := time.Now().UTC()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.h.Status, t.h.LastError, t.h.LastErrorAt = StatusError, err.Error(), &now
}

// PartialError reports a send that reached some recipients and must be
// tried again for the others (an SMTP 4xx on some RCPT TO). The engine
// records Accepted and passes them to the next attempt (Attempt.Accepted),
// so that nobody gets the message twice.
type PartialError struct {
	Accepted []schema.RecipientResult // the recipients that have it now
	Err      error                    // why the rest did not: Temporary or Permanent
}

func (e *PartialError) Error() string { return e.Err.Error() }

// Unwrap gives the classified error.
func (e *PartialError) Unwrap() error { return e.Err }
