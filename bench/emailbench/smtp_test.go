package emailbench

import (
	"bytes"
	"context"
	"fmt"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

const (
	queuers        = 8 // agents queueing drafts at once in the burst
	backlogSubject = "Backlog reply"
	burstSubject   = "Burst reply"
	pacedSubject   = "Paced reply"
)

// draftBody is an agent's reply: Markdown that Courier renders into a
// text and an HTML part (about 1.9 KB on the wire).
const draftBody = `Hi Ann,

Thanks for the logs. The disk on **db-2** filled at 02:14 UTC and the
replica stopped applying WAL; I have:

1. freed 40 GB of old base backups,
2. restarted the replica, which caught up by 02:31,
3. opened [OPS-1234](https://tracker.example.com/OPS-1234) for the alert
   that should have fired at 80 %.

| host | disk before | disk after |
|------|-------------|------------|
| db-1 | 71 %        | 70 %       |
| db-2 | 100 %       | 58 %       |

Nothing was lost. I'll watch it tonight and report tomorrow morning.

— the agent
`

// BenchmarkSend: `courier serve` with an SMTP account on Postfix's
// smtp-sink delivers -drafts drafts, three ways:
//
//   - backlog: the drafts are queued while the service is stopped (after an
//     outage, say); drafts/s from the start of `courier serve` to the last
//     file in archive/email/: the delivery engine alone;
//   - burst: -drafts more are queued while it runs, by eight goroutines (eight
//     agents) calling mailbox.Queue — what `courier send` does once it has
//     resolved a draft; drafts/s from the first Queue to the last archived
//     file, and the queued → accepted latency (created_at →
//     delivery.sent_at, i.e. to the peer's 250 after DATA), which here
//     includes the wait behind the backlog;
//   - paced: -paced drafts, each queued by a `courier send` process, one
//     after the other, as an agent does: the unloaded latency.
//
// msmtp then sends the burst's messages (taken from the sink's dumps of
// Courier's run, so the very same bytes), a process per message, one at a
// time and eight at a time, to the same sink.
//
// With -prefill N the workspace first holds N inbound messages: the
// engine's queries should not care, and this shows whether they do.
func BenchmarkSend(b *testing.B) {
	n, paced := *draftsFlag, *pacedFlag
	msmtp := needCommand(b, "msmtp", "msmtp")
	bins, names := []string{courierBin(b)}, []string{"courier"}
	if *beforeFlag != "" {
		bins, names = append(bins, *beforeFlag), append(names, "before")
	}
	var raws [][]byte // the burst's messages of the warm-up, as the sink got them
	courier := make([][]sendRun, len(bins))
	var msmtps []msmtpRun
	var sides []benchutil.Side
	for i, bin := range bins {
		sides = append(sides, benchutil.Side{Name: names[i], Run: func(b *testing.B, ws string, round int) {
			if round < 0 {
				if r := courierSend(b, bin, ws, min(n, benchutil.WarmN), min(paced, 10)); raws == nil {
					raws = r.raws
				}
				return
			}
			courier[i] = append(courier[i], courierSend(b, bin, ws, n, paced))
		}})
		if i == 0 { // msmtp's warm-up needs the messages of Courier's
			sides = append(sides, benchutil.Side{Name: "msmtp", Run: func(b *testing.B, _ string, round int) {
				if round < 0 {
					msmtpSend(b, msmtp, raws, min(n, benchutil.WarmN))
					return
				}
				msmtps = append(msmtps, msmtpSend(b, msmtp, raws, n))
			}})
		}
	}
	load := benchutil.Interleave(b, min(*runsFlag, 3), true, sides...)
	for i := range bins {
		reportSend(b, names[i], n, paced, load, courier[i], msmtps)
	}
}

// sendRun is one round of Courier in BenchmarkSend.
type sendRun struct {
	backlog, burst, queued time.Duration
	burstLat, pacedLat     []time.Duration
	raws                   [][]byte // the burst's messages, as the sink got them
}

// msmtpRun is one round of msmtp in BenchmarkSend: a process a message,
// one at a time, then eight at a time.
type msmtpRun struct{ seq, par time.Duration }

// courierSend runs `courier serve` (bin) in the fresh workspace ws against
// a fresh smtp-sink: the backlog, the burst and the paced drafts.
func courierSend(b *testing.B, bin, ws string, n, paced int) sendRun {
	b.Helper()
	sink := testutil.StartSMTPSink(b, nil)
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
          smtp: {host: %s, port: %d, tls: none}
`, httpAddr, sink.Host(), sink.Port()))
	if err := mailbox.Init(ws); err != nil {
		b.Fatal(err)
	}
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer mb.Close()
	if *prefillFlag > 0 {
		prefill(b, mb, *prefillFlag)
	}

	archive := filepath.Join(ws, ".monoco/mailbox/archive/email")
	w, err := fsnotify.NewWatcher()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(archive); err != nil {
		b.Fatal(err)
	}
	var archived atomic.Int64
	more := make(chan struct{}, 1)
	go func() {
		for ev := range w.Events {
			if ev.Op.Has(fsnotify.Create) && strings.HasSuffix(ev.Name, ".md") {
				archived.Add(1)
				select {
				case more <- struct{}{}:
				default:
				}
			}
		}
	}()
	var srv *testutil.Serve
	waitArchived := func(want int64) time.Time {
		timeout := time.After(5 * time.Minute)
		for archived.Load() < want {
			select {
			case <-more:
			case <-timeout:
				b.Fatalf("%d drafts archived after 5 min, want %d:\n%s", archived.Load(), want, srv.Log())
			}
		}
		return time.Now()
	}

	// Backlog.
	queueDrafts(b, mb, 0, n, backlogSubject)
	start := time.Now()
	srv = startServe(b, bin, ws, httpAddr)
	backlog := waitArchived(int64(n)).Sub(start)

	// Burst.
	start = time.Now()
	queueDrafts(b, mb, n, 2*n, burstSubject)
	queued := time.Since(start)
	burst := waitArchived(int64(2 * n)).Sub(start)

	// Paced: one `courier send` at a time.
	draft := filepath.Join(ws, "reply.md")
	if err := os.WriteFile(draft, []byte("---\nto: [rcpt@x.y]\nsubject: "+pacedSubject+"\n---\n"+draftBody), 0o644); err != nil {
		b.Fatal(err)
	}
	for range paced {
		cmd := exec.Command(bin, "--root", ws, "--agent", "bench", "send", draft)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("courier send: %v\n%s", err, out)
		}
	}
	waitArchived(int64(2*n + paced))
	srv.Stop(b)

	var burstLat, pacedLat []time.Duration
	ents, err := os.ReadDir(archive)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(archive, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		d, _, err := schema.DecodeDraft(data)
		if err != nil {
			b.Fatalf("%s: %v", e.Name(), err)
		}
		if d.Delivery == nil || d.Delivery.Status != schema.DeliverySent || d.Delivery.SentAt == nil || d.CreatedAt == nil {
			b.Fatalf("%s: not delivered: %+v", e.Name(), d.Delivery)
		}
		lat := d.Delivery.SentAt.Sub(d.CreatedAt.Time)
		switch {
		case strings.HasPrefix(d.Subject, burstSubject):
			burstLat = append(burstLat, lat)
		case d.Subject == pacedSubject:
			pacedLat = append(pacedLat, lat)
		}
	}
	if len(burstLat) != n || len(pacedLat) != paced {
		b.Fatalf("archived %d burst and %d paced drafts, want %d and %d", len(burstLat), len(pacedLat), n, paced)
	}

	var raws [][]byte
	for _, m := range sink.WaitMessages(b, 2*n+paced, time.Minute) {
		msg, err := mail.ReadMessage(bytes.NewReader(m.Raw))
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(msg.Header.Get("Subject"), burstSubject) {
			raws = append(raws, m.Raw)
		}
	}
	if len(raws) != n {
		b.Fatalf("the sink holds %d of Courier's burst messages, want %d", len(raws), n)
	}
	return sendRun{backlog: backlog, burst: burst, queued: queued, burstLat: burstLat, pacedLat: pacedLat, raws: raws}
}

// msmtpSend sends n messages (raws, in turn) to a fresh smtp-sink with
// msmtp, a process a message, one at a time and then eight at a time.
func msmtpSend(b *testing.B, msmtp string, raws [][]byte, n int) msmtpRun {
	b.Helper()
	sink := testutil.StartSMTPSink(b, nil)
	args := []string{"--host=" + sink.Host(), "--port=" + strconv.Itoa(sink.Port()), "--from=a@b.c", "--auth=off", "--tls=off", "rcpt@x.y"}
	send := func(raw []byte) {
		cmd := exec.Command(msmtp, args...)
		cmd.Stdin = bytes.NewReader(raw)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("msmtp: %v\n%s", err, out)
		}
	}
	t0 := time.Now()
	for i := range n {
		send(raws[i%len(raws)])
	}
	seq := time.Since(t0)
	// Eight at a time, as `xargs -P8` would: Courier delivers eight at
	// once (courier.outbound.concurrency).
	t0 = time.Now()
	var wg sync.WaitGroup
	work := make(chan []byte)
	for range 8 {
		wg.Go(func() {
			for raw := range work {
				send(raw)
			}
		})
	}
	for i := range n {
		work <- raws[i%len(raws)]
	}
	close(work)
	wg.Wait()
	par := time.Since(t0)
	sink.WaitMessages(b, 2*n, time.Minute)
	return msmtpRun{seq: seq, par: par}
}

// reportSend reports the rounds of one courier side against msmtp's: each
// figure's median (min-max) over the rounds.
func reportSend(b *testing.B, side string, n, paced int, load benchutil.Load, cs []sendRun, ms []msmtpRun) {
	b.Helper()
	of := func(f func(sendRun) time.Duration) []time.Duration {
		out := make([]time.Duration, len(cs))
		for i, r := range cs {
			out[i] = f(r)
		}
		return out
	}
	pct := func(f func(sendRun) []time.Duration, q float64) []time.Duration {
		return of(func(r sendRun) time.Duration { return quantile(f(r), q) })
	}
	var seq, par []time.Duration
	for _, m := range ms {
		seq, par = append(seq, m.seq), append(par, m.par)
	}
	backlog, burst, queued := of(func(r sendRun) time.Duration { return r.backlog }), of(func(r sendRun) time.Duration { return r.burst }), of(func(r sendRun) time.Duration { return r.queued })
	burstLat, pacedLat := func(r sendRun) []time.Duration { return r.burstLat }, func(r sendRun) []time.Duration { return r.pacedLat }
	b50, b95 := pct(burstLat, 0.5), pct(burstLat, 0.95)
	p50, p95 := pct(pacedLat, 0.5), pct(pacedLat, 0.95)
	backlogRate, rate := float64(n)/median(backlog).Seconds(), float64(n)/median(burst).Seconds()
	seqRate, parRate := float64(n)/median(seq).Seconds(), float64(n)/median(par).Seconds()
	if side == "courier" {
		b.ReportMetric(backlogRate, "backlog-drafts/s")
		b.ReportMetric(rate, "drafts/s")
		b.ReportMetric(seqRate, "msmtp-msgs/s")
		b.ReportMetric(float64(median(p50).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(median(b50).Microseconds())/1000, "burst-p50-ms")
	}
	mailboxNote := ""
	if *prefillFlag > 0 {
		mailboxNote = fmt.Sprintf(", mailbox holding %d messages", *prefillFlag)
	}
	report(b,
		row{fmt.Sprintf("%s: send %d drafts to smtp-sink, backlog queued before `serve` starts%s, start -> all archived, median (min-max) of %d rounds; %s", side, n, mailboxNote, len(cs), load),
			fmt.Sprintf("%.0f drafts/s (%s)", backlogRate, spread(backlog)),
			fmt.Sprintf("msmtp, a process per message, one at a time: %.0f/s (%s)", seqRate, spread(seq)),
			"", ratio(backlogRate, seqRate), ">= 200 drafts/s", met(backlogRate >= 200)},
		row{fmt.Sprintf("%s: send %d drafts, queued while `serve` runs (mailbox.Queue from 8 goroutines, %.0f/s), first queued -> all archived", side, n, float64(n)/median(queued).Seconds()),
			fmt.Sprintf("%.0f drafts/s (%s)", rate, spread(burst)),
			fmt.Sprintf("msmtp, 8 processes at a time: %.0f/s (%s)", parRate, spread(par)),
			"", ratio(rate, parRate), ">= 200 drafts/s", met(rate >= 200)},
		row{"  queued -> accepted (created_at -> sent_at) in that burst, p50 / p95",
			benchutil.SpreadMs(b50) + " / " + benchutil.SpreadMs(b95), "(includes the wait behind the backlog)", "", "", "", ""},
		row{fmt.Sprintf("%s: queued -> accepted, %d drafts each queued by `courier send` in turn, p50 / p95", side, paced),
			benchutil.SpreadMs(p50) + " / " + benchutil.SpreadMs(p95), "", "", "", "p50 < 50 ms", met(median(p50) < 50*time.Millisecond)},
	)
}

// queueDrafts queues drafts lo..hi-1 from eight goroutines, as eight agents
// running `courier send` would once their drafts are resolved.
func queueDrafts(b *testing.B, mb *mailbox.Mailbox, lo, hi int, subject string) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	next := make(chan int)
	for range queuers {
		wg.Go(func() {
			for i := range next {
				now := time.Now()
				d := &schema.Draft{
					ID: fmt.Sprintf("email_out_%032x", i), Provider: schema.Email, To: schema.Recipients{"rcpt@x.y"},
					Subject: fmt.Sprintf("%s %d", subject, i), CreatedAt: schema.TimePtr(now), Agent: "bench",
					IdempotencyKey: fmt.Sprintf("<%d-%d@monoco.dev>", i, now.UnixNano()),
					Email:          &schema.EmailHeaders{Account: "bench", From: "agent@monoco.dev"},
					Body:           draftBody,
				}
				if _, err := mb.Queue(ctx, d); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := lo; i < hi; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// prefill writes n inbound email messages (about 1.5 KB each) through the
// mailbox's own write path, as bench/genmailbox does.
func prefill(b *testing.B, mb *mailbox.Mailbox, n int) {
	b.Helper()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 12)
	for i := 0; i < n; i += 256 {
		var in []mailbox.Inbound
		for j := i; j < min(i+256, n); j++ {
			m := testutil.Message(schema.Email, fmt.Sprintf("%020x", j), base.Add(time.Duration(j)*time.Second), text)
			in = append(in, mailbox.Inbound{Message: m})
		}
		if _, err := mb.WriteInbound(ctx, in, nil); err != nil {
			b.Fatal(err)
		}
	}
}
