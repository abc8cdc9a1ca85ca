package email

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// These tests talk to the embedded receiver with real clients: net/smtp
// from the standard library for SMTP, go-smtp's LMTP client over a Unix
// socket, and a raw transcript where the exact replies matter. Behind the
// receiver is the real pipeline and mailbox.

// startReceiver starts a receiver delivering to sink (ws.pipe when nil).
func startReceiver(t *testing.T, ws *workspace, sink adapters.Sink, opts ReceiverOptions) *Receiver {
	t.Helper()
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	opts.Dropzone = ws.dz
	if sink == nil {
		sink = ws.pipe
	}
	r := NewReceiver(opts)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	runSource(t, r, sink)
	return r
}

// receiverMail has LF line ends (net/smtp sends them as CRLF), lines that
// start with dots (stuffed on the wire), and a line with trailing space.
const receiverMail = `From: Ann Example <ann@example.com>
To: Agent <agent@example.com>, Bob <bob@example.com>
Subject: =?utf-8?q?R=C3=A9ception?= test
Date: Fri, 06 Feb 2026 18:31:15 +0100
Message-ID: <receiver-1@example.com>
MIME-Version: 1.0
Content-Type: text/plain; charset=utf-8

Hello,
.one leading dot
..two leading dots
trailing space   
.
Bye.
`

// sendSMTP sends raw with net/smtp and returns the error of the end of
// DATA (nil: 250).
func sendSMTP(t *testing.T, addr string, raw string) error {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.example"); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("ann@example.com"); err != nil {
		return err
	}
	if err := c.Rcpt("agent@example.com"); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, raw); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// crlf is what net/smtp puts on the wire for LF text: the receiver keeps
// the message with these line ends.
func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

// dropzoneObjects counts the objects stored in the dropzone.
func dropzoneObjects(t *testing.T, ws *workspace) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(ws.mb.Dropzone(), "sha256"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReceiverSMTP: a message sent with net/smtp is in the mailbox the
// moment the 250 arrives, normalised as Normalize does it, with the raw
// message kept in the dropzone byte for byte as received (CRLF, dots
// unstuffed).
func TestReceiverSMTP(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{Own: []string{"agent@example.com"}})
	if err := sendSMTP(t, r.Addr(), receiverMail); err != nil {
		t.Fatalf("end of DATA: %v", err)
	}
	// No waiting: the 250 means the file is durable.
	files := ws.files(t)
	if len(files) != 1 {
		t.Fatalf("%d files right after the 250, want 1", len(files))
	}
	data, err := os.ReadFile(filepath.Join(ws.dir(), files[0]))
	if err != nil {
		t.Fatal(err)
	}
	m, err := schema.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != threading.EmailID("<receiver-1@example.com>") || m.Session.Name != "Réception test" || m.Metadata.Extra.Folder != "receiver" {
		t.Errorf("id %s subject %q folder %q", m.ID, m.Session.Name, m.Metadata.Extra.Folder)
	}
	wantText := "Hello,\n.one leading dot\n..two leading dots\ntrailing space   \n.\nBye.\n"
	if string(m.Content.Text) != wantText {
		t.Errorf("text %q, want %q", m.Content.Text, wantText)
	}
	if got := m.Metadata.Extra.ExternalParticipants; strings.Join(got, ",") != "ann@example.com,bob@example.com" {
		t.Errorf("external participants %v (the receiver's own address must be left out)", got)
	}

	// The raw message, byte for byte.
	if m.Metadata.Extra.Raw == nil {
		t.Fatal("no raw message")
	}
	if raw, want := ws.read(t, m.Metadata.Extra.Raw.ID), crlf(receiverMail); !bytes.Equal(raw, want) {
		t.Errorf("raw message differs from what was sent:\n got %q\nwant %q", raw, want)
	}

	// The same normalisation as the IMAP source's: Normalize on the same
	// bytes, with the receiver's options and the envelope sendSMTP gave,
	// gives the same file.
	env := &schema.Envelope{MailFrom: "ann@example.com", RcptTo: []string{"agent@example.com"}, ClientIP: "127.0.0.1", Helo: "client.example"}
	direct := normalizeTest(t, testutil.NewDropzone(t, nil), bytes.NewReader(crlf(receiverMail)),
		NormalizeOptions{Folder: "receiver", Own: []string{"agent@example.com"}, ReceivedAt: m.ReceivedAt.Time, Envelope: env})
	enc, err := schema.Encode(direct)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, data) {
		t.Errorf("the receiver's file differs from Normalize's:\n%s", testutil.LineDiff(string(enc), string(data)))
	}
}

// gateSink holds Deliver until released, to see when the 250 goes out.
type gateSink struct {
	adapters.Sink
	entered chan struct{}
	release chan struct{}
	err     error // returned instead of delivering
}

func (g *gateSink) Deliver(ctx context.Context, events ...adapters.Event) error {
	g.entered <- struct{}{}
	<-g.release
	if g.err != nil {
		return g.err
	}
	return g.Sink.Deliver(ctx, events...)
}

