package slackfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// Options configure a Server; the zero value takes every default.
type Options struct {
	// BotToken (xoxb-) and AppToken (xapp-) are the only tokens accepted;
	// defaults "xoxb-fake-bot" and "xapp-fake-app".
	BotToken, AppToken string
	// TeamID, BotUserID and BotID are the workspace's and the app's ids,
	// answered by auth.test; defaults "T0FAKE", "U0BOT", "B0BOT".
	TeamID, BotUserID, BotID string
	// PingInterval is how often the server pings a Socket Mode connection;
	// default 10 s (slack-go gives up on a connection after 30 s without
	// one). Tests shorten it.
	PingInterval time.Duration
	// MaxUpload bounds a file upload; default 32 MiB.
	MaxUpload int64
	// Scopes, when set, is the X-OAuth-Scopes header of auth.test's
	// answers (comma-separated): the scopes the bot token was granted.
	Scopes string
}

// The names Fail and Calls know the file transfers by, which are not Web
// API methods.
const (
	FileDownload = "files-pri"
	FileUpload   = "upload"
)

// Failure is what Fail makes the next calls of a method answer.
type Failure struct {
	// Status is the HTTP status (429, 500, ...); 0 answers 200 with
	// {"ok":false,"error":Error}.
	Status int
	// RetryAfter is the Retry-After header in seconds; a 429 always
	// carries one, as Slack's do.
	RetryAfter int
	// Error is the Slack error code ("channel_not_found", "ratelimited",
	// ...); with a Status, it is the body's error (default "ratelimited"
	// for a 429, "fatal_error" otherwise).
	Error string
	// Times is how many calls fail; default 1.
	Times int
}

// Post is one chat.postMessage the fake accepted.
type Post struct {
	Channel        string // the conversation posted to (a D id for a user's DM)
	Text           string
	ThreadTS       string // as the request named it
	ReplyBroadcast bool
	Blocks         json.RawMessage // as sent, nil without
	Mrkdwn         bool            // false only for mrkdwn=false
	TS             string          // assigned
	Raw            url.Values      // the request's parameters, the token removed
}

// Upload is one file completed through the external upload.
type Upload struct {
	FileID         string
	Filename       string
	Title          string
	Content        []byte
	ChannelID      string
	ThreadTS       string
	InitialComment string
}

const (
	maxBody  = 1 << 20 // a Web API request
	maxFrame = 1 << 20 // a websocket frame read
	// maxAck is Slack's bound on a Socket Mode response: it drops one of
	// 20 KiB or more without a word (slack-go's maxResponseSize).
	maxAck = 20 * 1024
)

// Server is a fake Slack. Start one with New.
type Server struct {
	t    testing.TB
	opts Options
	hs   *httptest.Server
	base string // http://127.0.0.1:PORT

	mu       sync.Mutex
	users    map[string]slack.User
	convs    map[string]*conv
	dms      map[string]string // user id → D id opened for the bot
	posts    []Post
	uploads  []Upload
	pending  map[string]*pendingUpload // file id → upload in progress
	files    map[string]*file          // URL path → served file
	fails    map[string][]Failure
	calls    map[string]int
	revoked  bool
	lastTS   int64 // micro-seconds of the newest ts assigned or stored
	seq      int   // ids handed out
	tickets  map[string]bool
	sock     socketState
	closed   bool
	shutdown chan struct{}
	wg       sync.WaitGroup
}

type conv struct {
	ch   slack.Channel
	msgs []*stored // by ts, oldest first
}

// stored is one message as JSON fields, so a message added raw keeps
// every field slack.Message does not know.
type stored struct {
	ts       int64
	threadTS int64 // 0 when not in a thread
	bcast    bool  // a thread_broadcast: in the thread and the channel
	fields   map[string]json.RawMessage
}

type file struct {
	f          slack.File
	content    []byte
	restricted bool // the sign-in page even to the bot token
}

type pendingUpload struct {
	id, filename string
	length       int64
	content      []byte
	uploaded     bool
}

var (
	convID = regexp.MustCompile(`^[CDG][A-Z0-9]{2,}$`)
	userID = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	tsRe   = regexp.MustCompile(`^([0-9]{1,12})\.([0-9]{6})$`)
)

