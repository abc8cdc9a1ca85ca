package email

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
)

// ReceiverOptions configure a Receiver.
type ReceiverOptions struct {
	// Addr is host:port for TCP, or unix:/path for a Unix socket.
	Addr string
	// LMTP speaks LMTP (RFC 2033) instead of SMTP, for an MTA's local
	// delivery (Postfix's lmtp transport, say).
	LMTP     bool
	Hostname string
	// Own are the receiver's own addresses, left out of participants.
	Own         []string
	MaxMessage  int64 // bytes; larger messages are refused with 552
	MaxArtifact int64
	Dropzone    *dropzone.Store
	Logger      *slog.Logger
	// AllowFrom are the networks clients may connect from; others get 554
	// at connect (receiver_allow.go). Empty: any.
	AllowFrom []netip.Prefix
	// Verifier checks who sent each message (metadata.extra.auth).
	Verifier *Verifier
	// DedupeWindow is how far apart two identical mails without a
	// Message-ID may be received and still be one message (a client's
	// retry); default DefaultDedupeWindow.
	DedupeWindow time.Duration
	// Bounds bound the text a message file keeps and how many messages
	// normalise at once, shared with the provider's other sources.
	Bounds *Bounds

	// What one client may hold (receiver_limits.go); zero values take the
	// defaults. Beyond MaxSessions at once, or MaxSessionsPerIP from one
	// address (an IPv6 /64; the cap is not applied on a Unix socket, nor
	// to the LMTP listener's loopback clients), a client is answered
	// 421 4.7.0, which an MTA retries, unless a session waiting for its
	// client has moved no message for EvictIdle (1 s for a client whose
	// address delivered a message in the last hour; content arriving at
	// 1 KiB/s counts as moving one): that one is closed (421) to make
	// room. A session its client has ended (QUIT, a hang-up) no longer
	// counts (receiver_release.go).
	MaxSessions      int           // default 100
	MaxSessionsPerIP int           // default 10
	MaxSessionTime   time.Duration // a session's whole life, default 10 min
	// ReadTimeout bounds the wait for each command line, and a DATA or
	// BDAT transfer counted from its command; a timeout ends the session
	// (421), also in the middle of a line. Default 5 min.
	ReadTimeout    time.Duration
	MaxCommandLine int           // octets, CRLF included, default 4096; DATA lines are bounded by MaxMessage only
	EvictIdle      time.Duration // default 10 s
	// Now is the clock of MaxSessionTime's check at each command and of
	// EvictIdle (tests set it); deadlines go by the wall clock.
	Now func() time.Time
}

// Receiver is the embedded SMTP (or LMTP) server: whatever mail is handed
// to it is normalised and written to the mailbox before the DATA reply, so
// a 250 means the message is durable. It is an adapters.Source.
type Receiver struct {
	opts   ReceiverOptions
	log    *slog.Logger
	srv    *smtp.Server
	ln     net.Listener
	sink   atomic.Pointer[adapters.Sink]
	gate   atomic.Pointer[gate] // while Run runs
	served chan struct{}
	adapters.HealthTracker
}

var (
	_ adapters.Source  = (*Receiver)(nil)
	_ adapters.Starter = (*Receiver)(nil)
	_ adapters.Stopper = (*Receiver)(nil)
)

// NewReceiver returns a receiver. It does no I/O.
func NewReceiver(opts ReceiverOptions) *Receiver {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Hostname == "" {
		opts.Hostname = "localhost"
	}
	opts.limits()
	r := &Receiver{opts: opts, log: opts.Logger}
	r.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{r: r, conn: c}, nil }))
	r.srv.Domain = opts.Hostname
	r.srv.LMTP = opts.LMTP
	r.srv.MaxMessageBytes = opts.MaxMessage
	// go-smtp's line limit (2,000 by default) holds for the message body
	// too. RFC 5322's 998 is broken by real mail (unwrapped HTML, base64
	// in one line), and a refused message would be lost or retried
	// forever, so lines are bounded only by the message limit (none when
	// there is none), as Postfix accepts them. Command lines are bounded
	// under go-smtp, by the sessionConn (MaxCommandLine).
	r.srv.MaxLineLength = 0
	if opts.MaxMessage > 0 {
		r.srv.MaxLineLength = max(2000, int(min(opts.MaxMessage, 1<<30)))
	}
	r.srv.MaxRecipients = maxRecipients
	r.srv.ReadTimeout = opts.ReadTimeout
	r.srv.WriteTimeout = time.Minute
	r.srv.EnableSMTPUTF8 = true
	r.srv.ErrorLog = slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn)
	return r
}

// Name implements adapters.Source.
func (r *Receiver) Name() string {
	if r.opts.LMTP {
		return "email/receiver/lmtp"
	}
	return "email/receiver/smtp"
}

// Check says whether the receiver's address can be bound: another program
// may hold the port, or the running service (which doctor tells apart, as
// the check is a Listen check).
func (r *Receiver) Check(ctx context.Context) error {
	if strings.HasPrefix(r.opts.Addr, "unix:") {
		return nil
	}
	ln, err := net.Listen("tcp", r.opts.Addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v (another program holds the port, or the service is running)", r.opts.Addr, err)
	}
	return ln.Close()
}

