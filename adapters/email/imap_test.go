package email

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// These tests run the IMAP source against go-imap's in-memory server
// (imapmemserver), the pattern of go-imap's own newMemClientServerPair: the
// real client, a real IMAP server, no network beyond loopback, and the real
// ingest pipeline and mailbox behind the source. dovecot_test.go repeats the
// important cases against a real Dovecot.

// memIMAP is an in-memory IMAP server with one user ("test"/"test") and an
// INBOX. The source connects to addr, where every command it sends is
// recorded; the test's own client connects to helperAddr, unrecorded.
type memIMAP struct {
	srv        *imapserver.Server
	user       *imapmemserver.User
	addr       string
	helperAddr string
	rec        *cmdRecorder

	mu     sync.Mutex
	helper *imapclient.Client
}

type memOptions struct {
	// noIdle hides IDLE from the capabilities the source sees.
	noIdle bool
	// loginErr, when set, is every login's answer.
	loginErr error
	// noBody answers the source's FETCH of a message's body without
	// the body (what a server does for a message it cannot read).
	noBody bool
}

// loginErrSession answers every login with an error. (It keeps MOVE, which
// the server announces.)
type loginErrSession struct {
	moveSession
	err error
}

type moveSession interface {
	imapserver.Session
	imapserver.SessionMove
}

func (s loginErrSession) Login(username, password string) error { return s.err }

// noBodySession answers every FETCH without its body sections.
type noBodySession struct{ moveSession }

func (s noBodySession) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, options *imap.FetchOptions) error {
	o := *options
	o.BodySection = nil
	return s.moveSession.Fetch(w, numSet, &o)
}

func startMemIMAP(t testing.TB, o memOptions) *memIMAP {
	t.Helper()
	mem := imapmemserver.New()
	user := imapmemserver.NewUser("test", "test")
	if err := user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			if o.loginErr != nil {
				return loginErrSession{mem.NewSession().(moveSession), o.loginErr}, nil, nil
			}
			if o.noBody {
				return noBodySession{mem.NewSession().(moveSession)}, nil, nil
			}
			return mem.NewSession(), nil, nil
		},
		InsecureAuth: true,
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapUIDPlus: {}, imap.CapMove: {}},
		Logger:       log.New(io.Discard, "", 0),
	})
	m := &memIMAP{srv: srv, user: user, rec: &cmdRecorder{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	helper, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.addr, m.helperAddr = ln.Addr().String(), helper.Addr().String()
	go srv.Serve(&recordingListener{Listener: ln, rec: m.rec, noIdle: o.noIdle})
	go srv.Serve(helper)
	t.Cleanup(func() {
		m.mu.Lock()
		if m.helper != nil {
			m.helper.Close()
		}
		m.mu.Unlock()
		srv.Close()
	})
	return m
}

// server is the Server the source is configured with.
func (m *memIMAP) server(t testing.TB) Server { return serverAt(t, m.addr) }

func serverAt(t testing.TB, addr string) Server {
	host, port := portOf(t, addr)
	return Server{Host: host, Port: port, TLS: "none", Username: "test", Password: "test"}
}

// source makes an IMAPSource on this server writing into ws.
func (m *memIMAP) source(t testing.TB, ws *workspace, opts IMAPOptions) *IMAPSource {
	if opts.Server.Host == "" {
		opts.Server = m.server(t)
	}
	return newTestSource(ws, opts)
}

func newTestSource(ws *workspace, opts IMAPOptions) *IMAPSource {
	opts.Account = "work"
	opts.Addresses = []string{"agent@example.com"}
	opts.Dropzone = ws.dz
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	return NewIMAPSource(opts)
}

// client is the test's own logged-in connection (not recorded).
func (m *memIMAP) client(t testing.TB) *imapclient.Client {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.helper == nil {
		c, err := imapclient.DialInsecure(m.helperAddr, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Login("test", "test").Wait(); err != nil {
			t.Fatal(err)
		}
		m.helper = c
	}
	return m.helper
}

// append adds a message to folder through the test's own client; a zero at
// means now.
func (m *memIMAP) append(t testing.TB, folder string, raw []byte, at time.Time) {
	t.Helper()
	appendIMAP(t, m.client(t), folder, raw, at)
}

func appendIMAP(t testing.TB, c *imapclient.Client, folder string, raw []byte, at time.Time) {
	t.Helper()
	cmd := c.Append(folder, int64(len(raw)), &imap.AppendOptions{Time: at})
	if _, err := cmd.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.Wait(); err != nil {
		t.Fatalf("append to %s: %v", folder, err)
	}
}

// flags returns the flags of every message of folder, by UID, read with
// EXAMINE so that looking changes nothing.
func (m *memIMAP) flags(t testing.TB, folder string) map[imap.UID][]imap.Flag {
	t.Helper()
	return flagsIMAP(t, m.client(t), folder)
}

func flagsIMAP(t testing.TB, c *imapclient.Client, folder string) map[imap.UID][]imap.Flag {
	t.Helper()
	sel, err := c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	out := map[imap.UID][]imap.Flag{}
	if sel.NumMessages == 0 {
		return out
	}
	msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range msgs {
		out[msg.UID] = msg.Flags
	}
	return out
}

// uidValidity returns folder's UIDVALIDITY.
func (m *memIMAP) uidValidity(t testing.TB, folder string) uint32 {
	t.Helper()
	st, err := m.client(t).Status(folder, &imap.StatusOptions{UIDValidity: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	return st.UIDValidity
}

func hasFlag(flags []imap.Flag, f imap.Flag) bool {
	return slices.ContainsFunc(flags, func(x imap.Flag) bool { return strings.EqualFold(string(x), string(f)) })
}

// cmdRecorder keeps the command lines clients sent on the recorded
// listener.
type cmdRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *cmdRecorder) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
}

// commands returns the command names sent ("EXAMINE", "UID FETCH",
// "IDLE", "DONE", ...), in order.
func (r *cmdRecorder) commands() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 1:
			out = append(out, strings.ToUpper(f[0]))
		case len(f) >= 3 && strings.EqualFold(f[1], "UID"):
			out = append(out, "UID "+strings.ToUpper(f[2]))
		case len(f) >= 2:
			out = append(out, strings.ToUpper(f[1]))
		}
	}
	return out
}

