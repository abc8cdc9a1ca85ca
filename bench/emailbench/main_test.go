package emailbench

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
)

var (
	// -courier, -before and -out are benchutil's, shared by every bench
	// package; -before is a fourth side of the fetch benchmark and one
	// more side of the others (a before/after in one run).
	courierFlag = benchutil.CourierFlag
	beforeFlag  = benchutil.BeforeFlag
	floorFlag   = flag.String("floor", "", "the bare go-imap client of the fetch benchmark (default: built from ./bench/imapfloor for this run)")
	runsFlag    = flag.Int("runs", 5, "runs of each side of the fetch benchmark (the median is reported; the others do at most 3 rounds)")
	fetchNFlag  = flag.Int("n", 5000, "messages in the fetch benchmark")
	samplesFlag = flag.Int("samples", 50, "IDLE push samples")
	draftsFlag  = flag.Int("drafts", 1000, "drafts in the send benchmark")
	pacedFlag   = flag.Int("paced", 200, "drafts queued one `courier send` at a time, for the unloaded latency")
	prefillFlag = flag.Int("prefill", 0, "inbound messages in the send benchmark's mailbox before it starts")
)

// builds are the binaries built for this run, by package; removed at exit.
var (
	buildMu  sync.Mutex
	buildDir string
	builds   = map[string]string{}
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// courierBin returns the binary under test: -courier, else one built now.
func courierBin(b *testing.B) string {
	b.Helper()
	return binary(b, *courierFlag, "github.com/monoco/courier/cmd/courier")
}

// floorBin returns the fetch benchmark's floor: -floor, else one built now.
func floorBin(b *testing.B) string {
	b.Helper()
	return binary(b, *floorFlag, "github.com/monoco/courier/bench/imapfloor")
}

// binary returns given if set, else pkg built once for this run.
func binary(b *testing.B, given, pkg string) string {
	b.Helper()
	if given != "" {
		return given
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := builds[pkg]; ok {
		return bin
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "emailbench-bin-")
		if err != nil {
			b.Fatal(err)
		}
		buildDir = d
	}
	bin := filepath.Join(buildDir, filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	builds[pkg] = bin
	return bin
}

// needCommand returns the path of a program the baseline needs, or fails:
// a benchmark without its baseline is not the benchmark asked for.
func needCommand(b *testing.B, name, pkg string) string {
	b.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		b.Fatalf("%s is not installed (Debian: apt-get install %s; scripts/test.sh installs it)", name, pkg)
	}
	return p
}

// row is one line of the table bench/email.sh prints. Floor is the fetch
// benchmark's third column (the bare go-imap client), empty elsewhere.
type row struct {
	Measure, Courier, Baseline, Floor, Ratio, Target, Met string
}

// report appends rows to -out and logs them.
func report(b *testing.B, rows ...row) {
	b.Helper()
	for _, r := range rows {
		benchutil.Report(b, r.Measure, r.Courier, r.Baseline, r.Floor, r.Ratio, r.Target, r.Met)
	}
}

func met(ok bool) string { return benchutil.Met(ok) }

// The method's helpers, shared with the other bench packages.
var (
	median  = benchutil.Median
	spread  = benchutil.Spread
	loadavg = benchutil.Loadavg
)

// run is one timed process.
type run struct {
	Wall time.Duration
	RSS  int64         // peak resident set, bytes (GNU time %M)
	CPU  time.Duration // user + system CPU time (GNU time %U + %S)
	Out  string
}

// timed runs name args... under GNU time (/usr/bin/time -f %M, as a user
// would measure it) and returns its wall time, measured here around the
// whole process, its peak RSS and its CPU time. A failure fails the
// benchmark.
func timed(b *testing.B, stdin []byte, name string, args ...string) run {
	b.Helper()
	tf, err := os.CreateTemp("", "emailbench-time-")
	if err != nil {
		b.Fatal(err)
	}
	tf.Close()
	defer os.Remove(tf.Name())
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%U %S %M", "-o", tf.Name(), name}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	data, err := os.ReadFile(tf.Name())
	if err != nil {
		b.Fatal(err)
	}
	// GNU time writes "Command exited with non-zero status" lines before
	// the format when the command failed; the last line is ours.
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) != 3 {
		b.Fatalf("GNU time wrote %q", data)
	}
	user, err1 := strconv.ParseFloat(fields[0], 64)
	sys, err2 := strconv.ParseFloat(fields[1], 64)
	kb, err3 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		b.Fatalf("GNU time wrote %q", data)
	}
	cpu := time.Duration((user + sys) * float64(time.Second))
	return run{Wall: wall, RSS: kb * 1024, CPU: cpu, Out: out.String()}
}

// quantile returns the q-quantile (nearest rank) of ds.
func quantile(ds []time.Duration, q float64) time.Duration { return benchutil.Pct(ds, q) }

// rounded returns ds to the millisecond, for logs.
func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func medianInt(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func secs(d time.Duration) string { return benchutil.Secs(d) }
func msecs(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}
func mb(n int64) string         { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
func ratio(a, b float64) string { return fmt.Sprintf("%.2fx", a/b) }

// writeConfig writes ws/.monoco/config/courier.yaml.
func writeConfig(b *testing.B, ws, cfg string) {
	b.Helper()
	p := filepath.Join(ws, ".monoco", "config", "courier.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
}

// countFiles returns the number of *.md files in dir.
func countFiles(b *testing.B, dir string) int {
	b.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".md") {
			n++
		}
	}
	return n
}

// startServe starts `bin --root ws serve` and waits until /health on
// httpAddr says it started; the process is killed in b.Cleanup if still
// running.
func startServe(b *testing.B, bin, ws, httpAddr string) *testutil.Serve {
	b.Helper()
	return testutil.StartServe(b, bin, httpAddr, "--root", ws, "serve", "--log-level", "warn", "--log-format", "text")
}
