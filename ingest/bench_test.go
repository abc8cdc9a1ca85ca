package ingest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// BenchmarkDeliver measures the whole inbound path (dedupe, enrich, durable
// write, checkpoint): one source delivering batches (an IMAP backfill), and
// many delivering one event each at once (webhooks), group-committed.
func BenchmarkDeliver(b *testing.B) {
	at := testutil.Time("2026-01-01T00:00:00Z")
	msg := func(i int) *schema.Message {
		return testutil.Message(schema.Lark, fmt.Sprintf("om_%d", i), at.Add(time.Duration(i)*time.Second), "benchmark message")
	}
	setup := func(b *testing.B) *ingest.Pipeline {
		root := b.TempDir()
		mailbox.Init(root)
		mb, err := mailbox.Open(root, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { mb.Close() })
		p := ingest.New(mb, nil)
		if err := p.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Stop(ctx) })
		return p
	}
	b.Run("batches=256", func(b *testing.B) {
		p := setup(b)
		b.ResetTimer()
		for i := 0; i < b.N; i += 256 {
			var evs []adapters.Event
			for j := i; j < min(i+256, b.N); j++ {
				evs = append(evs, adapters.Event{Message: msg(j)})
			}
			evs[len(evs)-1].Checkpoint = &adapters.Checkpoint{Key: "bench", Value: fmt.Sprint(i)}
			if err := p.Deliver(ctx, evs...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("concurrent=64", func(b *testing.B) {
		p := setup(b)
		b.ResetTimer()
		var wg sync.WaitGroup
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < b.N; i += 64 {
					if err := p.Deliver(ctx, adapters.Event{Message: msg(i)}); err != nil {
						b.Error(err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}
