package agentapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/monoco/courier/internal/netgate"
)

// Options configure a Server. Zero values mean defaults.
type Options struct {
	// Path is the socket's path. A missing folder is made 0750; an
	// existing one keeps its mode and group (make it setgid to give the
	// socket another group than the service's). The socket is 0660: the
	// service's user and group may connect, others may not.
	Path    string
	Backend Backend
	Logger  *slog.Logger
	// MaxConns bounds the connections served at once (default 64). A
	// newcomer beyond takes the place of the connection that has waited
	// longest for its client (idle, or sending its request slowly); when
	// every one is busy with a request, it waits up to a minute for one to
	// end, on one of 16 spare connections.
	MaxConns int
	// MaxConnsPerUID bounds the places one user holds (default 16): one
	// agent user cannot take them all from the others.
	MaxConnsPerUID int
	// MaxRequestBytes bounds the JSON of a request (default 4 MiB, room
	// for a draft of limits.max_draft_bytes and its --text).
	MaxRequestBytes int64
	// MaxFileBytes bounds what is read of each artifact a send carries
	// (limits.max_artifact_bytes; default 100 MiB). The Backend refuses
	// one over its own limit; this bounds what the service reads of a
	// request it refuses.
	MaxFileBytes int64
	// Owner is the user, besides root, whose agents may take any name:
	// the service's own (default: the effective uid).
	Owner *uint32
}

// Server serves a Backend on a Unix socket. Start binds it, Stop shuts it
// down and removes the socket: the shape of a service.Component.
type Server struct {
	opts Options
	log  *slog.Logger
	srv  *http.Server
	gate *netgate.Gate
	done chan struct{}
	sock os.FileInfo // the socket Start made, so Stop removes that one only
	// login answers /v1/web/login once ServeLogin has set it (weblogin.go).
	login atomic.Pointer[issuerBox]
}

// New returns a Server; it does no I/O.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 64
	}
	if opts.MaxConnsPerUID <= 0 {
		opts.MaxConnsPerUID = 16
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 4 << 20
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = 100 << 20
	}
	if opts.Owner == nil {
		uid := uint32(os.Geteuid())
		opts.Owner = &uid
	}
	s := &Server{opts: opts, log: opts.Logger}
	s.gate = netgate.New("agent socket", netgate.Limits{
		MaxConns: opts.MaxConns, MaxPerSource: opts.MaxConnsPerUID, Spare: spareConns,
		SpareWait: time.Minute, BodyTimeout: requestTimeout, MinWait: time.Second,
	}, s.peer, opts.Logger)
	s.srv = &http.Server{
		Handler:           s.gate.Handler(s.handler(), nil, refuse),
		ReadHeaderTimeout: requestTimeout,
		// The gate's handler bounds a request's body by requestTimeout, a
		// send's artifacts by sendTimeout; this holds from the request's
		// start to its handler's.
		ReadTimeout:    2 * requestTimeout,
		WriteTimeout:   sendTimeout,
		IdleTimeout:    time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
		ConnContext:    s.gate.ConnContext,
	}
	return s
}

const (
	// requestTimeout bounds the headers of a request, and then its body:
	// a claim, done or fail is a few hundred bytes.
	requestTimeout = 10 * time.Second
	// sendTimeout bounds a send's artifacts and any answer: 100 MiB crosses
	// a local socket in well under a second, an agent reading them from a
	// slow disk takes longer. Under pressure a send that trickles gives its
	// place to a newcomer long before.
	sendTimeout = 5 * time.Minute
	spareConns  = 16
)

// peer is the gate's Source: the peer's credentials, counted by uid. No
// credentials, no identity: not served.
func (s *Server) peer(c net.Conn) (string, any, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return "", nil, fmt.Errorf("agentapi: %T is not a Unix socket's connection", c)
	}
	uid, gid, pid, err := peerCred(uc)
	if err != nil {
		return "", nil, fmt.Errorf("cannot read the peer's credentials: %w", err)
	}
	caller := Caller{UID: uid, GID: gid, PID: pid, User: userName(uid), Owner: uid == 0 || uid == *s.opts.Owner}
	return "uid " + strconv.FormatUint(uint64(uid), 10), caller, nil
}

// refuse answers a request that found no place.
func refuse(w http.ResponseWriter, r *http.Request, why string) {
	writeError(w, &Error{Code: 69, Message: "agentapi: " + why + " on the agent socket, try again later"})
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.opts.Path }

// Conns returns the connections open now and the most there were at once.
func (s *Server) Conns() (open, peak int) { return s.gate.Conns() }

