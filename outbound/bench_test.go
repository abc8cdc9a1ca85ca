package outbound_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
)

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
	n  chan struct{}
}

func (l *latencies) Sent(p schema.Provider, d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
	l.n <- struct{}{}
}
func (l *latencies) Failed(schema.Provider, bool) {}

func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	return l.d[int(q*float64(len(l.d)-1))]
}

// BenchmarkEngine measures the engine with an in-process sender that
// accepts at once: drafts queued by `courier send`'s path (mailbox.Queue)
// while the engine runs, delivered and archived. It reports drafts/s and
// the queued→sent latency (p50, p99).
func BenchmarkEngine(b *testing.B) {
	root := b.TempDir()
	mailbox.Init(root)
	mb, err := mailbox.Open(root, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer mb.Close()
	lat := &latencies{n: make(chan struct{}, b.N)}
	accept := adapters.SenderFunc(func(ctx context.Context, at *adapters.Attempt) (adapters.Receipt, error) {
		d := at.Draft
		return adapters.Receipt{ProviderMessageID: d.IdempotencyKey}, nil
	})
	eng := outbound.New(mb, &outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Slack: accept}, Observer: lat})
	if err := eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer eng.Stop(context.Background())
	b.ResetTimer()
	go func() {
		for i := 0; i < b.N; i++ {
			d := &schema.Draft{ID: fmt.Sprintf("slack_out_%032x", i), Provider: schema.Slack, To: schema.Recipients{"C0123456"},
				CreatedAt: schema.TimePtr(time.Now()), IdempotencyKey: fmt.Sprint(i), Body: "benchmark\n"}
			if _, err := mb.Queue(context.Background(), d); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	for i := 0; i < b.N; i++ {
		<-lat.n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "drafts/s")
	b.ReportMetric(float64(lat.quantile(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat.quantile(0.99).Microseconds())/1000, "p99-ms")
}
