package adapters

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Provider is what one provider package offers: the service runs its
// Sources, hands its Sender the drafts queued for it, mounts its Webhook,
// reports its Health and runs its Checks; `courier send` asks its Resolver.
// A provider package has one constructor that returns it, does no I/O and
// may be called by a command that never starts anything (send resolves
// drafts with it).
type Provider struct {
	// Name is the provider, the folder name under inbound/ and outbound/.
	Name schema.Provider
	// Resolver holds the provider's rules for drafts; required.
	Resolver Resolver
	// Sources receive inbound messages; the service starts each (Starter),
	// runs it, restarts its Run with a backoff when it fails (and tells
	// its ErrorReporter; a slow one when the error is Refused, which a
	// Start may return too without failing the service's start), and
	// stops it (Stopper) in reverse order.
	Sources []Source
	// Sender delivers the drafts queued for this provider. Nil when the
	// config gives it no way to send: drafts stay queued, and Waiting says
	// why on /health.
	Sender  Sender
	Waiting string
	// Webhook, when set, is mounted at /webhook/<name> on the service's
	// HTTP listener, given the ingest pipeline as its Sink.
	Webhook Webhook
	// Health is the provider's one entry on /health; nil reports nothing.
	Health HealthReporter
	// Ignored counts, by reason, the inbound events the provider does not
	// file on purpose (see DeadLetter); /health and /metrics show them.
	// Nil when it ignores nothing.
	Ignored *Ignored
	// Checks are what `courier doctor` asks of the provider:
	// connectivity and credentials.
	Checks []Check
	// Secrets are the credentials the provider holds. The service keeps
	// their values out of its log, whatever an error message quotes.
	Secrets []confkit.Secret
	// Self lists the participant ids of the bot itself (Slack's user and
	// bot ids, Lark's open_id): messages from them are dropped as echoes.
	// A Source that learns them only once connected marks its events
	// Event.Self instead.
	Self []string
}

// Resolver holds a provider's rules for drafts: how recipients are named,
// and what a draft leaves to Courier. `courier send` uses it whether or not
// the service runs, so it must not need a connection.
type Resolver interface {
	// Recognizes reports whether a recipient string names an address or id
	// of this provider. `courier send` takes a draft's provider from its
	// recipients when one provider recognises every one of them.
	Recognizes(recipient string) bool
	// Resolve fills in what draft d leaves to Courier, after the provider
	// and the generic fields (correlation_id, thread_key) are set: the
	// recipients and the provider's own fields (email: account, From,
	// Subject, In-Reply-To, References) from the message answered, when
	// there is one; then the IdempotencyKey every attempt sends with and,
	// when it is known before sending, the InboundID. Errors name the
	// draft's field through src (src.Errorf).
	Resolve(d *schema.Draft, parent *Parent, opts ResolveOptions, src *schema.Source) error
}

// Parent is the message a draft answers: an inbound message, or one of our
// own drafts (a follow-up).
type Parent struct {
	Message *schema.Message // set for an inbound message
	Draft   *schema.Draft   // set for one of our drafts
}

// ResolveOptions are what the person sending chose on the command line.
type ResolveOptions struct {
	// Account is the account to send from (email: --account), "" for the
	// provider's default.
	Account string
}

// Webhook is implemented by providers that receive over HTTP (Slack's
// Events API, Lark's event subscription). The handler must verify what it
// receives before it hands anything to sink.
type Webhook interface {
	Handler(sink Sink) http.Handler
}

// WebhookFunc makes a Webhook of a function.
type WebhookFunc func(sink Sink) http.Handler

// Handler calls f.
func (f WebhookFunc) Handler(sink Sink) http.Handler { return f(sink) }

// Check is one thing `courier doctor` verifies of a provider.
type Check struct {
	Name string
	Run  func(ctx context.Context) error
	// Listen marks a check that binds one of the service's own ports: it
	// fails while the service runs, which holds the port, and doctor says
	// so instead of failing.
	Listen bool
}

// ErrorReporter is implemented by Sources that record on their health the
// errors their Run returns (the service tells them before it restarts Run).
type ErrorReporter interface {
	Error(err error)
}

// Fetcher is implemented by Sources that can make one pass and stop
// (`courier fetch`: an IMAP sync, a history catch-up).
type Fetcher interface {
	Source
	FetchOnce(ctx context.Context, sink Sink) error
}

// CombineHealth makes one /health entry of a provider's parts: the first
// status that is not connected, the latest event and error, and every
// part's detail.
func CombineHealth(parts ...HealthReporter) HealthReporter { return combined(parts) }

type combined []HealthReporter

func (c combined) Health() Health {
	out := Health{Status: StatusConnected}
	var details []string
	for _, p := range c {
		ph := p.Health()
		if ph.Status != StatusConnected && out.Status == StatusConnected {
			out.Status = ph.Status
		}
		out.LastEvent = later(out.LastEvent, ph.LastEvent)
		if ph.LastErrorAt != nil && (out.LastErrorAt == nil || ph.LastErrorAt.After(*out.LastErrorAt)) {
			out.LastError, out.LastErrorAt = ph.LastError, ph.LastErrorAt
		}
		if ph.Detail != "" {
			details = append(details, ph.Detail)
		}
	}
	out.Detail = strings.Join(details, "; ")
	return out
}

func later(a, b *time.Time) *time.Time {
	if b != nil && (a == nil || b.After(*a)) {
		return b
	}
	return a
}

// Validate checks that p holds what every provider must.
func (p *Provider) Validate() error {
	if !p.Name.Valid() {
		return fmt.Errorf("adapters: provider %q is not a provider the mailbox knows", p.Name)
	}
	if p.Resolver == nil {
		return fmt.Errorf("adapters: provider %s has no Resolver", p.Name)
	}
	return nil
}

// SameSession is the reply rule of chat providers: a reply goes to the
// chat or channel of the message answered (its session id), and a
// follow-up to one of our drafts to that draft's recipients.
func SameSession(parent *Parent) schema.Recipients {
	switch {
	case parent == nil:
		return nil
	case parent.Draft != nil:
		return parent.Draft.To
	case parent.Message != nil && parent.Message.Session.ID != "":
		return schema.Recipients{parent.Message.Session.ID}
	}
	return nil
}

// ChatResolver is the rules for drafts of a chat provider whose recipients
// are ids that IDs matches: a reply goes to the chat of the message
// answered (SameSession), and every attempt sends with one uuid fixed at
// queue time (Lark's uuid). The inbound id of what it posts comes from the
// receipt. Slack has a Resolver of its own (threads, DMs to users).
type ChatResolver struct {
	IDs *regexp.Regexp
}

var _ Resolver = ChatResolver{}

// Recognizes reports whether r is one of the provider's ids.
func (c ChatResolver) Recognizes(r string) bool { return c.IDs.MatchString(r) }

// Resolve answers in the same chat and fixes the idempotency key.
func (ChatResolver) Resolve(d *schema.Draft, parent *Parent, _ ResolveOptions, _ *schema.Source) error {
	if len(d.To) == 0 {
		d.To = SameSession(parent)
	}
	d.IdempotencyKey = uuid.NewString()
	return nil
}
