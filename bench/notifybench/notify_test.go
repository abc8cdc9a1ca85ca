package notifybench

import (
	"bufio"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
)

var messagesFlag = flag.Int("messages", 500, "mails in the message → hook benchmark")

// hookRun is one run of the benchmark: a fresh workspace in ws with both
// hooks, n mails; the time from each mail's start to the 250 (durable),
// the url hook's POST, the exec hook's start and the inotify watcher's
// wake-up.
type hookRun struct{ durable, toURL, toExec, toWatch []time.Duration }

// BenchmarkMessageToHook: -messages mails a round, over -rounds rounds,
// each in a fresh workspace made before the first timed run (and, with
// -before, the other build's rounds interleaved with this one's).
func BenchmarkMessageToHook(b *testing.B) {
	n := *messagesFlag
	sides := []benchutil.Side{{Name: "courier"}}
	bins := []string{benchutil.CourierBin(b)}
	if *benchutil.BeforeFlag != "" {
		sides, bins = append(sides, benchutil.Side{Name: "before"}), append(bins, *benchutil.BeforeFlag)
	}
	runs := make([][]hookRun, len(sides))
	for i := range sides {
		sides[i].Run = func(b *testing.B, ws string, round int) {
			if round < 0 {
				hooks(b, bins[i], ws, min(n, benchutil.WarmN))
				return
			}
			runs[i] = append(runs[i], hooks(b, bins[i], ws, n))
		}
	}
	load := benchutil.Interleave(b, *benchutil.RoundsFlag, true, sides...)
	for i, side := range sides {
		reportHooks(b, side.Name, n, load, runs[i])
	}
}

// hooks runs `courier serve` (bin) in a fresh workspace ws with a url and
// an exec hook and hands its receiver n mails, one at a time.
func hooks(b *testing.B, bin, ws string, n int) hookRun {
	b.Helper()
	if out, err := exec.Command(bin, "--root", ws, "init").CombinedOutput(); err != nil {
		b.Fatalf("init: %v\n%s", err, out)
	}
	dir := filepath.Join(ws, "hook")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	fifo := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		b.Fatal(err)
	}
	ff, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer ff.Close()
	execStarted := make(chan time.Time, 16)
	go func() {
		sc := bufio.NewScanner(ff)
		for sc.Scan() {
			execStarted <- time.Now()
		}
	}()
	script := filepath.Join(dir, "hook.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$COURIER_MESSAGE_ID\" > \"$FIFO\"\n"), 0o755)
	posted := make(chan time.Time, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posted <- time.Now() }))
	defer srv.Close()

	recv, web := testutil.FreeAddr(b), testutil.FreeAddr(b)
	cfg := fmt.Sprintf(`courier:
  http: {listen: %s}
  log: {level: warn}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
  notify:
    - {name: url, url: %s, secret: bench}
    - {name: exec, exec: [%s], env: {FIFO: %s}}
`, web, recv, srv.URL, script, fifo)
	os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(cfg), 0o600)

	inbound := filepath.Join(ws, ".monoco/mailbox/inbound/email")
	os.MkdirAll(inbound, 0o750)
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		b.Fatal(err)
	}
	defer fw.Close()
	if err := fw.Add(inbound); err != nil {
		b.Fatal(err)
	}
	seen := make(chan time.Time, 16)
	go func() {
		for ev := range fw.Events {
			if ev.Has(fsnotify.Create) && strings.HasSuffix(ev.Name, ".md") {
				seen <- time.Now()
			}
		}
	}()

	s := testutil.StartServe(b, bin, web, "--root", ws, "serve")
	var r hookRun
	wait := func(c chan time.Time, what string, i int) time.Time {
		select {
		case t := <-c:
			return t
		case <-time.After(30 * time.Second):
			b.Fatalf("message %d: no %s in 30 s:\n%s", i, what, s.Log())
		}
		return time.Time{}
	}
	for i := 0; i < n; i++ {
		msg := fmt.Sprintf("From: ann@example.com\r\nTo: agent@example.com\r\nSubject: bench %d\r\nMessage-ID: <bench-%d@example.com>\r\nDate: %s\r\n\r\nbody %d\r\n",
			i, i, time.Now().Format(time.RFC1123Z), i)
		start := time.Now()
		if err := smtp.SendMail(recv, nil, "ann@example.com", []string{"agent@example.com"}, []byte(msg)); err != nil {
			b.Fatalf("message %d: %v", i, err)
		}
		r.durable = append(r.durable, time.Since(start))
		r.toWatch = append(r.toWatch, wait(seen, "inotify event", i).Sub(start))
		r.toURL = append(r.toURL, wait(posted, "POST", i).Sub(start))
		r.toExec = append(r.toExec, wait(execStarted, "exec hook start", i).Sub(start))
	}
	s.Stop(b)
	return r
}

// reportHooks reports the rounds of one side (courier, or -before's):
// each percentile's median (min-max) over the rounds, the hooks' against
// the durable file's, and the hooks' own share with its target.
func reportHooks(b *testing.B, side string, n int, load benchutil.Load, runs []hookRun) {
	b.Helper()
	series := func(f func(hookRun) []time.Duration) [][]time.Duration {
		out := make([][]time.Duration, len(runs))
		for i, r := range runs {
			out[i] = f(r)
		}
		return out
	}
	durable := series(func(r hookRun) []time.Duration { return r.durable })
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		d := benchutil.PctOfRounds(durable, p.q)
		benchutil.Report(b, fmt.Sprintf("%s: mail → durable file (the 250), %s over %d mails, median (min-max) of %d rounds; %s", side, p.name, n, len(runs), load),
			benchutil.SpreadMs(d), "", "1", "", "")
		row := func(what string, lat [][]time.Duration) {
			c := benchutil.PctOfRounds(lat, p.q)
			benchutil.Report(b, fmt.Sprintf("%s: %s, %s", side, what, p.name), benchutil.SpreadMs(c),
				"the durable file "+benchutil.Ms(benchutil.Median(d)), benchutil.Ratio(benchutil.Median(c), benchutil.Median(d)), "", "")
		}
		row("mail → url hook POST received", series(func(r hookRun) []time.Duration { return r.toURL }))
		row("mail → exec hook started", series(func(r hookRun) []time.Duration { return r.toExec }))
		row("mail → inotify watcher on inbound/ woken (baseline)", series(func(r hookRun) []time.Duration { return r.toWatch }))
	}
	// The hooks' own share: from the 250 (durable and indexed) to the
	// hook's start, per mail.
	for _, h := range []struct {
		what string
		lat  func(hookRun) []time.Duration
	}{{"url hook POST received", func(r hookRun) []time.Duration { return r.toURL }}, {"exec hook started", func(r hookRun) []time.Duration { return r.toExec }}} {
		added := series(func(r hookRun) []time.Duration {
			lat, out := h.lat(r), make([]time.Duration, len(r.durable))
			for i := range r.durable {
				out[i] = max(lat[i]-r.durable[i], 0)
			}
			return out
		})
		p50, p99 := benchutil.PctOfRounds(added, 0.5), benchutil.PctOfRounds(added, 0.99)
		benchutil.Report(b, fmt.Sprintf("%s: durable file (the 250) → %s, p50 / p99", side, h.what), benchutil.SpreadMs(p50)+" / "+benchutil.SpreadMs(p99),
			"", "", "p99 < 1 s", benchutil.Met(slices.Max(p99) < time.Second))
	}
}
