package lark

import "github.com/monoco/courier/adapters"

// outbound sets the provider's Sender. (Not built yet: drafts wait.)
func (a *Adapter) outbound(p *adapters.Provider) {
	p.Waiting = "lark: sending is not built yet, so drafts wait"
}
