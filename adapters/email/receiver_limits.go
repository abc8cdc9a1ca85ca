package email

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/monoco/courier/internal/netgate"
)

// What one client can hold of the receiver, and for how long.
//
// go-smtp alone bounds little of it: one line limit holds for command
// lines and DATA lines alike (raised to the message size, since real mail
// has long body lines), so a "command" could be 150 MiB long, gathered in
// memory; a NOOP now and then keeps a session forever; and a read timeout
// in the middle of a line is answered 501 and the session goes on, because
// bufio.Reader.ReadLine drops the error when it holds part of a line. So
// the receiver wraps its listener in a gate (sessions at once, in all and
// per client address) and each connection in a sessionConn, which follows
// the conversation under go-smtp's reader: it hands go-smtp a command line
// only when the whole line is there and at most MaxCommandLine octets long,
// DATA and BDAT content as it comes, and ends the session at its lifetime.

// The defaults of the ReceiverOptions limits.
const (
	defaultMaxSessions      = 100
	defaultMaxSessionsPerIP = 10
	defaultMaxSessionTime   = 10 * time.Minute
	// RFC 5321 4.5.3.2.7: a server waits 5 minutes for a command.
	defaultReadTimeout = 5 * time.Minute
	// RFC 5321 allows 512 octets; this leaves room for SMTPUTF8 addresses
	// and the parameters of extensions (ORCPT, ENVID) without letting a
	// line grow without end.
	defaultMaxCommandLine = 4096
	// Postfix shortens its timeouts to 10 s under stress; a session that
	// has moved no message for as long gives its place to a new one.
	defaultEvictIdle = 10 * time.Second
	// Content counts as moving a message at this rate: a session sending
	// a message's content at 1 KiB/s or more never looks idle, one that
	// trickles it (or sends one-octet BDAT chunks now and then) does.
	creditPerKiB = time.Second
	// A client whose address delivered a message within knownFor (the
	// last knownSenders such addresses are kept) may take the place of a
	// session idle for knownEvictIdle already. Slow clients that reconnect
	// as soon as they are refused would otherwise take every place that
	// frees up before the MTA that delivers real mail finds one.
	knownSenders   = 1024
	knownFor       = time.Hour
	knownEvictIdle = time.Second
	// RFC 5321 4.5.3.1.8 requires at least 100 recipients per message.
	// More is a client's to split, and each recipient costs up to a
	// command line of memory for the length of the transaction.
	maxRecipients = 100
)

// limits fills in the defaults of the receiver's limits.
func (o *ReceiverOptions) limits() {
	if o.MaxSessions <= 0 {
		o.MaxSessions = defaultMaxSessions
	}
	if o.MaxSessionsPerIP <= 0 {
		o.MaxSessionsPerIP = defaultMaxSessionsPerIP
	}
	if o.MaxSessionTime <= 0 {
		o.MaxSessionTime = defaultMaxSessionTime
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = defaultReadTimeout
	}
	if o.MaxCommandLine <= 0 {
		o.MaxCommandLine = defaultMaxCommandLine
	}
	if o.EvictIdle <= 0 {
		o.EvictIdle = defaultEvictIdle
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// gate is the receiver's listener: it admits a session while there are
// fewer than MaxSessions, and fewer than MaxSessionsPerIP from the
// client's address. With every place taken it closes the session, waiting
// for its client, that has gone longest (at least EvictIdle, or
// knownEvictIdle for a client from an address that delivered mail lately)
// without moving a message (see sessionConn.moved), so that slow clients
// cannot keep real mail out; failing that, and beyond the per-address cap,
// it answers 421, which an MTA retries later.
type gate struct {
	net.Listener
	opts    *ReceiverOptions
	log     func(msg string, args ...any)
	closing atomic.Bool

	mu      sync.Mutex
	conns   map[*sessionConn]struct{}
	perIP   map[string]int
	known   map[string]time.Time // address → when it last delivered a message
	refused int                  // since the last log line, which says how many
	evicted int
	logged  time.Time
}

func newGate(ln net.Listener, r *Receiver) *gate {
	return &gate{Listener: ln, opts: &r.opts, log: r.log.Warn,
		conns: map[*sessionConn]struct{}{}, perIP: map[string]int{}, known: map[string]time.Time{}}
}

// Accept returns the next connection admitted; the others are answered and
// closed here.
func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if sc := g.admit(c); sc != nil {
			return sc, nil
		}
	}
}

