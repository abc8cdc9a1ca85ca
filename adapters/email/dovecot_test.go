package email

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
)

// These tests run the IMAP source against a real Dovecot 2.3
// (testutil.StartDovecot). They skip when Dovecot is not installed, unless
// COURIER_REQUIRE_SERVERS=1, which makes that a failure.

func dovecotServer(d *testutil.Dovecot) Server {
	return Server{Host: d.Host, Port: d.Port, TLS: "none", Username: d.User, Password: confkit.Secret(d.Password)}
}

func dovecotSource(d *testutil.Dovecot, ws *workspace, opts IMAPOptions) *IMAPSource {
	if opts.Server.Host == "" {
		opts.Server = dovecotServer(d)
	}
	return newTestSource(ws, opts)
}

// status returns doveadm's "messages" and "unseen" counts of folder.
func dovecotStatus(t *testing.T, d *testutil.Dovecot, folder string) (messages, unseen int) {
	t.Helper()
	out := d.Doveadm(t, "mailbox", "status", "-u", d.User, "messages unseen", folder)
	// "Folder messages=3 unseen=3"
	messages, unseen = -1, -1
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "messages="); ok {
			messages, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(f, "unseen="); ok {
			unseen, _ = strconv.Atoi(v)
		}
	}
	if messages < 0 || unseen < 0 {
		t.Fatalf("doveadm mailbox status: unexpected output %q", out)
	}
	return messages, unseen
}

// dovecotLogins counts the IMAP logins in Dovecot's log.
func dovecotLogins(d *testutil.Dovecot) int {
	return strings.Count(d.Log(), "imap-login: Info: Login: user=<"+d.User+">")
}

// waitLogin polls Dovecot's log until it shows more than n logins.
func waitLogin(t *testing.T, d *testutil.Dovecot, n int, timeout time.Duration) {
	t.Helper()
	if !testutil.Poll(timeout, func() bool { return dovecotLogins(d) > n }) {
		t.Fatalf("the source did not log in again within %v:\n%s", timeout, d.Log())
	}
}

// TestDovecotBackfill: a few hundred messages are backfilled into as many
// files, with the checkpoint at the last UID, the server's flags
// untouched; a second pass writes nothing.
func TestDovecotBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testutil.StartDovecot(t)
	const n = 300
	d.DeliverMany(t, "INBOX", func(i int) []byte { return testMail(i+1, fmt.Sprintf("Backfill %d", i+1)) }, n)
	ws := newWorkspace(t)
	src := dovecotSource(d, ws, IMAPOptions{Chunk: 128})
	start := time.Now()
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages in %v", n, time.Since(start).Round(time.Millisecond))
	if got := len(ws.files(t)); got != n {
		t.Fatalf("%d files, want %d", got, n)
	}
	validity := d.UIDValidity(t, "INBOX")
	msgs := ws.messages(t)
	for _, i := range []int{1, 2, 150, n} {
		m := msgs[mailID(i)]
		if m == nil {
			t.Errorf("message %d has no file", i)
			continue
		}
		if x := m.Metadata.Extra; x.UID != uint32(i) || x.UIDValidity != validity || x.Folder != "INBOX" {
			t.Errorf("message %d: uid %d uidvalidity %d folder %q", i, x.UID, x.UIDValidity, x.Folder)
		}
	}
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:%d", validity, n); got != want {
		t.Errorf("checkpoint %q, want %q", got, want)
	}
	if msgs, unseen := dovecotStatus(t, d, "INBOX"); msgs != n || unseen != n {
		t.Errorf("INBOX has %d messages, %d unseen; want %d and %d (the server untouched)", msgs, unseen, n, n)
	}
	written := ws.written()
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if got := len(ws.files(t)); got != n || ws.written() != written {
		t.Errorf("the second pass wrote: %d files, %d written, was %d", got, ws.written(), written)
	}
}

