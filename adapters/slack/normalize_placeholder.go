package slack

import (
	"context"
	"errors"

	"github.com/monoco/courier/adapters"
)

// PLACEHOLDER, replaced by normalize.go.
func (a *Adapter) normalize(ctx context.Context, ev event) (*adapters.Event, error) {
	return nil, errors.New("slack: normalize is not built yet")
}