// count is how many times the command name was sent.
func (r *cmdRecorder) count(name string) int {
	n := 0
	for _, c := range r.commands() {
		if c == name {
			n++
		}
	}
	return n
}

// matching returns the lines holding s.
func (r *cmdRecorder) matching(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(strings.ToUpper(l), strings.ToUpper(s)) {
			out = append(out, l)
		}
	}
	return out
}

// waitCount polls until the command name was sent at least n times.
func (r *cmdRecorder) waitCount(t testing.TB, name string, n int, timeout time.Duration) {
	t.Helper()
	if !testutil.Poll(timeout, func() bool { return r.count(name) >= n }) {
		t.Fatalf("%s sent %d times in %v, want %d; commands: %v", name, r.count(name), timeout, n, r.commands())
	}
}

type recordingListener struct {
	net.Listener
	rec    *cmdRecorder
	noIdle bool
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, rec: l.rec, noIdle: l.noIdle}, nil
}

// recordingConn is the server's side of a connection: it records the
// client's lines and, with noIdle, strips IDLE from the capabilities the
// server announces (imapserver always announces it with IMAP4rev1).
type recordingConn struct {
	net.Conn
	rec    *cmdRecorder
	noIdle bool
	buf    []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.buf = append(c.buf, p[:n]...)
	for {
		i := bytes.Index(c.buf, []byte("\r\n"))
		if i < 0 {
			break
		}
		c.rec.add(string(c.buf[:i]))
		c.buf = c.buf[i+2:]
	}
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) {
	if c.noIdle && bytes.Contains(p, []byte("CAPABILITY")) {
		if _, err := c.Conn.Write(bytes.ReplaceAll(p, []byte(" IDLE"), nil)); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// checkUntouched fails unless the source only looked: EXAMINE, never
// SELECT; every body fetched with BODY.PEEK; nothing stored, copied,
// moved, expunged or appended; and no message got \Seen.
func checkUntouched(t *testing.T, m *memIMAP, folder string) {
	t.Helper()
	cmds := m.rec.commands()
	for _, c := range cmds {
		switch c {
		case "SELECT", "STORE", "UID STORE", "COPY", "UID COPY", "MOVE", "UID MOVE", "EXPUNGE", "UID EXPUNGE", "APPEND", "CREATE", "DELETE":
			t.Errorf("the source sent %s; by default it must not change the server (commands: %v)", c, cmds)
		}
	}
	if !slices.Contains(cmds, "EXAMINE") {
		t.Errorf("the source never sent EXAMINE: %v", cmds)
	}
	for _, l := range m.rec.matching("FETCH") {
		if strings.Contains(strings.ToUpper(l), "BODY[") {
			t.Errorf("a fetch without PEEK: %q", l)
		}
	}
	for uid, fl := range m.flags(t, folder) {
		if hasFlag(fl, imap.FlagSeen) {
			t.Errorf("%s UID %d is \\Seen after a sync: the source changed the server", folder, uid)
		}
	}
}

// TestIMAPBackfill: the first sync takes every message of the folder, each
// into one file that says where it came from, and saves the folder's
// checkpoint as UIDVALIDITY:last UID, without changing anything on the
// server.
func TestIMAPBackfill(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	for i := 1; i <= 5; i++ {
		m.append(t, "INBOX", testMail(i, fmt.Sprintf("Backfill %d", i)), time.Time{})
	}
	ws := newWorkspace(t)
	var progress bytes.Buffer // a terminal's view of the backfill
	src := m.source(t, ws, IMAPOptions{Progress: &progress})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	files := ws.files(t)
	if len(files) != 5 {
		t.Fatalf("%d files, want 5: %v", len(files), files)
	}
	if out := progress.String(); !strings.Contains(out, "\r") || !strings.Contains(out, "5/5 messages (") || !strings.HasSuffix(out, "\n") {
		t.Errorf("backfill progress %q: want done/total and rate, redrawn in place, ending the line", out)
	}
	validity := m.uidValidity(t, "INBOX")
	msgs := ws.messages(t)
	for i := 1; i <= 5; i++ {
		msg := msgs[mailID(i)]
		if msg == nil {
			t.Errorf("message %d (%s) has no file", i, mailID(i))
			continue
		}
		x := msg.Metadata.Extra
		if x.Account != "work" || x.Folder != "INBOX" || x.UID != uint32(i) || x.UIDValidity != validity {
			t.Errorf("message %d: account %q folder %q uid %d uidvalidity %d, want work INBOX %d %d",
				i, x.Account, x.Folder, x.UID, x.UIDValidity, i, validity)
		}
		if want := fmt.Sprintf("Backfill %d", i); msg.Session.Name != want {
			t.Errorf("message %d: subject %q, want %q", i, msg.Session.Name, want)
		}
		if x.Raw == nil || !ws.dz.Has(x.Raw.ID) {
			t.Errorf("message %d: the raw message is not in the dropzone", i)
		}
	}
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:5", validity); got != want {
		t.Errorf("checkpoint = %q, want %q", got, want)
	}
	checkUntouched(t, m, "INBOX")
}

// TestIMAPSecondSyncWritesNothing: a sync after a complete one fetches no
// body and writes no file, and leaves the checkpoint alone; a message
// added since is the only thing the next sync writes, and the checkpoint
// moves to it.
func TestIMAPSecondSyncWritesNothing(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	for i := 1; i <= 3; i++ {
		m.append(t, "INBOX", testMail(i, fmt.Sprintf("First %d", i)), time.Time{})
	}
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	before, written := ws.files(t), ws.written()
	cp := ws.checkpoint(t, "imap/work/INBOX")
	bodies := len(m.rec.matching("BODY.PEEK[]"))
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if after := ws.files(t); !slices.Equal(before, after) || ws.written() != written {
		t.Errorf("the second sync wrote files: %v, then %v", before, after)
	}
	if n := len(m.rec.matching("BODY.PEEK[]")); n != bodies {
		t.Errorf("the second sync fetched bodies again (%d fetches, then %d)", bodies, n)
	}
	if got := ws.checkpoint(t, "imap/work/INBOX"); got != cp {
		t.Errorf("checkpoint moved from %q to %q with nothing new", cp, got)
	}

	m.append(t, "INBOX", testMail(4, "Later"), time.Time{})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	after := ws.files(t)
	if len(after) != 4 {
		t.Fatalf("%d files after a new message, want 4", len(after))
	}
	if ws.messages(t)[mailID(4)] == nil {
		t.Error("the new message has no file")
	}
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:4", m.uidValidity(t, "INBOX")); got != want {
		t.Errorf("checkpoint = %q, want %q", got, want)
	}
}

