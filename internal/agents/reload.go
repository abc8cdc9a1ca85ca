package agents

import (
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/providers"
)

// backendLive is the config and the providers a reload gave the Backend.
type backendLive struct {
	cfg *config.Config
	set providers.Set
}

// Reload makes the socket's verbs resolve drafts with cfg and set from now
// on (a reload of the service: SIGHUP, `courier reload`).
func (b *Backend) Reload(cfg *config.Config, set providers.Set) {
	b.live.Store(&backendLive{cfg: cfg, set: set})
}

// current is the config and the providers the Backend runs with.
func (b *Backend) current() (*config.Config, providers.Set) {
	if l := b.live.Load(); l != nil {
		return l.cfg, l.set
	}
	return b.Config, b.Providers
}
