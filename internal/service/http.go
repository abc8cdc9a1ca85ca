package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// HTTPLimits bound what clients can hold of the HTTP listener (/health,
// /metrics, /webhook/<provider>). A server with only ReadHeaderTimeout
// keeps a connection as long as its client sends a body byte now and then,
// or idles between requests, and takes as many connections as there are
// file descriptors. Webhook bodies are bounded by their handlers: each
// provider knows what its events weigh.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration // request line and headers
	ReadTimeout       time.Duration // the whole request, body included
	WriteTimeout      time.Duration // from the end of the headers to the end of the response
	IdleTimeout       time.Duration // between requests on a kept-alive connection
	MaxHeaderBytes    int
	MaxConns          int // beyond, Accept waits for a connection to close
}

// DefaultHTTPLimits are the service's. A webhook's handler writes the
// event to the mailbox before it answers, which a slow disk can stretch to
// seconds; the rest answers at once.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          128,
	}
}

// NewHTTPServer is an http.Server for h under lim; serve it on
// LimitListener(ln, lim.MaxConns).
func NewHTTPServer(h http.Handler, lim HTTPLimits, log *slog.Logger) *http.Server {
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

// LimitListener accepts at most n connections at once: beyond, Accept waits
// until one closes, and the kernel's backlog holds the newcomers. Every
// connection ends within the server's timeouts, so the wait is bounded;
// refusing instead would fail the webhooks of providers that retry slowly.
// (golang.org/x/net/netutil.LimitListener does the same; x/net is not a
// direct dependency.)
func LimitListener(ln net.Listener, n int) net.Listener {
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

// HTTPComponent serves h (/health, /metrics, webhooks, /mcp) on listen
// under DefaultHTTPLimits. Binding happens at start, so a port in use
// fails the start.
func HTTPComponent(listen string, h http.Handler, log *slog.Logger) Component {
	lim := DefaultHTTPLimits()
	srv := NewHTTPServer(h, lim, log)
	var done chan struct{}
	return Component{
		Name: "http " + listen,
		Start: func(ctx context.Context) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s (courier.http.listen): %w", listen, err)
			}
			ln = LimitListener(ln, lim.MaxConns)
			done = make(chan struct{})
			go func() {
				defer close(done)
				if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("http server failed", "err", err)
				}
			}()
			return nil
		},
		Stop: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			<-done
			return err
		},
	}
}
