// Package webui is the web viewer of the mailbox (`courier web`, docs/web.md):
// every provider's messages, the threads, each message rendered and
// sanitised, the outbound queue with its verbs, updated live from the
// mailbox's event journal. It is served by the service on its HTTP
// listener under /ui/, to a browser logged in through the agents' socket
// (auth.go): without a session no page shows message data.
//
// The pages are rendered on the server with html/template and work
// without JavaScript; a small script (static/app.js) follows the live
// events. Everything is embedded: no build step, nothing loaded from
// elsewhere, and a Content-Security-Policy that allows nothing inline.
package webui

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/mailbox"
)

// Approver decides on a draft held for approval (status
// awaiting_approval). The service's is the approval gate's; the viewer
// calls it with the Caller who logged in, whose rules then apply.
type Approver interface {
	Approve(ctx context.Context, c agentapi.Caller, id string) (*agentapi.OutboundResult, error)
	Reject(ctx context.Context, c agentapi.Caller, id, reason string) (*agentapi.OutboundResult, error)
	// MayApprove says whether c is one of courier.outbound.approvers,
	// who may open the viewer besides the service's user.
	MayApprove(c agentapi.Caller) bool
}

// StatusAwaitingApproval is the status of a draft the approval gate holds.
const StatusAwaitingApproval = "awaiting_approval"

// Options configure a Server. Zero values mean defaults.
type Options struct {
	Mailbox  *mailbox.Mailbox
	Dropzone *dropzone.Store
	// Operator runs retry, requeue and cancel (agents.Backend, with its
	// permission rule); nil hides those buttons.
	Operator agentapi.Operator
	// Approver approves and rejects held drafts; nil hides those buttons.
	Approver Approver
	Logger   *slog.Logger
	Now      func() time.Time

	TokenTTL    time.Duration // a login token's life (default 2 minutes)
	SessionTTL  time.Duration // a session's (default 12 hours)
	MaxSessions int           // sessions at once (default 16); the oldest goes
	PageSize    int           // messages a page of the inbox (default 50)
	// Poll is how often the live feed looks at claims, which the journal
	// does not record (default 1 s); journal events wake it at once.
	Poll time.Duration
}

// Server serves /ui/.
type Server struct {
	opts  Options
	log   *slog.Logger
	auth  *auth
	pages map[string]*template.Template
	hub   *hub
	mux   *http.ServeMux
}

//go:embed templates static
var files embed.FS

// New returns a Server; Start runs its live feed and search indexer.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = 2 * time.Minute
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 16
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	s := &Server{opts: o, log: o.Logger.With("component", "web"), auth: newAuth(&o)}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.hub = newHub(o.Mailbox, o.Poll, s.log)
	s.mux = s.routes()
	return s, nil
}

// Start runs the live feed and the search indexer until Stop.
func (s *Server) Start(ctx context.Context) error { s.hub.start(); return nil }

// Stop ends them and the live streams.
func (s *Server) Stop(ctx context.Context) error { s.hub.stop(); return nil }

// Mount serves /ui/ and passes every other path to next.
func (s *Server) Mount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/") {
			s.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// csp allows this origin's scripts, styles and images only: no inline
// script or style, no remote image (a tracking pixel), no frames.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

// authed wraps a handler that shows mailbox data: without a session it
// answers 401 with the page that says how to log in.
func (s *Server) authed(fn func(w http.ResponseWriter, r *http.Request, sess *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		sess := s.auth.session(r)
		if sess == nil {
			s.page(w, r, http.StatusUnauthorized, "login", pageData{Title: "Log in"})
			return
		}
		if r.Method == http.MethodPost {
			if why := checkPost(r, sess); why != "" {
				s.log.Warn("web viewer: POST refused", "path", r.URL.Path, "why", why)
				http.Error(w, "refused: "+why, http.StatusForbidden)
				return
			}
		}
		fn(w, r, sess)
	}
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	static, _ := fs.Sub(files, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		if tok := r.URL.Query().Get("login"); tok != "" {
			w.Header().Set("Cache-Control", "no-store")
			s.login(w, r, tok)
			return
		}
		s.authed(s.inbox)(w, r)
	})
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	mux.HandleFunc("GET /ui/thread/{id}", s.authed(s.thread))
	mux.HandleFunc("GET /ui/message/{id}", s.authed(s.message))
	mux.HandleFunc("GET /ui/attachment/{id}/{n}", s.authed(s.attachment))
	mux.HandleFunc("GET /ui/outbound", s.authed(s.outbound))
	mux.HandleFunc("POST /ui/outbound/{verb}/{id}", s.authed(s.outboundVerb))
	mux.HandleFunc("GET /ui/events", s.authed(s.events))
	mux.HandleFunc("POST /ui/logout", s.authed(func(w http.ResponseWriter, r *http.Request, _ *session) {
		s.auth.logout(r)
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	}))
	return mux
}
