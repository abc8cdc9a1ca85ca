// Package benchutil is what the benchmark packages under bench/ share: the
// courier binary they drive, the table rows they report, percentiles, and
// the method that makes their figures measure the code rather than the
// disk's mood (Interleave: the sides alternate, each run in a folder of its
// own made before the first timed run, nothing deleted until the end).
package benchutil

import (
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	// CourierFlag is -courier: the binary under test.
	CourierFlag = flag.String("courier", "", "the courier binary (default: built from ./cmd/courier for this run)")
	// BeforeFlag is -before: another build, run as one more side (a
	// before/after in one run).
	BeforeFlag = flag.String("before", "", "another courier binary, run as one more side of each benchmark (a before/after in one run)")
	// RoundsFlag is -rounds: how many times each side runs, interleaved.
	RoundsFlag = flag.Int("rounds", 3, "rounds: each side runs once a round, the order rotating (min, median and max are reported)")
	outFlag    = flag.String("out", "", "append the table rows, tab-separated, to this file (the bench/*.sh scripts print them)")
)

// CourierBin returns -courier, else a binary built now into a temp dir.
func CourierBin(b *testing.B) string {
	b.Helper()
	if *CourierFlag != "" {
		return *CourierFlag
	}
	bin := filepath.Join(b.TempDir(), "courier")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/monoco/courier/cmd/courier").CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/courier: %v\n%s", err, out)
	}
	return bin
}

// Report logs a row and appends it to -out: measure, courier, baseline,
// ratio, target, met (the email table has a floor column too).
func Report(b *testing.B, cols ...string) {
	b.Helper()
	b.Log(strings.Join(cols, " | "))
	if *outFlag == "" {
		return
	}
	f, err := os.OpenFile(*outFlag, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, strings.Join(cols, "\t")); err != nil {
		b.Fatal(err)
	}
}

// Met is the table's "met" column.
func Met(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// Pct is the p-quantile (0..1, nearest rank) of d.
func Pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Median is the median of d (the lower one of an even count).
func Median(d []time.Duration) time.Duration { return Pct(d, 0.5) }

// Ms formats d in milliseconds.
func Ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// Secs formats d in seconds.
func Secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// Spread is "median (min-max)" of d in seconds: "3.81 s (3.50-4.20)".
func Spread(d []time.Duration) string {
	return fmt.Sprintf("%s (%.2f-%.2f)", Secs(Median(d)), slices.Min(d).Seconds(), slices.Max(d).Seconds())
}

// SpreadMs is Spread in milliseconds: "3.38 ms (3.10-3.90)".
func SpreadMs(d []time.Duration) string {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("%s (%.2f-%.2f)", Ms(Median(d)), ms(slices.Min(d)), ms(slices.Max(d)))
}

// PctOfRounds is the p-quantile of each round's samples, one per round:
// a latency benchmark's percentile, whose min, median and max over the
// rounds Spread and SpreadMs give.
func PctOfRounds(rounds [][]time.Duration, p float64) []time.Duration {
	out := make([]time.Duration, len(rounds))
	for i, r := range rounds {
		out[i] = Pct(r, p)
	}
	return out
}

// Ratio is a/b as "1.23×".
func Ratio(a, b time.Duration) string { return fmt.Sprintf("%.2f×", float64(a)/float64(b)) }

// Loadavg is the 1, 5 and 15 minute load averages, as /proc/loadavg says.
func Loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// Side is one column of an interleaved benchmark: Run does one run of it
// into dir, a fresh empty folder of its own; round is -1 for the untimed
// warm-up, then 0, 1, ... Run keeps what it measured.
type Side struct {
	Name string
	Run  func(b *testing.B, dir string, round int)
}

// Load is the load average before the first timed run and after the last.
type Load struct{ Before, After string }

func (l Load) String() string { return "load " + l.Before + " -> " + l.After }

// Interleave runs each side once untimed (when warm), then rounds rounds
// of all of them, the order rotating each round so that drift in the
// machine hits all alike. Every run gets a folder of its own under a temp
// dir, all created before the first run, and nothing is deleted until the
// benchmark ends: on ext4 without a journal, creating files right after
// thousands were deleted scans past the deleted inodes and slows whichever
// run comes next 2-3×. The page cache is synced before each timed run so
// that the previous run's writes are not billed to it.
func Interleave(b *testing.B, rounds int, warm bool, sides ...Side) Load {
	b.Helper()
	base := b.TempDir()
	dir := func(s Side, i int) string { return filepath.Join(base, fmt.Sprintf("%s.%d", s.Name, i)) }
	for i := -1; i < rounds; i++ {
		for _, s := range sides {
			if err := os.MkdirAll(dir(s, i), 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	if warm {
		for _, s := range sides {
			s.Run(b, dir(s, -1), -1)
		}
	}
	load := Load{Before: Loadavg()}
	for i := range rounds {
		for k := range sides {
			s := sides[(i+k)%len(sides)]
			syscall.Sync()
			s.Run(b, dir(s, i), i)
		}
	}
	load.After = Loadavg()
	b.Logf("%s", load)
	return load
}