// checkingSink checks what the source hands the sink: the checkpoint
// travels last in each Deliver, covering no message it does not carry,
// and the failOn-th Deliver fails (a disk full) without writing anything.
type checkingSink struct {
	adapters.Sink
	t      *testing.T
	calls  int
	failOn int
}

func (c *checkingSink) Deliver(ctx context.Context, events ...adapters.Event) error {
	c.calls++
	var maxUID uint32
	for i, ev := range events {
		if ev.Message != nil {
			maxUID = max(maxUID, ev.Message.Metadata.Extra.UID)
		}
		if ev.Checkpoint != nil && i != len(events)-1 {
			c.t.Errorf("Deliver %d: a checkpoint before the last event", c.calls)
		}
	}
	if last := events[len(events)-1].Checkpoint; last == nil {
		c.t.Errorf("Deliver %d: no checkpoint", c.calls)
	} else if _, u, _ := strings.Cut(last.Value, ":"); mustAtoi(c.t, u) < int(maxUID) {
		c.t.Errorf("Deliver %d: checkpoint %s behind message UID %d", c.calls, last.Value, maxUID)
	}
	if c.calls == c.failOn {
		return errors.New("disk full")
	}
	return c.Sink.Deliver(ctx, events...)
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestIMAPCheckpointAfterDurable: the checkpoint moves with each chunk
// only once the chunk is delivered; when a delivery fails, it stays at the
// last durable chunk and the next sync takes up from there, writing every
// message once.
func TestIMAPCheckpointAfterDurable(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	for i := 1; i <= 5; i++ {
		m.append(t, "INBOX", testMail(i, fmt.Sprintf("Chunked %d", i)), time.Time{})
	}
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{Chunk: 2})
	sink := &checkingSink{Sink: ws.pipe, t: t, failOn: 2}
	if err := src.SyncOnce(ctx, sink); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("SyncOnce = %v, want the sink's error", err)
	}
	v := m.uidValidity(t, "INBOX")
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:2", v); got != want {
		t.Errorf("checkpoint after the failed chunk = %q, want %q", got, want)
	}
	if n := len(ws.files(t)); n != 2 {
		t.Errorf("%d files after the failed chunk, want 2", n)
	}
	sink.failOn = 0
	if err := src.SyncOnce(ctx, sink); err != nil {
		t.Fatal(err)
	}
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:5", v); got != want {
		t.Errorf("checkpoint = %q, want %q", got, want)
	}
	if n, w := len(ws.files(t)), ws.written(); n != 5 || w != 5 {
		t.Errorf("%d files, %d written; want 5, 5", n, w)
	}
}

