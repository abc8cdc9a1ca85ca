package slack

import "github.com/monoco/courier/adapters"

// PLACEHOLDER, replaced by send.go: outbound sets p.Sender.
func (a *Adapter) outbound(p *adapters.Provider) { p.Waiting = "slack: sending is not built yet" }
