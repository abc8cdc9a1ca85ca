package ingest

import "context"

// FlushDue flushes the debounce groups whose time has come by the
// pipeline's clock, so that tests drive debounce with a fake clock.
func (p *Pipeline) FlushDue(ctx context.Context) error { return p.flushDue(ctx) }
