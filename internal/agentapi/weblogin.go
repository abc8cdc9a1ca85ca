package agentapi

import (
	"context"
	"net/http"
	"time"
)

// The web viewer's login (internal/webui, `courier web`): the socket is
// where the service learns who asks (SO_PEERCRED), so it is where a
// browser's session starts. `courier web` asks for a one-time token here
// and prints the URL that exchanges it for a session cookie.
//
//	POST /v1/web/login                 a WebLogin
//	                (served once the service has a LoginIssuer)

// WebLogin is a one-time login token for the web viewer.
type WebLogin struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
	// Path is the URL path, with the token, to open on the service's
	// HTTP listener.
	Path string `json:"path"`
}

// LoginIssuer gives a Caller a login token, or refuses with an *Error
// (77: this user may not view the mailbox).
type LoginIssuer interface {
	IssueLogin(ctx context.Context, c Caller) (*WebLogin, error)
}

type issuerBox struct{ LoginIssuer }

// ServeLogin makes the socket answer /v1/web/login with l.
func (s *Server) ServeLogin(l LoginIssuer) { s.login.Store(&issuerBox{l}) }

func (s *Server) webLogin(w http.ResponseWriter, r *http.Request) {
	c, ok := caller(w, r)
	if !ok {
		return
	}
	box := s.login.Load()
	if box == nil {
		writeError(w, &Error{Code: 69, Message: "agentapi: this service does not serve the web viewer"})
		return
	}
	s.audit(c, "web login", "", "")
	res, err := box.IssueLogin(r.Context(), c)
	if err != nil {
		writeError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// WebLogin asks the service for a login token of the web viewer.
func (c *Client) WebLogin(ctx context.Context) (*WebLogin, error) {
	var res WebLogin
	if err := c.do(ctx, http.MethodPost, "/v1/web/login", "application/json", http.NoBody, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