func (g *gate) admit(c net.Conn) *sessionConn {
	key := g.capKey(c.RemoteAddr())
	now := g.opts.Now()
	var (
		refuse string
		victim *sessionConn
		sc     *sessionConn
	)
	g.mu.Lock()
	if key != "" && g.perIP[key] >= g.opts.MaxSessionsPerIP || len(g.conns) >= g.opts.MaxSessions {
		g.reapEnded()
	}
	switch {
	case g.closing.Load():
		refuse = "421 4.3.2 " + g.opts.Hostname + " shutting down, try again later"
	case key != "" && g.perIP[key] >= g.opts.MaxSessionsPerIP:
		refuse = "421 4.7.0 " + g.opts.Hostname + " too many connections from your address, try again later"
	case len(g.conns) >= g.opts.MaxSessions:
		wait := g.opts.EvictIdle
		if t, ok := g.known[key]; ok && now.Sub(t) < knownFor {
			wait = min(wait, knownEvictIdle)
		}
		if victim = g.idlest(now, wait); victim == nil {
			refuse = "421 4.7.0 " + g.opts.Hostname + " too many connections, try again later"
		}
	}
	if victim != nil {
		g.forget(victim)
		g.evicted++
	}
	if refuse != "" {
		g.refused++
	} else {
		sc = newSessionConn(c, g, key, now)
		g.conns[sc] = struct{}{}
		if key != "" {
			g.perIP[key]++
		}
	}
	// Under attack every refusal would be a line: one a minute says how
	// many there were.
	var logArgs []any
	if (refuse != "" || victim != nil) && now.Sub(g.logged) >= time.Minute {
		logArgs = []any{"sessions", len(g.conns), "refused", g.refused, "evicted", g.evicted,
			"max_sessions", g.opts.MaxSessions, "max_sessions_per_ip", g.opts.MaxSessionsPerIP}
		g.refused, g.evicted, g.logged = 0, 0, now
	}
	g.mu.Unlock()

	if logArgs != nil {
		g.log("receiver: sessions over the caps refused, or idle ones closed for new ones (counts since the last such line)", logArgs...)
	}
	if victim != nil {
		go victim.evict("421 4.7.0 " + g.opts.Hostname + " closing an idle session, too many connections")
	}
	if refuse != "" {
		// A new socket's send buffer is empty: the write does not wait for
		// the client; the deadline is there in case it ever does.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(c, refuse+"\r\n")
		c.Close()
	}
	return sc
}

// idlest returns the session waiting for its client that has gone longest,
// at least wait, without moving a message, marked evicted; nil if none
// has. Called with g.mu held.
func (g *gate) idlest(now time.Time, wait time.Duration) *sessionConn {
	var best *sessionConn
	var bestIdle time.Duration
	for c := range g.conns {
		if d, ok := c.idle(now); ok && d >= wait && d > bestIdle {
			best, bestIdle = c, d
		}
	}
	if best == nil || !best.markEvicted() {
		return nil
	}
	return best
}

// forget frees c's place. Called with g.mu held.
func (g *gate) forget(c *sessionConn) {
	if _, ok := g.conns[c]; !ok {
		return
	}
	delete(g.conns, c)
	if c.key != "" {
		if g.perIP[c.key]--; g.perIP[c.key] <= 0 {
			delete(g.perIP, c.key)
		}
	}
}

// delivered records that key's client moved a message at now.
func (g *gate) delivered(key string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.known[key]; !ok && len(g.known) >= knownSenders {
		oldest := now
		var drop string
		for k, t := range g.known {
			if !t.After(oldest) {
				oldest, drop = t, k
			}
		}
		delete(g.known, drop)
	}
	g.known[key] = now
}

func (g *gate) release(c *sessionConn) {
	g.mu.Lock()
	g.forget(c)
	g.mu.Unlock()
}

// shutdown admits no more sessions and closes those waiting for a
// command; a session in the middle of a message finishes it and is closed
// when it asks for the next command.
func (g *gate) shutdown() {
	g.closing.Store(true)
	g.mu.Lock()
	var idle []*sessionConn
	for c := range g.conns {
		if c.waitingForCommand() && c.markEvicted() {
			idle = append(idle, c)
		}
	}
	g.mu.Unlock()
	for _, c := range idle {
		c.evict("421 4.3.2 " + g.opts.Hostname + " shutting down, try again later")
	}
}

