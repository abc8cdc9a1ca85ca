package webui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/monoco/courier/internal/agentapi"
)

// Login and sessions. `courier web` asks the service over its socket for
// a one-time token (IssueLogin: the socket's peer credentials say who
// asks); opening /ui/?login=<token> trades it for a session cookie. Both
// live in memory only: a restart of the service logs everyone out.
//
// Who may: the Owner of the socket (the service's user, root) and the
// users courier.outbound.approvers lists. The viewer shows every
// provider's traffic; an agent (another user of the socket's group) reads
// mail written by strangers and may be talked into anything by it, so it
// gets no token unless its user is an approver. What a session may do is
// its user's: the outbound verbs keep their rule (a user acts on its own
// agents' drafts), and the approval gate its own (nobody approves a
// draft of their own agents).

const (
	cookieName = "courier_session"
	tokenBytes = 32
)

// session is a logged-in browser.
type session struct {
	caller  agentapi.Caller
	csrf    string
	expires time.Time
}

// auth holds the login tokens and the sessions, bounded in number: the
// oldest is dropped to make room.
type auth struct {
	mu          sync.Mutex
	now         func() time.Time
	tokenTTL    time.Duration
	sessionTTL  time.Duration
	maxSessions int
	tokens      map[string]pending  // by hash of the token
	sessions    map[string]*session // by hash of the cookie's value
}

type pending struct {
	caller  agentapi.Caller
	expires time.Time
}

func newAuth(o *Options) *auth {
	return &auth{now: o.Now, tokenTTL: o.TokenTTL, sessionTTL: o.SessionTTL, maxSessions: o.MaxSessions,
		tokens: map[string]pending{}, sessions: map[string]*session{}}
}

func randomToken() string {
	b := make([]byte, tokenBytes)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hashOf keys the maps: a token is never kept as such, and looking one up
// compares hashes, not the secret.
func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return string(h[:])
}

// IssueLogin gives the Owner a one-time login token (agentapi.LoginIssuer).
func (s *Server) IssueLogin(ctx context.Context, c agentapi.Caller) (*agentapi.WebLogin, error) {
	if !c.Owner && (s.opts.Approver == nil || !s.opts.Approver.MayApprove(c)) {
		return nil, &agentapi.Error{Code: 77, Message: "web: user " + c.User + " may not open the web viewer: only the service's user (or root) and courier.outbound.approvers may, because the viewer shows every agent's mail"}
	}
	a := s.auth
	tok := randomToken()
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for k, p := range a.tokens {
		if now.After(p.expires) {
			delete(a.tokens, k)
		}
	}
	if len(a.tokens) >= a.maxSessions {
		a.tokens = map[string]pending{} // a flood of logins: only the newest counts
	}
	exp := now.Add(a.tokenTTL)
	a.tokens[hashOf(tok)] = pending{caller: c, expires: exp}
	return &agentapi.WebLogin{Token: tok, Expires: exp, Path: "/ui/?login=" + url.QueryEscape(tok)}, nil
}

// redeem takes a token out and, when it was valid, opens a session; it
// returns the cookie's value.
func (a *auth) redeem(tok string) (string, *session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := hashOf(tok)
	p, ok := a.tokens[h]
	delete(a.tokens, h)
	now := a.now()
	if !ok || now.After(p.expires) {
		return "", nil, false
	}
	for k, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, k)
		}
	}
	for len(a.sessions) >= a.maxSessions {
		var oldest string
		for k, s := range a.sessions {
			if oldest == "" || s.expires.Before(a.sessions[oldest].expires) {
				oldest = k
			}
		}
		delete(a.sessions, oldest)
	}
	id := randomToken()
	s := &session{caller: p.caller, csrf: randomToken(), expires: now.Add(a.sessionTTL)}
	a.sessions[hashOf(id)] = s
	return id, s, true
}

// session returns the session of r's cookie.
func (a *auth) session(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	h := hashOf(c.Value)
	s, ok := a.sessions[h]
	if !ok {
		return nil
	}
	if a.now().After(s.expires) {
		delete(a.sessions, h)
		return nil
	}
	return s
}

// logout ends the session of r's cookie.
func (a *auth) logout(r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		a.mu.Lock()
		delete(a.sessions, hashOf(c.Value))
		a.mu.Unlock()
	}
}

// login is GET /ui/?login=<token>: the token for a cookie, then /ui/.
func (s *Server) login(w http.ResponseWriter, r *http.Request, tok string) {
	id, sess, ok := s.auth.redeem(tok)
	if !ok {
		s.page(w, r, http.StatusUnauthorized, "login", pageData{Title: "Log in", Error: "This login link is used or expired. Run `courier web` again for a new one."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/ui/",
		Expires: sess.expires, MaxAge: int(s.opts.SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https",
	})
	s.log.Info("web viewer: logged in", "user", sess.caller.User, "uid", sess.caller.UID)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// checkPost refuses a POST without the session's CSRF token or from
// another origin: the token in the form, and the Origin header (browsers
// send it on every POST) naming this host. A cross-site form cannot know
// the token, and SameSite=Strict keeps the cookie from it anyway; each
// check stands if the other is lost (an old browser, a proxy).
func checkPost(r *http.Request, sess *session) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "the request has no Origin header"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host != r.Host {
		return "the request comes from another site (" + origin + ")"
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return "the request comes from another site"
	}
	got := r.PostFormValue("csrf")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
		return "the form's CSRF token is missing or wrong (reload the page)"
	}
	return ""
}
