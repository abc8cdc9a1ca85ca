package benchutil

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestInterleave: the sides alternate, the order rotating each round,
// after one warm-up run of each; every run has a folder of its own, all
// made before the first run, and no run's folder is gone when a later run
// starts (issue 21: a benchmark that deleted its trees between runs
// measured the disk's state after the deletion).
func TestInterleave(t *testing.T) {
	var order []string
	var dirs []string
	ran := false
	testing.Benchmark(func(b *testing.B) { // called again with a larger b.N: once is the test
		if ran {
			return
		}
		ran = true
		run := func(name string) Side {
			return Side{Name: name, Run: func(b *testing.B, dir string, round int) {
				if round == -1 && len(dirs) == 0 { // the first run: every folder is there
					ents, err := os.ReadDir(filepath.Dir(dir))
					if err != nil || len(ents) != 3*4 {
						t.Errorf("before the first run, %d folders (%v), want 12", len(ents), err)
					}
				}
				for _, d := range dirs {
					if _, err := os.Stat(d); err != nil {
						t.Errorf("%s of an earlier run is gone: %v", d, err)
					}
				}
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Errorf("%s is not empty", dir)
				}
				os.WriteFile(filepath.Join(dir, "f"), nil, 0o600)
				dirs = append(dirs, dir)
				order = append(order, name+string(rune('0'+round+1)))
			}}
		}
		Interleave(b, 3, true, run("a"), run("b"), run("c"))
	})
	want := []string{"a0", "b0", "c0", "a1", "b1", "c1", "b2", "c2", "a2", "c3", "a3", "b3"}
	if !slices.Equal(order, want) {
		t.Errorf("runs in the order %v, want %v", order, want)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(dirs)))) != len(dirs) {
		t.Errorf("two runs shared a folder: %v", dirs)
	}
}

func TestSpreadAndPct(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	if got := SpreadMs(ms(5, 1, 3)); got != "3.00 ms (1.00-5.00)" {
		t.Errorf("SpreadMs = %q", got)
	}
	if got := Spread(ms(2500, 1000, 4000)); got != "2.50 s (1.00-4.00)" {
		t.Errorf("Spread = %q", got)
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	if got := Pct(ms(hundred...), 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms = %v, want 99ms", got)
	}
	rounds := [][]time.Duration{ms(1, 2, 3), ms(7, 8, 9), ms(4, 5, 6)}
	if got := PctOfRounds(rounds, 0.5); !slices.Equal(got, ms(2, 8, 5)) {
		t.Errorf("PctOfRounds = %v", got)
	}
}
