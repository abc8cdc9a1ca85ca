package service

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// laneProvider is a provider whose one source counts its runs and whose
// Sender answers with tag.
func laneProvider(tag string, running *atomic.Int32) *adapters.Provider {
	return &adapters.Provider{Name: schema.Slack,
		Sources: []adapters.Source{adapters.SourceFunc{SourceName: "src " + tag, Func: func(ctx context.Context, _ adapters.Sink) error {
			running.Add(1)
			defer running.Add(-1)
			<-ctx.Done()
			return nil
		}}},
		Sender: adapters.SenderFunc(func(context.Context, *adapters.Attempt) (adapters.Receipt, error) {
			return adapters.Receipt{ProviderMessageID: tag}, nil
		}),
	}
}

// RestartProvider stops the provider's sources and starts the new
// build's, and the engine's Sender reaches the new build from then on; a
// build that gained a webhook cannot change live. Run with -race: /health
// and sends read the lane while it is replaced.
func TestRestartProvider(t *testing.T) {
	var oldRuns, newRuns atomic.Int32
	log := slog.New(slog.DiscardHandler)
	s := &Service{}
	senders, _ := s.makeLanes([]*adapters.Provider{laneProvider("old", &oldRuns)}, log, DefaultRestart)
	lt := NewLifetime(log)
	for _, c := range s.lanes["slack"].components() {
		lt.Add(c)
	}
	ctx := context.Background()
	if err := lt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitCount(t, &oldRuns, 1)
	stop := make(chan struct{})
	go func() { // a send and /health while the provider is replaced
		for {
			select {
			case <-stop:
				return
			default:
				senders[schema.Slack].Send(ctx, &adapters.Attempt{})
				s.retryAt("slack")
			}
		}
	}()
	if err := s.RestartProvider(ctx, laneProvider("new", &newRuns)); err != nil {
		t.Fatal(err)
	}
	close(stop)
	waitCount(t, &oldRuns, 0)
	waitCount(t, &newRuns, 1)
	if r, _ := senders[schema.Slack].Send(ctx, &adapters.Attempt{}); r.ProviderMessageID != "new" {
		t.Errorf("the engine's Sender reaches %q, want the new build", r.ProviderMessageID)
	}
	p := laneProvider("webhook", &newRuns)
	p.Webhook = adapters.WebhookFunc(nil)
	if err := s.RestartProvider(ctx, p); !errors.Is(err, ErrNotLive) {
		t.Errorf("a provider that gained a webhook: %v, want ErrNotLive", err)
	}
	if err := lt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitCount(t, &newRuns, 0)
}

func waitCount(t *testing.T, n *atomic.Int32, want int32) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); n.Load() != want; {
		if time.Now().After(end) {
			t.Fatalf("%d running, want %d", n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
