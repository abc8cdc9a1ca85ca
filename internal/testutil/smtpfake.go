package testutil

import (
	"io"
	"log"
	"net"
	"slices"
	"sync"
	"testing"

	// Only adapters/email may import the emersion libraries in production
	// code (STYLE.md); testutil is imported by tests only.
	"github.com/emersion/go-smtp"
)

// SMTPFake is an SMTP server inside the test process (go-smtp's server),
// recording every transaction whose data arrived whole. Unlike SMTPSink,
// it can hold a transaction at its very end, the message whole on its side
// and the reply to the final "." not yet sent, until the test lets it go:
// the instant at which a client that crashes leaves a message delivered
// without knowing it (HoldAt). No TLS, no AUTH. Start one with
// StartSMTPFake.
type SMTPFake struct {
	t    testing.TB
	srv  *smtp.Server
	addr *net.TCPAddr

	mu    sync.Mutex
	msgs  []FakeMessage
	armed *Hold   // waiting for its transaction
	holds []*Hold // every hold made, released at cleanup
}

// FakeMessage is one transaction an SMTPFake received whole.
type FakeMessage struct {
	From string   // envelope sender, "" for <>
	To   []string // envelope recipients, in order
	UTF8 bool     // MAIL FROM said SMTPUTF8
	// Raw is the message as received, dot-unstuffed, lines ending in
	// CRLF.
	Raw []byte
}

// Hold is a transaction an SMTPFake holds at its final ".": the message
// is recorded, the reply waits for Release.
type Hold struct {
	at      int
	held    chan struct{}
	release chan struct{}
	once    sync.Once
	msg     FakeMessage
}

// StartSMTPFake starts an SMTPFake on a free 127.0.0.1 port and stops it
// in t.Cleanup, releasing what it holds first.
func StartSMTPFake(t testing.TB) *SMTPFake { return StartSMTPFakeWith(t, SMTPFakeOptions{}) }

// SMTPFakeOptions are what an SMTPFake offers besides the default.
type SMTPFakeOptions struct {
	// SMTPUTF8 offers the SMTPUTF8 extension (RFC 6531).
	SMTPUTF8 bool
}

// StartSMTPFakeWith is StartSMTPFake with options.
func StartSMTPFakeWith(t testing.TB, opts SMTPFakeOptions) *SMTPFake {
	t.Helper()
	f := &SMTPFake{t: t}
	f.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &fakeSession{f: f}, nil
	}))
	f.srv.Domain = "smtp-fake.test"
	f.srv.EnableSMTPUTF8 = opts.SMTPUTF8
	f.srv.ErrorLog = log.New(io.Discard, "", 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	f.addr = ln.Addr().(*net.TCPAddr)
	go f.srv.Serve(ln)
	t.Cleanup(func() {
		f.mu.Lock()
		holds := f.holds
		f.mu.Unlock()
		for _, h := range holds {
			h.Release()
		}
		f.srv.Close()
	})
	return f
}

// Addr returns the fake's "127.0.0.1:PORT".
func (f *SMTPFake) Addr() string { return f.addr.String() }

// Host returns "127.0.0.1".
func (f *SMTPFake) Host() string { return f.addr.IP.String() }

// Port returns the fake's port.
func (f *SMTPFake) Port() int { return f.addr.Port }

// Messages returns the transactions received whole so far, held ones
// included, in the order their data ended. A transaction cut off before
// its final "." is not one.
func (f *SMTPFake) Messages() []FakeMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.msgs)
}

// HoldAt arms the fake to hold the n-th transaction received whole,
// counting from its start (1 is the first), or the next one if n have
// already come. One hold is armed at a time.
func (f *SMTPFake) HoldAt(n int) *Hold {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed != nil {
		f.t.Fatalf("testutil: SMTPFake.HoldAt(%d) while the hold at %d waits for its transaction", n, f.armed.at)
	}
	h := &Hold{at: n, held: make(chan struct{}), release: make(chan struct{})}
	f.armed = h
	f.holds = append(f.holds, h)
	return h
}

// Held is closed once the transaction is held: its data has all arrived
// and its reply is not sent.
func (h *Hold) Held() <-chan struct{} { return h.held }

// Message is the held transaction; valid once Held is closed.
func (h *Hold) Message() FakeMessage { return h.msg }

// Release sends the held transaction its reply (250), if its client is
// still there to read it. It may be called more than once, and before the
// transaction comes (then it is not held at all).
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

type fakeSession struct {
	f    *SMTPFake
	from string
	to   []string
	utf8 bool
}

func (s *fakeSession) Mail(from string, opts *smtp.MailOptions) error {
	s.from, s.utf8 = from, opts != nil && opts.UTF8
	return nil
}

func (s *fakeSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *fakeSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err // cut off before the final ".": no message
	}
	f := s.f
	m := FakeMessage{From: s.from, To: slices.Clone(s.to), UTF8: s.utf8, Raw: raw}
	f.mu.Lock()
	f.msgs = append(f.msgs, m)
	h := f.armed
	if h != nil && len(f.msgs) >= h.at {
		f.armed = nil
		h.msg = m
	} else {
		h = nil
	}
	f.mu.Unlock()
	if h != nil {
		close(h.held)
		<-h.release
	}
	return nil
}

func (s *fakeSession) Reset()        { s.from, s.to, s.utf8 = "", nil, false }
func (s *fakeSession) Logout() error { return nil }
