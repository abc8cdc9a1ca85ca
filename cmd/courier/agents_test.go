package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// viaService makes cli() go through a service socket started in the test
// process for each workspace (serveAgents), so that the command line's
// tests run in both modes: acting on the mailbox, and asking the service.
var viaService bool

var (
	agentSocketsMu sync.Mutex
	agentSockets   = map[string]*agentapi.Server{}
	// servedConns counts the connections the test sockets served: a test
	// run via the service that leaves it at 0 never reached one.
	servedConns atomic.Int64
)

// serveAgents starts the service's agent socket for workspace ws (its
// mailbox initialized; the config as it is now), once, until t ends.
func serveAgents(t testing.TB, ws string) {
	t.Helper()
	agentSocketsMu.Lock()
	defer agentSocketsMu.Unlock()
	if agentSockets[ws] != nil || !mailbox.Initialized(ws) {
		return
	}
	a := &app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, rootFlag: ws}
	cfg, err := a.loadConfig()
	if err != nil {
		t.Fatalf("serveAgents: %v", err)
	}
	mb, err := a.Mailbox()
	if err != nil {
		t.Fatalf("serveAgents: %v", err)
	}
	set, err := a.providerTable().Build(cfg, providers.Env{})
	if err != nil {
		t.Fatalf("serveAgents: %v", err)
	}
	b, err := agents.NewBackend(a.root, cfg, mb, set)
	if err != nil {
		t.Fatalf("serveAgents: %v", err)
	}
	comp, srv := agents.Socket(a.root, b, slog.New(slog.DiscardHandler))
	if err := comp.Start(context.Background()); err != nil {
		t.Fatalf("serveAgents: %v", err)
	}
	agentSockets[ws] = srv
	t.Cleanup(func() {
		comp.Stop(context.Background())
		_, peak := srv.Conns()
		servedConns.Add(int64(peak))
		b.Close()
		a.close()
		agentSocketsMu.Lock()
		delete(agentSockets, ws)
		agentSocketsMu.Unlock()
	})
}

// The command line's tests of the writing verbs, run again with the
// service running: each must pass as it does without it, with the same
// exit codes and messages (claims raced by eight processes included).
func TestCLIViaService(t *testing.T) {
	viaService = true
	defer func() { viaService = false }()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"SendEmailReply", TestSendEmailReply},
		{"SendAttachFromParent", TestSendAttachFromParent},
		{"SendRefusals", TestSendRefusals},
		{"SendQuickAndArtifacts", TestSendQuickAndArtifacts},
		{"ClaimDoneFailExitCodes", TestClaimDoneFailExitCodes},
		{"ClaimRaceProcesses", TestClaimRaceProcesses},
		// The attach policy is the command line's, service or not.
		{"AttachAttacks", TestAttachAttacks},
		{"AttachAllowed", TestAttachAllowed},
	} {
		before := servedConns.Load()
		t.Run(tc.name, tc.fn)
		if servedConns.Load() == before {
			t.Errorf("%s never reached the service's socket", tc.name)
		}
	}
}

// normalize takes out of a command's output what differs between two runs
// by design: the workspace's path, times, generated ids.
var (
	rfc3339  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	fileTime = regexp.MustCompile(`\d{8}T\d{6}_`)
	outID    = regexp.MustCompile(`_out_[0-9a-f]{32}`)
	uuidPat  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	msgIDPat = regexp.MustCompile(`<[0-9a-f]{32}@[^>]+>`)
)

func normalize(s, ws string) string {
	s = strings.ReplaceAll(s, ws, "WS")
	s = rfc3339.ReplaceAllString(s, "TIME")
	s = fileTime.ReplaceAllString(s, "TIME_")
	s = outID.ReplaceAllString(s, "_out_ID")
	s = uuidPat.ReplaceAllString(s, "UUID")
	return msgIDPat.ReplaceAllString(s, "<MSGID>")
}

