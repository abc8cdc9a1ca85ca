package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/mail"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// startServe starts `courier serve` in ws and waits until /health answers.
func startServe(t *testing.T, ws, httpAddr string, args ...string) *testutil.Serve {
	t.Helper()
	return testutil.StartServe(t, courierBin, httpAddr, append([]string{"--root", ws, "serve", "--log-level", "debug"}, args...)...)
}

func writeConfig(t *testing.T, ws, cfg string) {
	t.Helper()
	p := filepath.Join(ws, ".monoco/config/courier.yaml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(cfg), 0o640); err != nil {
		t.Fatal(err)
	}
}

func sendMail(addr, from, to, msgID, subject, body string) error {
	return smtp.SendMail(addr, nil, from, []string{to}, mailText(from, to, msgID, subject, body))
}

// mailText is a mail dated now. A client that tries again sends the same
// bytes, as an MTA does: a mail with its Message-ID and another Date is
// another mail (docs/email.md, "Email identity").
func mailText(from, to, msgID, subject, body string) []byte {
	return fmt.Appendf(nil, "From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s>\r\nDate: %s\r\n\r\n%s\r\n",
		from, to, subject, msgID, time.Now().Format(time.RFC1123Z), body)
}

func countIDs(t *testing.T, ws string, args ...string) []string {
	out, _, _ := cli(t, ws, "", append([]string{"list", "--format", "id"}, args...)...)
	return strings.Fields(out)
}

// The whole loop on real processes and a real SMTP peer: mail in through
// the receiver, listed and read by an agent, answered with `courier send`,
// delivered over SMTP with the reply headers, archived; /health and
// /metrics tell; SIGTERM stops it cleanly.
func TestServeEndToEnd(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s, addresses: [agent@corp.example]}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
`, web, recv, sink.Host(), sink.Port()))
	s := startServe(t, ws, web)

	if err := sendMail(recv, "ann@example.com", "agent@corp.example", "q1@example.com", "Logs please", "Can you look at the logs?"); err != nil {
		t.Fatalf("send to the receiver: %v\n%s", err, s.Log())
	}
	ids := countIDs(t, ws)
	if len(ids) != 1 {
		t.Fatalf("after the 250, list shows %v", ids)
	}
	out, _, _ := cli(t, ws, "", "read", ids[0], "--content")
	if strings.TrimSpace(out) != "Can you look at the logs?" {
		t.Errorf("read --content = %q", out)
	}
	out, e, code := cli(t, ws, "", "send", "--reply-to", ids[0], "--text", "Looking now.")
	if code != 0 {
		t.Fatalf("send: %d %s", code, e)
	}
	msgs := sink.WaitMessages(t, 1, 20*time.Second)
	m, err := mail.ReadMessage(bytes.NewReader(msgs[0].Raw))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("In-Reply-To") != "<q1@example.com>" || m.Header.Get("Subject") != "Re: Logs please" || msgs[0].To[0] != "ann@example.com" {
		t.Errorf("reply: In-Reply-To %q Subject %q to %v", m.Header.Get("In-Reply-To"), m.Header.Get("Subject"), msgs[0].To)
	}
	testutil.WaitFor(t, 10*time.Second, "the draft archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 1 })
	// The engine counts a send just after it files the draft: the total
	// /health gives, then the sent counter, then the latency histogram of
	// /metrics. Wait for the last.
	testutil.WaitFor(t, 10*time.Second, "the send's latency in /metrics", func() bool {
		resp, err := http.Get("http://" + web + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `courier_processing_duration_bucket{direction="outbound",provider="email",le="+Inf"} 1`)
	})
	var rep struct {
		Status   string
		Adapters map[string]struct{ Status string }
		Totals   struct{ Received, Sent uint64 }
	}
	resp, err := http.Get(s.Health)
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if rep.Status != "healthy" || rep.Adapters["email"].Status != "connected" || rep.Adapters["lark"].Status != "disabled" || rep.Totals.Received != 1 || rep.Totals.Sent != 1 {
		t.Errorf("/health = %+v", rep)
	}
	resp, _ = http.Get("http://" + web + "/metrics")
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Every series of an enabled provider exists, at zero if nothing
	// happened (rate() and absent() need them); none for disabled ones.
	for _, want := range []string{`courier_messages_received_total{provider="email"} 1`, `courier_messages_sent_total{provider="email"} 1`,
		`courier_messages_failed_total{kind="permanent",provider="email"} 0`, `courier_messages_failed_total{kind="temporary",provider="email"} 0`,
		`courier_adapter_health{adapter="email",status="connected"} 1`, `courier_queue_depth{provider="email"} 0`,
		`courier_processing_duration_bucket{direction="outbound",provider="email",le="+Inf"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(metrics), `provider="lark"`) {
		t.Errorf("/metrics has series of lark, which is not enabled")
	}
	out, _, code = cli(t, ws, "", "status", "--format", "json")
	if code != 0 || !strings.Contains(out, `"service": "running"`) {
		t.Errorf("status: %d %s", code, out)
	}
	// doctor beside the running service: the receiver's port is the
	// service's, not a conflict.
	out, _, code = cli(t, ws, "", "doctor")
	if code != 0 || !strings.Contains(out, "✓ email/receiver/smtp") || !strings.Contains(out, "listening in the running service") {
		t.Errorf("doctor while serving: exit %d\n%s", code, out)
	}
	// A second serve on the same mailbox is refused at once.
	second := exec.Command(courierBin, "--root", ws, "serve")
	outb, _ := second.CombinedOutput()
	if second.ProcessState.ExitCode() != exitConflict || !strings.Contains(string(outb), "another courier serve is running") {
		t.Errorf("second serve: exit %d %s", second.ProcessState.ExitCode(), outb)
	}
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, s.Log())
	}
	if !strings.Contains(s.Log(), "stopped") {
		t.Errorf("no clean stop in the log:\n%s", s.Log())
	}
	// Stopped: status says so and exits 3.
	out, _, code = cli(t, ws, "", "status")
	if code != exitNoService || !strings.Contains(out, "Service:   stopped") {
		t.Errorf("status after stop: %d %s", code, out)
	}
	// No secret, and no password, in the log.
	if strings.Contains(s.Log(), "password") {
		t.Errorf("log mentions a password:\n%s", s.Log())
	}
}