// TestDovecotIdlePush: a message delivered while Run waits in IDLE is
// written within seconds (the heartbeat is a minute away, and there is no
// polling in mode idle).
func TestDovecotIdlePush(t *testing.T) {
	t.Parallel()
	d := testutil.StartDovecot(t)
	d.Deliver(t, "INBOX", testMail(1, "Before"))
	ws := newWorkspace(t)
	src := dovecotSource(d, ws, IMAPOptions{Heartbeat: time.Minute, PollInterval: time.Hour})
	runSource(t, src, ws.pipe)
	ws.waitFiles(t, 1, 10*time.Second)
	d.Deliver(t, "INBOX", testMail(2, "Pushed"))
	start := time.Now()
	ws.waitFiles(t, 2, 10*time.Second)
	t.Logf("pushed message written %v after delivery", time.Since(start).Round(time.Millisecond))
	if ws.messages(t)[mailID(2)] == nil {
		t.Error("the pushed message has no file")
	}
}

// TestDovecotRestartUnderIdle: Dovecot restarts while the source is in
// IDLE; the source logs in to the new server and ingests what arrives
// there. (Dovecot's old IMAP process outlives the master by some 10 s and
// still pushes new mail meanwhile, so the test waits for the new login
// before the delivery that only the new connection can see.)
func TestDovecotRestartUnderIdle(t *testing.T) {
	t.Parallel()
	d := testutil.StartDovecot(t)
	d.Deliver(t, "INBOX", testMail(1, "Before the restart"))
	ws := newWorkspace(t)
	src := dovecotSource(d, ws, IMAPOptions{Heartbeat: time.Minute, PollInterval: time.Hour})
	runSource(t, src, ws.pipe)
	ws.waitFiles(t, 1, 10*time.Second)
	before := dovecotLogins(d)
	d.Restart()
	d.Deliver(t, "INBOX", testMail(2, "During the restart"))
	waitLogin(t, d, before, 30*time.Second)
	ws.waitFiles(t, 2, 10*time.Second)
	d.Deliver(t, "INBOX", testMail(3, "After the restart"))
	ws.waitFiles(t, 3, 10*time.Second)
	if n := len(ws.files(t)); n != 3 {
		t.Errorf("%d files, want 3", n)
	}
	if !testutil.Poll(5*time.Second, func() bool { return src.Health().Status == adapters.StatusConnected }) {
		t.Fatalf("health %+v after reconnecting", src.Health())
	}
}

// TestDovecotUIDValidityChange: the folder's UIDVALIDITY changes under a
// running source (Dovecot's index rebuilt: every UID renumbered); the
// source re-syncs and writes exactly the one new message, no duplicate of
// the old ones, with or without a Message-ID.
func TestDovecotUIDValidityChange(t *testing.T) {
	t.Parallel()
	d := testutil.StartDovecot(t)
	for i := 1; i <= 5; i++ {
		d.Deliver(t, "INBOX", testMail(i, fmt.Sprintf("Old %d", i)))
	}
	d.Deliver(t, "INBOX", []byte("From: bob@example.com\nSubject: No id\nDate: Fri, 06 Feb 2026 09:00:00 +0000\n\nNo Message-ID.\n"))
	ws := newWorkspace(t)
	src := dovecotSource(d, ws, IMAPOptions{Heartbeat: time.Minute})
	runSource(t, src, ws.pipe)
	ws.waitFiles(t, 6, 10*time.Second)
	// Asked only now: Dovecot gives INBOX its UIDVALIDITY when it is
	// first opened, and says 0 before.
	before := d.UIDValidity(t, "INBOX")
	ws.waitCheckpoint(t, "imap/work/INBOX", fmt.Sprintf("%d:6", before), 10*time.Second)
	oldFiles := ws.files(t)

	// Dovecot's old IMAP process outlives the stop by some 10 s (and may
	// still see new mail): the new message is delivered once the source
	// has logged in again, so that only the re-sync can find it.
	logins := dovecotLogins(d)
	_, after := d.ResetUIDValidity(t, "INBOX")
	waitLogin(t, d, logins, 30*time.Second)
	d.Deliver(t, "INBOX", testMail(7, "New"))
	ws.waitCheckpoint(t, "imap/work/INBOX", fmt.Sprintf("%d:7", after), 10*time.Second)
	files := ws.files(t)
	if len(files) != 7 || ws.written() != 7 {
		t.Errorf("%d files, %d written; want 7 (6 old + 1 new)", len(files), ws.written())
	}
	for _, f := range oldFiles {
		found := false
		for _, g := range files {
			found = found || f == g
		}
		if !found {
			t.Errorf("%s is gone", f)
		}
	}
	m := ws.messages(t)[mailID(7)]
	if m == nil || m.Metadata.Extra.UIDValidity != after || m.Metadata.Extra.UID != 7 {
		t.Errorf("new message: %+v", m)
	}
}