// The same commands, on two workspaces seeded alike, one without the
// service and one with it, print the same bytes and exit alike: what an
// agent scripts against does not depend on whether the service runs.
func TestServiceParity(t *testing.T) {
	type step struct {
		args  []string
		stdin string
	}
	steps := []step{
		{args: []string{"done", "lark_om_p1", "--agent", "a"}},
		{args: []string{"claim", "lark_om_p1", "--agent", "a"}},
		{args: []string{"claim", "lark_om_p1", "--agent", "a", "--format", "json"}},
		{args: []string{"claim", "lark_om_p1", "--agent", "b", "--format", "json"}},
		{args: []string{"claim", "lark_om_p1", "lark_om_nope", "--agent", "b"}},
		{args: []string{"fail", "lark_om_p1", "--agent", "b", "--reason", "x"}},
		{args: []string{"fail", "lark_om_p1", "--agent", "a", "--reason", "flaky", "--format", "json"}},
		{args: []string{"claim", "-", "--agent", "c"}, stdin: "lark_om_p2\n# comment\nlark_om_p3 | Ann | hi\n"},
		{args: []string{"done", "lark_om_p2", "--agent", "c", "--format", "json"}},
		{args: []string{"fail", "lark_om_p3", "--agent", "c", "--permanent", "--reason", "unreadable"}},
		{args: []string{"claim", "lark_om_p3", "--agent", "c"}},
		{args: []string{"claim", "lark_om_p1", "--agent", "evil\u202eecila"}},
		{args: []string{"done", "lark_om_p1", "--agent", "a\u2066b"}},
		{args: []string{"fail", "lark_om_p1", "--agent", "a\x1bb", "--reason", "x"}},
		{args: []string{"send", "drafts/ok.md", "--agent", "evil\u202eecila"}},
		{args: []string{"send", "drafts/ok.md"}},
		{args: []string{"send", "drafts/ok.md", "--format", "json"}},
		{args: []string{"send", "drafts/ok.md", "--dry-run"}},
		{args: []string{"send", "drafts/ok.md", "--dry-run", "--format", "json"}},
		{args: []string{"send", "--reply-to", "lark_om_p2", "--text", "Thanks.", "--correlation", "c_9"}},
		{args: []string{"send", "-"}, stdin: "---\nprovider: lark\nto: oc_1\n---\nfrom stdin\n"},
		{args: []string{"send", "drafts/attach.md", "--format", "json"}},
		{args: []string{"send", "--to", "oc_1", "--text", "x", "--attach", "drafts/report.pdf", "--attach", "drafts/absent.pdf"}},
		{args: []string{"send", "--to", "oc_1", "--text", "x", "--attach", "/etc/passwd"}},
		{args: []string{"send", "drafts/norcpt.md"}},
		{args: []string{"send", "drafts/both.md"}},
		{args: []string{"send", "drafts/missing-art.md"}},
		{args: []string{"send", "drafts/outside.md"}},
		{args: []string{"send", "drafts/yaml.md"}},
		{args: []string{"send", "drafts/big.md"}},
		{args: []string{"send", "drafts/unknown-reply.md"}},
		{args: []string{"send", "drafts/ok.md", "--text", "and text"}},
		{args: []string{"send", "--provider", "slack", "--to", "C0123456", "--text", strings.Repeat("y", 3000)}},
	}
	drafts := map[string]string{
		"ok.md":            "---\nprovider: lark\nto: oc_1\ncorrelation_id: bug_1\n---\nFixed.\n",
		"attach.md":        "---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: report.pdf\n  - path: notes\n---\nSee attached.\n",
		"report.pdf":       "%PDF-1.4 pretend",
		"notes":            "plain notes, no extension\n",
		"norcpt.md":        "---\nprovider: lark\n---\nhi\n",
		"both.md":          "---\nprovider: lark\nartifacts:\n  - path: ./absent.pdf\n---\nhi\n",
		"missing-art.md":   "---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: report.pdf\n  - path: ./absent.pdf\n---\nhi\n",
		"outside.md":       "---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: /etc/hostname\n---\nhi\n",
		"yaml.md":          "---\nprovider: lark\nto: [oc_1\n---\nhi\n",
		"big.md":           "---\nprovider: lark\nto: oc_1\n---\n" + strings.Repeat("x", 3000) + "\n",
		"unknown-reply.md": "---\nreply_to: lark_om_nope\n---\nhi\n",
	}
	setup := func(t *testing.T) string {
		ws := newWorkspace(t)
		os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte("courier:\n  limits: {max_draft_bytes: 2000}\n"), 0o644)
		os.Mkdir(filepath.Join(ws, "drafts"), 0o755)
		for n, c := range drafts {
			os.WriteFile(filepath.Join(ws, "drafts", n), []byte(c), 0o644)
		}
		var msgs []*schema.Message
		for i := 1; i <= 3; i++ {
			msgs = append(msgs, testutil.Message(schema.Lark, fmt.Sprintf("om_p%d", i), testutil.Time("2026-03-01T10:00:00Z").Add(time.Duration(i)*time.Minute), "hi"))
		}
		msgs[1].CorrelationID = "c_1"
		seed(t, ws, msgs...)
		return ws
	}
	direct, served := setup(t), setup(t)
	// The commands run in the workspace, as an agent would, so that
	// relative paths mean the same in both.
	cwd, _ := os.Getwd()
	defer os.Chdir(cwd)
	run := func(ws string, s step) string {
		os.Chdir(ws)
		o, e, code := cli(t, ws, s.stdin, s.args...)
		return normalize(fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, o, e), ws)
	}
	var got []string
	for _, s := range steps {
		got = append(got, run(direct, s))
	}
	viaService = true
	defer func() { viaService = false }()
	for i, s := range steps {
		want := got[i]
		if g := run(served, s); g != want {
			t.Errorf("%v:\nwithout the service:\n%s\nwith it:\n%s", s.args, want, g)
		}
	}
	agentSocketsMu.Lock()
	srv := agentSockets[served]
	agentSocketsMu.Unlock()
	if srv == nil {
		t.Error("the second workspace has no service")
	} else if _, peak := srv.Conns(); peak == 0 {
		t.Error("the second workspace never reached the service")
	}
	// Both mailboxes hold the same files, the same claims.
	for _, ws := range []string{direct, served} {
		out, _, _ := cli(t, ws, "", "list", "--all", "--format", "compact")
		got = append(got, normalize(out, ws))
	}
	if got[len(got)-2] != got[len(got)-1] {
		t.Errorf("the mailboxes differ:\n%s\n---\n%s", got[len(got)-2], got[len(got)-1])
	}
}

