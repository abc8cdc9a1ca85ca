package lark

import (
	"context"
	"errors"

	"github.com/monoco/courier/adapters"
)

// newWSSource is the long connection. (Being built.)
func newWSSource(r *receiver) adapters.Source {
	return adapters.SourceFunc{SourceName: "lark ws", Func: func(ctx context.Context, sink adapters.Sink) error {
		return errors.New("lark: the long connection is not built yet")
	}}
}
