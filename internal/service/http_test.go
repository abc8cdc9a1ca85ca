package service

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The HTTP listener under issue 9's slowloris: with the service's limits
// made short, each attack below is cut where its limit says. Real clients
// over loopback; no sleeps (a client blocks reading until the server acts).

// startHTTP serves h under lim on a loopback port, the way HTTPComponent
// does, and returns its address.
func startHTTP(t *testing.T, h http.Handler, lim HTTPLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(h, lim, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(LimitListener(ln, lim.MaxConns)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return ln.Addr().String()
}

func testHTTPLimits() HTTPLimits {
	return HTTPLimits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond,
		WriteTimeout: 5 * time.Second, IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4 << 10, MaxConns: 2}
}

// dialHTTP connects, with a bound on every wait so that a server that
// never acts fails the test instead of hanging it.
func dialHTTP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// closedBy reads until the server closes c and returns what it sent
// first; it fails if the 20 s bound passes first.
func closedBy(t *testing.T, c net.Conn) string {
	t.Helper()
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection (read %q)", b)
	}
	return string(b)
}

func TestServeHTTPLimitsAreSet(t *testing.T) {
	lim := DefaultHTTPLimits()
	srv := NewHTTPServer(http.NotFoundHandler(), lim, slog.New(slog.DiscardHandler))
	if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 ||
		srv.MaxHeaderBytes == 0 || srv.MaxHeaderBytes > 1<<20 || lim.MaxConns == 0 {
		t.Errorf("the service's HTTP server is unbounded somewhere: %+v, %d connections", srv, lim.MaxConns)
	}
}

// TestHTTPSlowHeaders: a client that sends its request line and then one
// header byte at a time (or nothing) is closed at ReadHeaderTimeout.
func TestHTTPSlowHeaders(t *testing.T) {
	addr := startHTTP(t, http.NotFoundHandler(), testHTTPLimits())
	c := dialHTTP(t, addr)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: a")
	start := time.Now()
	closedBy(t, c)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %v, want about ReadHeaderTimeout", d)
	}
}

// TestHTTPSlowBody: a webhook body that trickles is cut at ReadTimeout:
// the handler's read fails and the connection closes.
func TestHTTPSlowBody(t *testing.T) {
	readErr := make(chan error, 1)
	addr := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}), testHTTPLimits())
	c := dialHTTP(t, addr)
	fmt.Fprintf(c, "POST /webhook/slack HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"a\":")
	select {
	case err := <-readErr:
		if err == nil {
			t.Error("the handler read a body that never came whole")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler is still reading a trickling body")
	}
	closedBy(t, c)
}

// TestHTTPIdleKeepAlive: a kept-alive connection that sends no next
// request is closed at IdleTimeout.
func TestHTTPIdleKeepAlive(t *testing.T) {
	addr := startHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), testHTTPLimits())
	c := dialHTTP(t, addr)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.Close {
		t.Fatal("the server closed after one request; nothing to test")
	}
	closedBy(t, c)
}

// TestHTTPLargeHeaders: headers over MaxHeaderBytes are refused with 431,
// not read into memory.
func TestHTTPLargeHeaders(t *testing.T) {
	addr := startHTTP(t, http.NotFoundHandler(), testHTTPLimits())
	c := dialHTTP(t, addr)
	go fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("b", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

// TestHTTPConnectionCap: with MaxConns connections held by clients that
// send nothing, the next client waits (in the kernel's backlog, costing
// the process nothing) and is served once the server has closed one of
// them at ReadHeaderTimeout: the server takes it only after that close,
// never before. The order is the server's own (when it closed and when it
// accepted), not when the clients' goroutines got to note it: a client
// that saw its connection closed could note it after the next client was
// already served.
func TestHTTPConnectionCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := &recordingListener{Listener: ln}
	lim := testHTTPLimits()
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), lim, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(LimitListener(rl, lim.MaxConns)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	addr := ln.Addr().String()
	closed := make(chan struct{}, 2)
	for range 2 {
		c := dialHTTP(t, addr)
		go func() { closedBy(t, c); closed <- struct{}{} }()
	}
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-closed
	if closes := rl.closesAt(2); closes < 1 {
		t.Errorf("the third connection was accepted before any of the %d held connections was closed: the cap does not hold", 2)
	}
}

// recordingListener counts the connections it closed, and notes how many
// were closed when it accepted each.
type recordingListener struct {
	net.Listener
	mu       sync.Mutex
	closes   int
	atAccept []int
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.atAccept = append(l.atAccept, l.closes)
	l.mu.Unlock()
	return &recordingConn{Conn: c, l: l}, nil
}

// closesAt is how many connections were closed when the i-th (from 0) was
// accepted.
func (l *recordingListener) closesAt(i int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.atAccept) {
		return -1
	}
	return l.atAccept[i]
}

type recordingConn struct {
	net.Conn
	l    *recordingListener
	once sync.Once
}

func (c *recordingConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.closes++
		c.l.mu.Unlock()
	})
	return err
}