// The attack helper: TestTwoUsers runs the test binary as an agent with
// attackEnv set, and TestMain hands it to attackMain, which tries each
// operation and reports the errno each got.
const attackEnv = "COURIER_TEST_ATTACK"

type attackOp struct {
	Op, Path, To string
}

type attackResult struct {
	attackOp
	Errno int    // 0 when the operation succeeded
	Err   string // the error, for the test's message
}

func attackMain(spec string) int {
	var ops []attackOp
	if err := json.Unmarshal([]byte(spec), &ops); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var out []attackResult
	for _, op := range ops {
		err := attack(op)
		r := attackResult{attackOp: op}
		if err != nil {
			r.Err = err.Error()
			var errno syscall.Errno
			if errors.As(err, &errno) {
				r.Errno = int(errno)
			} else {
				r.Errno = -1
			}
		}
		out = append(out, r)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

func attack(op attackOp) error {
	switch op.Op {
	case "unlink":
		return os.Remove(op.Path)
	case "rename":
		return os.Rename(op.Path, op.To)
	case "create":
		f, err := os.OpenFile(op.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			f.Close()
		}
		return err
	case "openw":
		f, err := os.OpenFile(op.Path, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return err
	case "openrw":
		f, err := os.OpenFile(op.Path, os.O_RDWR, 0)
		if err == nil {
			f.Close()
		}
		return err
	case "truncate":
		return os.Truncate(op.Path, 0)
	case "chmod":
		return os.Chmod(op.Path, 0o666)
	case "mkdir":
		return os.Mkdir(op.Path, 0o755)
	case "symlink":
		return os.Symlink(op.To, op.Path)
	case "sqlite-write":
		// Through SQLite itself, as a script would: it opens what it can
		// (read-only) and the write fails.
		db, err := sql.Open("sqlite", "file:"+op.Path)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.Exec(`UPDATE claims SET agent = 'mallory'`)
		if err != nil && strings.Contains(err.Error(), "readonly") {
			return fmt.Errorf("%w: %v", syscall.EACCES, err)
		}
		return err
	}
	return fmt.Errorf("unknown op %q", op.Op)
}

// sysUser is a system user the two-user test makes (or finds).
type sysUser struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

func ensureUser(t *testing.T, name string, extraGroups ...string) sysUser {
	t.Helper()
	if _, err := user.Lookup(name); err != nil {
		args := []string{"--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", "--comment", "Courier test"}
		if len(extraGroups) > 0 {
			args = append(args, "-G", strings.Join(extraGroups, ","))
		}
		if out, err := exec.Command("useradd", append(args, name)...).CombinedOutput(); err != nil {
			if _, lerr := user.Lookup(name); lerr != nil {
				t.Fatalf("useradd %s: %v: %s", name, err, out)
			}
		}
	} else if len(extraGroups) > 0 {
		if out, err := exec.Command("usermod", "-aG", strings.Join(extraGroups, ","), name).CombinedOutput(); err != nil {
			t.Fatalf("usermod %s: %v: %s", name, err, out)
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	su := sysUser{name: name, uid: uint32(uid), gid: uint32(gid)}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		n, _ := strconv.Atoi(g)
		su.groups = append(su.groups, uint32(n))
	}
	return su
}

// as makes cmd run as u, with a small environment of its own.
func (u sysUser) as(cmd *exec.Cmd, home string) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}}
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + home, "LANG=C.UTF-8"}
	cmd.Dir = home
	return cmd
}

