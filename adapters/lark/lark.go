// Package lark is the Lark (Feishu) provider. This version holds its
// rules for drafts (recipient ids, replies in the same chat, idempotency
// keys), so that drafts for Lark can be written and queued; receiving and
// sending are not built yet, and enabling the adapter is a config error.
package lark

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
	Config config.Lark
	Logger *slog.Logger
}

// ids are Lark's: chats (oc_), users (ou_ open_id, on_ union_id) and
// messages (om_).
var ids = regexp.MustCompile(`^(oc|ou|on|om)_[A-Za-z0-9_-]+$`)

// New returns the Lark provider. It does no I/O.
func New(o Options) (*adapters.Provider, error) {
	if o.Config.Enabled {
		return nil, fmt.Errorf("courier.adapters.lark.enabled: the Lark adapter is not in this version of Courier yet; set enabled: false (drafts for lark stay queued)")
	}
	return &adapters.Provider{Name: schema.Lark, Resolver: adapters.ChatResolver{IDs: ids}}, nil
}
