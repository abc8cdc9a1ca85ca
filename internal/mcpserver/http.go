package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/service"
)

// HTTP is /mcp in the service: the streamable HTTP transport, behind the
// Origin check and the bearer token, with bounded bodies and sessions.
type HTTP struct {
	s     *Server
	h     http.Handler
	token []byte // sha256 of the token; nil: none is asked for
	// closed refuses every request: no token is configured and anonymous
	// use was not allowed (courier.mcp.allow_anonymous).
	closed bool
	bound  sessionBound
	cancel context.CancelFunc
}

// NewHTTP makes the /mcp handler of the service of the workspace at root,
// serving s as courier.mcp (cfg) says. A token file that cannot be read is
// a fault.Config error naming the key.
func NewHTTP(s *Server, root string, cfg config.MCP, log *slog.Logger) (*HTTP, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &HTTP{s: s, bound: sessionBound{max: cfg.MaxSessions, log: log}, closed: cfg.TokenFile == "" && !cfg.AllowAnonymous}
	if cfg.TokenFile != "" {
		path := cfg.TokenFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		tok, err := os.ReadFile(path)
		if err != nil {
			return nil, fault.Errorf(fault.Config, "courier.mcp.token_file: %w", err)
		}
		t := bytes.TrimSpace(tok)
		if len(t) == 0 {
			return nil, fault.Errorf(fault.Config, "courier.mcp.token_file: %s is empty", cfg.TokenFile)
		}
		sum := sha256.Sum256(t)
		h.token = sum[:]
	}
	// Stateful: sessions, their event streams and subscriptions. The
	// go-sdk serves the 2026-07-28 protocol over HTTP only stateless, so
	// /mcp speaks up to 2025-11-25 (docs/agents.md, "Protocol versions").
	h.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		Logger:              log,
		SessionTimeout:      cfg.SessionTimeout.D(),
		MaxRequestBodyBytes: cfg.MaxRequestBytes,
	})
	return h, nil
}

// Mount returns next with /mcp routed to h.
func (h *HTTP) Mount(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/", next)
	return mux
}

// Around is the service's HTTP component c, which serves Mount's handler,
// with h's own start and stop: h watches for new mail from c's start, and
// ends its sessions before c shuts the listener down (an open event stream
// would hold the shutdown to its deadline).
func (h *HTTP) Around(c service.Component) service.Component {
	start, stop := c.Start, c.Stop
	c.Start = func(ctx context.Context) error {
		h.Start(ctx)
		return start(ctx)
	}
	c.Stop = func(ctx context.Context) error {
		h.Stop(ctx)
		return stop(ctx)
	}
	return c
}

// Start watches for new mail; Stop ends the sessions.
func (h *HTTP) Start(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	h.s.Watch(wctx)
	return nil
}

func (h *HTTP) Stop(ctx context.Context) error {
	if h.cancel != nil {
		h.cancel()
	}
	for ss := range h.s.srv.Sessions() {
		ss.Close()
	}
	return nil
}

func (h *HTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		// The session's event stream lasts as long as the session: the
		// listener's write timeout would cut it every minute. Sessions
		// are bounded in number, idle ones time out, and a client that
		// stops answering pings is dropped.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	if !h.admit(w, r) {
		return
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		defer h.bound.use(id)()
	} else if r.Method == http.MethodPost {
		release, n, ok := h.bound.take(h.s.srv.Sessions)
		if !ok {
			w.Header().Set("Retry-After", "10")
			http.Error(w, fmt.Sprintf("mcp: %d sessions are open and in use, the most there may be (courier.mcp.max_sessions)", n), http.StatusServiceUnavailable)
			return
		}
		aw := &answering{ResponseWriter: w}
		aw.release = func() { release(aw.Header().Get("Mcp-Session-Id")) }
		defer aw.release()
		w = aw
	}
	h.h.ServeHTTP(w, r)
}

// admit checks a request's origin and token, and answers one that fails.
func (h *HTTP) admit(w http.ResponseWriter, r *http.Request) bool {
	// DNS rebinding: a page elsewhere that got its name resolved to
	// 127.0.0.1 sends its own Origin. Browsers send one on every
	// cross-origin request; agents send none.
	if o := r.Header.Get("Origin"); o != "" && !localOrigin(o) {
		http.Error(w, "mcp: origin "+strconv.Quote(o)+" is not allowed", http.StatusForbidden)
		return false
	}
	if h.closed {
		w.Header().Set("WWW-Authenticate", `Bearer realm="courier"`)
		http.Error(w, "mcp: /mcp needs a bearer token: set courier.mcp.token_file (or courier.mcp.allow_anonymous: true where every local user may read this mailbox); `courier mcp` over stdio needs none", http.StatusUnauthorized)
		return false
	}
	if h.token != nil {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(sum[:], h.token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="courier"`)
			http.Error(w, "mcp: a bearer token is needed (courier.mcp.token_file)", http.StatusUnauthorized)
			return false
		}
	}
	return true
}

// answering calls release before the first byte of the answer is written
// (its header, its body, or a flush).
type answering struct {
	http.ResponseWriter
	release func()
}

func (w *answering) WriteHeader(code int) {
	w.release()
	w.ResponseWriter.WriteHeader(code)
}

func (w *answering) Write(p []byte) (int, error) {
	w.release()
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController calls to flush.
func (w *answering) FlushError() error {
	w.release()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer's other controls.
func (w *answering) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// localOrigin reports whether an Origin is a page of this machine.
func localOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
