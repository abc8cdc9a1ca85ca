package service

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/notify"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
)

// Service is the running service as /health and /metrics see it.
type Service struct {
	Mailbox  *mailbox.Mailbox
	Pipeline *ingest.Pipeline
	Engine   *outbound.Engine
	// Adapters are the enabled adapters, by name; the providers Courier
	// has that are not among them are reported disabled.
	Adapters map[string]adapters.HealthReporter
	// Waiting says, per provider without a Sender, why its drafts wait.
	Waiting map[schema.Provider]string
	// DeadLetters keeps what the providers cannot file (deadletter.go);
	// Ignored counts what they do not file on purpose.
	DeadLetters *mailbox.DeadLetters
	Ignored     map[schema.Provider]*adapters.Ignored
	Version     string
	Listen      string
	// Hooks are the names of the hooks of courier.notify.
	Hooks []string

	started  time.Time
	stopping atomic.Bool
	metrics  *Metrics
	// lanes are the providers, by name, each restarted alone on a reload
	// (lane.go); /health says when a failed source is started again.
	lanes map[string]*lane
	hooks *hooksSlot
	sink  adapters.Sink
	// secrets are the providers' credentials, kept out of the adapters'
	// errors on /health whatever a server quoted back.
	secrets secretSet

	mu     sync.Mutex
	config ConfigState
	reload Reload
}

// MarkStarted records the start time.
func (s *Service) MarkStarted() { s.started = time.Now() }

// MarkStopping makes /health say the service is stopping (load balancers
// and `courier status` see it before the port closes).
func (s *Service) MarkStopping() { s.stopping.Store(true) }

