package service

import (
	"context"
	"log/slog"
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
	mu   sync.Mutex
	vals atomic.Pointer[[]string] // a new slice at each Add
}

// NewRedactor wraps h. Add gives it the secrets once they are known.
func NewRedactor(h slog.Handler) *Redactor {
	return &Redactor{next: h, secretSet: &secretSet{}}
}

// Add adds secrets to redact. One shorter than confkit.StrongSecretLen is
// redacted only as a whole token (confkit.Redact), so that a test token
// "v" does not blank out every v of the log.
func (s *secretSet) Add(secrets ...confkit.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vals []string
	if p := s.vals.Load(); p != nil {
		vals = append(vals, *p...)
	}
	for _, x := range secrets {
		if v := x.Reveal(); v != "" {
			vals = append(vals, v)
		}
	}
	if len(vals) > 0 {
		s.vals.Store(&vals)
	}
}

// redact returns x without the secrets' values.
func (s *secretSet) redact(x string) string {
	if p := s.vals.Load(); p != nil {
		return confkit.Redact(x, *p...)
	}
	return x
}

func (r *Redactor) Enabled(ctx context.Context, l slog.Level) bool { return r.next.Enabled(ctx, l) }

func (r *Redactor) Handle(ctx context.Context, rec slog.Record) error {
	if r.vals.Load() == nil {
		return r.next.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, r.redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(r.redactAttr(a))
		return true
	})
	return r.next.Handle(ctx, out)
}

func (s *secretSet) redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, s.redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, x := range g {
			out[i] = s.redactAttr(x)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, s.redact(err.Error()))
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
