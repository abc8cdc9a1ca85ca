package email

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/monoco/courier/schema"
)

// Who may talk to the receiver, and what it records of them.
//
// The receiver ingests whatever it is handed, so the network is its first
// gate: ReceiverOptions.AllowFrom lists the networks it takes connections
// from, and any other client is answered 554 in place of the greeting
// (RFC 5321 §3.1) and disconnected, before it can hold a session. A
// receiver that listens beyond loopback without AllowFrom is open to anyone
// who can reach the port: Start logs a warning and `courier doctor` fails
// its exposure check until AllowFrom says who may connect (0.0.0.0/0 and
// ::/0 say "anyone" on purpose).

// allowListener answers 554 and closes the connections from outside nets.
type allowListener struct {
	net.Listener
	nets     []netip.Prefix
	hostname string
	log      func(msg string, args ...any)
	now      func() time.Time
	logged   time.Time
	refused  int
}

// allowFrom wraps ln so that only clients in nets get through; ln itself
// when nets is empty.
func (r *Receiver) allowFrom(ln net.Listener) net.Listener {
	if len(r.opts.AllowFrom) == 0 {
		return ln
	}
	return &allowListener{Listener: ln, nets: r.opts.AllowFrom, hostname: r.opts.Hostname, log: r.log.Warn, now: time.Now}
}

// Accept returns the next connection from an allowed network. The refusal
// is written inline, under a short deadline, rather than in a goroutine: a
// fresh socket's send buffer takes one line at once, and an outsider
// opening connections in a loop must not be able to grow anything.
func (l *allowListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := clientAddr(c.RemoteAddr())
		if !ok || l.allowed(ip) {
			// Not an IP connection (a Unix socket): local by nature.
			return c, nil
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(c, "554 5.7.1 %s access denied to %s\r\n", l.hostname, ip)
		c.Close()
		// One line a minute, saying how many, so that a flood does not
		// flood the log too. Accept runs on one goroutine: no lock.
		l.refused++
		if now := l.now(); now.Sub(l.logged) >= time.Minute {
			l.log("receiver: refused connections from outside allow_from", "client", ip.String(), "refused", l.refused)
			l.logged, l.refused = now, 0
		}
	}
}

func (l *allowListener) allowed(ip netip.Addr) bool {
	for _, n := range l.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// clientAddr is the IP address of a TCP peer, IPv4-mapped addresses made
// IPv4 (so that 192.0.2.0/24 matches a dual-stack listener's clients).
func clientAddr(a net.Addr) (netip.Addr, bool) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ip.Unmap(), ok
}

// Exposure says, for `courier doctor` and the warning at start, whether the
// receiver can be reached from beyond loopback by anyone: nil when it
// listens on loopback or a Unix socket, or AllowFrom limits who connects.
func (r *Receiver) Exposure() error {
	if len(r.opts.AllowFrom) > 0 || strings.HasPrefix(r.opts.Addr, "unix:") {
		return nil
	}
	host, _, err := net.SplitHostPort(r.opts.Addr)
	if err != nil {
		return nil // Start says what is wrong with the address
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	key := "receiver.smtp"
	if r.opts.LMTP {
		key = "receiver.lmtp"
	}
	return fmt.Errorf("email receiver: %s listens on %s, beyond loopback, and takes mail from anyone who can reach it "+
		"(any From, ingested for your agents): set courier.adapters.email.receiver.allow_from to your MTA's networks "+
		"(or to [0.0.0.0/0, \"::/0\"] to accept anyone on purpose)", key, r.opts.Addr)
}

// warnExposed logs Exposure's warning when the receiver starts.
func (r *Receiver) warnExposed() {
	if err := r.Exposure(); err != nil {
		r.log.Warn(err.Error())
	}
}

// envelope is what the session knows of the message's sender: MAIL FROM,
// RCPT TO, the client's address and HELO name.
func (s *session) envelope() *schema.Envelope {
	e := &schema.Envelope{MailFrom: s.from, RcptTo: s.rcpts}
	if s.conn == nil {
		return e
	}
	e.Helo = s.conn.Hostname()
	if ip, ok := clientAddr(s.conn.Conn().RemoteAddr()); ok {
		e.ClientIP = ip.String()
	}
	return e
}