// TestIMAPSince: a first backfill with Since takes only mail received
// (INTERNALDATE) on or after that day.
func TestIMAPSince(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	dates := []string{"2025-06-01T10:00:00Z", "2025-12-31T23:00:00Z", "2026-01-01T08:00:00Z", "2026-02-01T12:00:00Z"}
	for i, d := range dates {
		at, _ := time.Parse(time.RFC3339, d)
		m.append(t, "INBOX", testMail(i+1, "Received "+d[:10]), at)
	}
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if got, want := ws.subjects(t), []string{"Received 2026-01-01", "Received 2026-02-01"}; !slices.Equal(got, want) {
		t.Errorf("subjects %q, want %q", got, want)
	}
	// Later mail is taken whatever its date once the backfill is done.
	old, _ := time.Parse(time.RFC3339, "2025-03-01T00:00:00Z")
	m.append(t, "INBOX", testMail(9, "Moved in later"), old)
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if n := len(ws.files(t)); n != 3 {
		t.Errorf("%d files after a later message, want 3", n)
	}
}

// TestIMAPIdlePush: while Run waits in IDLE, a message appended by another
// client is written within seconds, with no poll and no heartbeat to find
// it (both are an hour and a minute away).
func TestIMAPIdlePush(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	m.append(t, "INBOX", testMail(1, "Before"), time.Time{})
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{Mode: "idle", PollInterval: time.Hour, Heartbeat: time.Minute})
	runSource(t, src, ws.pipe)
	ws.waitFiles(t, 1, 5*time.Second)
	m.rec.waitCount(t, "IDLE", 1, 5*time.Second)

	m.append(t, "INBOX", testMail(2, "Pushed"), time.Time{})
	ws.waitFiles(t, 2, 5*time.Second)
	if ws.messages(t)[mailID(2)] == nil {
		t.Error("the pushed message has no file")
	}
	if h := src.Health(); h.Status != adapters.StatusConnected || !strings.Contains(h.Detail, "idle") {
		t.Errorf("health = %+v, want connected, idle", h)
	}
	checkUntouched(t, m, "INBOX")
}

