package agentapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/testutil"
)

var ctx = context.Background()

// backend is a Backend whose methods the test sets.
type backend struct {
	claim func(c agentapi.Caller, req agentapi.ClaimRequest) agentapi.Outcome
	send  func(c agentapi.Caller, req *agentapi.SendRequest, files agentapi.Files) (*agentapi.SendResult, error)
}

func (b *backend) Claim(_ context.Context, c agentapi.Caller, req agentapi.ClaimRequest) agentapi.Outcome {
	return b.claim(c, req)
}

func (b *backend) Done(_ context.Context, c agentapi.Caller, req agentapi.DoneRequest) agentapi.Outcome {
	agent, _ := c.Agent(req.Agent)
	return agentapi.Outcome{Result: agentapi.Result{Success: true, MessageID: req.ID, Message: "done by " + agent}}
}

func (b *backend) Fail(_ context.Context, c agentapi.Caller, req agentapi.FailRequest) agentapi.Outcome {
	return agentapi.Outcome{Result: agentapi.Result{MessageID: req.ID, Error: "conflict", Message: "nope"}, Code: 2}
}

func (b *backend) Send(_ context.Context, c agentapi.Caller, req *agentapi.SendRequest, files agentapi.Files) (*agentapi.SendResult, error) {
	return b.send(c, req, files)
}

func start(t *testing.T, path string, b agentapi.Backend, opts *agentapi.Options) *agentapi.Server {
	t.Helper()
	o := agentapi.Options{}
	if opts != nil {
		o = *opts
	}
	o.Path, o.Backend = path, b
	s := agentapi.New(o)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(ctx) })
	return s
}

func dial(t *testing.T, path string) *agentapi.Client {
	t.Helper()
	c, err := agentapi.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// The server knows who connected from the kernel (SO_PEERCRED), not from
// the request: the test's own uid and pid, and the user's name.
func TestWhoAmIIsThePeer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "courier.sock")
	start(t, path, &backend{}, nil)
	c := dial(t, path)
	who, agent, err := c.WhoAmI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	me, _ := user.Current()
	if who.UID != uint32(os.Getuid()) || who.GID != uint32(os.Getgid()) || who.PID != int32(os.Getpid()) || who.User != me.Username || agent != me.Username {
		t.Errorf("whoami = %+v agent %q; want uid %d gid %d pid %d user %s", who, agent, os.Getuid(), os.Getgid(), os.Getpid(), me.Username)
	}
	if !who.Owner {
		t.Error("the server's own user is not the owner")
	}
	// Another uid as the owner: the test's user is then an ordinary agent.
	other := uint32(os.Getuid() + 4242)
	path2 := filepath.Join(t.TempDir(), "courier.sock")
	start(t, path2, &backend{}, &agentapi.Options{Owner: &other})
	if who, _, _ := dial(t, path2).WhoAmI(ctx); who.Owner != (os.Getuid() == 0) {
		t.Errorf("owner = %v for uid %d when the service is uid %d", who.Owner, who.UID, other)
	}
}

// The attack: an agent of one user takes the name of another user's agent
// to finish or fail its claim. Its requests act under a name qualified by
// its own user, which no other user can produce.
func TestAgentNamesCannotCrossUsers(t *testing.T) {
	alice := agentapi.Caller{UID: 1001, User: "alice"}
	bob := agentapi.Caller{UID: 1002, User: "bob"}
	svc := agentapi.Caller{UID: 999, User: "courier", Owner: true}
	for _, tc := range []struct {
		c           agentapi.Caller
		asked, want string
	}{
		{alice, "", "alice"},
		{alice, "alice", "alice"},
		{alice, "reviewer", "reviewer@alice"},
		{alice, "reviewer@alice", "reviewer@alice"},
		{bob, "alice", "alice@bob"},                   // bob cannot be alice
		{bob, "reviewer@alice", "reviewer@alice@bob"}, // nor alice's reviewer
		{bob, "x@bob@alice", "x@bob@alice@bob"},
		{svc, "reviewer@alice", "reviewer@alice"}, // the service's user could write the database anyway
		{svc, "", "courier"},
	} {
		got, err := tc.c.Agent(tc.asked)
		if err != nil || got != tc.want {
			t.Errorf("%s asks %q: %q %v, want %q", tc.c.User, tc.asked, got, err, tc.want)
		}
	}
	// Bidirectional marks too (issue 18): "evil\u202eecila" shows as
	// "evilalice".
	for _, bad := range []string{"a b", "a\nb", "a\x00", strings.Repeat("x", agentapi.MaxAgentLen+1), "\xff",
		"evil\u202eecila", "a\u2066b", "a\u200fb", "a\u061cb", "a\x1b[31mb", "a\u009bb"} {
		if _, err := alice.Agent(bad); err == nil {
			t.Errorf("agent name %q accepted", bad)
		}
	}
}

