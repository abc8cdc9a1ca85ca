package emailbench

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
)

// fetchConfig is a workspace config with one IMAP account on d and nothing
// else (no receiver).
func fetchConfig(d *testutil.Dovecot) string {
	return fmt.Sprintf(`courier:
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: bench
          addresses: [agent@monoco.dev]
          imap: {host: %s, port: %d, tls: none, username: %s, password: %s, mode: idle}
`, d.Host, d.Port, d.User, d.Password)
}

var fetchedRE = regexp.MustCompile(`fetched (\d+) new message`)

// courierFetch runs `courier fetch` into a fresh workspace ws and checks
// that it wrote want files.
func courierFetch(b *testing.B, d *testutil.Dovecot, ws string, want int) run {
	b.Helper()
	return fetchWith(b, courierBin(b), d, ws, want)
}

// fetchWith is courierFetch with the courier binary bin.
func fetchWith(b *testing.B, bin string, d *testutil.Dovecot, ws string, want int) run {
	b.Helper()
	writeConfig(b, ws, fetchConfig(d))
	r := timed(b, nil, bin, "--root", ws, "fetch")
	m := fetchedRE.FindStringSubmatch(r.Out)
	if m == nil {
		b.Fatalf("courier fetch said:\n%s", r.Out)
	}
	if n, _ := strconv.Atoi(m[1]); n != want {
		b.Fatalf("courier fetch wrote %d messages, want %d:\n%s", n, want, r.Out)
	}
	if n := countFiles(b, filepath.Join(ws, ".monoco/mailbox/inbound/email")); n != want {
		b.Fatalf("inbound/email holds %d files, want %d", n, want)
	}
	return r
}

// mbsyncFetch runs mbsync (its defaults: FSync yes) into a fresh Maildir
// and sync state under dir and checks that it wrote want messages.
func mbsyncFetch(b *testing.B, d *testutil.Dovecot, dir string, want int) run {
	b.Helper()
	rc := d.WriteMbsyncConfig(b, dir)
	r := timed(b, nil, needCommand(b, "mbsync", "isync"), "-q", "-c", rc, "-a")
	n := 0
	for _, sub := range []string{"cur", "new"} {
		ents, err := os.ReadDir(filepath.Join(dir, "INBOX", sub))
		if err != nil {
			b.Fatal(err)
		}
		n += len(ents)
	}
	if n != want {
		b.Fatalf("mbsync wrote %d messages, want %d:\n%s", n, want, r.Out)
	}
	return r
}