// TestIMAPHeartbeat: IDLE is left every Heartbeat for a NOOP, then entered
// again, on the same connection: a Heartbeat longer than Timeout does not
// make the quiet IDLE look like a dead connection.
func TestIMAPHeartbeat(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{Heartbeat: 400 * time.Millisecond, Timeout: 150 * time.Millisecond})
	runSource(t, src, ws.pipe)
	m.rec.waitCount(t, "NOOP", 3, 5*time.Second)
	if n := m.rec.count("AUTHENTICATE") + m.rec.count("LOGIN"); n != 1 {
		t.Errorf("%d logins, want 1: the connection was dropped between heartbeats", n)
	}
	cmds := m.rec.commands()
	// Each NOOP follows an IDLE ended by DONE.
	for i, c := range cmds {
		if c == "NOOP" && (i < 2 || cmds[i-1] != "DONE" || cmds[i-2] != "IDLE") {
			t.Fatalf("NOOP not preceded by IDLE, DONE: %v", cmds[max(0, i-3):i+1])
		}
	}
	if m.rec.count("IDLE") < 3 {
		t.Errorf("IDLE not entered again after the heartbeat: %v", cmds)
	}
}

// TestIMAPPollMode: with mode poll the source never IDLEs and finds new
// mail by polling, on one connection.
func TestIMAPPollMode(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	ws := newWorkspace(t)
	// A poll interval longer than Timeout: the quiet connection between
	// polls is not taken for a dead one.
	src := m.source(t, ws, IMAPOptions{Mode: "poll", PollInterval: 400 * time.Millisecond, Timeout: 150 * time.Millisecond, Heartbeat: time.Hour})
	runSource(t, src, ws.pipe)
	m.rec.waitCount(t, "EXAMINE", 3, 5*time.Second) // polled twice
	if n := m.rec.count("AUTHENTICATE") + m.rec.count("LOGIN"); n != 1 {
		t.Errorf("%d logins, want 1: the connection was dropped between polls", n)
	}
	m.append(t, "INBOX", testMail(1, "Polled"), time.Time{})
	ws.waitFiles(t, 1, 5*time.Second)
	if n := m.rec.count("IDLE"); n != 0 {
		t.Errorf("mode poll sent IDLE %d times", n)
	}
	if h := src.Health(); !strings.Contains(h.Detail, "polling") {
		t.Errorf("health = %+v, want polling", h)
	}
}

// TestIMAPServerWithoutIdle: a server that does not announce IDLE is
// polled even in mode idle, and Check (courier doctor) says so.
func TestIMAPServerWithoutIdle(t *testing.T) {
	m := startMemIMAP(t, memOptions{noIdle: true})
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{Mode: "idle", PollInterval: 50 * time.Millisecond, Heartbeat: time.Hour})
	if err := src.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "no IDLE") {
		t.Errorf("Check = %v, want an error saying the server has no IDLE", err)
	}
	runSource(t, src, ws.pipe)
	m.rec.waitCount(t, "EXAMINE", 3, 5*time.Second) // Check's, then a sync and a poll
	m.append(t, "INBOX", testMail(1, "Polled"), time.Time{})
	ws.waitFiles(t, 1, 5*time.Second)
	if n := m.rec.count("IDLE"); n != 0 {
		t.Errorf("IDLE sent %d times to a server without it", n)
	}
}

// TestIMAPBadPassword: Start fails on bad credentials, saying so, without
// the password; an unreachable server only warns (Run keeps trying).
func TestIMAPBadPassword(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	ws := newWorkspace(t)
	srv := m.server(t)
	srv.Password = "hunter2-Sekr1t"
	src := m.source(t, ws, IMAPOptions{Server: srv})
	err := src.Start(context.Background())
	if err == nil {
		t.Fatal("Start succeeded with a bad password")
	}
	if !strings.Contains(err.Error(), "authentication") {
		t.Errorf("error %q does not mention authentication", err)
	}
	if strings.Contains(err.Error(), srv.Password.Reveal()) {
		t.Errorf("error %q holds the password", err)
	}
	if !errors.Is(err, errAuth) || !adapters.IsRefused(err) {
		t.Errorf("error %q is not errAuth marked adapters.Refused", err)
	}

	// Nothing listens here any more.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	src = newTestSource(ws, IMAPOptions{Server: serverAt(t, addr)})
	if err := src.Start(context.Background()); err != nil {
		t.Errorf("Start with the server down = %v, want nil (Run keeps trying)", err)
	}
	if h := src.Health(); h.Status != adapters.StatusError || h.LastError == "" {
		t.Errorf("health = %+v, want error", h)
	}
}

