package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-sasl"

	"github.com/monoco/courier/adapters"
)

// imapConn is a logged-in connection.
type imapConn struct {
	c       *imapclient.Client
	raw     *watchdogConn
	updates chan struct{}
	stop    func() bool
}

// deadline arms the connection's watchdog: from now on it is closed when
// it makes no progress for d (see watchdogConn).
func (ic *imapConn) deadline(d time.Duration) { ic.raw.arm(d) }

// clearDeadline disarms it, while the connection is rightly silent (IDLE,
// between polls, while the sink writes).
func (ic *imapConn) clearDeadline() { ic.raw.arm(0) }

// watchdogConn bounds the connection's silence by the source's own
// Timeout, on top of the deadlines go-imap sets itself. go-imap's client
// sets a 30 s read deadline for each response (5 min inside a literal) and
// clears it after each response, so a deadline set on the raw connection
// lasts only until the next response: a connection that goes silent after
// that (a dead peer whose TCP stack still answers, a NAT that dropped its
// mapping) would hang a command forever, and a server that accepts but
// never greets would hold the connect for 30 s whatever the Timeout. Here
// every read and write deadline go-imap asks for is capped by ours, and
// ours moves on whenever bytes pass, so a large message on a slow link is
// not cut, only a stalled connection.
type watchdogConn struct {
	net.Conn
	mu     sync.Mutex
	limit  time.Duration // 0: disarmed
	until  time.Time     // now + limit at the last progress
	rd, wd time.Time     // the deadlines go-imap asked for
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// apply sets the effective deadlines; w.mu is held.
func (w *watchdogConn) apply() error {
	err := w.Conn.SetReadDeadline(earliest(w.rd, w.until))
	if err2 := w.Conn.SetWriteDeadline(earliest(w.wd, w.until)); err == nil {
		err = err2
	}
	return err
}

func (w *watchdogConn) arm(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limit, w.until = d, time.Time{}
	if d > 0 {
		w.until = time.Now().Add(d)
	}
	w.apply()
}

// progress pushes the watchdog's deadline on after bytes passed.
func (w *watchdogConn) progress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.limit > 0 {
		w.until = time.Now().Add(w.limit)
		w.apply()
	}
}

func (w *watchdogConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.progress()
	}
	return n, err
}

func (w *watchdogConn) Write(p []byte) (int, error) {
	n, err := w.Conn.Write(p)
	if n > 0 {
		w.progress()
	}
	return n, err
}

func (w *watchdogConn) SetDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rd, w.wd = t, t
	return w.apply()
}

func (w *watchdogConn) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rd = t
	return w.Conn.SetReadDeadline(earliest(w.rd, w.until))
}

func (w *watchdogConn) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wd = t
	return w.Conn.SetWriteDeadline(earliest(w.wd, w.until))
}

func (ic *imapConn) close() {
	ic.deadline(5 * time.Second)
	ic.c.Logout().Wait()
	ic.c.Close()
	ic.stop()
}

// errAuth marks a login the server refused.
var errAuth = errors.New("authentication failed")

// connect dials, starts TLS as configured and logs in. The connection is
// closed when ctx ends.
func (s *IMAPSource) connect(ctx context.Context) (*imapConn, error) {
	srv := s.opts.Server
	d := &net.Dialer{Timeout: s.opts.Timeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", srv.addr())
	if err != nil {
		return nil, fmt.Errorf("imap %s: %w", srv.addr(), err)
	}
	// TLS, the greeting and the login are bounded by Timeout too.
	raw := &watchdogConn{Conn: nc}
	raw.arm(s.opts.Timeout)
	ic := &imapConn{raw: raw, updates: make(chan struct{}, 1)}
	opts := &imapclient.Options{
		TLSConfig: srv.tlsConfig(),
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(data *imapclient.UnilateralDataMailbox) {
				if data.NumMessages != nil {
					select {
					case ic.updates <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	var conn net.Conn = raw
	switch srv.TLS {
	case "implicit":
		tc := tls.Client(raw, srv.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("imap %s: TLS: %w", srv.addr(), err)
		}
		conn = tc
		ic.c = imapclient.New(conn, opts)
	case "starttls":
		if ic.c, err = imapclient.NewStartTLS(conn, opts); err != nil {
			raw.Close()
			return nil, fmt.Errorf("imap %s: STARTTLS: %w", srv.addr(), err)
		}
	default:
		ic.c = imapclient.New(conn, opts)
	}
	ic.stop = context.AfterFunc(ctx, func() { ic.c.Close() })
	fail := func(err error) (*imapConn, error) {
		ic.c.Close()
		ic.stop()
		return nil, err
	}
	if err := ic.c.WaitGreeting(); err != nil {
		return fail(fmt.Errorf("imap %s: greeting: %w", srv.addr(), err))
	}
	if srv.Auth == "login" || !ic.c.Caps().Has(imap.AuthCap(sasl.Plain)) {
		err = ic.c.Login(srv.Username, srv.Password.Reveal()).Wait()
	} else {
		err = ic.c.Authenticate(sasl.NewPlainClient("", srv.Username, srv.Password.Reveal()))
	}
	if err != nil {
		var ie *imap.Error
		// NO [UNAVAILABLE] is the server's own trouble (RFC 5530: its
		// authentication backend is down), worth retrying soon: not a
		// bad password, which is a refusal (tried again minutes later).
		if errors.As(err, &ie) && ie.Code != imap.ResponseCodeUnavailable {
			return fail(adapters.Refused(fmt.Errorf("imap %s: %w as %s: %s (check the account's imap username and password)", srv.addr(), errAuth, srv.Username, ie.Text)))
		}
		return fail(fmt.Errorf("imap %s: login: %w", srv.addr(), err))
	}
	return ic, nil
}

// idle waits in IDLE until the server reports news, the heartbeat is due,
// or ctx ends; then it leaves IDLE and checks the connection with a NOOP.
// (go-imap re-issues IDLE every 28 minutes by itself, before servers'
// 29-minute limit.)
func (s *IMAPSource) idle(ctx context.Context, ic *imapConn) error {
	// The server's "+ idling" is awaited within Timeout; then the
	// connection may be silent until the heartbeat.
	ic.deadline(s.opts.Timeout)
	cmd, err := ic.c.Idle()
	if err != nil {
		return fmt.Errorf("IDLE: %w", err)
	}
	ic.clearDeadline()
	select {
	case <-ic.updates:
	case <-time.After(s.opts.Heartbeat):
	case <-ctx.Done():
	case <-ic.c.Closed():
	}
	ic.deadline(s.opts.Timeout)
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("leave IDLE: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("IDLE: %w", err)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := ic.c.Noop().Wait(); err != nil {
		return fmt.Errorf("NOOP: %w", err)
	}
	return nil
}

// appendSent copies a sent message to the Sent folder (IMAP APPEND).
func appendSent(ctx context.Context, srv Server, folder string, write func(io.Writer) error, timeout time.Duration) error {
	var n countWriter
	if err := write(&n); err != nil {
		return err
	}
	s := NewIMAPSource(IMAPOptions{Server: srv, Timeout: timeout})
	ic, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer ic.close()
	if folder == "" {
		folder = "Sent"
	}
	cmd := ic.c.Append(folder, int64(n), &imap.AppendOptions{Flags: []imap.Flag{imap.FlagSeen}, Time: time.Now()})
	if err := write(cmd); err != nil {
		cmd.Close()
		return err
	}
	if err := cmd.Close(); err != nil {
		return err
	}
	_, err = cmd.Wait()
	return err
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