// The socket is 0660 in a 0750 folder the server makes; a folder that
// exists keeps its mode and group, and a setgid one gives the socket its
// group (how an operator picks the agents' group).
func TestSocketModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "run")
	path := filepath.Join(dir, "courier.sock")
	s := start(t, path, &backend{}, nil)
	for p, want := range map[string]os.FileMode{dir: fs.ModeDir | 0o750, path: fs.ModeSocket | 0o660} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v %v, want %v", p, fi.Mode(), err, want)
		}
	}
	s.Stop(ctx)
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stop left the socket: %v", err)
	}

	if os.Geteuid() != 0 {
		t.Log("not root: the setgid folder's group is not checked")
		return
	}
	shared := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(shared, 0o750)
	const gid = 4243 // any group: root may give a folder any
	if err := os.Chown(shared, 0, gid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o2770|fs.ModeSetgid)
	path = filepath.Join(shared, "courier.sock")
	start(t, path, &backend{}, nil)
	fi, _ := os.Stat(shared)
	if fi.Mode() != fs.ModeDir|fs.ModeSetgid|0o770 {
		t.Errorf("existing folder's mode changed to %v", fi.Mode())
	}
	fi, _ = os.Stat(path)
	if st := fi.Sys().(*syscall.Stat_t); st.Gid != gid {
		t.Errorf("socket group %d, want the setgid folder's %d", st.Gid, gid)
	}
}

// A socket a killed service left behind is replaced; anything else at the
// path is not touched, and the error names it.
func TestStaleSocketAndStrangers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "courier.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // what kill -9 leaves: the file, nobody listening
	start(t, path, &backend{}, nil)
	if _, _, err := dial(t, path).WhoAmI(ctx); err != nil {
		t.Errorf("after replacing a stale socket: %v", err)
	}

	file := filepath.Join(dir, "config.yaml")
	os.WriteFile(file, []byte("precious"), 0o600)
	err = agentapi.New(agentapi.Options{Path: file, Backend: &backend{}}).Start(ctx)
	if err == nil || !strings.Contains(err.Error(), file+" exists and is not a socket") {
		t.Errorf("Start on a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "precious" {
		t.Error("the file at the socket's path was changed")
	}
}

// A workspace deeper than a Unix socket path may be (107 bytes) still
// gets its socket, and clients reach it.
func TestLongSocketPath(t *testing.T) {
	dir := t.TempDir()
	for len(dir) < 160 {
		dir = filepath.Join(dir, "a-rather-long-folder-name")
	}
	path := filepath.Join(dir, ".monoco", "run", "courier.sock")
	start(t, path, &backend{}, nil)
	if fi, err := os.Stat(path); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		t.Fatalf("%s: %v %v", path, fi, err)
	}
	if _, _, err := dial(t, path).WhoAmI(ctx); err != nil {
		t.Errorf("whoami over a %d-byte path: %v", len(path), err)
	}
}

// No service: Dial says so, with the reason a caller tells apart.
func TestDialErrors(t *testing.T) {
	_, err := agentapi.Dial(ctx, filepath.Join(t.TempDir(), "none.sock"))
	var de *agentapi.DialError
	if !errors.As(err, &de) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no socket: %v", err)
	}
}

