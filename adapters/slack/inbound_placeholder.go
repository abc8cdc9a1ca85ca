package slack

import "github.com/monoco/courier/adapters"

// PLACEHOLDER, replaced by the transports (socket.go, events.go,
// replay.go): inbound sets p.Sources and p.Webhook.
func (a *Adapter) inbound(p *adapters.Provider) {}
