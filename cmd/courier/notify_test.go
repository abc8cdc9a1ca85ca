package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/notify"
	"github.com/monoco/courier/schema"
)

// ntFifo makes a named pipe at path and returns its lines. The test holds
// it open for reading and writing, so a hook's `echo > fifo` never
// blocks for long and the reader never sees an end.
func ntFifo(t *testing.T, path string) <-chan string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// ntEnv reads the environment an exec hook saved (env > path).
func ntEnv(path string) map[string]string {
	env := map[string]string{}
	b, _ := os.ReadFile(path)
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	return env
}

func ntLine(t *testing.T, lines <-chan string, within time.Duration, what string, s *testutil.Serve) string {
	t.Helper()
	select {
	case l := <-lines:
		return l
	case <-time.After(within):
		log := ""
		if s != nil {
			log = s.Log()
		}
		t.Fatalf("no %s within %v:\n%s", what, within, log)
	}
	return ""
}

// The hooks of the promise, through the real service: a mail
// handed to the SMTP receiver wakes an exec hook and a url hook within a
// second of its 250 (the file durable), with the message's facts in the
// environment, its JSON on stdin, and a signature that checks.
func TestNotifyHooksThroughService(t *testing.T) {
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	dir := t.TempDir()
	ran := ntFifo(t, filepath.Join(dir, "ran"))
	script := filepath.Join(dir, "hook.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
env > "$OUT/$COURIER_MESSAGE_ID.env"
cat > "$OUT/$COURIER_MESSAGE_ID.json"
echo "ran $COURIER_MESSAGE_ID" > "$OUT/ran"
`), 0o755)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("hook-secret-1\n"), 0o600)
	type post struct {
		sigOK bool
		event string
		body  []byte
	}
	posts := make(chan post, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get("X-Courier-Timestamp"), 10, 64)
		posts <- post{sigOK: r.Header.Get("X-Courier-Signature") == notify.Sign("hook-secret-1", ts, b) && time.Since(time.Unix(ts, 0)).Abs() < time.Minute,
			event: r.Header.Get("X-Courier-Event"), body: b}
	}))
	defer srv.Close()
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
  notify:
    - name: wake
      exec: [%s]
      env: {OUT: %s}
    - name: web
      url: %s/courier
      secret_file: %s
`, web, recv, script, dir, srv.URL, filepath.Join(dir, "secret")))
	s := startServe(t, ws, web)
	if err := sendMail(recv, "ann@example.com", "agent@example.com", "wake-1@example.com", "Logs", "Can you look?"); err != nil {
		t.Fatal(err)
	}
	durable := time.Now() // the 250: the file is durable
	line := ntLine(t, ran, 5*time.Second, "exec hook run", s)
	execLag := time.Since(durable)
	var p post
	select {
	case p = <-posts:
	case <-time.After(5 * time.Second):
		t.Fatalf("no POST:\n%s", s.Log())
	}
	postLag := time.Since(durable)
	if execLag > time.Second || postLag > time.Second {
		t.Errorf("hooks ran %v (exec) and %v (url) after the file was durable; want within a second", execLag, postLag)
	}
	ids := countIDs(t, ws)
	if len(ids) != 1 || line != "ran "+ids[0] {
		t.Fatalf("hook said %q; mailbox holds %v", line, ids)
	}
	id := ids[0]
	env := ntEnv(filepath.Join(dir, id+".env"))
	files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound/email/*_"+id+".md"))
	if len(files) != 1 {
		t.Fatalf("file of %s: %v", id, files)
	}
	for k, v := range map[string]string{"COURIER_EVENT": "inbound", "COURIER_MESSAGE_ID": id, "COURIER_PROVIDER": "email",
		"COURIER_THREAD_KEY": "email-thread:wake-1@example.com", "COURIER_CORRELATION_ID": "", "COURIER_MESSAGE_PATH": files[0], "COURIER_HOOK": "wake"} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	var m schema.Message
	b, _ := os.ReadFile(filepath.Join(dir, id+".json"))
	if err := json.Unmarshal(b, &m); err != nil || m.ID != id || m.Session.Name != "Logs" || !strings.Contains(m.Body, "Can you look?") {
		t.Errorf("stdin %s (%v)", b, err)
	}
	if !p.sigOK || p.event != "inbound" {
		t.Errorf("POST: signature ok %v, event %q", p.sigOK, p.event)
	}
	if err := json.Unmarshal(p.body, &m); err != nil || m.ID != id {
		t.Errorf("POST body %s", p.body)
	}
	if strings.Contains(s.Log(), "hook-secret-1") {
		t.Error("the hook's secret is in the service's log")
	}
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
}

// kill -9 of the service with a hook running and two messages durable
// but not yet handed to it (the hook runs one call at a time): after the
// restart every message's hook runs; the one cut runs again (at least
// once), the others once. The instant is hit by a hook that blocks until
// the test lets it go, and that tells the test it started.
func TestNotifySurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the service")
	}
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	dir := t.TempDir()
	started := ntFifo(t, filepath.Join(dir, "started"))
	gate := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	block := filepath.Join(dir, "block")
	os.WriteFile(block, nil, 0o600)
	script := filepath.Join(dir, "hook.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
echo "$COURIER_MESSAGE_ID" >> "$OUT/runs"
echo "started $COURIER_MESSAGE_ID" > "$OUT/started"
if [ -e "$OUT/block" ]; then read x < "$OUT/gate"; fi
`), 0o755)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
  notify:
    - {name: wake, exec: [%s], env: {OUT: %s}, concurrency: 1, timeout: 5m}
`, web, recv, script, dir))
	s := startServe(t, ws, web)
	if err := sendMail(recv, "ann@example.com", "agent@example.com", "k1@example.com", "one", "1"); err != nil {
		t.Fatal(err)
	}
	first := ntLine(t, started, 10*time.Second, "the first hook run", s)
	for i := 2; i <= 3; i++ {
		if err := sendMail(recv, "ann@example.com", "agent@example.com", fmt.Sprintf("k%d@example.com", i), "more", "x"); err != nil {
			t.Fatal(err)
		}
	}
	// The kill lands where meant: three messages durable and indexed, the
	// hook running for the first, the others not started.
	if ids := countIDs(t, ws); len(ids) != 3 {
		t.Fatalf("%d messages before the kill", len(ids))
	}
	runs, _ := os.ReadFile(filepath.Join(dir, "runs"))
	if strings.Count(string(runs), "\n") != 1 {
		t.Fatalf("runs before the kill: %q", runs)
	}
	s.Kill()
	// Let the orphaned hook end (it is in a process group of its own).
	if f, err := os.OpenFile(gate, os.O_WRONLY, 0); err == nil {
		f.Close()
	}
	os.Remove(block)
	s = startServe(t, ws, web)
	after := map[string]bool{}
	for len(after) < 3 {
		after[strings.TrimPrefix(ntLine(t, started, 10*time.Second, "the hook runs after the restart", s), "started ")] = true
	}
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	runs, _ = os.ReadFile(filepath.Join(dir, "runs"))
	count := map[string]int{}
	for _, id := range strings.Fields(string(runs)) {
		count[id]++
	}
	ids := countIDs(t, ws)
	cutID := strings.TrimPrefix(first, "started ")
	total := 0
	for _, id := range ids {
		total += count[id]
		switch {
		case count[id] == 0:
			t.Errorf("%s: its hook never ran", id)
		case id == cutID && count[id] != 2:
			t.Errorf("%s, cut by the kill, ran %d times, want 2", id, count[id])
		case id != cutID && count[id] != 1:
			t.Errorf("%s ran %d times, want 1", id, count[id])
		}
	}
	t.Logf("3 messages, 1 kill with a hook running: %d runs (%v)", total, count)
}

// ntSMTP is an SMTP server that takes mail for ok@ addresses and refuses
// every other recipient for good (550), so that one draft is delivered and
// another dead-lettered.
func ntSMTP(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				fmt.Fprint(c, "220 nt ESMTP\r\n")
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					cmd := strings.ToUpper(strings.TrimSpace(l))
					switch {
					case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
						fmt.Fprint(c, "250 nt\r\n")
					case strings.HasPrefix(cmd, "RCPT") && !strings.Contains(cmd, "<OK@"):
						fmt.Fprint(c, "550 5.1.1 no such user\r\n")
					case cmd == "DATA":
						fmt.Fprint(c, "354 go on\r\n")
						for {
							l, err := r.ReadString('\n')
							if err != nil {
								return
							}
							if l == ".\r\n" {
								break
							}
						}
						fmt.Fprint(c, "250 2.0.0 queued\r\n")
					case cmd == "QUIT":
						fmt.Fprint(c, "221 bye\r\n")
						return
					default:
						fmt.Fprint(c, "250 ok\r\n")
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A draft delivered and a draft dead-lettered by the real service fire
// their events, so an agent learns its reply failed.
func TestNotifyDraftEventsThroughService(t *testing.T) {
	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	host, port, _ := net.SplitHostPort(ntSMTP(t))
	type ev struct{ event, id, status string }
	events := make(chan ev, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d schema.Draft
		json.NewDecoder(r.Body).Decode(&d)
		st := ""
		if d.Delivery != nil {
			st = d.Delivery.Status
		}
		events <- ev{r.Header.Get("X-Courier-Event"), d.ID, st}
	}))
	defer srv.Close()
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %s, tls: none}
  notify:
    - {name: replies, url: %s, secret: k, direction: outbound}
`, web, host, port, srv.URL))
	s := startServe(t, ws, web)
	ids := map[string]string{}
	for _, to := range []string{"ok@example.com", "nobody@example.com"} {
		out, e, code := cli(t, ws, "", "send", "--to", to, "--provider", "email", "--subject", "report", "--text", "hello")
		if code != 0 {
			t.Fatalf("send: %d %s %s", code, out, e)
		}
		ids[to] = out
	}
	got := map[string]ev{}
	for len(got) < 2 {
		select {
		case e := <-events:
			got[e.event] = e
		case <-time.After(20 * time.Second):
			t.Fatalf("events so far %v:\n%s", got, s.Log())
		}
	}
	if e := got["delivered"]; e.status != schema.DeliverySent || !strings.Contains(ids["ok@example.com"], e.id) {
		t.Errorf("delivered event %+v; sent %q", e, ids["ok@example.com"])
	}
	if e := got["dead"]; e.status != schema.DeliveryFailed || !strings.Contains(ids["nobody@example.com"], e.id) {
		t.Errorf("dead event %+v; sent %q", e, ids["nobody@example.com"])
	}
	s.Stop(t)
}

// Mail pouring in while the service is killed -9 at three arbitrary
// instants (with hooks running, messages between their rename and their
// commit, events between the journal and a queue): every message in the
// mailbox has had its hook run, and the duplicates are at most the calls
// in flight at the kills.
func TestNotifyCrashDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the service")
	}
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "hook.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$COURIER_MESSAGE_ID\" >> \"$OUT/runs\"\n"), 0o755)
	const n, kills, conc = 120, 3, 4
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
  notify:
    - {name: wake, exec: [%s], env: {OUT: %s}, concurrency: %d}
`, web, recv, script, dir, conc))
	s := startServe(t, ws, web)
	work := make(chan int, n)
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	done := make(chan struct{})
	var senders sync.WaitGroup
	for w := 0; w < 4; w++ {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for i := range work {
				msg := mailText("ann@example.com", "agent@example.com", fmt.Sprintf("c%d@example.com", i), fmt.Sprint("m ", i), "x")
				for smtp.SendMail(recv, nil, "ann@example.com", []string{"agent@example.com"}, msg) != nil {
					select {
					case <-done:
						return
					case <-time.After(20 * time.Millisecond): // deferred: try again, as an MTA does
					}
				}
			}
		}()
	}
	inbound := filepath.Join(ws, ".monoco/mailbox/inbound/email")
	for k := 1; k <= kills; k++ {
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%d messages written", k*n/4), func() bool {
			files, _ := filepath.Glob(filepath.Join(inbound, "*.md"))
			return len(files) >= k*n/4
		})
		s.Kill()
		s = startServe(t, ws, web)
	}
	senders.Wait()
	close(done)
	ids := countIDs(t, ws)
	if len(ids) != n {
		t.Fatalf("%d messages in the mailbox, want %d", len(ids), n)
	}
	count := map[string]int{}
	testutil.WaitFor(t, 60*time.Second, "a hook run for every message", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "runs"))
		count = map[string]int{}
		for _, id := range strings.Fields(string(b)) {
			count[id]++
		}
		for _, id := range ids {
			if count[id] == 0 {
				return false
			}
		}
		return true
	})
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "runs"))
	runs := strings.Fields(string(b))
	if dups := len(runs) - n; dups > kills*conc {
		t.Errorf("%d duplicate runs after %d kills with at most %d calls in flight each", dups, kills, conc)
	}
	t.Logf("%d messages, %d kills: %d hook runs (%d duplicates)", n, kills, len(runs), len(runs)-n)
}