// At most MaxConns connections are served at once; the others wait, and
// are served when one closes.
func TestConnectionBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.sock")
	entered := make(chan string, 16)
	release := make(chan struct{})
	s := start(t, path, &backend{claim: func(c agentapi.Caller, req agentapi.ClaimRequest) agentapi.Outcome {
		entered <- req.ID
		<-release
		return agentapi.Outcome{Result: agentapi.Result{Success: true, MessageID: req.ID}}
	}}, &agentapi.Options{MaxConns: 2})
	const n = 6
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := agentapi.Dial(ctx, path)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if o, err := c.Claim(ctx, agentapi.ClaimRequest{ID: fmt.Sprint(i)}); err != nil || !o.Result.Success {
				t.Errorf("claim %d: %+v %v", i, o, err)
			}
		}()
	}
	for i := 0; i < n; i++ {
		<-entered
		if open, _ := s.Conns(); open > 2 {
			t.Errorf("%d connections served at once, bound 2", open)
		}
		release <- struct{}{}
	}
	wg.Wait()
	if _, peak := s.Conns(); peak > 2 {
		t.Errorf("peak of %d connections, bound 2", peak)
	}
}

// A request over the size bound is refused with an error that says so,
// not read whole.
func TestRequestBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.sock")
	start(t, path, &backend{claim: func(agentapi.Caller, agentapi.ClaimRequest) agentapi.Outcome {
		t.Error("an oversized request reached the backend")
		return agentapi.Outcome{}
	}}, &agentapi.Options{MaxRequestBytes: 1024})
	c := dial(t, path)
	_, err := c.Claim(ctx, agentapi.ClaimRequest{ID: strings.Repeat("x", 4096)})
	var e *agentapi.Error
	if !errors.As(err, &e) || e.Code != 65 || !strings.Contains(e.Message, "over 1024 bytes") {
		t.Errorf("oversized claim: %v", err)
	}
	_, err = c.Send(ctx, &agentapi.SendRequest{Name: "d.md", Draft: bytes.Repeat([]byte("x"), 4096)}, nil)
	if !errors.As(err, &e) || e.Code != 65 {
		t.Errorf("oversized send: %v", err)
	}
	// Unknown fields are a client bug: refused, not ignored.
	resp := rawPost(t, path, "/v1/claim", `{"id": "x", "agent_uid": 0}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.body, "unknown field") {
		t.Errorf("unknown field: %d %s", resp.StatusCode, resp.body)
	}
}

type rawResponse struct {
	*http.Response
	body string
}

func rawPost(t *testing.T, path, url, body string) rawResponse {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := hc.Post("http://courier"+url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResponse{resp, string(b)}
}

// A send's artifacts arrive in order as the backend asks for them, as the
// agent's command line read them; a refusal before any is read still
// reaches a client that is uploading a large one (the rest is read and
// dropped, up to the announced bound), instead of a reset connection.
func TestSendFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.sock")
	refuse := false
	start(t, path, &backend{send: func(c agentapi.Caller, req *agentapi.SendRequest, files agentapi.Files) (*agentapi.SendResult, error) {
		if refuse {
			return nil, &agentapi.Error{Code: 65, Message: "d.md:2: to: draft has no recipient"}
		}
		var got []string
		for _, f := range req.Files {
			r, err := files.Open(f.Index)
			if err != nil {
				return nil, err
			}
			b, err := io.ReadAll(r)
			if err != nil {
				return nil, err
			}
			got = append(got, fmt.Sprintf("%d=%s", f.Index, b))
		}
		return &agentapi.SendResult{ID: "lark_out_1", File: strings.Join(got, ",")}, nil
	}}, &agentapi.Options{MaxFileBytes: 64 << 20})
	c := dial(t, path)
	content := map[int]string{0: "first", 2: "third"}
	open := func(i int) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(content[i])), nil }
	res, err := c.Send(ctx, &agentapi.SendRequest{Name: "d.md", Files: []agentapi.File{{Index: 0}, {Index: 2}}}, open)
	if err != nil || res.File != "0=first,2=third" {
		t.Fatalf("send: %+v %v", res, err)
	}

	refuse = true
	big := func(i int) (io.ReadCloser, error) { return io.NopCloser(io.LimitReader(zeros{}, 32<<20)), nil }
	_, err = c.Send(ctx, &agentapi.SendRequest{Name: "d.md", Files: []agentapi.File{{Index: 0}}}, big)
	var e *agentapi.Error
	if !errors.As(err, &e) || e.Code != 65 || e.Message != "d.md:2: to: draft has no recipient" {
		t.Errorf("refused send with a 32 MiB artifact: %v", err)
	}
	// The connection is still good for the next request.
	if _, _, err := c.WhoAmI(ctx); err != nil {
		t.Errorf("after a refused upload: %v", err)
	}

	// Parts that do not match what the request announced are refused.
	refuse = false
	resp := rawMultipart(t, path, `{"name": "d.md", "files": [{"index": 0}]}`, "artifact.1", "x")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.body, `part \"artifact.1\" where \"artifact.0\" was due`) {
		t.Errorf("mismatched part: %d %s", resp.StatusCode, resp.body)
	}
	resp = rawMultipart(t, path, `{"name": "d.md"}`, "artifact.0", "x")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.body, "parts after the announced files") {
		t.Errorf("unannounced part: %d %s", resp.StatusCode, resp.body)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func rawMultipart(t *testing.T, path, request, name, content string) rawResponse {
	t.Helper()
	body := "--b\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n" + request + "\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + content + "\r\n--b--\r\n"
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := hc.Post("http://courier/v1/send", "multipart/form-data; boundary=b", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResponse{resp, string(b)}
}

// Stop lets a request in flight finish, then removes the socket; a client
// dialling afterwards finds no service.
func TestStopFinishesRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.sock")
	entered, release := make(chan struct{}), make(chan struct{})
	s := agentapi.New(agentapi.Options{Path: path, Backend: &backend{claim: func(agentapi.Caller, agentapi.ClaimRequest) agentapi.Outcome {
		close(entered)
		<-release
		return agentapi.Outcome{Result: agentapi.Result{Success: true}}
	}}})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := dial(t, path)
	done := make(chan error, 1)
	go func() {
		o, err := c.Claim(ctx, agentapi.ClaimRequest{ID: "x"})
		if err == nil && !o.Result.Success {
			err = errors.New("not a success")
		}
		done <- err
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctx) }()
	testutil.WaitFor(t, 5*time.Second, "Stop to close the listener", func() bool {
		_, err := agentapi.Dial(ctx, path)
		return err != nil
	})
	close(release)
	if err := <-done; err != nil {
		t.Errorf("the request in flight: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket after Stop: %v", err)
	}
}

