// Package slack is the Slack provider. This version holds its
// rules for drafts (recipient ids, replies in the same chat, idempotency
// keys), so that drafts for Slack can be written and queued; receiving and
// sending are not built yet, and enabling the adapter is a config error.
package slack

import (
	"fmt"
	"log/slog"
	"regexp"

	"github.com/google/uuid"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/schema"
)

// Options configure the provider. The zero value is a disabled provider.
type Options struct {
	Config config.Slack
	Logger *slog.Logger
}

// New returns the Slack provider. It does no I/O.
func New(o Options) (*adapters.Provider, error) {
	if o.Config.Enabled {
		return nil, fmt.Errorf("courier.adapters.slack.enabled: the Slack adapter is not in this version of Courier yet; set enabled: false (drafts for slack stay queued)")
	}
	return &adapters.Provider{Name: schema.Slack, Resolver: Resolver{}}, nil
}

// idRE matches Slack's conversation and user ids: channels (C), DMs (D),
// private channels and group DMs (G), users (U, W).
var idRE = regexp.MustCompile(`^[CDGUW][A-Z0-9]{6,}$`)

// Resolver is Slack's rules for drafts.
type Resolver struct{}

var _ adapters.Resolver = Resolver{}

// Recognizes reports whether r is a Slack conversation or user id.
func (Resolver) Recognizes(r string) bool { return idRE.MatchString(r) }

// Resolve answers in the channel of the message answered and fixes the
// client_msg_id every attempt posts with.
func (Resolver) Resolve(d *schema.Draft, parent *adapters.Parent, _ adapters.ResolveOptions, _ *schema.Source) error {
	if len(d.To) == 0 {
		d.To = adapters.SameSession(parent)
	}
	d.IdempotencyKey = uuid.NewString()
	return nil
}