// New starts a fake Slack on 127.0.0.1 and closes it, and every
// connection, when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.BotToken == "" {
		o.BotToken = "xoxb-fake-bot"
	}
	if o.AppToken == "" {
		o.AppToken = "xapp-fake-app"
	}
	if o.TeamID == "" {
		o.TeamID = "T0FAKE"
	}
	if o.BotUserID == "" {
		o.BotUserID = "U0BOT"
	}
	if o.BotID == "" {
		o.BotID = "B0BOT"
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 10 * time.Second
	}
	if o.MaxUpload <= 0 {
		o.MaxUpload = 32 << 20
	}
	s := &Server{t: t, opts: o,
		users: map[string]slack.User{}, convs: map[string]*conv{}, dms: map[string]string{},
		pending: map[string]*pendingUpload{}, files: map[string]*file{},
		fails: map[string][]Failure{}, calls: map[string]int{}, tickets: map[string]bool{},
		lastTS: 1700000000_000000, shutdown: make(chan struct{}),
	}
	s.sock.init()
	// The app's bot user is a user like any, as in Slack.
	s.users[o.BotUserID] = slack.User{ID: o.BotUserID, TeamID: o.TeamID, Name: "courier", RealName: "Courier",
		IsBot: true, Profile: slack.UserProfile{BotID: o.BotID, RealName: "Courier", DisplayName: "courier"}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/link/", s.serveLink)
	mux.HandleFunc("/files-pri/", s.serveFile)
	mux.HandleFunc("/upload/v1/", s.serveUpload)
	mux.HandleFunc("/", s.serveLogin)
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
	conns := append(slices.Clone(s.sock.conns), s.sock.starting...)
	s.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
	s.hs.Close()
	s.wg.Wait()
}

// APIURL is the Web API's base, as slack.OptionAPIURL wants it.
func (s *Server) APIURL() string { return s.base + "/api/" }

// URL is the fake's origin, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.base }

// Options returns the options in effect, defaults filled in.
func (s *Server) Options() Options { return s.opts }

// AddUser makes u known to users.info, conversations.open and
// chat.postMessage to a user id.
func (s *Server) AddUser(u slack.User) {
	s.t.Helper()
	if !userID.MatchString(u.ID) {
		s.t.Fatalf("slackfake: AddUser: %q is not a user id", u.ID)
	}
	if u.TeamID == "" {
		u.TeamID = s.opts.TeamID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = u
}

// AddConversation makes c known. The id's letter sets its kind as Slack's
// do: D is an IM (is_im, the bot in it), G a private channel or, with
// is_mpim, a group DM; C a channel, private with is_private. The bot is a
// member of an IM always, of others when c.IsMember.
func (s *Server) AddConversation(c slack.Channel) {
	s.t.Helper()
	if !convID.MatchString(c.ID) {
		s.t.Fatalf("slackfake: AddConversation: %q is not a conversation id", c.ID)
	}
	switch c.ID[0] {
	case 'D':
		c.IsIM, c.IsMember, c.IsPrivate = true, true, false
	case 'G':
		c.IsGroup = !c.IsMpIM
		c.IsPrivate = true
	case 'C':
		c.IsChannel = !c.IsIM && !c.IsMpIM
	}
	if c.ContextTeamID == "" {
		c.ContextTeamID = s.opts.TeamID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.convs[c.ID]; ok {
		old.ch = c
		return
	}
	s.convs[c.ID] = &conv{ch: c}
	if c.IsIM && c.User != "" {
		s.dms[c.User] = c.ID
	}
}

// AddMessage stores m in channel's history (a reply when its thread_ts
// names another message). m.Timestamp must be a ts ("1700000000.000100")
// no other message of the channel has.
func (s *Server) AddMessage(channel string, m slack.Message) {
	s.t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		s.t.Fatalf("slackfake: AddMessage: %v", err)
	}
	s.AddRawMessage(channel, b)
}

// AddRawMessage is AddMessage for a message as JSON (one of the corpus,
// say), every field kept.
func (s *Server) AddRawMessage(channel string, raw json.RawMessage) {
	s.t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		s.t.Fatalf("slackfake: AddRawMessage: %v", err)
	}
	m, err := newStored(fields)
	if err != nil {
		s.t.Fatalf("slackfake: AddRawMessage: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.convs[channel]
	if c == nil {
		s.t.Fatalf("slackfake: AddRawMessage: unknown conversation %q (AddConversation first)", channel)
	}
	if !c.insert(m) {
		s.t.Fatalf("slackfake: AddRawMessage: %s already has a message at %s", channel, formatTS(m.ts))
	}
	s.lastTS = max(s.lastTS, m.ts)
}

func newStored(fields map[string]json.RawMessage) (*stored, error) {
	var ts, thread string
	if err := json.Unmarshal(fields["ts"], &ts); err != nil || ts == "" {
		return nil, errors.New("message has no ts")
	}
	if raw, ok := fields["thread_ts"]; ok {
		if err := json.Unmarshal(raw, &thread); err != nil {
			return nil, fmt.Errorf("thread_ts: %v", err)
		}
	}
	var subtype string
	if raw, ok := fields["subtype"]; ok {
		json.Unmarshal(raw, &subtype)
	}
	m := &stored{fields: fields, bcast: subtype == "thread_broadcast"}
	var ok bool
	if m.ts, ok = parseTS(ts); !ok {
		return nil, fmt.Errorf("ts %q is not a Slack ts", ts)
	}
	if thread != "" {
		if m.threadTS, ok = parseTS(thread); !ok {
			return nil, fmt.Errorf("thread_ts %q is not a Slack ts", thread)
		}
	}
	return m, nil
}

// insert keeps msgs sorted by ts; false when the ts is taken.
func (c *conv) insert(m *stored) bool {
	i, found := slices.BinarySearchFunc(c.msgs, m.ts, func(x *stored, ts int64) int { return cmp64(x.ts, ts) })
	if found {
		return false
	}
	c.msgs = slices.Insert(c.msgs, i, m)
	return true
}

func (c *conv) find(ts int64) *stored {
	i, found := slices.BinarySearchFunc(c.msgs, ts, func(x *stored, ts int64) int { return cmp64(x.ts, ts) })
	if !found {
		return nil
	}
	return c.msgs[i]
}

func cmp64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseTS reads a Slack ts as micro-seconds since the epoch.
func parseTS(ts string) (int64, bool) {
	m := tsRe.FindStringSubmatch(ts)
	if m == nil {
		return 0, false
	}
	sec, _ := strconv.ParseInt(m[1], 10, 64)
	us, _ := strconv.ParseInt(m[2], 10, 64)
	return sec*1_000_000 + us, true
}

func formatTS(us int64) string { return fmt.Sprintf("%d.%06d", us/1_000_000, us%1_000_000) }

// nextTS is a new ts after every one the fake has seen, as Slack's are
// the time of the post.
func (s *Server) nextTS() int64 {
	s.lastTS += 100
	return s.lastTS
}

func (s *Server) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s0FAKE%04d", prefix, s.seq)
}

// Posts returns every chat.postMessage accepted, in order.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// Uploads returns every file upload completed, in order.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uploads)
}