// Addr returns the address the receiver listens on (after Start).
func (r *Receiver) Addr() string {
	if r.ln == nil {
		return r.opts.Addr
	}
	return r.ln.Addr().String()
}

// Start binds the listener, so that a port in use fails the service's
// start.
func (r *Receiver) Start(ctx context.Context) error {
	network, addr := "tcp", r.opts.Addr
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", p
		// A socket left by an earlier run; anything else at that path is
		// not ours to remove (binding then fails and says so).
		if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(addr)
		}
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, network, addr)
	if err != nil {
		return fmt.Errorf("email receiver: listen on %s: %w", r.opts.Addr, err)
	}
	if network == "unix" {
		os.Chmod(addr, 0o660)
	}
	r.ln = r.allowFrom(ln)
	r.warnExposed()
	return nil
}

// Run implements adapters.Source: it serves until ctx ends.
func (r *Receiver) Run(ctx context.Context, sink adapters.Sink) error {
	if r.ln == nil {
		if err := r.Start(ctx); err != nil {
			return err
		}
	}
	r.sink.Store(&sink)
	r.Set(adapters.StatusConnected, "listening on "+r.Addr())
	errc := make(chan error, 1)
	g := newGate(r.ln, r)
	r.gate.Store(g)
	go func() { errc <- r.srv.Serve(g) }()
	select {
	case <-ctx.Done():
		// Sessions waiting for a command are told and closed now;
		// those in the middle of a message have 30 s to finish it.
		g.shutdown()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if r.srv.Shutdown(sctx) != nil {
			r.srv.Close()
		}
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, smtp.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Stop closes the listener if Run never ran.
func (r *Receiver) Stop(ctx context.Context) error {
	if r.sink.Load() == nil && r.ln != nil {
		return r.ln.Close()
	}
	return nil
}

// session is one SMTP conversation.
type session struct {
	r     *Receiver
	conn  *smtp.Conn // the client's address and HELO, for the envelope
	from  string
	rcpts []string
}

var _ smtp.LMTPSession = (*session)(nil)

func (s *session) Reset()        { s.from, s.rcpts = "", nil }
func (s *session) Logout() error { return nil }

func (s *session) Mail(from string, opts *smtp.MailOptions) error {
	if opts != nil && opts.Size > 0 && s.r.opts.MaxMessage > 0 && opts.Size > s.r.opts.MaxMessage {
		return &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "message too big"}
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, opts *smtp.RcptOptions) error {
	s.rcpts = append(s.rcpts, to)
	return nil
}

// Data makes the message durable, then answers 250.
func (s *session) Data(r io.Reader) error {
	return s.deliver(r)
}

// LMTPData answers once per recipient: the message is one file whatever the
// number of recipients, so they share its fate.
func (s *session) LMTPData(r io.Reader, status smtp.StatusCollector) error {
	err := s.deliver(r)
	for _, rc := range s.rcpts {
		status.SetStatus(rc, err)
	}
	return err
}

var errTooBig = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "message too big"}

func (s *session) deliver(r io.Reader) error {
	rc := s.r
	sinkp := rc.sink.Load()
	if sinkp == nil {
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "not ready, try again"}
	}
	batch := rc.opts.Dropzone.NewBatch()
	defer batch.Abort()
	obj, err := batch.Put(r)
	if err != nil {
		// A line over the line limit is a line over the message limit.
		if errors.Is(err, smtp.ErrDataTooLarge) || errors.Is(err, dropzone.ErrTooLarge) || errors.Is(err, smtp.ErrTooLongLine) {
			return errTooBig
		}
		if clientGone(err) {
			// A timeout, a hang-up, an abandoned BDAT: not a fault of
			// ours, and as frequent as a client likes (so: debug).
			rc.log.Debug("receiver: the client stopped sending its message", "err", err)
			return errClientGone
		}
		rc.log.Error("receiver: cannot store the message", "err", err)
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "cannot store the message now, try again"}
	}
	f, err := batch.Open(obj)
	if err != nil {
		return tempFail(rc, err)
	}
	m, err := Normalize(f, batch, obj, NormalizeOptions{Folder: "receiver", Own: rc.opts.Own, ReceivedAt: rc.opts.Now().UTC(), MaxArtifact: rc.opts.MaxArtifact,
		Verifier: rc.opts.Verifier, Envelope: s.envelope(), Bounds: rc.opts.Bounds})
	f.Close()
	if err != nil {
		return tempFail(rc, err)
	}
	if err := batch.Commit(); err != nil {
		return tempFail(rc, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := (*sinkp).Deliver(ctx, event(m, rc.opts.Verifier, rc.opts.DedupeWindow)); err != nil {
		return tempFail(rc, err)
	}
	rc.Event()
	s.markDelivered()
	rc.log.Info("received", "id", m.ID, "from", s.from, "rcpts", len(s.rcpts), "size", obj.Size)
	return nil
}

func tempFail(r *Receiver, err error) error {
	r.log.Error("receiver: cannot ingest the message", "err", err)
	r.Error(err)
	return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "cannot store the message now, try again"}
}
