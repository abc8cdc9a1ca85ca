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
	writeConfig(b, ws, fetchConfig(d))
	r := timed(b, nil, courierBin(b), "--root", ws, "fetch")
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

// BenchmarkFetch: `courier fetch` of -n realistic messages (5,000, 23 MB)
// from a local Dovecot, with the full normalisation (Markdown files,
// attachments and raw messages in the dropzone, index, checkpoints, every
// file durable), against mbsync pulling the same folder into a Maildir
// with its default FSync. Each run starts from nothing: a fresh workspace
// for courier, a fresh Maildir and sync state for mbsync. The two
// alternate, so that drift in the machine hits both; one untimed run of
// each warms Dovecot's index and cache and the page cache first.
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
	one := func(i int, courier bool) run {
		// A fresh folder each run, and the previous runs' writes flushed
		// first so that they are not billed to this one. Earlier runs are
		// kept until the end: deleting thousands of files makes ext4
		// allocate new inodes slowly for a while (it skips recently
		// deleted ones), which would slow whichever run comes next.
		syscall.Sync()
		dir := filepath.Join(base, fmt.Sprintf("run%d", i))
		if courier {
			return courierFetch(b, d, dir, n)
		}
		return mbsyncFetch(b, d, dir, n)
	}
	one(-1, true) // warm-up
	one(-2, false)
	var cw, mw []time.Duration
	var crss, mrss []int64
	for i := range *runsFlag {
		for _, courier := range []bool{i%2 == 0, i%2 != 0} {
			r := one(i, courier)
			if courier {
				cw, crss = append(cw, r.Wall), append(crss, r.RSS)
			} else {
				mw, mrss = append(mw, r.Wall), append(mrss, r.RSS)
			}
		}
	}
	c, m := median(cw), median(mw)
	b.ReportMetric(c.Seconds(), "courier-s")
	b.ReportMetric(m.Seconds(), "mbsync-s")
	b.ReportMetric(c.Seconds()/m.Seconds(), "ratio")
	b.ReportMetric(float64(slices.Max(crss))/(1<<20), "courier-peak-MB")
	b.Logf("each run: courier %v, mbsync %v", rounded(cw), rounded(mw))
	report(b,
		row{fmt.Sprintf("fetch %d messages (%.1f MB) from Dovecot, wall, median of %d", n, float64(size)/1e6, len(cw)),
			fmt.Sprintf("%s (%.0f msg/s)", secs(c), float64(n)/c.Seconds()),
			fmt.Sprintf("mbsync, FSync on: %s (%.0f msg/s)", secs(m), float64(n)/m.Seconds()),
			ratio(c.Seconds(), m.Seconds()), "<= 0.80x", met(c.Seconds() <= 0.8*m.Seconds())},
		row{"courier fetch peak RSS (GNU time %M), median / max",
			fmt.Sprintf("%s / %s", mb(medianInt(crss)), mb(slices.Max(crss))),
			fmt.Sprintf("mbsync: %s", mb(medianInt(mrss))),
			ratio(float64(medianInt(crss)), float64(medianInt(mrss))), "< 64 MB", met(slices.Max(crss) < 64<<20)},
	)
}

// largeAttachment is the attachment of BenchmarkFetchLargeAttachment:
// 100 MB (10^8 bytes, under the default max_artifact_bytes of 100 MiB),
// a 137 MB message once base64-encoded.
const largeAttachment = 100_000_000

// BenchmarkFetchLargeAttachment: the peak RSS of `courier fetch` of one
// message carrying a 100 MB attachment, minus that of fetching one typical
// 4.6 KB message (each into a fresh workspace, each from its own Dovecot):
// what the attachment costs in memory. mbsync does the same beside it.
// Medians of min(-runs, 3).
func BenchmarkFetchLargeAttachment(b *testing.B) {
	big, small := testutil.StartDovecot(b), testutil.StartDovecot(b)
	big.Deliver(b, "INBOX", largeMessage(largeAttachment))
	small.Deliver(b, "INBOX", syntheticMessage(4)) // with a small attachment: the same code path
	base := b.TempDir()
	courierBin(b)
	var cBig, cSmall, mBig, mSmall []int64
	var cBigWall []time.Duration
	for i := range min(*runsFlag, 3) {
		syscall.Sync() // the wall time reported is the large fetch's
		dir := func(s string) string { return filepath.Join(base, fmt.Sprintf("%s%d", s, i)) }
		r := courierFetch(b, big, dir("cbig"), 1)
		if !hasArtifact(b, dir("cbig"), largeAttachment) {
			b.Fatalf("no %d-byte artifact in the dropzone after fetching the large message", largeAttachment)
		}
		cBig, cBigWall = append(cBig, r.RSS), append(cBigWall, r.Wall)
		cSmall = append(cSmall, courierFetch(b, small, dir("csmall"), 1).RSS)
		mBig = append(mBig, mbsyncFetch(b, big, dir("mbig"), 1).RSS)
		mSmall = append(mSmall, mbsyncFetch(b, small, dir("msmall"), 1).RSS)
		for _, s := range []string{"cbig", "csmall", "mbig", "msmall"} {
			os.RemoveAll(dir(s))
		}
	}
	cd := medianInt(cBig) - medianInt(cSmall)
	md := medianInt(mBig) - medianInt(mSmall)
	b.ReportMetric(float64(cd)/(1<<20), "courier-added-MB")
	b.ReportMetric(float64(md)/(1<<20), "mbsync-added-MB")
	report(b, row{fmt.Sprintf("100 MB attachment: peak RSS added (vs a 4.6 KB message), median of %d; fetch took %s", len(cBig), secs(median(cBigWall))),
		fmt.Sprintf("+%s (%s - %s)", mb(cd), mb(medianInt(cBig)), mb(medianInt(cSmall))),
		fmt.Sprintf("mbsync: +%s (%s - %s)", mb(md), mb(medianInt(mBig)), mb(medianInt(mSmall))),
		ratio(float64(cd), float64(md)), "< 16 MB", met(cd < 16<<20)})
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
