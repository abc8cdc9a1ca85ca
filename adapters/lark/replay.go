package lark

import (
	"context"

	"github.com/monoco/courier/adapters"
)

// newReplaySource is the catch-up of webhook mode. (Being built.)
func newReplaySource(r *receiver) adapters.Source {
	return adapters.SourceFunc{SourceName: "lark catch-up", Func: func(ctx context.Context, sink adapters.Sink) error {
		<-ctx.Done()
		return nil
	}}
}
