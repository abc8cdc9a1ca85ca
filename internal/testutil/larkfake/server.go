package larkfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure a Server; the zero value takes every default.
type Options struct {
	// AppID and AppSecret are the only credentials the token and ws
	// endpoints accept. Defaults are random per Server ("cli_" and 16
	// hex): the SDK caches tokens in a process-wide cache keyed by app id,
	// so two fakes sharing an app id would share tokens.
	AppID, AppSecret string
	// TenantKey names the tenant in events and senders; default
	// "tenant_fake".
	TenantKey string
	// TokenTTL is a tenant_access_token's life; default 2 h, as Lark's.
	// The SDK caches a token for its expire minus 3 min, so a TTL of 3
	// min or less makes it fetch a token before every call.
	TokenTTL time.Duration
	// PingInterval, ReconnectInterval, ReconnectNonce and ReconnectCount
	// are the ClientConfig the ws endpoint and every pong hand the client,
	// in whole seconds on the wire. Defaults: PingInterval 120 s (Lark's);
	// ReconnectInterval 0 and ReconnectNonce 0, so a dropped client
	// reconnects at once (Lark's are 120 s and 30 s); ReconnectCount -1
	// (forever). PingInterval is at least 1 s: the SDK pings in a tight
	// loop on 0.
	PingInterval, ReconnectInterval, ReconnectNonce time.Duration
	ReconnectCount                                  int
	// MaxConnections bounds the ws connections open at once; default 50,
	// Lark's limit per app. One more is refused at the handshake with
	// Lark's ExceedConnLimit, which the SDK takes as final.
	MaxConnections int
	// Now is the fake's clock (token expiry, create_time); default
	// time.Now.
	Now func() time.Time
}

// The routes, as Fail and Calls name them: the method and the path with
// Go ServeMux wildcards.
const (
	RouteTenantToken  = "POST /open-apis/auth/v3/tenant_access_token/internal"
	RouteWSEndpoint   = "POST /callback/ws/endpoint"
	RouteCreate       = "POST /open-apis/im/v1/messages"
	RouteReply        = "POST /open-apis/im/v1/messages/{message_id}/reply"
	RouteList         = "GET /open-apis/im/v1/messages"
	RouteGet          = "GET /open-apis/im/v1/messages/{message_id}"
	RouteResource     = "GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}"
	RouteImageUpload  = "POST /open-apis/im/v1/images"
	RouteFileUpload   = "POST /open-apis/im/v1/files"
	RouteChat         = "GET /open-apis/im/v1/chats/{chat_id}"
	RouteChats        = "GET /open-apis/im/v1/chats"
	RouteUser         = "GET /open-apis/contact/v3/users/{user_id}"
	RouteWSConnection = "GET /ws/v2"
)

// Lark's codes the fake answers.
const (
	CodeOK                = 0
	CodeMissingToken      = 99991661 // no Authorization: Bearer
	CodeInvalidToken      = 99991663 // an unknown or expired tenant token
	CodeRateLimited       = 99991400
	CodePermissionDenied  = 99991672
	CodeFieldValidation   = 99992402
	CodeInvalidParam      = 230001 // an invalid receive_id, message_id, msg_type, content...
	CodeContentTooLong    = 230025
	CodeResourceNotInMsg  = 234003
	CodeNoUserAuthority   = 41050
	CodeInvalidAppID      = 10003
	CodeInvalidAppSecret  = 10014
	CodeWSExceedConnLimit = 1000040350
	codeHandshakeAuthFail = 514
	msgMissingToken       = "Missing access token for authorization. Please make a request with token attached."
	msgInvalidToken       = "Invalid access token for authorization. Please make a request with token attached."
	msgRateLimited        = "request trigger frequency limit"
	defaultRetryAfterSecs = 1
	maxBody               = 1 << 20  // a JSON request
	maxImage              = 10 << 20 // Lark's bound on an image
	maxFile               = 30 << 20 // Lark's bound on a file
	maxFrame              = 1 << 20  // a ws frame read
	uuidWindow            = time.Hour
	maxUUIDLen            = 50
	maxUUIDs              = 10000 // uuids remembered before the expired are pruned
	maxTickets            = 1000  // ws tickets handed out and not yet used
	tokenReuseWindow      = 30 * time.Minute
	defaultPageSize       = 20
	maxPageSize           = 50
	maxTextContent        = 150 << 10
	maxRichContent        = 30 << 10
)

// Failure is what Fail makes the next calls of a route answer.
type Failure struct {
	// Status is the HTTP status (429, 500, ...); 0 answers 200. A 5xx
	// without a Code answers a text/plain body, as a gateway does.
	Status int
	// Code and Msg are Lark's (99991400 rate limited, 230001 invalid
	// receive id, 99991672 permission denied, ...); a 429 without a Code
	// answers 99991400.
	Code int
	Msg  string
	// RetryAfter, in seconds, is sent as x-ogw-ratelimit-reset with a 429
	// (Lark's header); default 1.
	RetryAfter int
	// Times is how many calls fail; default 1.
	Times int
}

