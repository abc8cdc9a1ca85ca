package lark

import "github.com/monoco/courier/adapters"

// checks are what `courier doctor` asks.
func (a *Adapter) checks() []adapters.Check { return nil }
