package main

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// httpLimits bound what clients can hold of the HTTP listener (/health,
// /metrics, /webhook/<provider>). A server with only ReadHeaderTimeout
// keeps a connection as long as its client sends a body byte now and then,
// or idles between requests, and takes as many connections as there are
// file descriptors. Webhook bodies are bounded by their handlers: each
// provider knows what its events weigh.
type httpLimits struct {
	ReadHeaderTimeout time.Duration // request line and headers
	ReadTimeout       time.Duration // the whole request, body included
	WriteTimeout      time.Duration // from the end of the headers to the end of the response
	IdleTimeout       time.Duration // between requests on a kept-alive connection
	MaxHeaderBytes    int
	MaxConns          int // beyond, Accept waits for a connection to close
}

// serveHTTPLimits are the service's. A webhook's handler writes the event
// to the mailbox before it answers, which a slow disk can stretch to
// seconds; the rest answers at once.
func serveHTTPLimits() httpLimits {
	return httpLimits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          128,
	}
}

// newHTTPServer is an http.Server for h under lim; serve it on
// limitListener(ln, lim.MaxConns).
func newHTTPServer(h http.Handler, lim httpLimits, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// limitListener accepts at most n connections at once: beyond, Accept waits
// until one closes, and the kernel's backlog holds the newcomers. Every
// connection ends within the server's timeouts, so the wait is bounded;
// refusing instead would fail the webhooks of providers that retry slowly.
// (golang.org/x/net/netutil.LimitListener does the same; x/net is not a
// direct dependency.)
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitedListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
