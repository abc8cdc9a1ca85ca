package email

import (
	"net"
	"time"
)

// A session's last replies must reach its client even when the session
// ends with input unread: a command line over the limit, pipelined after a
// message (the message's 250, then 500), or anything sent after a final
// 421. Closing a TCP socket whose receive queue holds data unread makes the
// kernel answer with a reset and drop what it has not sent yet of the
// socket's output (RFC 2525 2.17, Linux tcp_close): the replies written
// just before, the 250 of a message stored included. A client that saw no
// 250 for a message it sent retries it, and the message arrives twice. So
// such a session is closed as a lingering close would: its output is shut
// first (a FIN after the last reply), and the socket is closed once the
// client's side has acknowledged all of it, or after lingerTime. Nothing
// more is read from the client meanwhile: the octets a client may make the
// receiver take in stay bounded.

// lingerTime bounds the wait for the client to acknowledge the last
// replies: a client that is there does so within a round trip. A variable
// only so that a test whose client reads through a tiny window on a loaded
// machine can wait longer.
var lingerTime = 2 * time.Second

// flushBeforeClose shuts conn's output and waits for the client to
// acknowledge it, when closing conn would reset it: the client sent
// octets the session did not take (pending, or in the socket's receive
// queue). Only TCP sockets reset; others return at once.
func flushBeforeClose(conn net.Conn, pending bool) {
	tc := tcpConn(conn)
	if tc == nil {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	if !pending && !unreadInput(raw) {
		return
	}
	if tc.CloseWrite() != nil {
		return
	}
	waitAcked(raw, time.Now().Add(lingerTime))
}

// tcpConn returns the TCP connection under conn (through wrappers that
// give theirs by NetConn, as crypto/tls does), nil if it is none.
func tcpConn(conn net.Conn) *net.TCPConn {
	for {
		switch cc := conn.(type) {
		case *net.TCPConn:
			return cc
		case interface{ NetConn() net.Conn }:
			conn = cc.NetConn()
		default:
			return nil
		}
	}
}
