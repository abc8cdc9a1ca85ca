package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/monoco/courier/internal/netgate"
)

// HTTPLimits bound what clients can hold of the HTTP listener (/health,
// /metrics, /webhook/<provider>, /mcp). A server with only
// ReadHeaderTimeout keeps a connection as long as its client sends a body
// byte now and then, or idles between requests, and takes as many
// connections as there are file descriptors; with only a cap on
// connections, 128 clients that each send one byte of a 100-byte body
// hold every place for the read timeout, and /health with them. Webhook
// bodies are bounded in size by their handlers: each provider knows what
// its events weigh.
//
// So the listener is behind a netgate.Gate: when every place is taken, the
// connection that has waited longest for its client (at least
// EvictAfter: its request is sent slowly, or not at all, or it idles
// between two) gives its place to the next client (a webhook, /health,
// /mcp), which waits at most that long; a body has BodyTimeout to
// arrive; a remote address holds at most MaxConnsPerIP places; and when
// every place is busy with a request in progress, ReserveConns more
// serve /health and /metrics at once while other requests wait for a
// place.
//
// Loopback clients have no per-address cap: every local client is
// 127.0.0.1, the reverse proxy in front of the webhooks and /mcp among
// them, and a cap there would let a local user's connections lock the
// proxy out. What keeps a local user from starving the others is the
// eviction: a connection that waits for its client gives its place as
// soon as another client needs one.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration // request line and headers
	BodyTimeout       time.Duration // a request's body, once its headers are read
	WriteTimeout      time.Duration // from the end of the headers to the end of the response
	IdleTimeout       time.Duration // between requests on a kept-alive connection
	MaxHeaderBytes    int
	MaxConns          int           // places; beyond, a newcomer takes the place of a connection waiting for its client
	MaxConnsPerIP     int           // places one remote address (IPv6: one /64) may hold; loopback has none
	ReserveConns      int           // connections beyond MaxConns when every place is busy: /health and /metrics are served there
	ReserveWait       time.Duration // how long another request on a reserve connection waits for a place before a 503
	EvictAfter        time.Duration // a connection gives its place to a newcomer once it has waited this long for its client
}

// DefaultHTTPLimits are the service's. A webhook's handler writes the
// event to the mailbox before it answers, which a slow disk can stretch to
// seconds; the rest answers at once. A webhook's body is a few KB sent at
// once: 5 s is ample on any network. Providers want an answer within
// seconds (Slack 3 s) and retry: a request that finds no place in 5 s is
// answered 503 with Retry-After.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{
		ReadHeaderTimeout: 10 * time.Second,
		BodyTimeout:       5 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          128,
		MaxConnsPerIP:     32,
		ReserveConns:      16,
		ReserveWait:       5 * time.Second,
		EvictAfter:        time.Second,
	}
}

// HTTPServer is the service's http.Server with the gate of its listener:
// Serve takes the bare listener.
type HTTPServer struct {
	*http.Server
	gate *netgate.Gate
}

// NewHTTPServer is an http.Server for h under lim.
func NewHTTPServer(h http.Handler, lim HTTPLimits, log *slog.Logger) *HTTPServer {
	gate := netgate.New("http", netgate.Limits{
		MaxConns: lim.MaxConns, MaxPerSource: lim.MaxConnsPerIP, Spare: lim.ReserveConns,
		SpareWait: lim.ReserveWait, BodyTimeout: lim.BodyTimeout, MinWait: lim.EvictAfter,
	}, remoteIP, log)
	return &HTTPServer{gate: gate, Server: &http.Server{
		Handler:           gate.Handler(h, reserved, refuseHTTP),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		// The gate's handler sets the body's deadline (BodyTimeout); this
		// one holds from the request's start to its handler's.
		ReadTimeout:    lim.ReadHeaderTimeout + lim.BodyTimeout,
		WriteTimeout:   lim.WriteTimeout,
		IdleTimeout:    lim.IdleTimeout,
		MaxHeaderBytes: lim.MaxHeaderBytes,
		ConnContext:    gate.ConnContext,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
}

// Serve serves ln behind the server's gate.
func (s *HTTPServer) Serve(ln net.Listener) error { return s.Server.Serve(s.gate.Listen(ln)) }

// Conns returns the connections holding a place now and the most there
// were at once.
func (s *HTTPServer) Conns() (open, peak int) { return s.gate.Conns() }

// remoteIP is the per-address key of an HTTP client: none for loopback.
func remoteIP(c net.Conn) (string, any, error) {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return "", nil, nil
	}
	return netgate.AddrKey(c.RemoteAddr()), nil, nil
}

// reserved says whether r is served on a reserve connection at once: what
// a monitor asks.
func reserved(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/health" || r.URL.Path == "/metrics")
}

func refuseHTTP(w http.ResponseWriter, r *http.Request, why string) {
	http.Error(w, "courier: "+why+", try again later", http.StatusServiceUnavailable)
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
