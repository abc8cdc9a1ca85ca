package service

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// deadLetterSink is the Sink the service gives its Sources and Webhooks:
// the ingest pipeline, and the mailbox's dead letters for what cannot
// become a message (adapters.DeadLetterSink).
type deadLetterSink struct {
	adapters.Sink
	dl      *mailbox.DeadLetters
	secrets *secretSet
	log     *slog.Logger

	mu   sync.Mutex
	said map[schema.Provider]time.Time // when a refusal was last logged
}

// refusalLogEvery paces the log of dead letters refused beyond the
// bounds: whoever sends endless bad events does not fill the log too.
const refusalLogEvery = time.Minute

// NewDeadLetterSink is sink, keeping dead letters in dl. The values of
// secrets (the providers' credentials) are taken out of every payload
// kept, besides what adapters.ScrubPayload takes out.
func NewDeadLetterSink(sink adapters.Sink, dl *mailbox.DeadLetters, secrets []confkit.Secret, log *slog.Logger) adapters.DeadLetterSink {
	s := &secretSet{}
	s.Add(secrets...)
	return &deadLetterSink{Sink: sink, dl: dl, secrets: s, log: log, said: map[schema.Provider]time.Time{}}
}

// SetAside implements adapters.DeadLetterSink.
func (s *deadLetterSink) SetAside(ctx context.Context, d adapters.DeadLetter) error {
	payload := adapters.ScrubPayload(d.Payload)
	reason, source := d.Reason, d.Source
	if s.secrets.vals.Load() != nil {
		payload = []byte(s.secrets.redact(string(payload)))
		reason, source = s.secrets.redact(reason), s.secrets.redact(source)
	}
	rel, kept, err := s.dl.Put(ctx, mailbox.RawDeadLetter{Provider: d.Provider, Source: source, Reason: reason, Payload: payload, Ext: d.Ext})
	if err != nil {
		return fmt.Errorf("%s: set aside an event that cannot be filed (%s): %w", d.Provider, reason, err)
	}
	if kept {
		s.log.Warn("an inbound event cannot be filed; set aside in .deadletter", "provider", string(d.Provider), "source", source, "reason", reason, "path", rel)
		return nil
	}
	s.mu.Lock()
	say := time.Since(s.said[d.Provider]) >= refusalLogEvery
	if say {
		s.said[d.Provider] = time.Now()
	}
	s.mu.Unlock()
	if say {
		lim := s.dl.Limits()
		s.log.Warn("an inbound event cannot be filed, and the provider's dead letters are at their bound: counted, not kept (logged at most once a minute)",
			"provider", string(d.Provider), "source", source, "reason", reason, "max_files", lim.MaxFiles, "max_bytes", lim.MaxBytes)
	}
	return nil
}

// unfiled adds to r what the service did not file as messages: the dead
// letters of each enabled provider and the events each ignored on
// purpose (the bot's own echoes among them).
func (s *Service) unfiled(r *Report) {
	if s.DeadLetters != nil {
		r.DeadLetter = map[string]mailbox.DeadLetterStats{}
		for p, st := range s.DeadLetters.Stats(s.providers()...) {
			r.DeadLetter[string(p)] = st
		}
	}
	for p, counts := range s.ignored() {
		if r.Ignored == nil {
			r.Ignored = map[string]map[string]uint64{}
		}
		r.Ignored[string(p)] = counts
	}
}

// providers are the enabled providers.
func (s *Service) providers() []schema.Provider {
	var out []schema.Provider
	for name := range s.Adapters {
		if p := schema.Provider(name); p.Valid() {
			out = append(out, p)
		}
	}
	return out
}

// ignored are the counts of events ignored on purpose, per provider and
// reason: the providers' own and the pipeline's drops of the bot's own
// messages ("self").
func (s *Service) ignored() map[schema.Provider]map[string]uint64 {
	out := map[schema.Provider]map[string]uint64{}
	for p, c := range s.Ignored {
		if counts := c.Counts(); len(counts) > 0 {
			out[p] = counts
		}
	}
	if s.Pipeline != nil {
		for p, st := range s.Pipeline.Stats() {
			if st.Self > 0 {
				if out[p] == nil {
					out[p] = map[string]uint64{}
				}
				out[p]["self"] += st.Self
			}
		}
	}
	return out
}

var (
	deadDesc = prometheus.NewDesc("courier_deadletter_total",
		"Inbound events and mails that could not become messages, set aside in .deadletter/<provider>/, by provider.", []string{"provider"}, nil)
	deadRefusedDesc = prometheus.NewDesc("courier_deadletter_refused_total",
		"Inbound events that could not become messages and were not kept: the provider's dead letters were at their bound (courier.mailbox.deadletter).", []string{"provider"}, nil)
	deadKeptDesc = prometheus.NewDesc("courier_deadletter_kept",
		"Raw dead letters in .deadletter/<provider>/ now, by provider.", []string{"provider"}, nil)
	ignoredDesc = prometheus.NewDesc("courier_events_ignored_total",
		"Inbound events not filed on purpose (an event type not ingested, a notice, the bot's own echo, ...), by provider and reason.", []string{"provider", "reason"}, nil)
)

// unfiledDescs are the descriptions of the metrics collectUnfiled gives.
var unfiledDescs = []*prometheus.Desc{deadDesc, deadRefusedDesc, deadKeptDesc, ignoredDesc}

// collectUnfiled gives the dead letters' and the ignored events' metrics.
func (s *Service) collectUnfiled(ch chan<- prometheus.Metric) {
	if s.DeadLetters != nil {
		for p, st := range s.DeadLetters.Stats(s.providers()...) {
			ch <- prometheus.MustNewConstMetric(deadDesc, prometheus.CounterValue, float64(st.SetAside), string(p))
			ch <- prometheus.MustNewConstMetric(deadRefusedDesc, prometheus.CounterValue, float64(st.Refused), string(p))
			ch <- prometheus.MustNewConstMetric(deadKeptDesc, prometheus.GaugeValue, float64(st.Kept), string(p))
		}
	}
	for p, counts := range s.ignored() {
		for reason, n := range counts {
			ch <- prometheus.MustNewConstMetric(ignoredDesc, prometheus.CounterValue, float64(n), string(p), reason)
		}
	}
}