// Start makes the socket and serves it. A socket left at the path by a
// service that died is replaced (the caller holds the workspace's lock, so
// no other service uses it); anything else there is an error.
func (s *Server) Start(ctx context.Context) error {
	path := s.opts.Path
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("agentapi: socket folder (courier.socket.path): %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return fmt.Errorf("agentapi: %s exists and is not a socket (courier.socket.path); not replacing it", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("agentapi: remove the stale socket: %w", err)
		}
	}
	var ul *net.UnixListener
	err := withShortPath(path, func(addr string) error {
		var err error
		ul, err = net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		return err
	})
	if err != nil {
		return fmt.Errorf("agentapi: listen on %s (courier.socket.path): %w", path, err)
	}
	// The name bound may be a /proc/self/fd path that means nothing once
	// its descriptor is closed: Stop removes the socket by its real path.
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o660); err != nil {
		ul.Close()
		os.Remove(path)
		return fmt.Errorf("agentapi: %w", err)
	}
	s.sock, _ = os.Lstat(path)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.gate.Listen(ul)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("agent socket failed", "err", err)
		}
	}()
	return nil
}

// Stop stops taking connections, lets the requests in flight finish (until
// ctx ends) and removes the socket.
func (s *Server) Stop(ctx context.Context) error {
	if s.done == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	<-s.done
	if fi, lerr := os.Lstat(s.opts.Path); lerr == nil && s.sock != nil && os.SameFile(fi, s.sock) {
		os.Remove(s.opts.Path)
	}
	return err
}

// userName is the name of uid, or "uid<uid>" for a uid without one.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid" + id
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		c, ok := caller(w, r)
		if !ok {
			return
		}
		agent, _ := c.Agent("")
		writeJSON(w, http.StatusOK, struct {
			Caller
			Agent string `json:"agent"`
		}{c, agent})
	})
	mux.HandleFunc("POST /v1/claim", func(w http.ResponseWriter, r *http.Request) {
		var req ClaimRequest
		if c, ok := s.decode(w, r, &req); ok {
			s.audit(c, "claim", req.ID, req.Agent)
			s.outcome(w, s.opts.Backend.Claim(r.Context(), c, req))
		}
	})
	mux.HandleFunc("POST /v1/done", func(w http.ResponseWriter, r *http.Request) {
		var req DoneRequest
		if c, ok := s.decode(w, r, &req); ok {
			s.audit(c, "done", req.ID, req.Agent)
			s.outcome(w, s.opts.Backend.Done(r.Context(), c, req))
		}
	})
	mux.HandleFunc("POST /v1/fail", func(w http.ResponseWriter, r *http.Request) {
		var req FailRequest
		if c, ok := s.decode(w, r, &req); ok {
			s.audit(c, "fail", req.ID, req.Agent)
			s.outcome(w, s.opts.Backend.Fail(r.Context(), c, req))
		}
	})
	mux.HandleFunc("POST /v1/send", s.send)
	mux.HandleFunc("POST /v1/web/login", s.webLogin)
	if op, ok := s.opts.Backend.(Operator); ok {
		mux.HandleFunc("POST /v1/outbound", func(w http.ResponseWriter, r *http.Request) {
			var req OutboundRequest
			c, ok := s.decode(w, r, &req)
			if !ok {
				return
			}
			s.audit(c, "outbound "+req.Verb, req.ID, "")
			res, err := op.Outbound(r.Context(), c, req)
			if err != nil {
				writeError(w, asError(err))
				return
			}
			writeJSON(w, http.StatusOK, res)
		})
	}
	if ap, ok := s.opts.Backend.(Approver); ok {
		s.approvalRoute(mux, ap)
	}
	return mux
}

// audit logs who asked for what: the agent name the request acts under,
// the user the kernel named, never content (a reason or a draft may hold
// anything).
func (s *Server) audit(c Caller, verb, id, asked string) {
	agent, err := c.Agent(asked)
	if err != nil {
		agent = "(refused)"
	}
	s.log.Info("agent request", "verb", verb, "id", id, "agent", agent, "user", c.User, "uid", c.UID, "pid", c.PID)
}

func caller(w http.ResponseWriter, r *http.Request) (Caller, bool) {
	var c Caller
	ok := false
	if gc := netgate.ConnOf(r); gc != nil {
		c, ok = gc.Info.(Caller)
	}
	if !ok {
		writeError(w, &Error{Code: 70, Message: "agentapi: the connection has no peer credentials"})
	}
	return c, ok
}

// decode reads a JSON request of at most MaxRequestBytes.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) (Caller, bool) {
	c, ok := caller(w, r)
	if !ok {
		return c, false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, requestError(err, s.opts.MaxRequestBytes))
		return c, false
	}
	return c, true
}