// TestDovecotServerUntouched: by default the source changes nothing on the
// server (every message still unseen and in place); with MarkSeen the
// ingested messages are \Seen, with MoveTo they move.
func TestDovecotServerUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testutil.StartDovecot(t)
	for _, f := range []string{"Plain", "Mark", "Move", "Processed"} {
		d.CreateFolder(t, f)
	}
	for _, f := range []string{"Plain", "Mark", "Move"} {
		for i := 1; i <= 3; i++ {
			d.Deliver(t, f, testMail(i, f+" message"))
		}
	}
	cases := []struct {
		folder string
		opts   IMAPOptions
		check  func(t *testing.T)
	}{
		{"Plain", IMAPOptions{}, func(t *testing.T) {
			if msgs, unseen := dovecotStatus(t, d, "Plain"); msgs != 3 || unseen != 3 {
				t.Errorf("Plain: %d messages, %d unseen; want 3, 3", msgs, unseen)
			}
		}},
		{"Mark", IMAPOptions{MarkSeen: true}, func(t *testing.T) {
			if msgs, unseen := dovecotStatus(t, d, "Mark"); msgs != 3 || unseen != 0 {
				t.Errorf("Mark: %d messages, %d unseen; want 3, 0", msgs, unseen)
			}
		}},
		{"Move", IMAPOptions{MoveTo: "Processed"}, func(t *testing.T) {
			if msgs, _ := dovecotStatus(t, d, "Move"); msgs != 0 {
				t.Errorf("Move still holds %d messages", msgs)
			}
			if msgs, unseen := dovecotStatus(t, d, "Processed"); msgs != 3 || unseen != 3 {
				t.Errorf("Processed: %d messages, %d unseen; want 3, 3", msgs, unseen)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.folder, func(t *testing.T) {
			ws := newWorkspace(t)
			tc.opts.Folders = []string{tc.folder}
			src := dovecotSource(d, ws, tc.opts)
			if err := src.SyncOnce(ctx, ws.pipe); err != nil {
				t.Fatal(err)
			}
			if n := len(ws.files(t)); n != 3 {
				t.Errorf("%d files, want 3", n)
			}
			tc.check(t)
		})
	}
}

// TestDovecotTwoFoldersOneFile: the same messages in two folders, synced
// at once by Run's two connections, make one file each.
func TestDovecotTwoFoldersOneFile(t *testing.T) {
	t.Parallel()
	d := testutil.StartDovecot(t)
	d.CreateFolder(t, "Archive")
	const shared = 30
	for i := 1; i <= shared; i++ {
		raw := testMail(i, fmt.Sprintf("Shared %d", i))
		d.Deliver(t, "INBOX", raw)
		d.Deliver(t, "Archive", raw)
	}
	d.Deliver(t, "INBOX", testMail(100, "Only in INBOX"))
	d.Deliver(t, "Archive", testMail(101, "Only in Archive"))
	ws := newWorkspace(t)
	src := dovecotSource(d, ws, IMAPOptions{Folders: []string{"INBOX", "Archive"}, Chunk: 5, Heartbeat: time.Minute})
	runSource(t, src, ws.pipe)
	ws.waitFiles(t, shared+2, 10*time.Second)
	ws.waitCheckpoint(t, "imap/work/INBOX", fmt.Sprintf("%d:%d", d.UIDValidity(t, "INBOX"), shared+1), 10*time.Second)
	ws.waitCheckpoint(t, "imap/work/Archive", fmt.Sprintf("%d:%d", d.UIDValidity(t, "Archive"), shared+1), 10*time.Second)
	if n := len(ws.files(t)); n != shared+2 {
		t.Errorf("%d files, want %d", n, shared+2)
	}
}

// TestDovecotDeadConnection: the connection goes silent (a proxy stops
// forwarding without closing anything) while the source is in IDLE. The
// source must notice within Heartbeat + Timeout and reconnect; while new
// connections are held silent too, each attempt must give up after
// Timeout; once they pass again, the message delivered meanwhile is
// written.
func TestDovecotDeadConnection(t *testing.T) {
	t.Parallel()
	d := testutil.StartDovecot(t)
	d.Deliver(t, "INBOX", testMail(1, "Before"))
	p := startFreezeProxy(t, d.Addr)
	ws := newWorkspace(t)
	const heartbeat, timeout = time.Second, time.Second
	srv := dovecotServer(d)
	srv.Host, srv.Port = portOf(t, p.addr)
	src := newTestSource(ws, IMAPOptions{Server: srv, Heartbeat: heartbeat, Timeout: timeout, PollInterval: time.Hour})
	runSource(t, src, ws.pipe)
	ws.waitFiles(t, 1, 10*time.Second)

	p.HoldNew(true)
	p.FreezeAll()
	frozen, conns := time.Now(), p.Accepted()
	d.Deliver(t, "INBOX", testMail(2, "Behind the dead connection"))
	// A reconnection attempt shows the dead connection was noticed:
	// Heartbeat + Timeout, then the first backoff (1 s).
	limit := heartbeat + timeout + time.Second + 2*time.Second
	if !testutil.Poll(time.Until(frozen.Add(limit)), func() bool { return p.Accepted() != conns }) {
		t.Fatalf("no reconnection %v after the connection froze (Heartbeat %v, Timeout %v)", limit, heartbeat, timeout)
	}
	t.Logf("dead connection noticed: reconnecting %v after the freeze", time.Since(frozen).Round(time.Millisecond))
	if n := len(ws.files(t)); n != 1 {
		t.Fatalf("%d files while every connection is frozen", n)
	}
	// The attempt just made is held silent: it must time out, and the next
	// one (after a backoff of 2 s) passes.
	p.HoldNew(false)
	thawed := time.Now()
	ws.waitFiles(t, 2, timeout+2*time.Second+5*time.Second)
	t.Logf("written %v after new connections pass again, over %d connections", time.Since(thawed).Round(time.Millisecond), p.Accepted())
	if ws.messages(t)[mailID(2)] == nil {
		t.Error("the message delivered during the freeze has no file")
	}
}

// TestDovecotRefusedLogin: Dovecot refusing the password (NO
// [AUTHENTICATIONFAILED]) is a refusal, at Start and in Run, marked
// adapters.Refused: the service starts without the account and tries it
// again minutes later. The password is in no error.
func TestDovecotRefusedLogin(t *testing.T) {
	t.Parallel()
	d := testutil.StartDovecot(t)
	ws := newWorkspace(t)
	srv := dovecotServer(d)
	srv.Password = "not-the-password-0003"
	src := dovecotSource(d, ws, IMAPOptions{Server: srv})
	err := src.Start(context.Background())
	if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("Start: %v, want the refused login marked adapters.Refused", err)
	}
	done := make(chan error, 1)
	go func() { done <- src.Run(context.Background(), ws.pipe) }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Run went on with a refused password:\n%s", d.Log())
	}
	if !adapters.IsRefused(err) {
		t.Errorf("Run: %v, want the refused login marked adapters.Refused", err)
	}
	if strings.Contains(err.Error(), srv.Password.Reveal()) {
		t.Errorf("error %q holds the password", err)
	}
}
