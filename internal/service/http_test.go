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
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
)

// The HTTP listener under issue 9's slowloris: with the service's limits
// made short, each attack below is cut where its limit says. Real clients
// over loopback; no sleeps (a client blocks reading until the server acts).

// startHTTP serves h under lim on a loopback port, the way HTTPComponent
// does, and returns its address.
func startHTTP(t *testing.T, h http.Handler, lim HTTPLimits) string {
	t.Helper()
	addr, _ := startHTTPServer(t, h, lim)
	return addr
}

func startHTTPServer(t *testing.T, h http.Handler, lim HTTPLimits) (string, *HTTPServer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(h, lim, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return ln.Addr().String(), srv
}

func testHTTPLimits() HTTPLimits {
	return HTTPLimits{ReadHeaderTimeout: 300 * time.Millisecond, BodyTimeout: 600 * time.Millisecond,
		WriteTimeout: 5 * time.Second, IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4 << 10, MaxConns: 2,
		ReserveConns: 1, ReserveWait: 20 * time.Second, EvictAfter: 100 * time.Millisecond}
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
// send nothing, the next client does not wait for their timeouts (the
// header timeout here is longer than the test's bound): the connection
// that has waited longest gives its place to it, and no more than
// MaxConns hold a place at any time. (Before issue 18 the newcomer waited
// in the kernel's backlog until a held connection timed out.)
func TestHTTPConnectionCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := testHTTPLimits()
	lim.ReadHeaderTimeout = time.Minute
	srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), lim, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	addr := ln.Addr().String()
	held := make([]net.Conn, 2)
	for i := range held {
		held[i] = dialHTTP(t, addr)
		// Wait until the server holds it, so that the order is known.
		testutil.WaitFor(t, 20*time.Second, "the server to take the connection", func() bool { n, _ := srv.Conns(); return n == i+1 })
	}
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get("http://" + addr + "/webhook/slack")
	if err != nil {
		t.Fatalf("a newcomer with every place held by silent clients: %v", err)
	}
	resp.Body.Close()
	closedBy(t, held[0])
	if _, peak := srv.Conns(); peak > 2 {
		t.Errorf("%d connections held a place at once, bound 2", peak)
	}
}