func requestError(err error, limit int64) *Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || errors.Is(err, errTooLarge) {
		return &Error{Code: 65, Message: fmt.Sprintf("agentapi: the request is over %d bytes", limit)}
	}
	return &Error{Code: 64, Message: "agentapi: bad request: " + err.Error()}
}

var errTooLarge = errors.New("agentapi: request too large")

// ioBuffer is the buffer of each side of a send's stream.
const ioBuffer = 256 << 10

func (s *Server) outcome(w http.ResponseWriter, o Outcome) {
	writeJSON(w, status(o.Code), o)
}

// send reads the request part, hands the artifact parts to the Backend as
// it asks for them, and answers with the queued draft or the refusal.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	c, ok := caller(w, r)
	if !ok {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		writeError(w, &Error{Code: 64, Message: "agentapi: bad request: a send is multipart/form-data"})
		return
	}
	// multipart reads through a bufio.Reader as large as the one it is
	// given: the server's own reads 4 KiB at a time, a system call and a
	// dropzone write for each 4 KiB of an artifact.
	mr := multipart.NewReader(bufio.NewReaderSize(r.Body, ioBuffer), params["boundary"])
	part, err := mr.NextPart()
	if err != nil || part.FormName() != "request" {
		writeError(w, &Error{Code: 64, Message: "agentapi: bad request: the first part must be \"request\""})
		return
	}
	var req SendRequest
	dec := json.NewDecoder(&capped{r: part, n: s.opts.MaxRequestBytes})
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, requestError(err, s.opts.MaxRequestBytes))
		return
	}
	s.audit(c, "send", req.Name, req.Agent)
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(sendTimeout))
	files := &partFiles{mr: mr, max: s.opts.MaxFileBytes, want: req.Files}
	res, err := s.opts.Backend.Send(r.Context(), c, &req, files)
	if err == nil {
		err = files.finish()
	}
	if err != nil {
		// Read what is left of the artifacts (as much as the request
		// announced, no more) before answering: a peer still writing them
		// would otherwise see its connection reset instead of the answer.
		files.drain()
		writeError(w, asError(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// partFiles are a send's artifact parts, read in order.
type partFiles struct {
	mr   *multipart.Reader
	max  int64
	want []File
	next int // the index in want of the next part
	cur  *multipart.Part
}

func (f *partFiles) Open(i int) (io.Reader, error) {
	if f.next >= len(f.want) || f.want[f.next].Index != i {
		return nil, &Error{Code: 64, Message: fmt.Sprintf("agentapi: bad request: artifacts[%d] was not announced in files, in order", i)}
	}
	f.next++
	p, err := f.mr.NextPart()
	if err != nil {
		return nil, &Error{Code: 64, Message: fmt.Sprintf("agentapi: bad request: the content of artifacts[%d]: %v", i, err)}
	}
	if want := "artifact." + strconv.Itoa(i); p.FormName() != want {
		return nil, &Error{Code: 64, Message: fmt.Sprintf("agentapi: bad request: part %q where %q was due", p.FormName(), want)}
	}
	f.cur = p
	// One byte over the limit, so that the reader can tell "too large".
	return io.LimitReader(p, f.max+1), nil
}

// finish checks that every announced part was asked for and nothing
// follows.
func (f *partFiles) finish() error {
	if f.next < len(f.want) {
		return &Error{Code: 64, Message: fmt.Sprintf("agentapi: bad request: artifacts[%d] was announced but is not an artifact given by path", f.want[f.next].Index)}
	}
	if _, err := f.mr.NextPart(); err != io.EOF {
		return &Error{Code: 64, Message: "agentapi: bad request: parts after the announced files"}
	}
	return nil
}

// drain reads the rest of the announced parts, each up to the limit.
func (f *partFiles) drain() {
	if f.cur != nil {
		io.CopyN(io.Discard, f.cur, f.max+1)
	}
	for ; f.next < len(f.want); f.next++ {
		p, err := f.mr.NextPart()
		if err != nil {
			return
		}
		io.CopyN(io.Discard, p, f.max+1)
	}
}

// capped reads at most n bytes and then fails with errTooLarge.
type capped struct {
	r io.Reader
	n int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// status is the HTTP status for an exit code, for people reading the
// socket with curl; the client goes by the code in the body.
func status(code int) int {
	switch code {
	case 0:
		return http.StatusOK
	case 1, 66:
		return http.StatusNotFound
	case 2:
		return http.StatusConflict
	case 4, 69:
		return http.StatusServiceUnavailable
	case 64:
		return http.StatusBadRequest
	case 65:
		return http.StatusUnprocessableEntity
	case 77:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, e *Error) { writeJSON(w, status(e.Code), e) }

// asError is err as a refusal: itself if it is one, else an internal
// error (70).
func asError(err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: 70, Message: err.Error()}
	}
	return e
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}