// sessions returns the number of sessions admitted and not yet closed.
func (g *gate) sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// clientKey is what the per-address cap counts by (netgate.AddrKey): the
// IPv4 address, the /64 of an IPv6 one; "" for a Unix socket, where the
// one client is the local MTA and only the total cap holds.
func clientKey(a net.Addr) string { return netgate.AddrKey(a) }

// What sessionConn hands go-smtp next.
const (
	modeCommand = iota // one command line at a time, whole, at most MaxCommandLine octets
	modeData           // DATA content, lines of any length, up to its end marker
	modeChunk          // a BDAT chunk: so many octets, whatever they are
)

// The end-of-data states of go-smtp's dataReader (data.go), which
// sessionConn follows to know where the content ends.
const (
	dotBeginLine = iota
	dotDot
	dotDotCR
	dotCR
	dotData
)

// sessionConn is one session's connection, between go-smtp's buffered
// reader and the socket.
//
// In command mode a Read returns at most one line, and only a whole one: so
// go-smtp's bufio.Reader never holds more than the command it is about to
// handle, and sessionConn knows, when go-smtp answers 354 or reads a BDAT
// command, that what comes next from the client is content. A line not
// ended within MaxCommandLine octets is smtp.ErrTooLongLine (go-smtp
// answers 500 and closes); a read error with part of a line read is
// returned without the part, so a timeout ends the session (go-smtp answers
// 421) rather than handing over half a command. Every read and write
// deadline is capped at the session's end (MaxSessionTime after it began),
// and a command that arrives after it is answered 421.
type sessionConn struct {
	net.Conn
	g     *gate
	key   string
	start time.Time // on the receiver's clock
	end   time.Time // on the wall clock, for deadlines

	mu      sync.Mutex
	buf     []byte
	r, w    int // buf[r:w] is read from the client and not yet handed over
	pass    int // octets at buf[r:] cleared to hand over as they are
	mode    int
	chunk   int64 // BDAT octets not yet cleared
	dot     int
	err     error // returned once nothing cleared is left
	waiting bool  // go-smtp waits for the client (a line not all there, content)
	// moved is when the session last moved a message: set to the time a
	// message is answered, advanced by creditPerKiB for each KiB of
	// content (up to now). A NOOP, RSET or any other command moves none.
	moved    time.Time
	endedMsg bool // a message ended; the next reply is its answer
	evicted  bool
	// evicting is closed once evict has told the client why and closed
	// the socket: Close waits for it, so that a session whose Read ends
	// first (input arrived as it was marked) cannot close the socket
	// before the client has the reason.
	evicting chan struct{}
	final    bool // err ends the session: nothing more is handed over
	// quit: the last command line handed over is a QUIT, with nothing
	// read after it. answered: go-smtp wrote the last line of a reply
	// since it was last handed anything. ended: the client ended the
	// session and its place is free (receiver_release.go).
	quit, answered, ended bool
	closed                bool // the socket is closed; its place is freed next
}

func newSessionConn(c net.Conn, g *gate, key string, now time.Time) *sessionConn {
	return &sessionConn{Conn: c, g: g, key: key, start: now, moved: now,
		end: time.Now().Add(g.opts.MaxSessionTime),
		buf: make([]byte, max(2*g.opts.MaxCommandLine, 16<<10))}
}

func (c *sessionConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.mu.Lock()
	n, bye, err := c.read(p)
	c.mu.Unlock()
	if bye != "" {
		c.say(bye)
	}
	return n, err
}

