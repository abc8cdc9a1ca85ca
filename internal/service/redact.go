package service

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/monoco/courier/internal/confkit"
)

// Redactor is a slog.Handler that takes the values of the providers'
// secrets out of every record: the message and every string attribute,
// errors included. Secrets are a type that never prints itself; this is
// the net under that, for the library that quotes a password back in an
// error.
//
// Attributes fixed with Logger.With are labels (adapter, source names) and
// pass as they are.
type Redactor struct {
	next slog.Handler
	*secretSet
}

type secretSet struct {
	mu       sync.Mutex
	pairs    []string
	replacer atomic.Pointer[strings.Replacer]
}

// NewRedactor wraps h. Add gives it the secrets once they are known.
func NewRedactor(h slog.Handler) *Redactor {
	return &Redactor{next: h, secretSet: &secretSet{}}
}

// minSecret is the shortest value redacted: shorter ones would blank out
// ordinary words.
const minSecret = 6

// Add adds secrets to redact.
func (s *secretSet) Add(secrets ...confkit.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range secrets {
		if v := x.Reveal(); len(v) >= minSecret {
			s.pairs = append(s.pairs, v, "[redacted]")
		}
	}
	if len(s.pairs) > 0 {
		s.replacer.Store(strings.NewReplacer(s.pairs...))
	}
}

// redact returns x without the secrets' values.
func (s *secretSet) redact(x string) string {
	if rp := s.replacer.Load(); rp != nil {
		return rp.Replace(x)
	}
	return x
}

func (r *Redactor) Enabled(ctx context.Context, l slog.Level) bool { return r.next.Enabled(ctx, l) }

func (r *Redactor) Handle(ctx context.Context, rec slog.Record) error {
	rp := r.replacer.Load()
	if rp == nil {
		return r.next.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, rp.Replace(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(rp, a))
		return true
	})
	return r.next.Handle(ctx, out)
}

func redactAttr(rp *strings.Replacer, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, rp.Replace(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = redactAttr(rp, x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, rp.Replace(err.Error()))
		}
	}
	return a
}

func (r *Redactor) WithAttrs(as []slog.Attr) slog.Handler {
	return &Redactor{next: r.next.WithAttrs(as), secretSet: r.secretSet}
}

func (r *Redactor) WithGroup(name string) slog.Handler {
	return &Redactor{next: r.next.WithGroup(name), secretSet: r.secretSet}
}