// Report is the body of GET /health and of `courier status --format json`.
type Report struct {
	Status    string                     `json:"status"`  // healthy | degraded | unhealthy
	Service   string                     `json:"service"` // running | stopping | stopped
	PID       int                        `json:"pid,omitempty"`
	Version   string                     `json:"version,omitempty"`
	StartedAt *time.Time                 `json:"started_at,omitempty"`
	Uptime    float64                    `json:"uptime_seconds"`
	Listen    string                     `json:"listen,omitempty"`
	Adapters  map[string]adapters.Health `json:"adapters"`
	Inbox     map[mailbox.Status]int     `json:"inbox"`
	Outbound  []Queue                    `json:"outbound"`
	Totals    Totals                     `json:"totals"`
	// DeadLetter and Ignored are the inbound events not filed as
	// messages, by provider (deadletter.go).
	DeadLetter map[string]mailbox.DeadLetterStats `json:"deadletter,omitempty"`
	Ignored    map[string]map[string]uint64       `json:"ignored,omitempty"`
	// HookDead is the calls each hook set aside (notify.DeadCounts).
	HookDead map[string]int `json:"hook_dead,omitempty"`
	// Hooks is each hook's backlog, failing calls, last error and dead
	// letters (hooks.go).
	Hooks map[string]notify.State `json:"hooks,omitempty"`
	// Config is the config the service runs; Reload the outcome of the
	// last reload (reload.go).
	Config *ConfigState `json:"config,omitempty"`
	Reload *Reload      `json:"reload,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// Queue is one provider's outbound queue.
type Queue struct {
	mailbox.OutboundStatus
	// Dead is the provider's drafts in .deadletter/ (courier outbound
	// list shows why, requeue puts them back).
	Dead    int    `json:"dead"`
	Enabled bool   `json:"enabled"`
	Waiting string `json:"waiting,omitempty"` // why drafts are not being sent
}

// Totals are counters since the service started.
type Totals struct {
	Received   uint64 `json:"received"`
	Duplicates uint64 `json:"duplicates"`
	Merged     uint64 `json:"debounce_merged"`
	Sent       uint64 `json:"sent"`
	Failed     uint64 `json:"failed_attempts"`
}

// Report builds the health report.
func (s *Service) Report(ctx context.Context) Report {
	r := Report{Status: "healthy", Service: "running", PID: os.Getpid(), Version: s.Version, Listen: s.Listen,
		Adapters: map[string]adapters.Health{}}
	if s.stopping.Load() {
		r.Service = "stopping"
	}
	if !s.started.IsZero() {
		t := s.started.UTC()
		r.StartedAt = &t
		r.Uptime = time.Since(s.started).Round(time.Second).Seconds()
	}
	for _, p := range schema.Implemented {
		if _, ok := s.Adapters[string(p)]; !ok {
			r.Adapters[string(p)] = adapters.Health{Status: adapters.StatusDisabled}
		}
	}
	for name, h := range s.Adapters {
		hh := h.Health()
		hh.LastError, hh.Detail = s.secrets.redact(hh.LastError), s.secrets.redact(hh.Detail)
		hh.RetryAt = s.retryAt(name)
		r.Adapters[name] = hh
		if hh.Status != adapters.StatusConnected && r.Status == "healthy" {
			r.Status = "degraded"
		}
	}
	rep, err := Offline(ctx, s.Mailbox, s.enabled(), s.Waiting)
	if err != nil {
		r.Status, r.Error = "unhealthy", err.Error()
	}
	r.Inbox, r.Outbound = rep.Inbox, rep.Outbound
	if s.Pipeline != nil {
		for _, st := range s.Pipeline.Stats() {
			r.Totals.Received += st.Received
			r.Totals.Duplicates += st.Duplicates
			r.Totals.Merged += st.Merged
		}
	}
	if s.Engine != nil {
		r.Totals.Sent, r.Totals.Failed = s.Engine.Counts()
	}
	s.unfiled(&r)
	r.Hooks = HookStates(ctx, s.Mailbox, s.Hooks)
	s.reloadState(&r)
	return r
}

// retryAt is the earliest time a failed Source of the provider is started
// again; nil when none waits.
func (s *Service) retryAt(provider string) *time.Time {
	var first time.Time
	l := s.lanes[provider]
	if l == nil {
		return nil
	}
	for _, r := range l.sourceRuns() {
		if t := r.RetryAt(); !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if first.IsZero() {
		return nil
	}
	first = first.UTC()
	return &first
}

func (s *Service) enabled() []schema.Provider {
	if s.Engine == nil {
		return nil
	}
	return s.Engine.Enabled()
}

// Offline is the part of the report the mailbox alone can give: what
// `courier status` shows when the service is not running.
func Offline(ctx context.Context, mb *mailbox.Mailbox, enabled []schema.Provider, waiting map[schema.Provider]string) (Report, error) {
	r := Report{Service: "stopped", Adapters: map[string]adapters.Health{}}
	counts, err := mb.Count(ctx)
	if err != nil {
		return r, err
	}
	r.Inbox = map[mailbox.Status]int{}
	for _, st := range []mailbox.Status{mailbox.StatusNew, mailbox.StatusClaimed, mailbox.StatusFailed, mailbox.StatusDone, mailbox.StatusDead} {
		r.Inbox[st] = counts[st]
	}
	qs, err := mb.Outbound(ctx)
	if err != nil {
		return r, err
	}
	dead, err := mb.DeadDrafts(ctx)
	if err != nil {
		return r, err
	}
	queued := map[schema.Provider]bool{}
	for _, q := range qs {
		queued[q.Provider] = true
	}
	for p := range dead {
		if !queued[p] {
			qs = append(qs, mailbox.OutboundStatus{Provider: p}) // dead drafts only
		}
	}
	on := map[schema.Provider]bool{}
	for _, p := range enabled {
		on[p] = true
	}
	for _, q := range qs {
		e := Queue{OutboundStatus: q, Dead: dead[q.Provider], Enabled: on[q.Provider]}
		if !e.Enabled && q.Queued > 0 {
			e.Waiting = waiting[q.Provider]
			if e.Waiting == "" {
				e.Waiting = "the " + string(q.Provider) + " adapter is not enabled in the config (courier.adapters." + string(q.Provider) + ".enabled)"
			}
		}
		r.Outbound = append(r.Outbound, e)
	}
	sort.Slice(r.Outbound, func(i, j int) bool { return r.Outbound[i].Provider < r.Outbound[j].Provider })
	return r, nil
}

// Handler serves /health, /metrics and the extra handlers (webhooks).
func (s *Service) Handler(extra map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		rep := s.Report(r.Context())
		w.Header().Set("Content-Type", "application/json")
		if rep.Status == "unhealthy" || rep.Service == "stopping" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Metrics().reg, promhttp.HandlerOpts{}))
	for pattern, h := range extra {
		mux.Handle(pattern, h)
	}
	return mux
}

// Metrics returns the service's metrics, creating them on first use.
func (s *Service) Metrics() *Metrics {
	if s.metrics == nil {
		s.metrics = newMetrics(s)
	}
	return s.metrics
}

// Metrics are the Prometheus metrics, with upstream's names.
type Metrics struct {
	reg      *prometheus.Registry
	sent     *prometheus.CounterVec
	failed   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var (
	_ outbound.Observer = (*Metrics)(nil)
	_ ingest.Observer   = (*Metrics)(nil)
)

func newMetrics(s *Service) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_messages_sent_total",
			Help: "Drafts delivered, by provider."}, []string{"provider"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_messages_failed_total",
			Help: "Failed delivery attempts, by provider and kind (temporary: will be retried; permanent: set aside)."}, []string{"provider", "kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "courier_processing_duration",
			Help:    "Seconds to process: inbound, a write round made durable; outbound, from queued to accepted by the provider.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"direction", "provider"}),
	}
	m.reg.MustRegister(m.sent, m.failed, m.duration, &collector{s: s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Init makes every series of the given providers exist from the start, at
// zero: a counter that appears only with its first increment breaks
// rate() and alerts on absent(), and a dashboard shows nothing instead of 0.
func (m *Metrics) Init(providers ...schema.Provider) {
	for _, p := range providers {
		m.sent.WithLabelValues(string(p))
		m.failed.WithLabelValues(string(p), "temporary")
		m.failed.WithLabelValues(string(p), "permanent")
		m.duration.WithLabelValues("inbound", string(p))
		m.duration.WithLabelValues("outbound", string(p))
	}
}

// Sent implements outbound.Observer.
func (m *Metrics) Sent(p schema.Provider, latency time.Duration) {
	m.sent.WithLabelValues(string(p)).Inc()
	m.duration.WithLabelValues("outbound", string(p)).Observe(latency.Seconds())
}

// Failed implements outbound.Observer.
func (m *Metrics) Failed(p schema.Provider, permanent bool) {
	kind := "temporary"
	if permanent {
		kind = "permanent"
	}
	m.failed.WithLabelValues(string(p), kind).Inc()
}

// Written implements ingest.Observer.
func (m *Metrics) Written(p schema.Provider, n int, d time.Duration) {
	m.duration.WithLabelValues("inbound", string(p)).Observe(d.Seconds())
}

// collector reads the counters kept elsewhere at scrape time.
type collector struct{ s *Service }

var (
	receivedDesc = prometheus.NewDesc("courier_messages_received_total", "Inbound messages received from adapters, by provider (duplicates included).", []string{"provider"}, nil)
	dupDesc      = prometheus.NewDesc("courier_messages_duplicate_total", "Inbound messages dropped as already in the mailbox, by provider.", []string{"provider"}, nil)
	mergedDesc   = prometheus.NewDesc("courier_debounce_merged_total", "Inbound messages merged into another by debounce, by provider.", []string{"provider"}, nil)
	healthDesc   = prometheus.NewDesc("courier_adapter_health", "1 when the adapter is connected, 0 otherwise.", []string{"adapter", "status"}, nil)
	queueDesc    = prometheus.NewDesc("courier_queue_depth", "Drafts queued in outbound/, by provider.", []string{"provider"}, nil)
	inboxDesc    = prometheus.NewDesc("courier_inbox_messages", "Inbound messages by status.", []string{"status"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range append(append([]*prometheus.Desc{receivedDesc, dupDesc, mergedDesc, healthDesc, queueDesc, inboxDesc}, unfiledDescs...), hookDescs...) {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.s.Pipeline != nil {
		for p, st := range c.s.Pipeline.Stats() {
			ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(st.Received), string(p))
			ch <- prometheus.MustNewConstMetric(dupDesc, prometheus.CounterValue, float64(st.Duplicates), string(p))
			ch <- prometheus.MustNewConstMetric(mergedDesc, prometheus.CounterValue, float64(st.Merged), string(p))
		}
	}
	for name, h := range c.s.Adapters {
		st := h.Health().Status
		v := 0.0
		if st == adapters.StatusConnected {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, v, name, st)
	}
	c.s.collectUnfiled(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.s.Mailbox == nil {
		return
	}
	c.s.collectHooks(ctx, ch)
	if qs, err := c.s.Mailbox.Outbound(ctx); err == nil {
		depth := map[string]int{}
		for name := range c.s.Adapters {
			if schema.Provider(name).Valid() {
				depth[name] = 0 // an enabled provider with nothing queued
			}
		}
		for _, q := range qs {
			depth[string(q.Provider)] = q.Queued
		}
		for p, n := range depth {
			ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n), p)
		}
	}
	if counts, err := c.s.Mailbox.Count(ctx); err == nil {
		for _, st := range []mailbox.Status{mailbox.StatusNew, mailbox.StatusClaimed, mailbox.StatusFailed} {
			ch <- prometheus.MustNewConstMetric(inboxDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
		}
	}
}
