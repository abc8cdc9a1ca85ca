package benchutil

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Sampler is one side of a benchmark whose runs return samples: a
// latency per event, or one duration for the whole run. Run does a run of
// n events into dir, a fresh empty folder of its own.
type Sampler struct {
	Name  string // "courier", "before", or what the baseline is
	Run   func(b *testing.B, dir string, n int) []time.Duration
	Round [][]time.Duration // the samples of each timed round
}

// WarmN is how many events a warm-up run of a side does.
const WarmN = 100

// Sample runs the samplers interleaved (Interleave): one warm-up run of
// WarmN events each (none if n is smaller), then rounds rounds of n. A
// sampler made by courier for -before's binary is added when -before was
// given: the before/after of one run.
func Sample(b *testing.B, rounds, n int, courier func(bin string) func(*testing.B, string, int) []time.Duration, baselines ...*Sampler) ([]*Sampler, Load) {
	b.Helper()
	all := append([]*Sampler{{Name: "courier", Run: courier(CourierBin(b))}}, baselines...)
	if *BeforeFlag != "" {
		all = append(all, &Sampler{Name: "before", Run: courier(*BeforeFlag)})
	}
	sides := make([]Side, len(all))
	for i, s := range all {
		sides[i] = Side{Name: fmt.Sprintf("side%d", i), Run: func(b *testing.B, dir string, round int) {
			if round < 0 {
				s.Run(b, dir, min(n, WarmN))
				return
			}
			s.Round = append(s.Round, s.Run(b, dir, n))
		}}
	}
	load := Interleave(b, rounds, n > WarmN, sides...)
	return all, load
}

// ReportPcts reports the p50 and p99 of each round of samplers (courier,
// a baseline, maybe before), the min, median and max over the rounds, and
// the ratio of courier's median to the baseline's. target, when not zero,
// is what courier's p99 must stay under (its median over the rounds, and
// the worst round shown beside it).
func ReportPcts(b *testing.B, measure string, load Load, target time.Duration, s []*Sampler) {
	b.Helper()
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		c, bl := PctOfRounds(s[0].Round, p.q), PctOfRounds(s[1].Round, p.q)
		tgt, met := "", ""
		if target > 0 && p.name == "p99" {
			tgt = "< " + Ms(target)
			met = Met(Median(c) < target)
			if slices.Max(c) >= target {
				met += fmt.Sprintf(" (worst round %s)", Ms(slices.Max(c)))
			}
		}
		Report(b, fmt.Sprintf("%s, %s, median (min-max) of %d rounds; %s", measure, p.name, len(c), load), SpreadMs(c),
			s[1].Name+": "+SpreadMs(bl), Ratio(Median(c), Median(bl)), tgt, met)
		for _, o := range s[2:] {
			oc := PctOfRounds(o.Round, p.q)
			Report(b, fmt.Sprintf("  %s, %s", o.Name, p.name), SpreadMs(oc), "", Ratio(Median(oc), Median(bl)), "", "")
		}
	}
}

// ReportRuns reports samplers whose runs each return one duration, the
// time for n items: min, median and max over the rounds, and the rate.
func ReportRuns(b *testing.B, measure string, n int, load Load, s []*Sampler) {
	b.Helper()
	walls := make([][]time.Duration, len(s))
	for i, x := range s {
		for _, r := range x.Round {
			walls[i] = append(walls[i], r[0])
		}
	}
	rate := func(d []time.Duration) string {
		return fmt.Sprintf("%s, %.0f/s", Spread(d), float64(n)/Median(d).Seconds())
	}
	Report(b, fmt.Sprintf("%s, median (min-max) of %d rounds; %s", measure, len(walls[0]), load), rate(walls[0]),
		s[1].Name+": "+rate(walls[1]), Ratio(Median(walls[0]), Median(walls[1])), "", "")
	for i, o := range s[2:] {
		Report(b, "  "+o.Name, rate(walls[i+2]), "", Ratio(Median(walls[i+2]), Median(walls[1])), "", "")
	}
}