// Server is a fake Lark. Start one with New.
type Server struct {
	t    testing.TB
	opts Options
	hs   *httptest.Server
	base string

	mu        sync.Mutex
	tokens    map[string]time.Time // tenant token → expiry
	current   string               // the newest token
	seqTokens int                  // tokens issued
	fails     map[string][]Failure
	calls     map[string]int
	seq       int
	users     map[string]*User    // open_id → user
	chats     map[string]*Chat    // chat_id → chat
	p2p       map[string]string   // open_id → the bot's p2p chat with them
	msgs      map[string]*Message // message_id → message
	order     []*Message          // every message, as stored
	uuids     map[string]uuidSeen
	sent      []Sent
	uploads   []Upload
	keys      map[string]*Upload              // image_key / file_key → upload
	res       map[string]map[string]*resource // message_id → file_key → resource
	sock      socketState
	closed    bool
	shutdown  chan struct{}
	wg        sync.WaitGroup
}

type uuidSeen struct {
	at  time.Time
	msg *Message
}

// New starts a fake Lark on 127.0.0.1 and closes it, and every
// connection, when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.AppID == "" {
		o.AppID = "cli_" + randHex(8)
	}
	if o.AppSecret == "" {
		o.AppSecret = randHex(16)
	}
	if o.TenantKey == "" {
		o.TenantKey = "tenant_fake"
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = 2 * time.Hour
	}
	if o.PingInterval < time.Second {
		if o.PingInterval != 0 {
			t.Fatalf("larkfake: PingInterval %v: Lark's ClientConfig counts whole seconds, at least 1", o.PingInterval)
		}
		o.PingInterval = 120 * time.Second
	}
	if o.ReconnectCount == 0 {
		o.ReconnectCount = -1
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 50
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{t: t, opts: o,
		tokens: map[string]time.Time{}, fails: map[string][]Failure{}, calls: map[string]int{},
		users: map[string]*User{}, chats: map[string]*Chat{}, p2p: map[string]string{},
		msgs: map[string]*Message{}, uuids: map[string]uuidSeen{}, keys: map[string]*Upload{},
		res: map[string]map[string]*resource{}, shutdown: make(chan struct{}),
	}
	s.sock.init()
	mux := http.NewServeMux()
	for route, h := range s.routes() {
		mux.HandleFunc(route, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Lark's gateway answers an unknown path 404 with a JSON code.
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "msg": "404 page not found"})
	})
	s.hs = httptest.NewServer(mux)
	s.base = s.hs.URL
	t.Cleanup(s.close)
	return s
}

func (s *Server) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.shutdown)
	conns := slices.Clone(s.sock.conns)
	s.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
	s.hs.Close()
	s.wg.Wait()
}

// URL is the fake's origin, "http://127.0.0.1:PORT": the base URL for
// lark.WithOpenBaseUrl and the ws client's WithDomain.
func (s *Server) URL() string { return s.base }

// Options returns the options in effect, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// Fail makes the next f.Times calls of route fail as f says; failures
// queued for a route are used in order. A failure is answered before the
// token is checked, as Lark's gateway rate-limits before it
// authenticates.
func (s *Server) Fail(route string, f Failure) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[route] = append(s.fails[route], f)
}

// Calls is how many calls route got (failed ones included).
func (s *Server) Calls(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[route]
}

// ExpireTokens ends every tenant token issued so far: the next call with
// one gets 99991663, and the token endpoint issues a new one.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
	s.current = ""
}

// Tokens is how many tenant tokens were issued.
func (s *Server) Tokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seqTokens
}