// TestReceiverRepliesAfterDurable: the reply to the end of DATA waits for
// the sink: while the write is pending the client has no answer; when it
// succeeds the client gets 250 and the file is there; when it fails the
// client gets a 451 (try again) and no file is left.
func TestReceiverRepliesAfterDurable(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := map[bool]string{false: "durable", true: "write fails"}[fail]
		t.Run(name, func(t *testing.T) {
			ws := newWorkspace(t)
			g := &gateSink{Sink: ws.pipe, entered: make(chan struct{}, 1), release: make(chan struct{})}
			if fail {
				g.err = errors.New("disk full")
			}
			r := startReceiver(t, ws, g, ReceiverOptions{})
			done := make(chan error, 1)
			go func() { done <- sendSMTP(t, r.Addr(), receiverMail) }()
			select {
			case <-g.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the receiver never delivered")
			}
			select {
			case err := <-done:
				t.Fatalf("the client got its answer (%v) before the message was durable", err)
			case <-time.After(200 * time.Millisecond):
			}
			close(g.release)
			err := <-done
			if !fail {
				if err != nil {
					t.Fatalf("end of DATA: %v", err)
				}
				if n := len(ws.files(t)); n != 1 {
					t.Errorf("%d files after the 250, want 1", n)
				}
				return
			}
			var te *textproto.Error
			if !errors.As(err, &te) || te.Code != 451 {
				t.Errorf("end of DATA = %v, want 451", err)
			}
			if n := len(ws.files(t)); n != 0 {
				t.Errorf("%d files after a failed write", n)
			}
		})
	}
}

// TestReceiverSizeLimit: a message over MaxMessage is refused with 552, by
// size at MAIL FROM when the client declares it, else at the end of DATA;
// nothing is written, not even to the dropzone.
func TestReceiverSizeLimit(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{MaxMessage: 2048})
	big := receiverMail + strings.Repeat("A long line of padding to go over the limit.\n", 100)

	err := sendSMTP(t, r.Addr(), big)
	var te *textproto.Error
	if !errors.As(err, &te) || te.Code != 552 {
		t.Errorf("end of DATA = %v, want 552", err)
	}

	c, err := gosmtp.Dial(r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Mail("ann@example.com", &gosmtp.MailOptions{Size: int64(len(big))})
	var se *gosmtp.SMTPError
	if !errors.As(err, &se) || se.Code != 552 {
		t.Errorf("MAIL FROM with SIZE=%d = %v, want 552", len(big), err)
	}

	if n := len(ws.files(t)); n != 0 {
		t.Errorf("%d files written for refused messages", n)
	}
	if n := dropzoneObjects(t, ws); n != 0 {
		t.Errorf("%d objects left in the dropzone by refused messages", n)
	}
	// A message under the limit still goes through.
	if err := sendSMTP(t, r.Addr(), receiverMail); err != nil {
		t.Errorf("a small message: %v", err)
	}
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files, want 1", n)
	}
}

// TestReceiverLongLines: lines far over RFC 5322's 998 octets (unwrapped
// HTML, base64 in one line) are real mail: the message is accepted whole,
// raw byte for byte. Only a line over the message limit is refused, and
// with a permanent 552: a 4xx would have the MTA retry it forever.
func TestReceiverLongLines(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{MaxMessage: 64 << 10})
	long := strings.Repeat("0123456789", 3000) // 30,000 octets
	mail := strings.Replace(receiverMail, "Bye.", long, 1)
	if err := sendSMTP(t, r.Addr(), mail); err != nil {
		t.Fatalf("a message with a 30,000-octet line: %v", err)
	}
	msgs := ws.messages(t)
	m := msgs[threading.EmailID("<receiver-1@example.com>")]
	if len(msgs) != 1 || m == nil {
		t.Fatalf("%d messages, want the one sent", len(msgs))
	}
	if !strings.Contains(string(m.Content.Text), long) {
		t.Errorf("the long line is not in the text (%d octets of text)", len(m.Content.Text))
	}
	if raw := ws.read(t, m.Metadata.Extra.Raw.ID); !bytes.Equal(raw, crlf(mail)) {
		t.Errorf("raw message: %d octets, want %d as sent", len(raw), len(crlf(mail)))
	}

	huge := strings.Replace(receiverMail, "Bye.", strings.Repeat("x", 70<<10), 1)
	huge = strings.Replace(huge, "<receiver-1@", "<receiver-2@", 1)
	err := sendSMTP(t, r.Addr(), huge)
	var te *textproto.Error
	if !errors.As(err, &te) || te.Code != 552 {
		t.Errorf("a line over the message limit: end of DATA = %v, want 552", err)
	}
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files, want 1", n)
	}
}

// TestReceiverRedelivery: the same message delivered again (an MTA that
// retries after a lost 250) is accepted and makes no second file.
func TestReceiverRedelivery(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{})
	for i := 0; i < 3; i++ {
		if err := sendSMTP(t, r.Addr(), receiverMail); err != nil {
			t.Fatalf("delivery %d: %v", i+1, err)
		}
	}
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files after three deliveries of one message, want 1", n)
	}
	if st := ws.pipe.Stats()[schema.Email]; st.Written != 1 || st.Duplicates != 2 {
		t.Errorf("stats %+v, want 1 written, 2 duplicates", st)
	}
}

