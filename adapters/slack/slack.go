// Package slack is the Slack provider, built on slack-go: Socket Mode or
// the Events API in, chat.postMessage and the external file upload out.
//
// The parts, a file each:
//   - slack.go: the Adapter every part shares (the Web API client, the
//     app's own identity from auth.test, health) and New, which assembles
//     the provider;
//   - resolve.go: the rules for drafts (recipients, threads, idempotency);
//   - normalize.go, directory.go, files.go: a Slack event to a
//     schema.Message (names from users.info and conversations.info, files
//     into the dropzone);
//   - inbound.go: the one path from an event to the mailbox, and each
//     channel's checkpoint (a chatsync.Tracker of ts);
//   - socket.go, events.go, replay.go: the transports (Socket Mode, the
//     Events API webhook, the catch-up from history after a gap), on the
//     chat engine's joiner, webhook skeleton and catch-up loop
//     (adapters/chatsync);
//   - send.go: the Sender (its steps posted by chatsync.Poster).
//
// Only this package imports slack-go.
package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Options configure the provider: its Config, the limits, the dropzone,
// a logger and an HTTP client. The zero value is a disabled provider.
type Options = chatsync.Options[Config]

// DefaultAPIURL is Slack's Web API.
const DefaultAPIURL = "https://slack.com/api/"

// ids are Slack's conversations and users: channels (C), DMs (D), private
// channels and group DMs (G), users (U, W).
var ids = regexp.MustCompile(`^[CDGUW][A-Z0-9]{6,}$`)

// Adapter is what the provider's parts share.
type Adapter struct {
	cfg    Config
	limits confkit.Limits
	apiURL string
	api    *slackapi.Client // the bot token's client
	http   *http.Client
	dz     *dropzone.Store
	log    *slog.Logger
	health adapters.HealthTracker
	// ignored counts the events not filed on purpose, by reason.
	ignored adapters.Ignored
	// allow is the channels allow-list; nil lets every channel in.
	allow map[string]bool

	mu   sync.Mutex
	self *Identity // from auth.test, once it answered

	dir directory // users.info and conversations.info, cached (directory.go)
}

// Identity is the app's own: its posts come back as events and are
// dropped (DESIGN §5), matched by user id and bot id (bot_id alone is not
// reliable: a message another app posts as the same bot user has another).
type Identity struct {
	UserID string
	BotID  string
	TeamID string
}

// New returns the Slack provider. A provider that is not enabled only
// resolves drafts. New does no I/O.
func New(o Options) (*adapters.Provider, error) {
	p := &adapters.Provider{Name: schema.Slack, Resolver: Resolver{}}
	if !o.Config.Enabled {
		return p, nil
	}
	a := newAdapter(o)
	p.Health, p.Ignored = &a.health, &a.ignored
	p.Secrets = []confkit.Secret{o.Config.BotToken, o.Config.AppToken, o.Config.SigningSecret}
	p.Checks = a.checks()
	a.inbound(p)
	a.outbound(p)
	return p, nil
}

func newAdapter(o Options) *Adapter {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	apiURL := o.Config.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	a := &Adapter{cfg: o.Config, limits: o.Limits, apiURL: apiURL, http: hc, dz: o.Dropzone,
		log: log.With("adapter", "slack")}
	a.api = slackapi.New(o.Config.BotToken.Reveal(), slackapi.OptionAPIURL(apiURL), slackapi.OptionHTTPClient(hc),
		slackapi.OptionAppLevelToken(o.Config.AppToken.Reveal()))
	if len(o.Config.Channels) > 0 {
		a.allow = map[string]bool{}
		for _, c := range o.Config.Channels {
			a.allow[c] = true
		}
	}
	return a
}

// Identify returns the app's identity, asking auth.test the first time
// (and again after a failure).
func (a *Adapter) Identify(ctx context.Context) (*Identity, error) {
	a.mu.Lock()
	self := a.self
	a.mu.Unlock()
	if self != nil {
		return self, nil
	}
	r, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("slack: auth.test: %w", err)
	}
	self = &Identity{UserID: r.UserID, BotID: r.BotID, TeamID: r.TeamID}
	// What doctor fails on, the running service reports: degraded.
	if err := missingScopes(r.Header.Get("X-OAuth-Scopes")); err != nil {
		a.health.Lacking(err.Error())
	} else {
		a.health.Lacking("")
	}
	a.mu.Lock()
	a.self = self
	a.mu.Unlock()
	return self, nil
}

// event is one Slack event as a transport received it, handed to
// normalize.
type event struct {
	// ID is the Events API event_id ("Ev..."); "" for a message fetched
	// from history (replay.go).
	ID string
	// Channel is the conversation a message fetched from history came
	// from (history messages do not name it); "" for events, which do.
	Channel string
	// Inner is the event object: {"type":"message",...}.
	Inner json.RawMessage
	// Raw is the payload as the transport received it (an Events API
	// request's body, a Socket Mode envelope's payload): what is kept as
	// the dead letter of an event that cannot be filed. Nil for a message
	// from history, whose Inner is kept then.
	Raw json.RawMessage
	// Via is the transport, for a dead letter's source: "events api",
	// "socket mode"; "" for history.
	Via string
}

// checks are what `courier doctor` asks: the bot token (auth.test) and,
// in socket mode, the app token (apps.connections.open).
func (a *Adapter) checks() []adapters.Check {
	cs := []adapters.Check{{Name: "slack bot token (auth.test)", Run: func(ctx context.Context) error {
		r, err := a.api.AuthTestContext(ctx)
		if err != nil {
			return fmt.Errorf("slack: auth.test: %w", err)
		}
		return missingScopes(r.Header.Get("X-OAuth-Scopes"))
	}}}
	if a.cfg.Mode == "socket" {
		cs = append(cs, adapters.Check{Name: "slack app token (apps.connections.open)", Run: func(ctx context.Context) error {
			_, _, err := a.api.StartSocketModeContext(ctx)
			return err
		}})
	}
	return cs
}

// botScopes are the bot token scopes Courier uses, and what for.
var botScopes = []struct{ scope, use string }{
	{"channels:history", "messages in public channels"},
	{"groups:history", "messages in private channels"},
	{"im:history", "direct messages"},
	{"mpim:history", "group direct messages"},
	{"app_mentions:read", "mentions of the app"},
	{"channels:read", "channel names and the catch-up after a gap"},
	{"groups:read", "private channel names and the catch-up after a gap"},
	{"im:read", "direct message channels"},
	{"mpim:read", "group direct message channels"},
	{"users:read", "the names of people"},
	{"chat:write", "posting replies"},
	{"im:write", "opening a direct message to a user"},
	{"files:read", "downloading the files of messages"},
	{"files:write", "uploading a draft's attachments"},
}

// missingScopes names the scopes of botScopes that granted (auth.test's
// X-OAuth-Scopes header, comma-separated) lacks; nil when the header is
// absent (Slack sends it; a proxy may drop it).
func missingScopes(granted string) error {
	if strings.TrimSpace(granted) == "" {
		return nil
	}
	have := map[string]bool{}
	for _, s := range strings.Split(granted, ",") {
		have[strings.TrimSpace(s)] = true
	}
	var missing []string
	for _, b := range botScopes {
		if !have[b.scope] {
			missing = append(missing, fmt.Sprintf("%s (%s)", b.scope, b.use))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("slack: the bot token lacks scopes: %s; add them under OAuth & Permissions and reinstall the app", strings.Join(missing, ", "))
}
