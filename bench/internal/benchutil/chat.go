package benchutil

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Chat is what a chat provider's benchmarks (Slack, Lark) need of its
// fake server F: the benchmarks themselves are the same.
type Chat[F any] struct {
	Provider string // "slack": inbound/slack/, archive/slack/; "Slack" in the table
	Title    string
	NewFake  func(*testing.B) F
	// Workspace makes a workspace in ws for courier (bin) against the fake
	// and returns its HTTP address.
	Workspace func(b *testing.B, bin string, fake F, ws string) string
	// Latencies sends n events one at a time and returns each one's time
	// from the frame written to its ack read.
	Latencies func(b *testing.B, fake F, n int) []time.Duration
	// Bare is the bare SDK program's name and its handler, which writes
	// each event into dir (durable) until ctx ends.
	Bare        string
	BareHandler func(ctx context.Context, fake F, dir string)
	// Draft is the i-th reply's draft, Delivered how many replies the fake
	// holds; Loop prepares the SDK's reply loop on a fresh fake (the
	// messages replied to, a client) and returns it: n replies, timed.
	Draft     func(i int) string
	Delivered func(fake F) int
	LoopName  string
	Loop      func(b *testing.B, fake F, n int) func()
}

// EventToFile: event → durable file, Courier against the bare SDK
// handler, interleaved over -rounds rounds, each against a fresh fake into
// a fresh folder (Sample); p50 and p99, the p99's target under 20 ms.
func (c Chat[F]) EventToFile(b *testing.B, n int) {
	courier := func(bin string) func(*testing.B, string, int) []time.Duration {
		return func(b *testing.B, ws string, n int) []time.Duration {
			fake := c.NewFake(b)
			web := c.Workspace(b, bin, fake, ws)
			return ServeEvents(b, bin, ws, web, c.Provider, n, func() []time.Duration { return c.Latencies(b, fake, n) })
		}
	}
	bare := &Sampler{Name: c.Bare, Run: func(b *testing.B, dir string, n int) []time.Duration {
		fake := c.NewFake(b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go c.BareHandler(ctx, fake, dir)
		lat := c.Latencies(b, fake, n)
		cancel()
		if got, _ := os.ReadDir(dir); len(got) != n {
			b.Fatalf("the baseline wrote %d files for %d events", len(got), n)
		}
		return lat
	}}
	s, load := Sample(b, *RoundsFlag, n, courier, bare)
	ReportPcts(b, fmt.Sprintf("%s event → durable file, over %d events a round", c.Title, n), load, 20*time.Millisecond, s)
}

// Replies: n drafts queued while the service is down, then delivered by
// `courier serve` (ServeReplies), against the SDK's reply loop;
// interleaved over -rounds rounds, each against a fresh fake into a fresh
// folder.
func (c Chat[F]) Replies(b *testing.B, n int) {
	courier := func(bin string) func(*testing.B, string, int) []time.Duration {
		return func(b *testing.B, ws string, n int) []time.Duration {
			fake := c.NewFake(b)
			web := c.Workspace(b, bin, fake, ws)
			// The messages answered: in the mailbox and in the fake.
			ServeEvents(b, bin, ws, web, c.Provider, n, func() []time.Duration { return c.Latencies(b, fake, n) })
			return []time.Duration{ServeReplies(b, bin, ws, web, c.Provider, n, c.Draft, func() int { return c.Delivered(fake) })}
		}
	}
	loop := &Sampler{Name: c.LoopName, Run: func(b *testing.B, _ string, n int) []time.Duration {
		loop := c.Loop(b, c.NewFake(b), n)
		start := time.Now()
		loop()
		return []time.Duration{time.Since(start)}
	}}
	s, load := Sample(b, *RoundsFlag, n, courier, loop)
	ReportRuns(b, fmt.Sprintf("%d %s replies queued → delivered (service start included)", n, c.Title), n, load, s)
}