// operator is a backend that serves the outbound verbs too.
type operator struct {
	backend
	got []agentapi.Caller
}

func (o *operator) Outbound(_ context.Context, c agentapi.Caller, req agentapi.OutboundRequest) (*agentapi.OutboundResult, error) {
	o.got = append(o.got, c)
	if !c.Owner {
		return nil, &agentapi.Error{Code: 77, Message: "not yours"}
	}
	return &agentapi.OutboundResult{ID: req.ID, Verb: req.Verb, Status: "queued", Message: "ok"}, nil
}

// /v1/outbound is served for a Backend that is an Operator, with the
// Caller the kernel names: the owner's request goes through, another
// user's gets the Operator's refusal; a plain Backend does not serve it.
func TestOutboundThroughSocket(t *testing.T) {
	op := &operator{}
	path := filepath.Join(t.TempDir(), "courier.sock")
	start(t, path, op, nil)
	res, err := dial(t, path).Outbound(ctx, agentapi.OutboundRequest{Verb: agentapi.OutboundCancel, ID: "email_out_1"})
	if err != nil || res.ID != "email_out_1" || res.Verb != "cancel" {
		t.Fatalf("owner: %+v %v", res, err)
	}
	other := uint32(os.Getuid() + 4242)
	path2 := filepath.Join(t.TempDir(), "courier.sock")
	start(t, path2, op, &agentapi.Options{Owner: &other})
	_, err = dial(t, path2).Outbound(ctx, agentapi.OutboundRequest{Verb: agentapi.OutboundRequeue, ID: "email_out_1"})
	var e *agentapi.Error
	if os.Getuid() != 0 && (!errors.As(err, &e) || e.Code != 77) {
		t.Errorf("another user: %v", err)
	}
	if len(op.got) != 2 || !op.got[0].Owner || op.got[1].Owner != (os.Getuid() == 0) || op.got[1].UID != uint32(os.Getuid()) {
		t.Errorf("callers %+v", op.got)
	}
	path3 := filepath.Join(t.TempDir(), "courier.sock")
	start(t, path3, &backend{}, nil)
	if _, err := dial(t, path3).Outbound(ctx, agentapi.OutboundRequest{Verb: "retry", ID: "x"}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a Backend that is no Operator: %v", err)
	}
}
