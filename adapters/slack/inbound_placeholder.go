package slack

import (
	"context"
	"errors"

	"github.com/monoco/courier/adapters"
)

// PLACEHOLDER, replaced by the transports (socket.go, events.go,
// replay.go): inbound sets p.Sources and p.Webhook.
func (a *Adapter) inbound(p *adapters.Provider) {}

// PLACEHOLDER, replaced by normalize.go.
func (a *Adapter) normalize(ctx context.Context, ev event) (*adapters.Event, error) {
	return nil, errors.New("slack: normalize is not built yet")
}
