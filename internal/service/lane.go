package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/monoco/courier/adapters"
)

// lane is one provider's part of the running service: its sources, and
// the Sender, Health and Webhook the rest of the service reaches it by.
// The rest of the service holds the lane's stand-ins (swapSender,
// swapHealth, swapHandler), never the provider's own values, so that a
// reload can replace the provider (Service.RestartProvider) while the
// others, ingest, outbound and the HTTP server run on.
type lane struct {
	name    string
	sink    adapters.Sink
	log     *slog.Logger
	restart Restart
	clk     clock

	mu    sync.Mutex // held by start, stop and replace
	runs  []*sourceRun
	stops []func(context.Context) error // of the started sources, in start order

	sender  *swapSender
	health  *swapHealth
	webhook *swapHandler
}

func newLane(p *adapters.Provider, sink adapters.Sink, log *slog.Logger, r Restart, clk clock) *lane {
	l := &lane{name: string(p.Name), sink: sink, log: log, restart: r, clk: clk}
	if p.Sender != nil {
		l.sender = &swapSender{}
	}
	if p.Health != nil {
		l.health = &swapHealth{}
	}
	if p.Webhook != nil {
		l.webhook = &swapHandler{}
	}
	l.set(p)
	return l
}

// fits reports whether p can replace the lane's provider live: the same
// abilities (a Sender, a Health, a Webhook), which the rest of the
// service was assembled with. Turning one on or off needs a restart.
func (l *lane) fits(p *adapters.Provider) bool {
	return (p.Sender != nil) == (l.sender != nil) && (p.Health != nil) == (l.health != nil) && (p.Webhook != nil) == (l.webhook != nil)
}

// set points the stand-ins at p and makes its source runs (not started).
func (l *lane) set(p *adapters.Provider) {
	if l.sender != nil {
		l.sender.s.Store(&p.Sender)
	}
	if l.health != nil {
		l.health.h.Store(&p.Health)
	}
	if l.webhook != nil {
		l.webhook.h.Store(ptr(p.Webhook.Handler(l.sink)))
	}
	l.runs = nil
	for _, src := range p.Sources {
		l.runs = append(l.runs, newSourceRun(src, l.sink, l.log, l.restart, l.clk))
	}
}

func ptr[T any](v T) *T { return &v }

// components are the lane's parts of the service's lifetime: one that
// stops whatever sources the lane runs then (first, so stopped last),
// and one per source, which starts the lane's run at its place.
func (l *lane) components() []Component {
	out := []Component{{Name: l.name + " sources", Stop: l.stop}}
	for i, r := range l.runs {
		out = append(out, Component{Name: r.src.Name(), Start: func(ctx context.Context) error { return l.startAt(ctx, i) }})
	}
	return out
}

// startAt starts the lane's i-th source: the service's start.
func (l *lane) startAt(ctx context.Context, i int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.runs[i].component()
	if err := c.Start(ctx); err != nil {
		return err
	}
	l.stops = append(l.stops, c.Stop)
	return nil
}

// stop stops the lane's started sources, in reverse.
func (l *lane) stop(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopLocked(ctx)
}

func (l *lane) stopLocked(ctx context.Context) error {
	var errs []error
	for i := len(l.stops) - 1; i >= 0; i-- {
		if err := l.stops[i](ctx); err != nil {
			errs = append(errs, err)
		}
	}
	l.stops = nil
	return errors.Join(errs...)
}

// replace stops the lane's sources, points it at p and starts p's: the
// provider restarted alone. A source of p that fails to start stops the
// ones started before it; the lane then runs nothing, and the error says
// so.
func (l *lane) replace(ctx context.Context, p *adapters.Provider) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.stopLocked(ctx); err != nil {
		l.log.Warn("the provider's sources stopped with errors", "provider", l.name, "err", err)
	}
	l.set(p)
	for _, r := range l.runs {
		c := r.component()
		if err := c.Start(ctx); err != nil {
			l.stopLocked(context.WithoutCancel(ctx))
			return fmt.Errorf("%s: %s: %w", l.name, r.src.Name(), err)
		}
		l.stops = append(l.stops, c.Stop)
	}
	return nil
}

// sourceRuns are the lane's current runs.
func (l *lane) sourceRuns() []*sourceRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*sourceRun(nil), l.runs...)
}

// swapSender is the Sender the outbound engine holds for a provider.
type swapSender struct {
	s atomic.Pointer[adapters.Sender]
}

func (w *swapSender) Send(ctx context.Context, a *adapters.Attempt) (adapters.Receipt, error) {
	return (*w.s.Load()).Send(ctx, a)
}

// swapHealth is the HealthReporter /health holds for a provider.
type swapHealth struct {
	h atomic.Pointer[adapters.HealthReporter]
}

func (w *swapHealth) Health() adapters.Health { return (*w.h.Load()).Health() }

// swapHandler is the handler mounted at /webhook/<provider>.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (w *swapHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	(*w.h.Load()).ServeHTTP(rw, r)
}
