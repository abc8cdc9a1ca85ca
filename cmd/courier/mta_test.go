//go:build unix

package main

import (
	"fmt"
	"net/smtp"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// Courier behind a real MTA, set up as docs/mta.md says: the blocks of the
// page are what these tests run, with only paths, ports and the socket's
// group their own.

// mtaDoc is the page the tests read.
const mtaDoc = "../../docs/mta.md"

// docBlock returns the fenced block of docs/mta.md that follows the line
// "<!-- test: name -->".
func docBlock(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(mtaDoc)
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- test: " + name + " -->\n```"
	_, rest, ok := strings.Cut(string(b), marker)
	if !ok {
		t.Fatalf("%s has no block marked %q", mtaDoc, name)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's info string
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: the block %q does not end", mtaDoc, name)
	}
	return block
}

// replaced is s with each old string of pairs replaced by the new one
// after it. Each old string must be in s: if the page changes, the test
// must change with it rather than run something else.
func replaced(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("a block of %s no longer holds %q:\n%s", mtaDoc, pairs[i], s)
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

// socketGroup makes dir, where Courier makes its LMTP socket,
// set-group-ID to group: the socket is made with that group, which the
// MTA's delivery processes have, as they have Courier's group in the page.
func socketGroup(t *testing.T, dir, group string) {
	t.Helper()
	g, err := user.LookupGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	if err := os.Chown(dir, -1, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
}

// mta is the MTA in front, as burstAcrossKill drives it.
type mta interface {
	Addr() string            // its SMTP port
	Flush(t testing.TB)      // deliver what it holds now
	Queued(t testing.TB) int // messages in its queue
	Log() string
}

// burstAcrossKill runs `courier serve` with the page's courier.yaml,
// listening for LMTP at listen, behind m: 200 mails sent to m at once, then
// 100 more while Courier is killed (SIGKILL) and started again. Every mail
// must be filed exactly once, and m must never have been answered 421.
func burstAcrossKill(t *testing.T, m mta, listen string) {
	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, replaced(t, docBlock(t, "courier.yaml"),
		"127.0.0.1:2424", listen, "courier:\n", "courier:\n  http: {listen: "+web+"}\n"))
	s := startServe(t, ws, web)
	inbound := filepath.Join(ws, ".monoco/mailbox/inbound/email")
	filed := func() int {
		files, _ := filepath.Glob(filepath.Join(inbound, "*.md"))
		return len(files)
	}
	send := func(ids []string, workers int) <-chan error {
		work := make(chan string, len(ids))
		for _, id := range ids {
			work <- id
		}
		close(work)
		errc := make(chan error, workers)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range work {
					if err := sendMail(m.Addr(), "ann@example.com", "agent@agent.example.com", id, id, "body of "+id); err != nil {
						errc <- fmt.Errorf("sending %s to the MTA: %v", id, err)
						return
					}
				}
			}()
		}
		done := make(chan error, 1)
		go func() { wg.Wait(); close(errc); done <- <-errc }()
		return done
	}
	ids := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s-%d@example.com", prefix, i))
		}
		return out
	}
	allIn := func(n int) {
		t.Helper()
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%d mails filed and the MTA's queue empty", n), func() bool {
			return filed() == n && m.Queued(t) == 0
		})
	}

	start := time.Now()
	burst := ids("burst", 200)
	if err := <-send(burst, 10); err != nil {
		t.Fatal(err)
	}
	allIn(200)
	burstTook := time.Since(start)

	// 100 more, one after the other in one session; Courier is killed
	// once 30 of them are in.
	more := ids("kill", 100)
	sent := make(chan error, 1)
	go func() { sent <- sendSession(m.Addr(), more, 10*time.Millisecond) }()
	testutil.WaitFor(t, 60*time.Second, "30 of the 100 filed", func() bool { return filed() >= 230 })
	s.Kill()
	killed, atKill := time.Now(), filed()
	s = startServe(t, ws, web)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	m.Flush(t)
	allIn(300)
	afterKill := time.Since(killed)
	if code := s.Stop(t); code != 0 {
		t.Errorf("courier serve exited %d on SIGTERM", code)
	}
	t.Logf("200 mails in a burst, filed in %v; %d of 300 filed when Courier was killed, the rest within %v of the kill",
		burstTook.Round(time.Millisecond), atKill, afterKill.Round(time.Millisecond))
	if atKill >= 300 {
		t.Errorf("everything was filed before the kill: the kill tested nothing")
	}

	seen := map[string]int{}
	entries, err := os.ReadDir(inbound)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(inbound, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		id, _ := msg.Metadata.ProviderRaw["message_id"].(string)
		seen[id]++
	}
	for _, id := range append(burst, more...) {
		if n := seen["<"+id+">"]; n != 1 {
			t.Errorf("%s filed %d times", id, n)
		}
	}
	if len(entries) != 300 {
		t.Errorf("%d files, want 300", len(entries))
	}
	var refused []string
	for _, line := range strings.Split(m.Log(), "\n") {
		if strings.Contains(line, " 421 ") || strings.Contains(line, " 421-") {
			refused = append(refused, line)
		}
	}
	if len(refused) > 0 {
		t.Errorf("the MTA was answered 421 %d times; the first: %s", len(refused), refused[0])
	}
}

// sendSession sends a mail for each id to the MTA at addr, one after the
// other in one SMTP session, pause apart.
func sendSession(addr string, ids []string, pause time.Duration) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, id := range ids {
		if err := c.Mail("ann@example.com"); err != nil {
			return fmt.Errorf("%s: MAIL: %v", id, err)
		}
		if err := c.Rcpt("agent@agent.example.com"); err != nil {
			return fmt.Errorf("%s: RCPT: %v", id, err)
		}
		w, err := c.Data()
		if err != nil {
			return fmt.Errorf("%s: DATA: %v", id, err)
		}
		fmt.Fprintf(w, "From: ann@example.com\r\nTo: agent@agent.example.com\r\nSubject: %s\r\nMessage-ID: <%s>\r\nDate: %s\r\n\r\nbody of %s\r\n",
			id, id, time.Now().Format(time.RFC1123Z), id)
		if err := w.Close(); err != nil {
			return fmt.Errorf("%s: end of DATA: %v", id, err)
		}
		time.Sleep(pause)
	}
	return c.Quit()
}

// overTCPAndSocket runs run for an MTA in front of Courier twice: with
// Courier's LMTP listener on 127.0.0.1 (listen its address, dir ""), and
// on a Unix socket (listen "unix:" and its path, in dir).
func overTCPAndSocket(t *testing.T, mtaName string, run func(t *testing.T, listen, dir string)) {
	if testing.Short() {
		t.Skip("runs " + mtaName + " and kills the service")
	}
	t.Run("tcp", func(t *testing.T) { run(t, testutil.FreeAddr(t), "") })
	t.Run("unix socket", func(t *testing.T) {
		dir := testutil.ServerDir(t, "courier-"+strings.ToLower(mtaName)+"-lmtp-")
		run(t, "unix:"+filepath.Join(dir, "lmtp.sock"), dir)
	})
}

// TestPostfixInFront: Postfix at its defaults, with docs/mta.md's main.cf,
// transport and master.cf, delivers a burst to Courier over LMTP without
// a 421 (with a cap of 10 sessions per address, 74 deliveries of the 300
// were answered 421 over TCP, Postfix opening its 20 connections), over
// TCP on 127.0.0.1 and over the Unix socket, and nothing is lost or filed
// twice across a kill -9 of Courier.
func TestPostfixInFront(t *testing.T) {
	overTCPAndSocket(t, "Postfix", func(t *testing.T, listen, dir string) {
		main := replaced(t, docBlock(t, "postfix main.cf"), "/etc/postfix/", "$config_directory/")
		opts := testutil.PostfixOptions{Main: main, Postmap: []string{"transport"}}
		if dir != "" {
			socketGroup(t, dir, "postfix")
			opts.Master = docBlock(t, "postfix master.cf")
			opts.Files = map[string]string{"transport": replaced(t, docBlock(t, "postfix transport socket"),
				"/run/courier/lmtp.sock", strings.TrimPrefix(listen, "unix:"))}
		} else {
			opts.Files = map[string]string{"transport": replaced(t, docBlock(t, "postfix transport"), "127.0.0.1:2424", listen)}
		}
		burstAcrossKill(t, testutil.StartPostfix(t, opts), listen)
	})
}

// TestEximInFront: Exim, with docs/mta.md's router and transports,
// delivers a burst to Courier over LMTP without a 421, over TCP on
// 127.0.0.1 (the smtp transport speaking LMTP) and over the Unix socket
// (the lmtp transport), and nothing is lost or filed twice across a
// kill -9 of Courier.
func TestEximInFront(t *testing.T) {
	overTCPAndSocket(t, "Exim", func(t *testing.T, listen, dir string) {
		opts := testutil.EximOptions{Domains: "agent.example.com", Routers: docBlock(t, "exim router")}
		if dir != "" {
			// Under -C the private Exim keeps no privilege: its
			// transport cannot take a group other than its user's.
			opts.Transports = replaced(t, docBlock(t, "exim transport socket"),
				"/run/courier/lmtp.sock", strings.TrimPrefix(listen, "unix:"), "group = courier", "group = Debian-exim")
		} else {
			_, port, _ := strings.Cut(listen, ":")
			opts.Transports = replaced(t, docBlock(t, "exim transport"), "port = 2424", "port = "+port)
		}
		e := testutil.StartExim(t, opts)
		if dir != "" {
			socketGroup(t, dir, "Debian-exim")
		}
		burstAcrossKill(t, e, listen)
	})
}
