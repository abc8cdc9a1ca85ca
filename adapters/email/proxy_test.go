package email

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// freezeProxy forwards TCP connections to a server and can freeze them: a
// frozen connection stays open but nothing passes either way any more, as
// behind a NAT that dropped its mapping or in front of a hung server. The
// client's writes still succeed (the proxy reads and discards them), so only
// a missing answer can tell it the connection is dead.
type freezeProxy struct {
	addr   string
	target string
	ln     net.Listener

	mu       sync.Mutex
	conns    []*proxyConn
	holdNew  bool   // connections accepted now are frozen from the start
	freezeOn []byte // freeze every connection when a client sends this
	accepted atomic.Int32
	closed   bool
}

type proxyConn struct {
	client, server net.Conn
	frozen         atomic.Bool
}

func startFreezeProxy(t testing.TB, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{addr: ln.Addr().String(), target: target, ln: ln}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxyConn{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		pc.frozen.Store(p.holdNew)
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		go p.pump(pc, c, s, true)
		go p.pump(pc, s, c, false)
	}
}

// pump copies src to dst until either side closes; while the connection is
// frozen it reads and drops.
func (p *freezeProxy) pump(pc *proxyConn, src, dst net.Conn, fromClient bool) {
	defer func() {
		// A side that closed closes the other, unless frozen: a frozen
		// connection must look alive to the client.
		if !pc.frozen.Load() {
			dst.Close()
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromClient && p.trigger(buf[:n]) {
				p.FreezeAll()
			}
			if !pc.frozen.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// trigger reports (once) whether data holds the freezeOn pattern.
func (p *freezeProxy) trigger(data []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freezeOn == nil || !bytes.Contains(data, p.freezeOn) {
		return false
	}
	p.freezeOn = nil
	return true
}

// FreezeOn arms a one-shot trigger: the first time a client sends pattern,
// every connection then open freezes (and the pattern is not forwarded).
// Connections made later pass normally.
func (p *freezeProxy) FreezeOn(pattern string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.freezeOn = []byte(pattern)
}

// FreezeAll freezes every open connection.
func (p *freezeProxy) FreezeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.frozen.Store(true)
	}
}

// HoldNew makes new connections frozen from the start (true) or pass
// normally (false); connections already frozen stay frozen.
func (p *freezeProxy) HoldNew(hold bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdNew = hold
}

// Accepted is how many connections the proxy has accepted.
func (p *freezeProxy) Accepted() int { return int(p.accepted.Load()) }

func (p *freezeProxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.client.Close()
		c.server.Close()
	}
}

// portOf returns the host and port of a "host:port" address.
func portOf(t testing.TB, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range port {
		n = n*10 + int(c-'0')
	}
	return host, n
}