// TestIMAPRefusedRun: a login refused while serving (the password
// changed) ends Run with the refusal, marked adapters.Refused, after one
// login per folder: the service tries again minutes later, instead of
// every folder logging in again every minute. The password is in no
// error.
func TestIMAPRefusedRun(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	if err := m.user.Create("Lists", nil); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t)
	srv := m.server(t)
	srv.Password = "hunter2-Sekr1t"
	src := m.source(t, ws, IMAPOptions{Server: srv, Folders: []string{"INBOX", "Lists"}})
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- src.Run(ctx, ws.pipe) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Run went on with a refused password (%d logins)", m.rec.count("LOGIN")+m.rec.count("AUTHENTICATE"))
	}
	if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("Run: %v, want the refused login marked adapters.Refused", err)
	}
	if strings.Contains(err.Error(), srv.Password.Reveal()) {
		t.Errorf("error %q holds the password", err)
	}
	if n := m.rec.count("LOGIN") + m.rec.count("AUTHENTICATE"); n > 2 {
		t.Errorf("%d logins, want at most one per folder", n)
	}
}

// TestIMAPLoginUnavailable: a login refused with NO [UNAVAILABLE] (the
// server's authentication backend is down) is not a bad password: Start
// only warns, and Run keeps trying.
func TestIMAPLoginUnavailable(t *testing.T) {
	m := startMemIMAP(t, memOptions{loginErr: &imap.Error{Type: imap.StatusResponseTypeNo,
		Code: imap.ResponseCodeUnavailable, Text: "Temporary authentication failure"}})
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{})
	if err := src.Start(context.Background()); err != nil {
		t.Errorf("Start = %v, want nil: the server is unavailable, the password may be right", err)
	}
	if h := src.Health(); h.Status != adapters.StatusError || !strings.Contains(h.LastError, "Temporary authentication failure") {
		t.Errorf("health = %+v", h)
	}
}

// TestIMAPUIDValidityChange: when a folder's UIDVALIDITY changes (here the
// folder is deleted and made again with the same mail), the source syncs
// it again from the start: the messages already in the mailbox, with or
// without a Message-ID, make no second file, the new one makes one, and
// the checkpoint takes the new UIDVALIDITY.
func TestIMAPUIDValidityChange(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	noID := []byte("From: bob@example.com\r\nSubject: No id\r\nDate: Fri, 06 Feb 2026 09:00:00 +0000\r\n\r\nNo Message-ID here.\r\n")
	old := [][]byte{testMail(1, "One"), testMail(2, "Two"), noID}
	for _, raw := range old {
		m.append(t, "INBOX", raw, time.Time{})
	}
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	before := ws.files(t)
	if len(before) != 3 {
		t.Fatalf("%d files, want 3", len(before))
	}
	v1 := m.uidValidity(t, "INBOX")

	c := m.client(t)
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Unselect().Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete("INBOX").Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Create("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	for _, raw := range append(old, testMail(3, "Three")) {
		m.append(t, "INBOX", raw, time.Time{})
	}
	v2 := m.uidValidity(t, "INBOX")
	if v1 == v2 {
		t.Fatalf("UIDVALIDITY did not change (%d)", v1)
	}
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	after := ws.files(t)
	if len(after) != 4 {
		t.Fatalf("%d files after the UIDVALIDITY change, want 4 (3 old + 1 new): %v", len(after), after)
	}
	for _, f := range before {
		if !slices.Contains(after, f) {
			t.Errorf("%s is gone", f)
		}
	}
	if msg := ws.messages(t)[mailID(3)]; msg == nil || msg.Metadata.Extra.UIDValidity != v2 || msg.Metadata.Extra.UID != 4 {
		t.Errorf("new message: %+v", msg)
	}
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:4", v2); got != want {
		t.Errorf("checkpoint = %q, want %q", got, want)
	}
}