// TestReceiverLMTP: over a Unix socket, LMTP answers the end of DATA once
// per recipient, and the message is one file whatever the number of
// recipients.
func TestReceiverLMTP(t *testing.T) {
	ws := newWorkspace(t)
	sock := filepath.Join(t.TempDir(), "lmtp.sock")
	r := startReceiver(t, ws, nil, ReceiverOptions{Addr: "unix:" + sock, LMTP: true, MaxMessage: 4096})
	if r.Name() != "email/receiver/lmtp" {
		t.Errorf("name %q", r.Name())
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket %s: %v %v", sock, fi.Mode(), err)
	}
	rcpts := []string{"agent@example.com", "other@example.com"}

	send := func(raw string) (map[string]*gosmtp.DataResponse, error) {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c := gosmtp.NewClientLMTP(conn)
		defer c.Close()
		if err := c.Hello("mta.example"); err != nil {
			t.Fatal(err)
		}
		if err := c.Mail("ann@example.com", nil); err != nil {
			t.Fatal(err)
		}
		for _, rc := range rcpts {
			if err := c.Rcpt(rc, nil); err != nil {
				t.Fatal(err)
			}
		}
		w, err := c.Data()
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, raw)
		resp, err := w.CloseWithLMTPResponse()
		// One status per recipient and no more: the next reply read is
		// QUIT's.
		if qerr := c.Quit(); qerr != nil {
			t.Errorf("QUIT after the statuses: %v (a status too many?)", qerr)
		}
		return resp, err
	}

	resp, err := send(string(crlf(receiverMail)))
	if err != nil {
		t.Fatalf("LMTP DATA: %v", err)
	}
	for _, rc := range rcpts {
		if resp[rc] == nil || !strings.Contains(resp[rc].StatusText, rc) {
			t.Errorf("status for %s: %+v", rc, resp[rc])
		}
	}
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files for one message to two recipients, want 1", n)
	}

	// Over the limit: each recipient gets its 552.
	_, err = send(string(crlf(receiverMail + strings.Repeat("padding padding padding\n", 300))))
	var le gosmtp.LMTPDataError
	if !errors.As(err, &le) || len(le) != 2 {
		t.Fatalf("LMTP DATA over the limit = %v, want a 552 for each recipient", err)
	}
	for _, rc := range rcpts {
		if le[rc] == nil || le[rc].Code != 552 {
			t.Errorf("status for %s: %v, want 552", rc, le[rc])
		}
	}
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files, want still 1", n)
	}
}

// TestReceiverLMTPTranscript: the same over a raw LMTP conversation, so
// that the count of replies is read off the wire.
func TestReceiverLMTPTranscript(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{LMTP: true})
	conn, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	tc := textproto.NewConn(conn)
	expect := func(code int) string {
		t.Helper()
		_, msg, err := tc.ReadResponse(code)
		if err != nil {
			t.Fatalf("want %d: %v", code, err)
		}
		return msg
	}
	expect(220)
	tc.PrintfLine("LHLO mta.example")
	expect(250)
	tc.PrintfLine("MAIL FROM:<ann@example.com>")
	expect(250)
	for _, rc := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		tc.PrintfLine("RCPT TO:<%s>", rc)
		expect(250)
	}
	tc.PrintfLine("DATA")
	expect(354)
	w := tc.DotWriter()
	io.WriteString(w, receiverMail)
	w.Close()
	for _, rc := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		if msg := expect(250); !strings.Contains(msg, rc) {
			t.Errorf("status %q does not name %s", msg, rc)
		}
	}
	tc.PrintfLine("QUIT")
	expect(221)
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files, want 1", n)
	}
}

// TestReceiverUnixSocketPath: a socket left by an earlier run is replaced;
// a file that is not a socket is left alone and the start fails.
func TestReceiverUnixSocketPath(t *testing.T) {
	ws := newWorkspace(t)
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	r := NewReceiver(ReceiverOptions{Addr: "unix:" + stale, LMTP: true, Dropzone: ws.dz})
	if err := r.Start(context.Background()); err != nil {
		t.Errorf("Start over a stale socket: %v", err)
	}
	r.Stop(context.Background())

	precious := filepath.Join(dir, "mail.db")
	os.WriteFile(precious, []byte("not a socket"), 0o600)
	r = NewReceiver(ReceiverOptions{Addr: "unix:" + precious, LMTP: true, Dropzone: ws.dz})
	if err := r.Start(context.Background()); err == nil {
		r.Stop(context.Background())
		t.Error("Start succeeded over a regular file")
	}
	if b, err := os.ReadFile(precious); err != nil || string(b) != "not a socket" {
		t.Errorf("the file at the socket path was removed or changed: %q %v", b, err)
	}
}