// floorFetch runs the bare go-imap client (bench/imapfloor) into a fresh
// directory dir and checks that it wrote want files.
func floorFetch(b *testing.B, d *testutil.Dovecot, dir string, want int) run {
	b.Helper()
	r := timed(b, nil, floorBin(b), "-addr", d.Addr, "-user", d.User, "-pass", d.Password, "-dir", dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	if len(ents) != want {
		b.Fatalf("the floor wrote %d messages, want %d:\n%s", len(ents), want, r.Out)
	}
	return r
}

// fetchSide is one column of BenchmarkFetch.
type fetchSide struct {
	name  string
	fetch func(*testing.B, *testutil.Dovecot, string, int) run
	runs  []run
}

func (s *fetchSide) walls() []time.Duration {
	out := make([]time.Duration, len(s.runs))
	for i, r := range s.runs {
		out[i] = r.Wall
	}
	return out
}

// BenchmarkFetch: `courier fetch` of -n realistic messages (5,000, 23 MB)
// from a local Dovecot, with the full normalisation (Markdown files,
// attachments and raw messages in the dropzone, index, checkpoints, every
// file durable), beside mbsync pulling the same folder into a Maildir with
// its default FSync, and beside the floor: a bare go-imap v2 client that
// writes one file per message and one syncfs per 250 (bench/imapfloor).
//
// The three interleave, the order rotating every round, so that drift in
// the machine hits all; one untimed run of each warms Dovecot and the page
// cache first. Every run writes into a folder of its own, all created
// before the first timed run, and nothing is deleted until the end:
// deleting thousands of files makes ext4 (without a journal) allocate new
// inodes slowly for a while, which would slow whichever run comes next.
// The load average is reported from before and after.
func BenchmarkFetch(b *testing.B) {
	n := *fetchNFlag
	d := testutil.StartDovecot(b)
	d.DeliverMany(b, "INBOX", syntheticMessage, n)
	var size int64
	for i := range n {
		size += int64(len(syntheticMessage(i)))
	}
	base := b.TempDir()
	courierBin(b)
	floorBin(b)
	sides := []*fetchSide{{name: "courier", fetch: courierFetch}, {name: "mbsync", fetch: mbsyncFetch}, {name: "floor", fetch: floorFetch}}
	if *beforeFlag != "" { // a fourth side: another build, for a before/after in one run
		sides = append(sides, &fetchSide{name: "before", fetch: func(b *testing.B, d *testutil.Dovecot, dir string, n int) run {
			return fetchWith(b, *beforeFlag, d, dir, n)
		}})
	}
	dir := func(s *fetchSide, i int) string { return filepath.Join(base, fmt.Sprintf("%s%d", s.name, i)) }
	for i := -1; i < *runsFlag; i++ {
		for _, s := range sides {
			if err := os.MkdirAll(dir(s, i), 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, s := range sides { // warm-up
		s.fetch(b, d, dir(s, -1), n)
	}
	load0 := loadavg()
	for i := range *runsFlag {
		for k := range sides {
			s := sides[(i+k)%len(sides)]
			syscall.Sync() // the previous runs' writes are not billed to this one
			s.runs = append(s.runs, s.fetch(b, d, dir(s, i), n))
		}
	}
	load1 := loadavg()
	reportFetch(b, n, size, sides, load0, load1)
}

// reportFetch reports BenchmarkFetch's sides: courier, mbsync, floor.
func reportFetch(b *testing.B, n int, size int64, sides []*fetchSide, load0, load1 string) {
	c, m, f := sides[0], sides[1], sides[2]
	cw, mw, fw := median(c.walls()), median(m.walls()), median(f.walls())
	var cpu []time.Duration
	var rss []int64
	for _, r := range c.runs {
		cpu, rss = append(cpu, r.CPU), append(rss, r.RSS)
	}
	b.ReportMetric(cw.Seconds(), "courier-s")
	b.ReportMetric(mw.Seconds(), "mbsync-s")
	b.ReportMetric(fw.Seconds(), "floor-s")
	b.ReportMetric(cw.Seconds()/fw.Seconds(), "floor-ratio")
	b.ReportMetric(cw.Seconds()/mw.Seconds(), "mbsync-ratio")
	b.ReportMetric(median(cpu).Seconds(), "courier-cpu-s")
	b.ReportMetric(float64(slices.Max(rss))/(1<<20), "courier-peak-MB")
	for _, s := range sides {
		b.Logf("each run, %s: %v", s.name, rounded(s.walls()))
	}
	b.Logf("load average before: %s, after: %s", load0, load1)
	if len(sides) > 3 {
		before := sides[3]
		var bcpu []time.Duration
		for _, r := range before.runs {
			bcpu = append(bcpu, r.CPU)
		}
		report(b, row{"-before build: fetch wall, median (min-max); CPU, median", spread(before.walls()) + "; CPU " + secs(median(bcpu)),
			"", "", fmt.Sprintf("%s floor, %s mbsync", ratio(median(before.walls()).Seconds(), fw.Seconds()), ratio(median(before.walls()).Seconds(), mw.Seconds())), "", ""})
	}
	report(b,
		row{fmt.Sprintf("fetch %d messages (%.1f MB) from Dovecot, wall, median (min-max) of %d; load %s -> %s", n, float64(size)/1e6, len(c.runs), load0, load1),
			spread(c.walls()),
			"mbsync, FSync on: " + spread(m.walls()),
			"bare go-imap: " + spread(f.walls()),
			fmt.Sprintf("%s floor, %s mbsync", ratio(cw.Seconds(), fw.Seconds()), ratio(cw.Seconds(), mw.Seconds())),
			"<= 2.50x floor (goal 2x)", met(cw.Seconds() <= 2.5*fw.Seconds())},
		row{"CPU time (user + system), median (min-max): what each side costs whatever the load",
			spread(cpu), "mbsync: " + spread(cpusOf(m)), "bare go-imap: " + spread(cpusOf(f)),
			fmt.Sprintf("%s floor, %s mbsync", ratio(median(cpu).Seconds(), median(cpusOf(f)).Seconds()), ratio(median(cpu).Seconds(), median(cpusOf(m)).Seconds())), "", ""},
		row{"courier fetch peak RSS (GNU time %M), median / max",
			fmt.Sprintf("%s / %s", mb(medianInt(rss)), mb(slices.Max(rss))),
			fmt.Sprintf("mbsync: %s", mb(medianInt(rssOf(m)))), "",
			ratio(float64(medianInt(rss)), float64(medianInt(rssOf(m)))), "< 64 MB", met(slices.Max(rss) < 64<<20)},
	)
}

func cpusOf(s *fetchSide) []time.Duration {
	out := make([]time.Duration, len(s.runs))
	for i, r := range s.runs {
		out[i] = r.CPU
	}
	return out
}

func rssOf(s *fetchSide) []int64 {
	out := make([]int64, len(s.runs))
	for i, r := range s.runs {
		out[i] = r.RSS
	}
	return out
}

// largeAttachment is the attachment of BenchmarkFetchLargeAttachment:
// 100 MB (10^8 bytes, under the default max_artifact_bytes of 100 MiB),
// a 137 MB message once base64-encoded.
const largeAttachment = 100_000_000

// BenchmarkFetchLargeAttachment: the peak RSS of `courier fetch` of one
// message carrying a 100 MB attachment, minus that of fetching one typical
// 4.6 KB message (each from its own Dovecot): what the attachment costs
// in memory. mbsync does the same beside it (and -before's build, if
// given). The sides interleave over min(-runs, 3) rounds after a warm-up
// (benchutil.Interleave), each run into a folder of its own, nothing
// deleted until the end; medians.
func BenchmarkFetchLargeAttachment(b *testing.B) {
	big, small := testutil.StartDovecot(b), testutil.StartDovecot(b)
	big.Deliver(b, "INBOX", largeMessage(largeAttachment))
	small.Deliver(b, "INBOX", syntheticMessage(4)) // with a small attachment: the same code path
	type fetcher struct {
		name  string
		fetch func(*testing.B, *testutil.Dovecot, string, int) run
	}
	fetchers := []fetcher{{"courier", courierFetch}, {"mbsync", mbsyncFetch}}
	if *beforeFlag != "" {
		fetchers = append(fetchers, fetcher{"before", func(b *testing.B, d *testutil.Dovecot, ws string, n int) run {
			return fetchWith(b, *beforeFlag, d, ws, n)
		}})
	}
	bigRuns, smallRuns := make([][]run, len(fetchers)), make([][]run, len(fetchers))
	var sides []benchutil.Side
	for i, f := range fetchers {
		sides = append(sides, benchutil.Side{Name: f.name + "-big", Run: func(b *testing.B, dir string, round int) {
			r := f.fetch(b, big, dir, 1)
			if f.name != "mbsync" && !hasArtifact(b, dir, largeAttachment) {
				b.Fatalf("%s: no %d-byte artifact in the dropzone after fetching the large message", f.name, largeAttachment)
			}
			if round >= 0 {
				bigRuns[i] = append(bigRuns[i], r)
			}
		}}, benchutil.Side{Name: f.name + "-small", Run: func(b *testing.B, dir string, round int) {
			if r := f.fetch(b, small, dir, 1); round >= 0 {
				smallRuns[i] = append(smallRuns[i], r)
			}
		}})
	}
	load := benchutil.Interleave(b, min(*runsFlag, 3), true, sides...)
	rss := func(runs []run) int64 {
		out := make([]int64, len(runs))
		for i, r := range runs {
			out[i] = r.RSS
		}
		return medianInt(out)
	}
	added := make([]int64, len(fetchers))
	for i := range fetchers {
		added[i] = rss(bigRuns[i]) - rss(smallRuns[i])
	}
	cd, md := added[0], added[1]
	b.ReportMetric(float64(cd)/(1<<20), "courier-added-MB")
	b.ReportMetric(float64(md)/(1<<20), "mbsync-added-MB")
	wall := func(runs []run) []time.Duration {
		out := make([]time.Duration, len(runs))
		for i, r := range runs {
			out[i] = r.Wall
		}
		return out
	}
	report(b, row{fmt.Sprintf("100 MB attachment: peak RSS added (vs a 4.6 KB message), median of %d; fetch took %s; %s", len(bigRuns[0]), spread(wall(bigRuns[0])), load),
		fmt.Sprintf("%+.1f MB (%s - %s)", float64(cd)/(1<<20), mb(rss(bigRuns[0])), mb(rss(smallRuns[0]))),
		fmt.Sprintf("mbsync: %+.1f MB (%s - %s), fetch took %s", float64(md)/(1<<20), mb(rss(bigRuns[1])), mb(rss(smallRuns[1])), spread(wall(bigRuns[1]))),
		"", ratio(float64(cd), float64(md)), "< 16 MB", met(cd < 16<<20)})
	if len(fetchers) > 2 {
		report(b, row{"  -before build", fmt.Sprintf("%+.1f MB, fetch took %s", float64(added[2])/(1<<20), spread(wall(bigRuns[2]))), "", "", "", "< 16 MB", met(added[2] < 16<<20)})
	}
}

// hasArtifact reports whether ws's dropzone holds a file of size bytes.
func hasArtifact(b *testing.B, ws string, size int64) bool {
	b.Helper()
	found := false
	filepath.WalkDir(filepath.Join(ws, ".monoco/dropzone"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil && fi.Size() == size {
				found = true
			}
		}
		return nil
	})
	return found
}