// apiError is a Lark error answered as {"code":...,"msg":...}.
type apiError struct {
	status int
	code   int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %s", e.code, e.msg) }

func larkErr(status, code int, format string, args ...any) error {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func invalidParam(format string, args ...any) error {
	return larkErr(http.StatusBadRequest, CodeInvalidParam, "Your request contains an invalid request parameter, ext="+format, args...)
}

func fieldValidation(format string, args ...any) error {
	return larkErr(http.StatusBadRequest, CodeFieldValidation, "field validation failed: "+format, args...)
}

// handler answers a call with s.mu held: the response's data (nil for
// none) or an error. A handler that streams (a download) writes w itself
// and returns errStreamed.
type handler struct {
	auth  bool // the call needs a tenant token
	serve func(s *Server, w http.ResponseWriter, r *http.Request, body []byte) (any, error)
	// limit bounds the request body; 0 is maxBody.
	limit int64
	// top puts the data's fields at the top level of the answer, as the
	// token endpoint does, rather than under "data".
	top bool
}

var errStreamed = errors.New("streamed")

func (s *Server) routes() map[string]http.HandlerFunc {
	hs := map[string]handler{
		RouteTenantToken: {serve: (*Server).tenantToken, top: true},
		RouteWSEndpoint:  {serve: (*Server).wsEndpoint},
		RouteCreate:      {auth: true, serve: (*Server).create},
		RouteReply:       {auth: true, serve: (*Server).reply},
		RouteList:        {auth: true, serve: (*Server).list},
		RouteGet:         {auth: true, serve: (*Server).get},
		RouteResource:    {auth: true, serve: (*Server).resource},
		RouteImageUpload: {auth: true, serve: (*Server).imageUpload, limit: maxImage + 1<<20},
		RouteFileUpload:  {auth: true, serve: (*Server).fileUpload, limit: maxFile + 1<<20},
		RouteChat:        {auth: true, serve: (*Server).chat},
		RouteChats:       {auth: true, serve: (*Server).chatList},
		RouteUser:        {auth: true, serve: (*Server).user},
	}
	out := map[string]http.HandlerFunc{RouteWSConnection: s.serveWS}
	for route, h := range hs {
		out[route] = func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, route, h) }
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, route string, h handler) {
	limit := h.limit
	if limit == 0 {
		limit = maxBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		s.mu.Lock()
		s.calls[route]++
		s.mu.Unlock()
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"code": CodeFieldValidation, "msg": "request body too large"})
		return
	}
	rec := httptest.NewRecorder()
	s.mu.Lock()
	s.answer(rec, r, route, h, body)
	s.mu.Unlock()
	// Written with the lock released: a client slow to read its answer
	// holds up no other call.
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// answer runs a call. Called with s.mu held.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, route string, h handler, body []byte) {
	s.calls[route]++
	if f, ok := s.failure(route); ok {
		writeFailure(w, f)
		return
	}
	if h.auth {
		if err := s.checkToken(r); err != nil {
			writeError(w, err)
			return
		}
	}
	data, err := h.serve(s, w, r, body)
	if errors.Is(err, errStreamed) {
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	res := map[string]any{"code": 0, "msg": "success"}
	if h.top {
		if m, ok := data.(map[string]any); ok {
			maps.Copy(res, m)
		}
	} else if data != nil {
		res["data"] = data
	} else {
		res["data"] = map[string]any{}
	}
	writeJSON(w, http.StatusOK, res)
}

// failure takes the next failure queued for route. Called with s.mu held.
func (s *Server) failure(route string) (Failure, bool) {
	q := s.fails[route]
	if len(q) == 0 {
		return Failure{}, false
	}
	f := q[0]
	if q[0].Times--; q[0].Times == 0 {
		s.fails[route] = q[1:]
	}
	return f, true
}

// checkToken checks the Authorization header as Lark does. Called with
// s.mu held.
func (s *Server) checkToken(r *http.Request) error {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(tok) == "" {
		return larkErr(http.StatusBadRequest, CodeMissingToken, msgMissingToken)
	}
	exp, known := s.tokens[tok]
	if !known || !s.opts.Now().Before(exp) {
		return larkErr(http.StatusBadRequest, CodeInvalidToken, msgInvalidToken)
	}
	return nil
}

// tenantToken is auth/v3/tenant_access_token/internal: the current token
// again while it has more than 30 minutes to live (with the seconds it
// has left), else a new one; the old one stays valid until it expires,
// as Lark's does.
func (s *Server) tenantToken(_ http.ResponseWriter, _ *http.Request, body []byte) (any, error) {
	var req struct {
		AppID     string `json:"app_id"`
		AppSecret string `json:"app_secret"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, larkErr(http.StatusBadRequest, CodeInvalidAppID, "invalid param: body is not JSON")
	}
	if req.AppID != s.opts.AppID {
		return nil, larkErr(http.StatusBadRequest, CodeInvalidAppID, "invalid param: app_id")
	}
	if req.AppSecret != s.opts.AppSecret {
		return nil, larkErr(http.StatusBadRequest, CodeInvalidAppSecret, "app secret invalid")
	}
	now := s.opts.Now()
	if exp, ok := s.tokens[s.current]; ok && exp.Sub(now) > min(tokenReuseWindow, s.opts.TokenTTL/2) {
		return map[string]any{"tenant_access_token": s.current, "expire": int(exp.Sub(now) / time.Second)}, nil
	}
	s.seqTokens++
	s.current = "t-" + randHex(20)
	s.tokens[s.current] = now.Add(s.opts.TokenTTL)
	return map[string]any{"tenant_access_token": s.current, "expire": int(s.opts.TokenTTL / time.Second)}, nil
}

func writeFailure(w http.ResponseWriter, f Failure) {
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	code, msg := f.Code, f.Msg
	if status == http.StatusTooManyRequests {
		if code == 0 {
			code, msg = CodeRateLimited, msgRateLimited
		}
		ra := f.RetryAfter
		if ra <= 0 {
			ra = defaultRetryAfterSecs
		}
		w.Header().Set("x-ogw-ratelimit-limit", "50")
		w.Header().Set("x-ogw-ratelimit-reset", strconv.Itoa(ra))
	}
	if status >= 500 && code == 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		io.WriteString(w, http.StatusText(status))
		return
	}
	if msg == "" {
		msg = "fake failure"
	}
	writeJSON(w, status, map[string]any{"code": code, "msg": msg})
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, code: 1, msg: err.Error()}
	}
	writeJSON(w, ae.status, map[string]any{"code": ae.code, "msg": ae.msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":1,"msg":"larkfake: encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%012x%s", prefix, s.seq, randHex(6))
}
