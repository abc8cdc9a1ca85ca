package email

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// unreadInput says whether the socket's receive queue holds octets not
// read yet.
func unreadInput(raw syscall.RawConn) bool {
	n := 0
	raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}

// The TCP states (include/net/tcp_states.h) in which a socket whose output
// is shut has all of it acknowledged, its FIN included, or is gone.
const (
	tcpFinWait2 = 5
	tcpTimeWait = 6
	tcpClose    = 7
)

// waitAcked waits until the client acknowledged the socket's output, FIN
// included (shut before), or deadline.
func waitAcked(raw syscall.RawConn, deadline time.Time) {
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 50*time.Millisecond) {
		var state uint8
		var err error
		if cerr := raw.Control(func(fd uintptr) {
			var info *unix.TCPInfo
			if info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				state = info.State
			}
		}); cerr != nil || err != nil {
			return
		}
		switch state {
		case tcpFinWait2, tcpTimeWait, tcpClose:
			return
		}
		if !time.Now().Add(wait).Before(deadline) {
			return
		}
		time.Sleep(wait)
	}
}

// peekInput copies what the socket's receive queue holds, up to len(buf)
// octets, without taking it; eof says the queue holds only the client's
// end of input, or the socket is being closed. ok is false when it cannot
// tell.
func peekInput(raw syscall.RawConn, buf []byte) (n int, eof, ok bool) {
	var err error
	if cerr := raw.Control(func(fd uintptr) {
		n, _, err = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
	}); cerr != nil {
		// Control fails only once Close has begun.
		return 0, true, true
	}
	switch {
	case err == unix.EAGAIN:
		return 0, false, true
	case err != nil:
		return 0, false, false
	}
	return n, n == 0, true
}
