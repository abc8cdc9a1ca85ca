//go:build !linux

package email

import (
	"syscall"
	"time"
)

// unreadInput cannot tell here: a session that ends with no input pending
// is taken to have none.
func unreadInput(raw syscall.RawConn) bool { return false }

// waitAcked cannot see the client's acknowledgements here: it gives them
// a round trip on a local network, at most until deadline.
func waitAcked(raw syscall.RawConn, deadline time.Time) {
	time.Sleep(min(50*time.Millisecond, time.Until(deadline)))
}

// peekInput cannot look at the socket's input here: a session is taken to
// go on until its side of it ends.
func peekInput(raw syscall.RawConn, buf []byte) (n int, eof, ok bool) { return 0, false, false }
