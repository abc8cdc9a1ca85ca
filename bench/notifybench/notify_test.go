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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
)

var messagesFlag = flag.Int("messages", 500, "mails in the message → hook benchmark")

func BenchmarkMessageToHook(b *testing.B) {
	n := *messagesFlag
	bin := benchutil.CourierBin(b)
	ws := b.TempDir()
	if out, err := exec.Command(bin, "--root", ws, "init").CombinedOutput(); err != nil {
		b.Fatalf("init: %v\n%s", err, out)
	}
	dir := b.TempDir()
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
	var durable, toURL, toExec, toWatch []time.Duration
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
		durable = append(durable, time.Since(start))
		toWatch = append(toWatch, wait(seen, "inotify event", i).Sub(start))
		toURL = append(toURL, wait(posted, "POST", i).Sub(start))
		toExec = append(toExec, wait(execStarted, "exec hook start", i).Sub(start))
	}
	s.Stop(b)
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		d := benchutil.Pct(durable, p.q)
		row := func(what string, lat []time.Duration) {
			c := benchutil.Pct(lat, p.q)
			benchutil.Report(b, fmt.Sprintf("%s, %s over %d mails", what, p.name, n), benchutil.Ms(c),
				"mail → durable file (the 250) "+benchutil.Ms(d), fmt.Sprintf("%.2f×", float64(c)/float64(d)), "", "")
		}
		row("mail → url hook POST received", toURL)
		row("mail → exec hook started", toExec)
		row("mail → inotify watcher on inbound/ woken (baseline)", toWatch)
	}
	// The hooks' own share: from the 250 (durable and indexed) to the
	// hook's start, per mail.
	for _, h := range []struct {
		what string
		lat  []time.Duration
	}{{"url hook POST received", toURL}, {"exec hook started", toExec}} {
		added := make([]time.Duration, len(durable))
		for i := range durable {
			added[i] = max(h.lat[i]-durable[i], 0)
		}
		p50, p99 := benchutil.Pct(added, 0.5), benchutil.Pct(added, 0.99)
		benchutil.Report(b, fmt.Sprintf("durable file (the 250) → %s, p50 / p99 over %d mails", h.what, n), benchutil.Ms(p50)+" / "+benchutil.Ms(p99),
			"", "", "< 1 s", fmt.Sprint(p99 < time.Second))
	}
}
