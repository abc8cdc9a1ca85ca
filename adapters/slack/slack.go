// Package slack is the Slack provider. This version holds its
// rules for drafts (recipient ids, replies in the same chat, idempotency
// keys), so that drafts for Slack can be written and queued; receiving and
// sending are not built yet, and enabling the adapter is a config error.
package slack

import (
	"fmt"
	"log/slog"
	"regexp"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/schema"
)

// Options configure the provider. The zero value is a disabled provider.
type Options struct {
	Config config.Slack
	Logger *slog.Logger
}

// ids are Slack's conversations and users: channels (C), DMs (D), private
// channels and group DMs (G), users (U, W).
var ids = regexp.MustCompile(`^[CDGUW][A-Z0-9]{6,}$`)

// New returns the Slack provider. It does no I/O.
func New(o Options) (*adapters.Provider, error) {
	if o.Config.Enabled {
		return nil, fmt.Errorf("courier.adapters.slack.enabled: the Slack adapter is not in this version of Courier yet; set enabled: false (drafts for slack stay queued)")
	}
	return &adapters.Provider{Name: schema.Slack, Resolver: adapters.ChatResolver{IDs: ids}}, nil
}