// Fail makes the next f.Times calls of method fail as f says; failures
// queued for a method are used in order. Besides the Web API methods,
// method may be FileDownload (a GET of a file AddFile serves) or
// FileUpload (the POST of an upload's bytes).
func (s *Server) Fail(method string, f Failure) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[method] = append(s.fails[method], f)
}

// failure takes the next failure queued for method. Called with s.mu
// held.
func (s *Server) failure(method string) (Failure, bool) {
	q := s.fails[method]
	if len(q) == 0 {
		return Failure{}, false
	}
	f := q[0]
	if q[0].Times--; q[0].Times == 0 {
		s.fails[method] = q[1:]
	}
	return f, true
}

// Calls is how many calls method got (failed ones included).
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// RevokeTokens revokes both tokens: from now on every call answers
// token_revoked and the websocket refuses a connection. Connections open
// stay open.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = true
	clear(s.tickets)
}

// AcceptTokens undoes RevokeTokens: both tokens are accepted again, as
// after a Slack incident that refused valid tokens for a while.
func (s *Server) AcceptTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked = false
}

// request is one Web API call, parsed.
type request struct {
	method string
	token  string
	args   url.Values
}

type tokenKind int

const (
	botToken tokenKind = iota
	appToken
)

// handler answers a call; it runs with s.mu held and returns the response
// fields besides "ok", or an error code.
type handler struct {
	token tokenKind
	serve func(s *Server, r *request) (map[string]any, error)
}

// apiError is a Slack error code answered with ok:false.
type apiError struct {
	code     string
	messages []string // response_metadata.messages
}

func (e *apiError) Error() string { return e.code }

func fail(code string, messages ...string) error { return &apiError{code: code, messages: messages} }

var methods map[string]handler

