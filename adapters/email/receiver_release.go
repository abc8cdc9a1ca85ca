package email

import (
	"bytes"
	"net"
	"syscall"
	"time"
)

// When a session's place is free again.
//
// A session is over for its client once it has sent QUIT, or hung up, with
// the server's last reply read. The server's side learns it later: when
// the session's goroutine next runs, reads the QUIT or the end of input,
// answers and closes. A client that opens its next session at once (as
// Postfix does, delivery after delivery) meets the old one still counted
// and, at its cap, a 421. So the gate, before it refuses anyone, frees
// the places of the sessions their clients have ended (reapEnded): a
// session whose go-smtp side has been handed a QUIT and nothing after it,
// or that waits for its next command (or has answered its last one) with
// nothing of it read, while its socket holds only the client's end of
// input or a QUIT line. Such a session does nothing more than answer that
// QUIT: from then on it takes no other command, and its socket is closed
// within lingerTime whatever the client does (deadlines, no lingering
// close), so the caps still bound the sockets a client can hold.

// capKey is what the per-address cap counts the client at a by: "" when
// it is not counted. The LMTP listener's loopback clients are the MTA in
// front of Courier (LMTP is for the last hop to the mailbox, RFC 2033),
// which opens as many sessions as it has deliveries at once and keeps idle
// ones for reuse (Postfix: 20 at its defaults); and on loopback an
// address cap bounds nothing, since a local program can connect from any
// address of 127/8. The total cap holds for them.
func (g *gate) capKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok && g.opts.LMTP && ta.IP.IsLoopback() {
		return ""
	}
	return clientKey(a)
}

// reapEnded frees the places of the sessions their clients have ended.
// Called with g.mu held, before a refusal.
func (g *gate) reapEnded() {
	for c := range g.conns {
		if c.markEnded() {
			g.forget(c)
		}
	}
}

// markEnded says whether c's client has ended the session, and if so
// marks it ended (see setEnded).
func (c *sessionConn) markEnded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return true
	}
	if c.evicted || c.ended || c.mode != modeCommand || c.w-c.r != c.pass {
		return false
	}
	// Not handed a QUIT: go-smtp waits for a command (or has answered
	// its last and is about to), nothing of the next one read, and the
	// socket holds the end of input, or a QUIT, and nothing else.
	if !c.quit && (c.pass > 0 || !c.waiting && !c.answered || !clientDone(c.Conn)) {
		return false
	}
	c.setEnded()
	return true
}

// setEnded marks c ended: from now on it hands go-smtp no command but a
// QUIT, and every wait on its socket ends within lingerTime. Called with
// c.mu held.
func (c *sessionConn) setEnded() {
	c.ended = true
	c.end = time.Now().Add(lingerTime)
	c.Conn.SetDeadline(c.end)
}

// clientDone says whether all that is left to read from conn is a QUIT
// line, or the end of input.
func clientDone(conn net.Conn) bool {
	raw := rawConn(conn)
	if raw == nil {
		return false
	}
	var buf [16]byte
	n, eof, ok := peekInput(raw, buf[:])
	if !ok {
		return false
	}
	return eof || n < len(buf) && bytes.IndexByte(buf[:n], '\n') == n-1 && isQuit(buf[:n])
}

// rawConn returns the socket under conn (through wrappers that give
// theirs by NetConn), nil if it has none.
func rawConn(conn net.Conn) syscall.RawConn {
	for {
		switch cc := conn.(type) {
		case syscall.Conn:
			raw, err := cc.SyscallConn()
			if err != nil {
				return nil
			}
			return raw
		case interface{ NetConn() net.Conn }:
			conn = cc.NetConn()
		default:
			return nil
		}
	}
}

// isQuit says whether line (its line end included or not) is a QUIT
// command, as go-smtp's parseCmd reads it.
func isQuit(line []byte) bool {
	line = bytes.TrimRight(line, "\r\n")
	return len(line) >= 4 && bytes.EqualFold(line[:4], []byte("QUIT")) && (len(line) == 4 || len(line) > 5 && line[4] == ' ')
}

// finalReply says whether p ends with the last line of a reply ("250 ",
// not "250-").
func finalReply(p []byte) bool {
	p = bytes.TrimRight(p, "\r\n")
	line := p[bytes.LastIndexByte(p, '\n')+1:]
	return len(line) >= 4 && line[3] == ' '
}
