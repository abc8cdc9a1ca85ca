package emailbench

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	// Only adapters/email may import the emersion libraries in production
	// code (STYLE.md); a benchmark's own IMAP clients may: they are test
	// code, the stand-ins for another mail client and for a bare IDLE
	// client.
	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
)

// imapLogin dials d and logs in.
func imapLogin(b *testing.B, d *testutil.Dovecot, opts *imapclient.Options) *imapclient.Client {
	b.Helper()
	c, err := imapclient.DialInsecure(d.Addr, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if err := c.Login(d.User, d.Password).Wait(); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkIdlePush: `courier serve` waits in IDLE on a local Dovecot's
// INBOX; another client APPENDs a message (4.6 KB, multipart) and the time
// from the APPEND until its file appears in inbound/email/ (fsnotify on
// the folder) is one sample.
//
// The baseline, on the same APPENDs: a bare IDLE client (go-imap: EXAMINE
// INBOX, as Courier does, then IDLE and nothing else) and the time until
// its EXISTS. That is Dovecot's own notification delay, which no client
// can beat: Dovecot 2.3 waits NOTIFY_DELAY_MSECS (500 ms, hard-coded in
// src/lib-storage/mailbox-watch.c) after inotify fires before it tells an
// IDLE session. Each sample thus also gives Courier's own share: its file
// time minus the bare client's EXISTS time.
//
// APPENDs are 600-900 ms apart (after the previous sample is complete):
// any change to the mailbox's files, Courier's own reads included (they
// update Dovecot's cache file), starts that 500 ms timer in every IDLE
// session, and an APPEND landing inside a running timer is announced
// early. Mail that arrives seconds apart, as it does, always waits the
// full delay; so does every sample here.
//
// -samples samples a round over min(-runs, 3) rounds, each with a fresh
// Dovecot and a fresh workspace made before the first timed round, after
// a short warm-up (benchutil.Interleave; -before: that build's rounds
// interleaved with this one's); each percentile's median (min-max) over
// the rounds.
func BenchmarkIdlePush(b *testing.B) {
	n := *samplesFlag
	bins := []string{courierBin(b)}
	sides := []benchutil.Side{{Name: "courier"}}
	if *beforeFlag != "" {
		bins, sides = append(bins, *beforeFlag), append(sides, benchutil.Side{Name: "before"})
	}
	runs := make([][]idleRun, len(sides))
	for i := range sides {
		sides[i].Run = func(b *testing.B, ws string, round int) {
			if round < 0 {
				idleRound(b, bins[i], ws, min(n, 3))
				return
			}
			runs[i] = append(runs[i], idleRound(b, bins[i], ws, n))
		}
	}
	load := benchutil.Interleave(b, min(*runsFlag, 3), true, sides...)
	for i, side := range sides {
		reportIdle(b, side.Name, n, load, runs[i])
	}
}

// idleRun is one round of BenchmarkIdlePush: per sample, APPEND -> file,
// APPEND -> the bare client's EXISTS, the difference, and the APPEND's
// round trip.
type idleRun struct{ courier, floor, own, appendRTT []time.Duration }

// idleRound runs `courier serve` (bin) on a fresh Dovecot into the fresh
// workspace ws and takes n samples.
func idleRound(b *testing.B, bin, ws string, n int) idleRun {
	b.Helper()
	d := testutil.StartDovecot(b)
	d.Deliver(b, "INBOX", syntheticMessage(999))
	httpAddr := testutil.FreeAddr(b)
	writeConfig(b, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: bench
          addresses: [agent@monoco.dev]
          imap: {host: %s, port: %d, tls: none, username: %s, password: %s, mode: idle}
`, httpAddr, d.Host, d.Port, d.User, d.Password))
	inbound := filepath.Join(ws, ".monoco/mailbox/inbound/email")

	srv := startServe(b, bin, ws, httpAddr)
	// The first message is backfilled: the source has synced and is about
	// to IDLE.
	if !testutil.Poll(20*time.Second, func() bool { return countFiles(b, inbound) >= 1 }) {
		b.Fatalf("the backfilled message has no file after 20 s:\n%s", srv.Log())
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(inbound); err != nil {
		b.Fatal(err)
	}
	files := make(chan time.Time, 16)
	go func() {
		for ev := range w.Events {
			if ev.Op.Has(fsnotify.Create) && strings.HasSuffix(ev.Name, ".md") {
				files <- time.Now()
			}
		}
	}()

	// The bare IDLE client.
	exists := make(chan time.Time, 16)
	var want atomic.Uint32 // the message count the current APPEND makes
	want.Store(1 << 31)
	bare := imapLogin(b, d, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Mailbox: func(m *imapclient.UnilateralDataMailbox) {
			if m.NumMessages != nil && *m.NumMessages >= want.Load() {
				exists <- time.Now()
			}
		},
	}})
	if _, err := bare.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		b.Fatal(err)
	}
	idle, err := bare.Idle()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { idle.Close(); idle.Wait() }()

	appender := imapLogin(b, d, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var r idleRun
	for i := range n {
		// Pacing, not synchronisation (see above).
		time.Sleep(time.Duration(600+rng.IntN(300)) * time.Millisecond)
		drain(files)
		drain(exists)
		msg := syntheticMessage(1000 + i)
		want.Store(uint32(i + 2))
		t0 := time.Now()
		cmd := appender.Append("INBOX", int64(len(msg)), nil)
		if _, err := cmd.Write(msg); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Close(); err != nil {
			b.Fatal(err)
		}
		if _, err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		r.appendRTT = append(r.appendRTT, time.Since(t0))
		var tFile, tExists time.Time
		timeout := time.After(15 * time.Second)
		for tFile.IsZero() || tExists.IsZero() {
			select {
			case t := <-files:
				tFile = t
			case t := <-exists:
				tExists = t
			case <-timeout:
				b.Fatalf("sample %d: no file (%v) or no EXISTS (%v) 15 s after the APPEND:\n%s", i, tFile, tExists, srv.Log())
			}
		}
		r.courier = append(r.courier, tFile.Sub(t0))
		r.floor = append(r.floor, tExists.Sub(t0))
		r.own = append(r.own, tFile.Sub(tExists))
	}
	srv.Stop(b)
	if got := countFiles(b, inbound); got != n+1 {
		b.Errorf("inbound/email holds %d files, want %d", got, n+1)
	}

	return r
}

// reportIdle reports one side's rounds: p50 and p95 of each, their median
// (min-max) over the rounds.
func reportIdle(b *testing.B, side string, n int, load benchutil.Load, runs []idleRun) {
	b.Helper()
	pct := func(f func(idleRun) []time.Duration, q float64) []time.Duration {
		out := make([]time.Duration, len(runs))
		for i, r := range runs {
			out[i] = quantile(f(r), q)
		}
		return out
	}
	courier := func(r idleRun) []time.Duration { return r.courier }
	floor := func(r idleRun) []time.Duration { return r.floor }
	own := func(r idleRun) []time.Duration { return r.own }
	c50, c95 := pct(courier, 0.5), pct(courier, 0.95)
	f50, f95 := pct(floor, 0.5), pct(floor, 0.95)
	o50, o95 := pct(own, 0.5), pct(own, 0.95)
	if side == "courier" {
		b.ReportMetric(float64(median(c50).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(median(c95).Microseconds())/1000, "p95-ms")
		b.ReportMetric(float64(median(f50).Microseconds())/1000, "bare-p50-ms")
		b.ReportMetric(float64(median(o50).Microseconds())/1000, "own-p50-ms")
	}
	report(b,
		row{fmt.Sprintf("%s: IDLE push, APPEND -> file in inbound/email/, p50 / p95 of %d a round, median (min-max) of %d rounds; %s", side, n, len(runs), load),
			benchutil.SpreadMs(c50) + " / " + benchutil.SpreadMs(c95),
			"bare IDLE client, APPEND -> EXISTS: " + benchutil.SpreadMs(f50) + " / " + benchutil.SpreadMs(f95),
			"", ratio(median(c50).Seconds(), median(f50).Seconds()), "p50 < 100 ms", met(median(c50) < 100*time.Millisecond)},
		row{side + ": IDLE push, Courier's own share (file - bare client's EXISTS, per sample), p50 / p95",
			benchutil.SpreadMs(o50) + " / " + benchutil.SpreadMs(o95),
			fmt.Sprintf("(Dovecot's notify delay: 500 ms; APPEND round trip p50 %s)", msecs(median(pct(func(r idleRun) []time.Duration { return r.appendRTT }, 0.5)))),
			"", "", "p50 < 100 ms", met(median(o50) < 100*time.Millisecond)},
	)
}

// drain empties a channel of stale events.
func drain(c chan time.Time) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}