func init() {
	methods = map[string]handler{
		"auth.test":                    {botToken, (*Server).authTest},
		"apps.connections.open":        {appToken, (*Server).connectionsOpen},
		"users.info":                   {botToken, (*Server).usersInfo},
		"conversations.info":           {botToken, (*Server).conversationsInfo},
		"conversations.open":           {botToken, (*Server).conversationsOpen},
		"conversations.history":        {botToken, (*Server).conversationsHistory},
		"conversations.replies":        {botToken, (*Server).conversationsReplies},
		"users.conversations":          {botToken, (*Server).usersConversations},
		"chat.postMessage":             {botToken, (*Server).chatPostMessage},
		"files.getUploadURLExternal":   {botToken, (*Server).getUploadURLExternal},
		"files.completeUploadExternal": {botToken, (*Server).completeUploadExternal},
	}
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	req, status, err := s.parse(w, r, method)
	rec := httptest.NewRecorder()
	s.mu.Lock()
	s.answer(rec, method, req, status, err)
	s.mu.Unlock()
	// Written with the lock released: a client slow to read its answer
	// holds up no other call.
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// answer answers a call whose parameters parse read (or failed to read,
// with status and err). Called with s.mu held.
func (s *Server) answer(w http.ResponseWriter, method string, req *request, status int, err error) {
	s.calls[method]++
	if err != nil {
		writeJSON(w, status, map[string]any{"ok": false, "error": err.Error()})
		return
	}
	h, known := methods[method]
	if !known {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method", "req_method": method})
		return
	}
	if f, ok := s.failure(method); ok {
		writeFailure(w, f)
		return
	}
	if err := s.auth(req.token, h.token); err != nil {
		writeError(w, err)
		return
	}
	res, err := h.serve(s, req)
	if err != nil {
		writeError(w, err)
		return
	}
	if res == nil {
		res = map[string]any{}
	}
	res["ok"] = true
	if method == "auth.test" && s.opts.Scopes != "" {
		w.Header().Set("X-OAuth-Scopes", s.opts.Scopes)
	}
	writeJSON(w, http.StatusOK, res)
}

// parse reads a call's parameters from its query and its body: a form, or
// JSON whose token may only come in the Authorization header.
func (s *Server) parse(w http.ResponseWriter, r *http.Request, method string) (*request, int, error) {
	req := &request{method: method, args: url.Values{}}
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		req.token = auth
	}
	for k, v := range r.URL.Query() {
		req.args[k] = v
	}
	if r.Body == nil {
		return req, 0, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request_too_large")
		}
		return nil, http.StatusBadRequest, fmt.Errorf("invalid_form_data")
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case len(body) == 0:
	case ct == "application/json":
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return nil, http.StatusOK, fmt.Errorf("invalid_json")
		}
		for k, raw := range fields {
			var str string
			if json.Unmarshal(raw, &str) == nil {
				req.args.Set(k, str)
			} else {
				req.args.Set(k, string(raw))
			}
		}
		// Slack takes a JSON call's token from its header only.
		req.args.Del("token")
	default:
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, http.StatusOK, fmt.Errorf("invalid_form_data")
		}
		for k, v := range form {
			req.args[k] = v
		}
		if req.token == "" {
			req.token = form.Get("token")
		}
	}
	req.args.Del("token")
	return req, 0, nil
}

// auth checks a token as Slack does. Called with s.mu held.
func (s *Server) auth(token string, want tokenKind) error {
	var kind tokenKind
	switch token {
	case "":
		return fail("not_authed")
	case s.opts.BotToken:
		kind = botToken
	case s.opts.AppToken:
		kind = appToken
	default:
		return fail("invalid_auth")
	}
	if s.revoked {
		return fail("token_revoked")
	}
	if kind != want {
		return fail("not_allowed_token_type")
	}
	return nil
}

func writeFailure(w http.ResponseWriter, f Failure) {
	code := f.Error
	status := f.Status
	if status == 0 {
		status = http.StatusOK
	}
	if code == "" {
		code = "fatal_error"
		if status == http.StatusTooManyRequests {
			code = "ratelimited"
		}
	}
	if f.RetryAfter > 0 || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	writeJSON(w, status, map[string]any{"ok": false, "error": code})
}

func writeError(w http.ResponseWriter, err error) {
	res := map[string]any{"ok": false, "error": err.Error()}
	var ae *apiError
	if errors.As(err, &ae) && len(ae.messages) > 0 {
		res["response_metadata"] = map[string]any{"messages": ae.messages}
	}
	writeJSON(w, http.StatusOK, res)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"ok":false,"error":"fatal_error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}