// TestIMAPTwoFoldersOneFile: a message in two folders, synced at once by
// Run's two connections, is one file.
func TestIMAPTwoFoldersOneFile(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	if err := m.user.Create("Archive", nil); err != nil {
		t.Fatal(err)
	}
	const shared = 40
	for i := 1; i <= shared; i++ {
		raw := testMail(i, fmt.Sprintf("Shared %d", i))
		m.append(t, "INBOX", raw, time.Time{})
		m.append(t, "Archive", raw, time.Time{})
	}
	m.append(t, "INBOX", testMail(100, "Only in INBOX"), time.Time{})
	m.append(t, "Archive", testMail(101, "Only in Archive"), time.Time{})
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{Folders: []string{"INBOX", "Archive"}, Chunk: 7})
	runSource(t, src, ws.pipe)
	ws.waitCheckpoint(t, "imap/work/INBOX", fmt.Sprintf("%d:%d", m.uidValidity(t, "INBOX"), shared+1), 10*time.Second)
	ws.waitCheckpoint(t, "imap/work/Archive", fmt.Sprintf("%d:%d", m.uidValidity(t, "Archive"), shared+1), 10*time.Second)
	if n := len(ws.files(t)); n != shared+2 {
		t.Errorf("%d files, want %d: a message in two folders must be one file", n, shared+2)
	}
	msgs := ws.messages(t)
	if msgs[mailID(100)] == nil || msgs[mailID(100)].Metadata.Extra.Folder != "INBOX" {
		t.Error("the INBOX-only message is missing or in the wrong folder")
	}
	if msgs[mailID(101)] == nil || msgs[mailID(101)].Metadata.Extra.Folder != "Archive" {
		t.Error("the Archive-only message is missing or in the wrong folder")
	}
}

// TestIMAPSelfSentNotIngested: a message whose Message-ID is that of a
// draft Courier queued (mailbox.DraftKeys) is not ingested when it shows up
// in a synced folder. It is fetched (an id proves nothing before the
// pipeline has seen whose it is: adapters.Content) and counted a duplicate.
func TestIMAPSelfSentNotIngested(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	if err := m.user.Create("Sent", nil); err != nil {
		t.Fatal(err)
	}
	ws := newWorkspace(t)
	d := testDraft()
	d.IdempotencyKey = "<Sent-By-Courier-1@corp.example>"
	d.InboundID = threading.EmailID(d.IdempotencyKey) // as the Resolver fixes it at queue time
	if _, err := ws.mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	echo := []byte("From: agent@corp.example\r\nTo: ann@example.com\r\nSubject: Re: plan\r\n" +
		"Date: Fri, 06 Feb 2026 20:45:00 +0000\r\nMessage-ID: <sent-by-courier-1@corp.example>\r\n\r\nOur own mail.\r\n")
	m.append(t, "Sent", echo, time.Time{})
	m.append(t, "Sent", testMail(1, "Sent by a person"), time.Time{})
	src := m.source(t, ws, IMAPOptions{Folders: []string{"Sent"}})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if got := ws.subjects(t); !slices.Equal(got, []string{"Sent by a person"}) {
		t.Errorf("subjects %q: our own sent mail was ingested", got)
	}
	if st := ws.pipe.Stats()[schema.Email]; st.Written != 1 || st.Duplicates != 1 {
		t.Errorf("stats %+v, want 1 written and the echo 1 duplicate", st)
	}
	if got, want := ws.checkpoint(t, "imap/work/Sent"), fmt.Sprintf("%d:2", m.uidValidity(t, "Sent")); got != want {
		t.Errorf("checkpoint = %q, want %q (past the echo too)", got, want)
	}
}

// TestIMAPMarkSeen: with MarkSeen the ingested messages get \Seen, a
// second copy of one of them too (its content is in the mailbox), and
// nothing else.
func TestIMAPMarkSeen(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	for i := 1; i <= 3; i++ {
		m.append(t, "INBOX", testMail(i, "Seen me"), time.Time{})
	}
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{MarkSeen: true})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	m.append(t, "INBOX", testMail(2, "Seen me"), time.Time{}) // UID 4: a copy
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if n := len(ws.files(t)); n != 3 {
		t.Fatalf("%d files, want 3", n)
	}
	if !slices.Contains(m.rec.commands(), "SELECT") {
		t.Error("MarkSeen without SELECT: EXAMINE is read-only")
	}
	fl := m.flags(t, "INBOX")
	for uid := imap.UID(1); uid <= 4; uid++ {
		if !hasFlag(fl[uid], imap.FlagSeen) {
			t.Errorf("UID %d flags %v, want \\Seen", uid, fl[uid])
		}
	}
	m.append(t, "INBOX", testMail(5, "Later"), time.Time{})
	if fl := m.flags(t, "INBOX"); hasFlag(fl[5], imap.FlagSeen) {
		t.Error("a message not yet ingested is \\Seen")
	}
}

