package email

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
)

// TestReceiverEndedSessionFreesItsPlace: a session its client has ended
// frees its place then, not when the server's side of it gets round to
// closing: a client at its per-address cap that ends n sessions and opens
// n new ones at once (Postfix's lmtp and smtp clients do, delivery after
// delivery) is never refused. Each way a client ends a session: QUIT and
// its 221 read (Postfix's lmtp_skip_quit_response=no, the default), QUIT
// and a hang-up without the 221 (smtp_skip_quit_response=yes), a hang-up
// after a reply.
func TestReceiverEndedSessionFreesItsPlace(t *testing.T) {
	const n, rounds = 5, 20
	for _, tc := range []struct {
		name string
		end  func(c *rawClient)
	}{
		{"QUIT, 221 read", func(c *rawClient) { c.send("QUIT\r\n"); c.expect("221"); c.c.Close() }},
		{"QUIT, no wait", func(c *rawClient) { c.send("QUIT\r\n"); c.c.Close() }},
		{"hang-up after a reply", func(c *rawClient) { c.send("NOOP\r\n"); c.expect("250"); c.c.Close() }},
		{"hang-up after the greeting", func(c *rawClient) { c.c.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t)
			// A still clock: no session is ever idle long enough to be
			// evicted; only an ended one may give its place.
			r := startReceiver(t, ws, nil, ReceiverOptions{MaxSessionsPerIP: n, Now: (&testutil.Clock{T: receivedAt}).Now})
			var held []*rawClient
			refused := 0
			open := func() {
				for range n {
					c := dialFrom(t, r.Addr(), "127.0.0.2")
					if got := c.reply(); !strings.HasPrefix(got, "220") {
						refused++
						if refused == 1 {
							t.Errorf("refused: %q", got)
						}
						continue
					}
					held = append(held, c)
				}
			}
			open()
			for range rounds {
				for _, c := range held {
					tc.end(c)
				}
				held = held[:0]
				open()
			}
			if refused > 0 {
				t.Errorf("%d of %d sessions refused, each opened just after as many of the client's had ended", refused, rounds*n)
			}
		})
	}
}

// TestReceiverEndedSessionBounded: a session whose place was freed as
// ended takes no command but QUIT, and is closed within lingerTime
// whatever its client does, so that a client cannot hold more sockets
// than the caps allow by ending sessions and going on with them.
func TestReceiverEndedSessionBounded(t *testing.T) {
	for _, tc := range []struct {
		name, send string
		want       []string
	}{
		{"a command", "NOOP\r\n", []string{"EOF"}},
		{"QUIT", "QUIT\r\n", []string{"221", "EOF"}},
		{"silence", "", []string{"EOF"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t)
			r := startReceiver(t, ws, nil, ReceiverOptions{})
			c := dialFrom(t, r.Addr(), "127.0.0.2")
			c.expect("220")
			waitWaiting(t, r, 1)
			g := r.gate.Load()
			g.mu.Lock()
			for sc := range g.conns {
				sc.mu.Lock()
				sc.setEnded()
				sc.mu.Unlock()
				g.forget(sc)
			}
			g.mu.Unlock()
			start := time.Now()
			if tc.send != "" {
				c.send(tc.send)
			}
			for _, want := range tc.want {
				c.expect(want)
			}
			if d := time.Since(start); d > lingerTime+time.Second {
				t.Errorf("closed after %v, want within %v", d, lingerTime)
			}
		})
	}
}

// TestReceiverLMTPLoopbackUncapped: on the LMTP listener a loopback client
// is the MTA in front, which opens as many sessions as it has deliveries
// at once (Postfix: 20, and idle ones it keeps for reuse): the
// per-address cap does not hold for it, the total cap does. Over SMTP the
// per-address cap holds for loopback clients too. (A Unix socket has no
// per-address cap: TestReceiverLMTPSocketCaps.)
func TestReceiverLMTPLoopbackUncapped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lmtp   bool
		admits int
	}{{"LMTP", true, 25}, {"SMTP", false, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := newWorkspace(t)
			r := startReceiver(t, ws, nil, ReceiverOptions{LMTP: tc.lmtp, MaxSessions: 25, MaxSessionsPerIP: 2,
				Now: (&testutil.Clock{T: receivedAt}).Now})
			for range tc.admits {
				dialFrom(t, r.Addr(), "127.0.0.1").expect("220")
			}
			c := dialFrom(t, r.Addr(), "127.0.0.1")
			c.expect("421 4.7.0")
			c.closed()
		})
	}
}

// TestCapKey: the LMTP listener does not count loopback clients by
// address (IPv4, IPv6, IPv4-mapped); other clients of it, and every
// client of the SMTP listener, are counted as clientKey says.
func TestCapKey(t *testing.T) {
	for _, tc := range []struct {
		lmtp bool
		addr string
		want string
	}{
		{true, "127.0.0.1", ""},
		{true, "127.0.0.2", ""},
		{true, "::1", ""},
		{true, "::ffff:127.0.0.1", ""},
		{true, "192.0.2.1", "192.0.2.1"},
		{false, "127.0.0.1", "127.0.0.1"},
		{false, "::1", "::/64"},
	} {
		g := &gate{opts: &ReceiverOptions{LMTP: tc.lmtp}}
		if got := g.capKey(&net.TCPAddr{IP: net.ParseIP(tc.addr), Port: 25}); got != tc.want {
			t.Errorf("LMTP %v: capKey(%s) = %q, want %q", tc.lmtp, tc.addr, got, tc.want)
		}
	}
}
