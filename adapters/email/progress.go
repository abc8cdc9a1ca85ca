package email

import (
	"fmt"
	"io"
	"time"
)

// progress prints backfill progress on a terminal: done/total and rate.
type progress struct {
	w          io.Writer
	label      string
	total, n   int
	start, out time.Time
}

func newProgress(w io.Writer, label string, total int) *progress {
	return &progress{w: w, label: label, total: total, start: time.Now()}
}

func (p *progress) add(k int) {
	p.n += k
	if p.w == nil || time.Since(p.out) < 200*time.Millisecond && p.n < p.total {
		return
	}
	p.out = time.Now()
	rate := float64(p.n) / time.Since(p.start).Seconds()
	fmt.Fprintf(p.w, "\r%s: %d/%d messages (%.0f/s)   ", p.label, p.n, p.total, rate)
}

func (p *progress) finish() {
	if p.w != nil && p.n > 0 {
		fmt.Fprintln(p.w)
	}
}