// read is Read with c.mu held; it lets go of it while it waits for the
// client. bye is a reply to send (without c.mu) before the error.
func (c *sessionConn) read(p []byte) (n int, bye string, err error) {
	for {
		if c.pass > 0 {
			n = copy(p[:min(len(p), c.pass)], c.buf[c.r:c.w])
			c.r += n
			c.pass -= n
			return n, "", nil
		}
		switch {
		case c.evicted:
			return 0, "", net.ErrClosed
		case c.final:
			return 0, "", c.err
		}
		if c.r < c.w {
			if bye, err = c.clear(); err != nil {
				c.err, c.final = err, true
				return 0, bye, err
			}
			if c.pass > 0 {
				continue
			}
		}
		// Nothing to hand over: a read error now, or more from the client.
		if c.err != nil {
			return 0, "", c.err
		}
		if c.mode == modeCommand && c.g.closing.Load() {
			c.err, c.final = io.EOF, true
			return 0, "421 4.3.2 " + c.g.opts.Hostname + " shutting down, try again later", c.err
		}
		c.waiting = true
		// What is left is part of a command line, shorter than the limit
		// (content is handed over whole); the buffer is twice that.
		if c.r == c.w {
			c.r, c.w = 0, 0
		} else if len(c.buf)-c.w < c.g.opts.MaxCommandLine {
			c.w = copy(c.buf, c.buf[c.r:c.w])
			c.r = 0
		}
		free := c.buf[c.w:]
		c.mu.Unlock()
		m, rerr := c.Conn.Read(free)
		c.mu.Lock()
		c.waiting = false
		c.w += m
		if m > 0 && c.mode != modeCommand {
			now := c.g.opts.Now()
			c.moved = minTime(now, c.moved.Add(time.Duration(m)*creditPerKiB/1024))
		}
		switch {
		case rerr == nil:
		case c.evicted:
			return 0, "", net.ErrClosed
		case c.ended:
			c.err, c.final = io.EOF, true
			return 0, "", c.err
		case isTimeout(rerr) && !time.Now().Before(c.end):
			c.err, c.final = io.EOF, true
			return 0, "421 4.4.2 " + c.g.opts.Hostname + " session time limit reached, closing", c.err
		case errors.Is(rerr, syscall.ECONNRESET):
			// A client's hang-up: go-smtp would log each one, and a
			// client can hang up as often as it likes.
			c.err = io.EOF
		default:
			// Handed over once what came before it is: a command line
			// cut short by it is not.
			c.err = rerr
		}
	}
}

// clear decides what of buf[r:w] go-smtp may have now, by mode, and sets
// pass to it (none when a command line is not all there yet).
func (c *sessionConn) clear() (bye string, err error) {
	b := c.buf[c.r:c.w]
	c.answered = false
	switch c.mode {
	case modeChunk:
		c.pass = int(min(c.chunk, int64(len(b))))
		if c.chunk -= int64(c.pass); c.chunk == 0 {
			c.mode = modeCommand
		}
		return "", nil
	case modeData:
		n, end := c.scanData(b)
		c.pass = n
		if end {
			c.mode, c.endedMsg = modeCommand, true
		}
		return "", nil
	}
	limit := c.g.opts.MaxCommandLine
	i := bytes.IndexByte(b, '\n')
	if i < 0 && len(b) >= limit || i >= limit {
		return "", smtp.ErrTooLongLine
	}
	if i < 0 {
		return "", nil
	}
	line := b[:i+1]
	c.quit = isQuit(line) && len(line) == len(b)
	if c.ended && !isQuit(line) {
		return "", io.EOF
	}
	if c.g.opts.Now().Sub(c.start) >= c.g.opts.MaxSessionTime {
		return "421 4.4.2 " + c.g.opts.Hostname + " session time limit reached, closing", io.EOF
	}
	if size, last, ok := bdatChunk(line); ok {
		if size > 0 {
			c.mode, c.chunk = modeChunk, size
		}
		// The answer to BDAT LAST is the message's (to the others,
		// 250 Continue: a chunk is not a message).
		c.endedMsg = last
	}
	c.pass = len(line)
	return "", nil
}

// scanData moves the end-of-data state over b as go-smtp's dataReader
// does, and returns how much of b is content (the end marker included) and
// whether it ended. In the middle of a line only a CR matters, so it
// skips to the next one at memchr speed.
func (c *sessionConn) scanData(b []byte) (int, bool) {
	for i := 0; i < len(b); i++ {
		switch c.dot {
		case dotData:
			j := bytes.IndexByte(b[i:], '\r')
			if j < 0 {
				return len(b), false
			}
			i += j
			c.dot = dotCR
		case dotBeginLine:
			switch b[i] {
			case '.':
				c.dot = dotDot
			case '\r':
				c.dot = dotCR
			default:
				c.dot = dotData
			}
		case dotDot:
			if b[i] == '\r' {
				c.dot = dotDotCR
			} else {
				c.dot = dotData
			}
		case dotDotCR:
			if b[i] == '\n' {
				c.dot = dotBeginLine
				return i + 1, true
			}
			c.dot = dotData
		case dotCR:
			if b[i] == '\n' {
				c.dot = dotBeginLine
			} else {
				c.dot = dotData
			}
		}
	}
	return len(b), false
}