// TestIMAPMoveTo: with MoveTo the ingested messages (and a second copy of
// one) leave the folder for the other one, and a later sync writes
// nothing more.
func TestIMAPMoveTo(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	if err := m.user.Create("Processed", nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		m.append(t, "INBOX", testMail(i, "Move me"), time.Time{})
	}
	m.append(t, "INBOX", testMail(1, "Move me"), time.Time{}) // a second copy
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{MoveTo: "Processed", Chunk: 2})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if n := len(ws.files(t)); n != 3 {
		t.Fatalf("%d files, want 3", n)
	}
	if n := len(m.flags(t, "INBOX")); n != 0 {
		t.Errorf("%d messages left in INBOX, want 0", n)
	}
	if n := len(m.flags(t, "Processed")); n != 4 {
		t.Errorf("%d messages in Processed, want 4", n)
	}
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	if n := len(ws.files(t)); n != 3 {
		t.Errorf("%d files after another sync, want 3", n)
	}
}

// TestIMAPDeadConnectionDuringSync: a connection that goes silent in the
// middle of a sync (here: the server never answers UID SEARCH) is given up
// after Timeout, and the source reconnects and finishes the sync. Without a
// bound of its own the source would wait forever: go-imap clears its read
// deadline after every response.
func TestIMAPDeadConnectionDuringSync(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	m.append(t, "INBOX", testMail(1, "Behind a dead connection"), time.Time{})
	p := startFreezeProxy(t, m.addr)
	p.FreezeOn("UID SEARCH")
	ws := newWorkspace(t)
	src := newTestSource(ws, IMAPOptions{Server: serverAt(t, p.addr), Timeout: 300 * time.Millisecond, Heartbeat: time.Hour})
	start := time.Now()
	runSource(t, src, ws.pipe)
	// Timeout, then a backoff of 1 s, then a sync: well under 5 s.
	ws.waitFiles(t, 1, 5*time.Second)
	t.Logf("written %v after the start, over %d connections", time.Since(start).Round(time.Millisecond), p.Accepted())
	if p.Accepted() < 2 {
		t.Errorf("%d connections, want a reconnection", p.Accepted())
	}
}

// TestIMAPConnectTimeout: a server that accepts the connection but never
// greets is given up after Timeout, not after go-imap's own 30 s.
func TestIMAPConnectTimeout(t *testing.T) {
	m := startMemIMAP(t, memOptions{})
	p := startFreezeProxy(t, m.addr)
	p.HoldNew(true)
	ws := newWorkspace(t)
	src := newTestSource(ws, IMAPOptions{Server: serverAt(t, p.addr), Timeout: 300 * time.Millisecond})
	start := time.Now()
	if err := src.Start(context.Background()); err != nil {
		t.Errorf("Start = %v, want nil (an unreachable server only warns)", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Start took %v with a Timeout of 300 ms", d)
	}
	if h := src.Health(); h.Status != adapters.StatusError {
		t.Errorf("health = %+v, want error", h)
	}
}

// TestIMAPJoinsKnownThread: a reply whose References are missing (only
// In-Reply-To, naming a reply) joins the thread of the parent the mailbox
// knows, as the receiver's mail does: the IMAP source asks the pipeline
// for it (adapters.Event.JoinKnownThread).
func TestIMAPJoinsKnownThread(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	ws := newWorkspace(t)
	mail := func(id, extra, subject string) []byte {
		return []byte("From: Ann <ann@example.com>\r\nTo: agent@corp.example\r\nSubject: " + subject +
			"\r\nDate: Fri, 06 Feb 2026 20:45:00 +0000\r\nMessage-ID: <" + id + ">\r\n" + extra + "\r\nbody\r\n")
	}
	m.append(t, "INBOX", mail("top@example.com", "", "Plan"), time.Time{})
	m.append(t, "INBOX", mail("mid@example.com", "In-Reply-To: <top@example.com>\r\nReferences: <top@example.com>\r\n", "Re: Plan"), time.Time{})
	m.append(t, "INBOX", mail("deep@example.com", "In-Reply-To: <mid@example.com>\r\n", "Re: Plan"), time.Time{})
	src := m.source(t, ws, IMAPOptions{})
	if err := src.SyncOnce(ctx, ws.pipe); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, msg := range ws.messages(t) {
		keys[msg.Metadata.ProviderRaw["message_id"].(string)] = string(msg.Session.ThreadKey)
	}
	if len(keys) != 3 || keys["<deep@example.com>"] != keys["<top@example.com>"] {
		t.Errorf("thread keys %v: the reply without References did not join its known thread", keys)
	}
}