func owner(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// The service as the only writer, with real users (issue 9, item 8): the
// service runs as one user, an agent as another in its group. The agent
// lists, reads, claims, finishes, fails and sends through the service's
// socket, its artifact read by its own command line from a folder the
// service cannot read; every file the verbs write is the service's. As the
// agent, unlinking, renaming, writing, truncating anything under inbound/
// or the database, forging a draft in outbound/ or an object in the
// dropzone, fail with EACCES (EPERM for chmod). Another user in the group
// cannot finish the agent's claim under the agent's name; a user outside
// it is told which group to join; with the service stopped the agent's
// writing verb fails at once, changing nothing, while reading still works.
func TestTwoUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv(testutil.RequireServersEnv) == "1" {
			t.Fatal("this test makes users and runs processes as them: it needs root, and COURIER_REQUIRE_SERVERS=1 forbids skipping")
		}
		t.Skip("needs root to make users and run processes as them")
	}
	// The service's group reads the mailbox; courierbots may also use
	// the socket (its folder is setgid courierbots), so reader only reads.
	if _, err := user.LookupGroup("courierbots"); err != nil {
		if out, err := exec.Command("groupadd", "--system", "courierbots").CombinedOutput(); err != nil {
			if _, lerr := user.LookupGroup("courierbots"); lerr != nil {
				t.Fatalf("groupadd: %v %s", err, out)
			}
		}
	}
	bots, _ := user.LookupGroup("courierbots")
	botsGID, _ := strconv.Atoi(bots.Gid)
	svc := ensureUser(t, "couriersvc")
	agent := ensureUser(t, "courieragent", "couriersvc", "courierbots")
	peer := ensureUser(t, "courierpeer", "couriersvc", "courierbots")
	reader := ensureUser(t, "courierreader", "couriersvc")
	outsider := ensureUser(t, "courieroutsider")
	sink := testutil.StartSMTPSink(t, nil)

	// Everything the users run from must be theirs to reach:
	// t.TempDir()'s parents are root's and 0700.
	dir, err := os.MkdirTemp("", "courier-2users-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "courier")
	testutil.CopyFile(t, courierBin, bin, 0o755)
	self, _ := os.Executable()
	helper := filepath.Join(dir, "courier.test")
	testutil.CopyFile(t, self, helper, 0o755)
	home := map[string]string{}
	for _, u := range []sysUser{svc, agent, peer, reader, outsider} {
		h := filepath.Join(dir, u.name)
		os.Mkdir(h, 0o700)
		os.Chown(h, int(u.uid), int(u.gid))
		home[u.name] = h
	}
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o750)
	os.Chown(ws, int(svc.uid), int(svc.gid))

	courier := func(u sysUser, stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := u.as(exec.Command(bin, append([]string{"--root", ws}, args...)...), home[u.name])
		var o, e bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("%s as %s: %v", args, u.name, err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	if _, e, code := courier(svc, "", "init"); code != 0 {
		t.Fatalf("init as %s: %d %s", svc.name, code, e)
	}
	// The operator's choice of the socket's group: its folder, setgid.
	run := filepath.Join(ws, ".monoco/run")
	os.Mkdir(run, 0o750)
	os.Chown(run, int(svc.uid), botsGID)
	os.Chmod(run, 0o750|os.ModeSetgid)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	cfgPath := filepath.Join(ws, ".monoco/config/courier.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s, attach_roots: [%s]}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s, addresses: [agent@corp.example]}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
`, web, home[agent.name], recv, sink.Host(), sink.Port())), 0o640)
	os.Chown(cfgPath, int(svc.uid), int(svc.gid))

	serve := svc.as(exec.Command(bin, "--root", ws, "serve", "--log-level", "debug"), home[svc.name])
	var serveLog bytes.Buffer
	var logMu sync.Mutex
	serve.Stdout = lockedWriter{&logMu, &serveLog}
	serve.Stderr = serve.Stdout
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { serve.Wait(); close(exited) }()
	t.Cleanup(func() {
		serve.Process.Kill()
		<-exited
	})
	logText := func() string { logMu.Lock(); defer logMu.Unlock(); return serveLog.String() }
	testutil.WaitFor(t, 20*time.Second, "the service to start", func() bool {
		resp, err := http.Get("http://" + web + "/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var rep struct {
			StartedAt *time.Time `json:"started_at"`
		}
		return json.NewDecoder(resp.Body).Decode(&rep) == nil && rep.StartedAt != nil
	})

	for i := 1; i <= 3; i++ {
		if err := sendMail(recv, "ann@example.com", "agent@corp.example", fmt.Sprintf("q%d@example.com", i), fmt.Sprintf("Question %d", i), fmt.Sprintf("Body %d", i)); err != nil {
			t.Fatalf("deliver: %v\n%s", err, logText())
		}
	}
	sock := filepath.Join(ws, ".monoco/run/courier.sock")
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Perm() != 0o660 || owner(t, sock) != svc.uid || fi.Sys().(*syscall.Stat_t).Gid != uint32(botsGID) {
		t.Fatalf("socket %v %v: want 0660, the service's, group courierbots", fi, err)
	}

	// Reading: directly, as the agent.
	out, e, code := courier(agent, "", "list", "--format", "id")
	ids := strings.Fields(out)
	if code != 0 || len(ids) != 3 {
		t.Fatalf("list as the agent: %d %q %s", code, out, e)
	}
	out, e, code = courier(agent, "", "read", ids[0], "--content")
	if code != 0 || strings.TrimSpace(out) != "Body 1" {
		t.Errorf("read as the agent: %d %q %s", code, out, e)
	}

	// Claim and done through the service; another user of the group
	// cannot finish or take the claim under the agent's name.
	out, e, code = courier(agent, "", "claim", ids[0])
	if code != 0 || !strings.Contains(out, "claimed "+ids[0]+" as courieragent until") {
		t.Fatalf("claim as the agent: %d %q %s", code, out, e)
	}
	_, e, code = courier(peer, "", "done", ids[0], "--agent", "courieragent")
	if code != exitConflict || !strings.Contains(e, "is claimed by courieragent, not by courieragent@courierpeer") {
		t.Errorf("done of the agent's claim by another user under its name: %d %s", code, e)
	}
	_, e, code = courier(peer, "", "claim", ids[0], "--agent", "courieragent")
	if code != exitConflict || !strings.Contains(e, "already claimed by courieragent") {
		t.Errorf("claim of the agent's message by another user under its name: %d %s", code, e)
	}
	out, e, code = courier(agent, "", "done", ids[0])
	if code != 0 || !strings.Contains(out, "done "+ids[0]+" -> .monoco/mailbox/archive/email/") {
		t.Fatalf("done as the agent: %d %q %s", code, out, e)
	}
	archived := filepath.Join(ws, strings.TrimSpace(strings.SplitN(out, "-> ", 2)[1]))
	if owner(t, archived) != svc.uid {
		t.Errorf("%s is owned by uid %d, want the service's %d", archived, owner(t, archived), svc.uid)
	}
	// Fail, set aside for good.
	courier(agent, "", "claim", ids[1])
	out, e, code = courier(agent, "", "fail", ids[1], "--permanent", "--reason", "cannot parse")
	if code != 0 || !strings.Contains(out, "set aside in .monoco/mailbox/.deadletter/email/") {
		t.Errorf("fail as the agent: %d %q %s", code, out, e)
	}
	// The service logged who asked, as the kernel named them.
	if !strings.Contains(logText(), fmt.Sprintf("verb=done id=%s agent=courieragent user=courieragent uid=%d", ids[0], agent.uid)) {
		t.Errorf("no audit line for the agent's done in the service's log:\n%s", logText())
	}

	// Send: a reply with an artifact from the agent's own folder, which the
	// service's user cannot read, and a Lark draft, which stays queued
	// (Lark is not enabled).
	report := filepath.Join(home[agent.name], "report.txt")
	os.WriteFile(report, []byte("only the agent can read this\n"), 0o600)
	os.Chown(report, int(agent.uid), int(agent.gid))
	draft := filepath.Join(home[agent.name], "reply.md")
	os.WriteFile(draft, []byte("---\nreply_to: "+ids[2]+"\nartifacts:\n  - path: report.txt\n---\nThe report.\n"), 0o600)
	os.Chown(draft, int(agent.uid), int(agent.gid))
	out, e, code = courier(agent, "", "send", draft, "--format", "json")
	if code != 0 {
		t.Fatalf("send as the agent: %d %s %s\n%s", code, out, e, logText())
	}
	msgs := sink.WaitMessages(t, 1, 20*time.Second)
	if att := attachment(t, msgs[0].Raw); att != "only the agent can read this\n" {
		t.Errorf("the attachment delivered is %q", att)
	}
	out, e, code = courier(agent, "", "send", "--provider", "lark", "--to", "oc_1", "--text", "queued", "--agent", "reviewer")
	if code != 0 || !strings.Contains(out, "queued lark_out_") {
		t.Fatalf("lark send as the agent: %d %q %s", code, out, e)
	}
	queued := filepath.Join(ws, strings.TrimSpace(strings.SplitN(out, "-> ", 2)[1]))
	if owner(t, queued) != svc.uid {
		t.Errorf("%s is owned by uid %d, want the service's %d", queued, owner(t, queued), svc.uid)
	}
	if b, _ := os.ReadFile(queued); !strings.Contains(string(b), "agent: reviewer@courieragent") {
		t.Errorf("the queued draft does not name the agent under its user:\n%s", b)
	}
	testutil.WaitFor(t, 20*time.Second, "the email reply archived", func() bool {
		m, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive/email/*_email_out_*.md"))
		return len(m) == 1 && owner(t, m[0]) == svc.uid
	})
	objs, _ := filepath.Glob(filepath.Join(ws, ".monoco/dropzone/sha256/*/*"))
	for _, o := range objs {
		if owner(t, o) != svc.uid {
			t.Errorf("dropzone object %s is owned by uid %d", o, owner(t, o))
		}
	}

	// A user who may read but not use the socket reads, and is told which
	// group the writing verbs need; one outside the workspace's group is
	// told which group that is.
	if out, e, code := courier(reader, "", "list", "--format", "id"); code != 0 || len(strings.Fields(out)) != 1 {
		t.Errorf("list by a reader: %d %q %s", code, out, e)
	}
	_, e, code = courier(reader, "", "claim", ids[2])
	if code != exitNoPerm || !strings.Contains(e, "cannot reach the service at "+sock+": permission denied") || !strings.Contains(e, "user courierreader must be in group courierbots") {
		t.Errorf("claim by a reader outside the socket's group: %d %s", code, e)
	}
	_, e, code = courier(outsider, "", "claim", ids[2])
	if code != exitNoPerm || !strings.Contains(e, "permission denied") || !strings.Contains(e, "user courieroutsider may not read this workspace; its agents are in group couriersvc") {
		t.Errorf("claim by a user outside the workspace's group: %d %s", code, e)
	}

	// The attacks, as the agent.
	inbound, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound/email/*.md"))
	if len(inbound) == 0 {
		t.Fatal("no inbound file left to attack")
	}
	in := inbound[0]
	state := filepath.Join(ws, ".monoco/mailbox/.state")
	ops := []attackOp{
		{Op: "unlink", Path: in},
		{Op: "rename", Path: in, To: in + ".moved"},
		{Op: "rename", Path: in, To: filepath.Join(home[agent.name], "stolen.md")},
		{Op: "create", Path: filepath.Join(filepath.Dir(in), "20260101T000000_email_forged.md")},
		{Op: "openw", Path: in},
		{Op: "openrw", Path: in},
		{Op: "truncate", Path: in},
		{Op: "chmod", Path: in},
		{Op: "mkdir", Path: filepath.Join(filepath.Dir(in), "x")},
		{Op: "symlink", Path: filepath.Join(filepath.Dir(in), "link.md"), To: "/etc/passwd"},
		{Op: "openrw", Path: filepath.Join(state, "courier.db")},
		{Op: "openw", Path: filepath.Join(state, "courier.db-wal")},
		{Op: "openrw", Path: filepath.Join(state, "courier.db-shm")},
		{Op: "truncate", Path: filepath.Join(state, "courier.db")},
		{Op: "unlink", Path: filepath.Join(state, "courier.db")},
		{Op: "rename", Path: filepath.Join(state, "courier.db"), To: filepath.Join(state, "old.db")},
		{Op: "create", Path: filepath.Join(state, "courier.db-journal")},
		{Op: "sqlite-write", Path: filepath.Join(state, "courier.db")},
		{Op: "create", Path: filepath.Join(ws, ".monoco/mailbox/outbound/email/20260101T000000_email_out_forged.md")},
		{Op: "create", Path: filepath.Join(ws, ".monoco/mailbox/.tmp/x")},
		{Op: "unlink", Path: archived},
		{Op: "create", Path: filepath.Join(ws, ".monoco/dropzone/sha256/forged")},
		{Op: "unlink", Path: sock},
		{Op: "create", Path: filepath.Join(ws, ".monoco/run/evil.sock")},
		{Op: "openw", Path: cfgPath},
	}
	before := dirState(t, filepath.Join(ws, ".monoco"))
	spec, _ := json.Marshal(ops)
	cmd := agent.as(exec.Command(helper), home[agent.name])
	cmd.Env = append(cmd.Env, attackEnv+"="+string(spec))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("attack helper: %v %s", err, raw)
	}
	var results []attackResult
	if err := json.Unmarshal(raw, &results); err != nil || len(results) != len(ops) {
		t.Fatalf("attack helper said %s (%v)", raw, err)
	}
	for _, r := range results {
		want := syscall.EACCES
		if r.Op == "chmod" {
			want = syscall.EPERM // not the owner
		}
		if err := syscall.Errno(r.Errno); r.Errno <= 0 || !errors.Is(err, want) {
			t.Errorf("%s %s as the agent: %q (errno %d), want %v", r.Op, strings.TrimPrefix(r.Path, ws+"/"), r.Err, r.Errno, want)
		}
	}
	if after := dirState(t, filepath.Join(ws, ".monoco")); after != before {
		t.Errorf("the attacks changed the workspace:\n%s\n---\n%s", before, after)
	}

	// The service stops: reading still works, a writing verb fails at once,
	// saying why, and changes nothing.
	serve.Process.Signal(syscall.SIGTERM)
	<-exited
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket after the service stopped: %v", err)
	}
	before = dirState(t, filepath.Join(ws, ".monoco"))
	out, e, code = courier(agent, "", "list", "--format", "id")
	if code != 0 || len(strings.Fields(out)) != 1 {
		t.Errorf("list with the service stopped: %d %q %s", code, out, e)
	}
	for _, args := range [][]string{
		{"claim", ids[2]},
		{"send", "--provider", "lark", "--to", "oc_1", "--text", "while stopped"},
	} {
		_, e, code = courier(agent, "", args...)
		if code != exitNoService || !strings.Contains(e, "the service is not running") || !strings.Contains(e, "may not write the mailbox itself") {
			t.Errorf("%v with the service stopped: %d %s", args, code, e)
		}
	}
	if after := dirState(t, filepath.Join(ws, ".monoco")); after != before {
		t.Errorf("a refused writing verb changed the workspace:\n%s\n---\n%s", before, after)
	}
}

// attachment returns the content of the first attachment of a raw email.
func attachment(t *testing.T, raw []byte) string {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(ct string, body io.Reader) string
	walk = func(ct string, body io.Reader) string {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || !strings.HasPrefix(mt, "multipart/") {
			return ""
		}
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				return ""
			}
			if s := walk(p.Header.Get("Content-Type"), p); s != "" {
				return s
			}
			if strings.HasPrefix(p.Header.Get("Content-Disposition"), "attachment") {
				b, _ := io.ReadAll(p)
				if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
					b, _ = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(b)), ""))
				}
				return string(b)
			}
		}
	}
	return walk(m.Header.Get("Content-Type"), m.Body)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Attack (issue 18, item 9): an agent name with a right-to-left override
// ("evil\u202eecila" shows as "evilalice") or a control character is
// refused by claim, done, fail and send, exit 64 naming it, and nothing
// is claimed.
func TestAgentNameBidiRefused(t *testing.T) {
	ws := newWorkspace(t)
	seed(t, ws, testutil.Message(schema.Lark, "om_b1", testutil.Time("2026-03-01T10:00:00Z"), "hi"))
	os.WriteFile(filepath.Join(ws, "draft.md"), []byte("---\nprovider: lark\nto: oc_1\n---\nhi\n"), 0o644)
	for _, args := range [][]string{
		{"claim", "lark_om_b1", "--agent", "evil\u202eecila"},
		{"claim", "lark_om_b1", "--agent", "a\u2067b"},
		{"claim", "lark_om_b1", "--agent", "a\x1b[31mb"},
		{"done", "lark_om_b1", "--agent", "evil\u202eecila"},
		{"fail", "lark_om_b1", "--agent", "evil\u202eecila", "--reason", "x"},
		{"send", filepath.Join(ws, "draft.md"), "--agent", "evil\u202eecila"},
	} {
		_, e, code := cli(t, ws, "", args...)
		if code != 64 || !strings.Contains(e, "agent name") {
			t.Errorf("%q: exit %d, %s", args, code, e)
		}
	}
	if out, _, _ := cli(t, ws, "", "list", "--all", "--format", "compact"); strings.Contains(out, "claimed") || strings.Contains(out, "ecila") {
		t.Errorf("something was claimed:\n%s", out)
	}
}