// bdatChunk says whether go-smtp takes line (a command line, its LF
// included) as a BDAT command followed by a chunk, the chunk's size and
// whether it is the LAST. It reads the line as go-smtp's parseCmd and
// handleBdat do, rule for rule: a chunk go-smtp reads must pass unbounded
// by the command line limit, and nothing else may.
func bdatChunk(line []byte) (size int64, last, ok bool) {
	s := strings.TrimRight(string(line), "\r\n")
	if len(s) < 6 || s[4] != ' ' || strings.ToUpper(s[:4]) != "BDAT" {
		return 0, false, false
	}
	args := strings.Fields(strings.TrimSpace(s[5:]))
	if len(args) == 0 || len(args) > 2 || len(args) == 2 && !strings.EqualFold(args[1], "LAST") {
		return 0, false, false
	}
	n, err := strconv.ParseUint(args[0], 10, 32)
	if err != nil {
		return 0, false, false
	}
	return int64(n), len(args) == 2, true
}

// Write passes go-smtp's replies on; a 354 means the client sends DATA
// content next.
func (c *sessionConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.endedMsg {
		// The answer to a message: if taken, the session moved one.
		if bytes.HasPrefix(p, []byte("250")) {
			c.moved = c.g.opts.Now()
		}
		c.endedMsg = false
	}
	if c.mode == modeCommand && bytes.HasPrefix(p, []byte("354")) {
		c.mode, c.dot = modeData, dotBeginLine
	}
	c.answered = c.answered || c.mode == modeCommand && finalReply(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// markDelivered tells the gate that the session's client delivered a
// message: its address is known for knownFor.
func (s *session) markDelivered() {
	if s.conn == nil {
		return
	}
	if c, ok := s.conn.Conn().(*sessionConn); ok {
		c.g.delivered(c.key, c.g.opts.Now())
	}
}

// idle says whether go-smtp is waiting for the client (for a command, or
// content), and for how long the session has moved no message by now.
func (c *sessionConn) idle(now time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.waiting || c.evicted {
		return 0, false
	}
	return now.Sub(c.moved), true
}

// waitingForCommand says whether go-smtp waits for the client's next
// command: no message is in the middle of its transfer.
func (c *sessionConn) waitingForCommand() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting && !c.evicted && c.mode == modeCommand
}

// markEvicted marks c to be closed if go-smtp still waits for a command:
// from then on its Read returns nothing more, so go-smtp writes nothing
// more.
func (c *sessionConn) markEvicted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.waiting || c.evicted {
		return false
	}
	c.evicted = true
	c.evicting = make(chan struct{})
	return true
}

// evict says why and closes the connection under a session marked
// evicted; its go-smtp side ends on the read error.
func (c *sessionConn) evict(msg string) {
	defer close(c.evicting)
	c.say(msg)
	c.mu.Lock()
	pending := c.r < c.w
	c.mu.Unlock()
	flushBeforeClose(c.Conn, pending)
	c.Conn.Close()
}

// say writes a reply of sessionConn's own, with a deadline of its own (the
// session's may have passed).
func (c *sessionConn) say(msg string) {
	c.Conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c.Conn, msg+"\r\n")
}

// Close closes the connection once the client has the replies written
// before (see flushBeforeClose), and then frees the session's place: a
// session that lingers still counts against the caps, so clients that
// make sessions end with input unread cannot hold more sockets than the
// caps allow. A session its client ended, whose place is free already,
// does not linger.
func (c *sessionConn) Close() error {
	c.mu.Lock()
	pending, evicting, ended := c.r < c.w, c.evicting, c.ended
	c.mu.Unlock()
	if evicting != nil {
		<-evicting
	}
	if !ended {
		flushBeforeClose(c.Conn, pending)
	}
	err := c.Conn.Close()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.g.release(c)
	return err
}

func (c *sessionConn) SetDeadline(t time.Time) error {
	return c.Conn.SetDeadline(c.capped(t))
}

func (c *sessionConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.capped(t))
}

func (c *sessionConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.capped(t))
}

// capped is t, or the session's end if that comes first (or t is none).
func (c *sessionConn) capped(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.IsZero() || t.After(c.end) {
		return c.end
	}
	return t
}

// errClientGone answers a message the client stopped sending; it is seldom
// still there to read it.
var errClientGone = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2}, Message: "the message did not arrive whole, closing"}

// clientGone says whether err, from reading a message's content, is the
// client's doing: a timeout, a hang-up, a session closed, a BDAT
// transfer abandoned (RSET, or no next chunk).
func clientGone(err error) bool {
	return isTimeout(err) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, smtp.ErrDataReset) || errors.Is(err, syscall.ECONNRESET)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
