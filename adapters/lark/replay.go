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

// catchUp is one pass over every chat the app is in: the messages missed
// since each chat's position, ingested through handle, then caughtUpTo for
// the chat; passStart/passDone around the whole pass. (Being built: for
// now it reads nothing.)
func (r *receiver) catchUp(ctx context.Context, sink adapters.Sink) error {
	return nil
}
