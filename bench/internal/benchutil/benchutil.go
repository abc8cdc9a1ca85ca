// Package benchutil is what the benchmark packages under bench/ share: the
// courier binary they drive, the table rows they report, percentiles.
package benchutil

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	courierFlag = flag.String("courier", "", "the courier binary (default: built from ./cmd/courier for this run)")
	outFlag     = flag.String("out", "", "append the table rows, tab-separated, to this file (the bench/*.sh scripts print them)")
)

// CourierBin returns -courier, else a binary built now into a temp dir.
func CourierBin(b *testing.B) string {
	b.Helper()
	if *courierFlag != "" {
		return *courierFlag
	}
	bin := filepath.Join(b.TempDir(), "courier")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/monoco/courier/cmd/courier").CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/courier: %v\n%s", err, out)
	}
	return bin
}

// Report logs a row and appends it to -out: measure, courier, baseline,
// ratio, target, met.
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
	fmt.Fprintln(f, strings.Join(cols, "\t"))
}

// Pct is the p-quantile (0..1) of d.
func Pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// Ms formats d in milliseconds.
func Ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