// A failed start is rolled back: a port in use stops what started, the lock
// is released, and the error names the setting.
func TestServeStartFailures(t *testing.T) {
	ws := newWorkspace(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, busy.Addr()))
	cmd := exec.Command(courierBin, "--root", ws, "serve")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitUnavailable || !strings.Contains(string(out), "listen on "+busy.Addr().String()) {
		t.Errorf("receiver port in use: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	// The HTTP server that had started was stopped: its port is free.
	if ln, err := net.Listen("tcp", web); err != nil {
		t.Errorf("http port still held after the rolled-back start: %v", err)
	} else {
		ln.Close()
	}
	// A malformed config: one error naming the key and line, exit 78.
	writeConfig(t, ws, "courier:\n  http: {listen: 127.0.0.1:1}\n  outbond: {max_attempts: 3}\n")
	cmd = exec.Command(courierBin, "--root", ws, "serve")
	out, _ = cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitConfig || !strings.Contains(string(out), `courier.yaml:3: courier.outbond: unknown field "outbond" (did you mean "outbound"?)`) {
		t.Errorf("bad config: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
}

// Kill -9 the service while it delivers hundreds of drafts, each time at
// the one instant that makes a duplicate: the SMTP peer has a message
// whole and holds its reply, so the service cannot know it delivered it.
// Restart it, and at the end: every draft delivered and archived, none left
// claimed, and duplicates at most one per kill, the draft held at that
// kill sent again.
func TestCrashDuringDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the service")
	}
	peer := testutil.StartSMTPFake(t)
	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s, backoff_base: 100ms, concurrency: 8}
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
`, web, peer.Host(), peer.Port()))
	const n, kills = 300, 4
	draftID := map[string]string{} // by Message-ID
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		d := &schema.Draft{ID: fmt.Sprintf("email_out_%032x", i), Provider: schema.Email, To: schema.Recipients{"ann@example.com"},
			Subject: fmt.Sprint("report ", i), CreatedAt: schema.TimePtr(time.Now()), IdempotencyKey: fmt.Sprintf("<draft-%d@corp.example>", i),
			Email: &schema.EmailHeaders{From: "agent@corp.example", Account: "work"}, Body: "numbers attached\n"}
		if _, err := mb.Queue(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		draftID[d.IdempotencyKey] = d.ID
	}
	mb.Close()
	messageID := func(m testutil.FakeMessage) string {
		msg, err := mail.ReadMessage(bytes.NewReader(m.Raw))
		if err != nil {
			t.Fatal(err)
		}
		return msg.Header.Get("Message-Id")
	}
	var held []string // the Message-ID held at each kill
	for i := 1; i <= kills; i++ {
		// Some drafts go through first (up to 40), so that each kill comes
		// in the middle of the queue, with the other sends at the commit
		// gate or in their DATA.
		h := peer.HoldAt(len(peer.Messages()) + 1 + rand.IntN(40))
		s := startServe(t, ws, web)
		select {
		case <-h.Held():
		case <-time.After(60 * time.Second):
			t.Fatalf("kill %d: no delivery reached its final \".\" in 60 s:\n%s", i, s.Log())
		}
		s.Kill()
		h.Release()
		key := messageID(h.Message())
		held = append(held, key)
		// The kill landed mid-delivery: the peer has the draft whole,
		// and the dead service had it claimed and not recorded as sent.
		requireInFlight(t, ws, draftID[key], i)
	}
	s := startServe(t, ws, web)
	testutil.WaitFor(t, 60*time.Second, "every draft delivered", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == n })
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	got := map[string]int{}
	for _, m := range peer.Messages() {
		got[messageID(m)]++
	}
	dups := 0
	for i := 0; i < n; i++ {
		c := got[fmt.Sprintf("<draft-%d@corp.example>", i)]
		if c == 0 {
			t.Errorf("draft %d never delivered", i)
		}
		dups += max(c-1, 0)
	}
	if dups > kills {
		t.Errorf("%d duplicates after %d kills: more than one per crash", dups, kills)
	}
	for i, key := range held {
		if got[key] < 2 {
			t.Errorf("%s, held at kill %d, was not sent again after the restart (%d copies)", key, i+1, got[key])
		}
	}
	t.Logf("%d drafts, %d kills, each with a delivery in flight, %d duplicate deliveries", n, kills, dups)
	mb, err = mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	var rows int
	mb.DB().QueryRow(`SELECT COUNT(*) FROM deliveries`).Scan(&rows)
	if rows != 0 {
		t.Errorf("%d delivery rows left (claims stuck)", rows)
	}
	if left, _ := os.ReadDir(filepath.Join(ws, ".monoco/mailbox/outbound/email")); len(left) != 0 {
		t.Errorf("%d drafts left in outbound/", len(left))
	}
	archived, _ := os.ReadDir(filepath.Join(ws, ".monoco/mailbox/archive/email"))
	if len(archived) != n {
		t.Errorf("%d archived, want %d", len(archived), n)
	}
}

// requireInFlight fails the test unless the draft id is what a kill in the
// middle of its delivery leaves: still queued in outbound/, claimed (state
// sending), not recorded as accepted.
func requireInFlight(t *testing.T, ws, id string, kill int) {
	t.Helper()
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	e, err := mb.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("kill %d: the held draft %s: %v", kill, id, err)
	}
	var state string
	mb.DB().QueryRow(`SELECT state FROM deliveries WHERE id = ?`, id).Scan(&state)
	if e.Status != mailbox.StatusQueued || state != mailbox.DeliverySending {
		t.Fatalf("kill %d did not land mid-delivery: the draft the peer held is %s, delivery state %q; want queued and %q",
			kill, e.Status, state, mailbox.DeliverySending)
	}
}

// Kill -9 the service three times while mail pours into its receiver
// from eight senders that retry like any MTA, each kill with a transaction
// open in DATA and mail still to come: at the end every message, the ones
// cut off by a kill included, is in the mailbox exactly once.
func TestCrashDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the service")
	}
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, recv))
	const n, kills = 200, 3
	s := startServe(t, ws, web)
	var wg sync.WaitGroup
	var accepted, cut atomic.Int32 // messages answered 250; transactions a kill broke
	send := func(msgID, subject string) {
		msg := mailText("ann@example.com", "agent@example.com", msgID, subject, "body") // the same bytes on every try
		for {
			err := smtp.SendMail(recv, nil, "ann@example.com", []string{"agent@example.com"}, msg)
			if err == nil {
				accepted.Add(1)
				return
			}
			if oe := (*net.OpError)(nil); !errors.As(err, &oe) || oe.Op != "dial" {
				cut.Add(1)
			}
			time.Sleep(30 * time.Millisecond) // deferred: try again, as an MTA does
		}
	}
	work := make(chan int, n)
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				send(fmt.Sprintf("m%d@example.com", i), fmt.Sprint("message ", i))
			}
		}()
	}
	inbound := filepath.Join(ws, ".monoco/mailbox/inbound/email")
	var held []string // the Message-IDs of the transactions open at the kills
	for k := 1; k <= kills; k++ {
		// The k-th kill comes once k quarters of the mail are in...
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%d messages written", k*n/4), func() bool {
			files, _ := filepath.Glob(filepath.Join(inbound, "*.md"))
			return len(files) >= k*n/4
		})
		// ...and a transaction of the test's own is in its DATA.
		id := fmt.Sprintf("held%d@example.com", k)
		c, w := openData(t, recv, "ann@example.com", "agent@example.com", id, fmt.Sprint("held ", k))
		s.Kill()
		if accepted.Load() >= n {
			t.Fatalf("kill %d came after all the mail was in", k)
		}
		if err := w.Close(); err == nil {
			t.Fatalf("kill %d: the transaction open in DATA was answered after the kill", k)
		}
		c.Close()
		held = append(held, id)
		s = startServe(t, ws, web)
	}
	for k, id := range held {
		send(id, fmt.Sprint("held ", k+1))
	}
	wg.Wait()
	s.Stop(t)
	t.Logf("%d messages, %d kills, each cutting a transaction in DATA; %d more sender transactions cut", n, kills, cut.Load())
	files, _ := os.ReadDir(filepath.Join(ws, ".monoco/mailbox/inbound/email"))
	seen := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(ws, ".monoco/mailbox/inbound/email", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		seen[m.Metadata.ProviderRaw["message_id"].(string)]++
	}
	for i := 0; i < n; i++ {
		if c := seen[fmt.Sprintf("<m%d@example.com>", i)]; c != 1 {
			t.Errorf("message %d written %d times", i, c)
		}
	}
	for _, id := range held {
		if c := seen["<"+id+">"]; c != 1 {
			t.Errorf("%s, cut off by a kill, written %d times", id, c)
		}
	}
	if len(files) != n+kills {
		t.Errorf("%d files, want %d", len(files), n+kills)
	}
	if ids := countIDs(t, ws); len(ids) != n+kills {
		t.Errorf("index lists %d, want %d", len(ids), n+kills)
	}
}

// openData starts a mail transaction on the SMTP server at addr and writes
// its message, all but the final ".": closing w sends that and reads the
// reply.
func openData(t *testing.T, addr, from, to, msgID, subject string) (*smtp.Client, io.WriteCloser) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Mail(from); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(to); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, "From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s>\r\nDate: %s\r\n\r\nbody\r\n",
		from, to, subject, msgID, time.Now().Format(time.RFC1123Z))
	return c, w
}

// doctor says what works and, precisely, what to fix.
func TestDoctor(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	closed := testutil.FreeAddr(t)
	host, port, _ := net.SplitHostPort(closed)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
      accounts:
        - name: good
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
        - name: down
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %s, tls: none}
`, testutil.FreeAddr(t), testutil.FreeAddr(t), sink.Host(), sink.Port(), host, port))
	out, _, code := cli(t, ws, "", "doctor")
	if code != exitUnavailable {
		t.Errorf("exit %d, want %d:\n%s", code, exitUnavailable, out)
	}
	for _, want := range []string{"✓ config", "✓ layout", "✓ database", "✓ email/good smtp", "✗ email/down smtp",
		"connection refused", "check the smtp host, port and tls of account down", "1 check(s) failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	// The same as JSON, for scripts: every check with its outcome.
	out, _, code = cli(t, ws, "", "doctor", "--format", "json")
	var rep struct {
		OK     bool
		Failed int
		Checks []struct {
			Check  string
			OK     bool
			Detail string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitUnavailable || rep.OK || rep.Failed != 1 {
		t.Errorf("doctor --format json: exit %d, %v, %+v\n%s", code, err, rep, out)
	}
	outcome := map[string]bool{}
	for _, c := range rep.Checks {
		outcome[c.Check] = c.OK
		if c.Check == "email/down smtp" && !strings.Contains(c.Detail, "connection refused") {
			t.Errorf("the failed check's detail: %q", c.Detail)
		}
	}
	if !outcome["config"] || !outcome["email/good smtp"] || outcome["email/down smtp"] {
		t.Errorf("JSON outcomes %v", outcome)
	}
	// A message file made writable is a permission problem doctor names.
	seed(t, ws, testutil.Message(schema.Lark, "om_perm", testutil.Time("2026-01-01T00:00:00Z"), "x"))
	files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound/lark/*.md"))
	os.Chmod(files[0], 0o644)
	out, _, _ = cli(t, ws, "", "doctor")
	if !strings.Contains(out, "✗ permissions") || !strings.Contains(out, "must be read-only (0440)") {
		t.Errorf("writable message file not reported:\n%s", out)
	}
}

// --log-format json writes one JSON object per line.
func TestServeJSONLogs(t *testing.T) {
	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, testutil.FreeAddr(t)))
	s := startServe(t, ws, web, "--log-format", "json")
	if code := s.Stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(s.Log()), "\n")
	if len(lines) < 2 {
		t.Fatalf("log: %q", s.Log())
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["msg"] == nil || v["level"] == nil {
			t.Errorf("not a JSON log line: %q", l)
		}
	}
}

// The example drafts of testdata/ are valid.
func TestExampleDrafts(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/drafts/*.md")
	if len(files) < 4 {
		t.Fatalf("found %d example drafts", len(files))
	}
	out, e, code := cli(t, t.TempDir(), "", append([]string{"validate"}, files...)...)
	if code != 0 || strings.Count(out, "ok (draft)") != len(files) {
		t.Errorf("validate: %d %s %s", code, out, e)
	}
}

// doctor outside the service's environment, where a secret is a systemd
// credential it cannot read: it says so, and checks the rest.
func TestDoctorWithoutSecrets(t *testing.T) {
	ws := newWorkspace(t)
	writeConfig(t, ws, `courier:
  adapters:
    email:
      enabled: true
      receiver: {smtp: ""}
      accounts:
        - name: work
          smtp:
            host: 127.0.0.1
            port: 1
            password_file: ${CREDENTIALS_DIRECTORY}/smtp
`)
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	os.Unsetenv("CREDENTIALS_DIRECTORY")
	out, _, _ := cli(t, ws, "", "doctor")
	for _, want := range []string{"✗ config", "CREDENTIALS_DIRECTORY is not set", "inside the service's environment", "✓ layout", "✓ database"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

// Under systemd (Type=notify, WatchdogSec=): the service says READY=1 once
// it serves, pets the watchdog while its database answers, and says
// STOPPING=1 on SIGTERM. A NOTIFY_SOCKET of our own stands in for systemd.
func TestServeSystemdNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(got)
				return
			}
			got <- string(buf[:n])
		}
	}()
	wait := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case m, ok := <-got:
				if !ok {
					t.Fatalf("notify socket closed before %s", want)
				}
				if strings.Contains(m, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %s on the notify socket", want)
			}
		}
	}

	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, testutil.FreeAddr(t)))
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "300000") // 0.3 s: a pet every 0.1 s
	s := startServe(t, ws, web)
	wait("READY=1")
	wait("WATCHDOG=1")
	wait("WATCHDOG=1")
	if code := s.Stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.Log())
	}
	wait("STOPPING=1")
}
