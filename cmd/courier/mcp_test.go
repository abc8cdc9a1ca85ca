package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/internal/mcpserver"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/mcptest"
)

// mcpEmailConfig is a workspace's config with the SMTP receiver and an
// account that replies through sink, plus extra under courier:.
func mcpEmailConfig(t *testing.T, ws string, sink *testutil.SMTPSink, extra string) (recv, web string) {
	t.Helper()
	recv, web = testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
%s  adapters:
    email:
      enabled: true
      receiver: {smtp: %s, addresses: [agent@corp.example]}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
`, web, extra, recv, sink.Host(), sink.Port()))
	return recv, web
}

// The go-sdk's client, as the tests call it (package mcptest).
var (
	mcpConnect = mcptest.Connect
	mcpCall    = mcptest.Call
	mcpOK      = mcptest.OK
	mcpRefused = mcptest.Refused
	mcpTextOf  = mcptest.Text
)

type mcpListed = mcptest.Listed

// An agent that speaks only MCP, over the service's /mcp: it is told of
// the mail that arrives, lists it, reads it, claims it (a second agent is
// refused, naming the holder), answers it (the reply is delivered over
// SMTP with the reply headers), finishes it; and every tool refuses a bad
// id as the CLI does.
func TestMCPHTTPEndToEnd(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	recv, web := mcpEmailConfig(t, ws, sink, "  mcp: {allow_anonymous: true}\n")
	s := startServe(t, ws, web)

	updated := make(chan string, 16)
	listChanged := make(chan struct{}, 16)
	a := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: "http://" + web + "/mcp"}, &mcp.ClientOptions{
		ResourceUpdatedHandler:     func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { listChanged <- struct{}{} },
	})
	ctx := context.Background()
	if err := a.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.InboxURI}); err != nil {
		t.Fatal(err)
	}
	var l mcpListed
	if mcpOK(t, a, "list", nil, &l); l.Count != 0 {
		t.Fatalf("empty mailbox lists %+v", l)
	}

	if err := sendMail(recv, "ann@example.com", "agent@corp.example", "q1@example.com", "Logs please", "Can you look at the logs?"); err != nil {
		t.Fatalf("send to the receiver: %v\n%s", err, s.Log())
	}
	select {
	case uri := <-updated:
		if uri != mcpserver.InboxURI {
			t.Errorf("updated %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notifications/resources/updated for the new mail\n%s", s.Log())
	}
	select {
	case <-listChanged:
	case <-time.After(10 * time.Second):
		t.Errorf("no notifications/resources/list_changed for the new mail")
	}

	mcpOK(t, a, "list", map[string]any{"provider": []string{"email"}}, &l)
	if l.Count != 1 || l.Messages[0].Status != "new" {
		t.Fatalf("list = %+v", l)
	}
	id := l.Messages[0].ID
	res := mcpOK(t, a, "read", map[string]any{"id": id}, nil)
	if text := mcpTextOf(res); !strings.Contains(text, "Can you look at the logs?") || !strings.Contains(text, "Subject:      Logs please") {
		t.Errorf("read's text is not the CLI's:\n%s", text)
	}
	if sc, _ := json.Marshal(res.StructuredContent); !bytes.Contains(sc, []byte(`"id":"`+id+`"`)) || !bytes.Contains(sc, []byte(`"message":{`)) {
		t.Errorf("read's structured content: %s", sc)
	}
	rr, err := a.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.MessageURI + id})
	if err != nil || len(rr.Contents) != 1 || !strings.HasPrefix(rr.Contents[0].Text, "---\n") || !strings.Contains(rr.Contents[0].Text, "Can you look at the logs?") {
		t.Errorf("resources/read: %v %+v", err, rr)
	}
	lr, err := a.ListResources(ctx, nil)
	if err != nil || len(lr.Resources) != 2 || lr.Resources[0].URI != mcpserver.InboxURI || lr.Resources[1].URI != mcpserver.MessageURI+id {
		t.Errorf("resources/list: %v %+v", err, lr)
	}

	var claimed mcpserver.VerbOut
	mcpOK(t, a, "claim", map[string]any{"id": id, "agent": "triage"}, &claimed)
	// Over HTTP the caller is the token's (mcp): names are qualified.
	if claimed.ClaimedBy != "triage@mcp" || claimed.ExitCode != 0 {
		t.Errorf("claim = %+v", claimed)
	}
	b := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: "http://" + web + "/mcp"}, nil)
	text := mcpRefused(t, b, "claim", map[string]any{"id": id, "agent": "other"}, exitConflict, "triage@mcp")
	t.Logf("a second agent's claim: %s", text)
	mcpRefused(t, b, "done", map[string]any{"id": id, "agent": "other"}, exitConflict, "triage@mcp")
	// Nor may a socket user's agent of the same name: the names differ.
	if _, e, code := cli(t, ws, "", "--agent", "triage", "done", id); code != exitConflict || !strings.Contains(e, "triage@mcp") {
		t.Errorf("the CLI's triage finishing triage@mcp's claim: exit %d %s", code, e)
	}

	// Over HTTP the service opens no path an agent names.
	mcpRefused(t, a, "send", map[string]any{"draft": "---\nreply_to: " + id + "\nartifacts:\n  - path: /etc/passwd\n---\nSee attached.\n"},
		exitDataErr, "artifacts[0].path")
	mcpRefused(t, a, "send", map[string]any{"reply_to": id, "text": "x", "attach": []string{"/etc/passwd"}}, exitDataErr, "dropzone object by id")
	if q := countIDs(t, ws, "--outbound"); len(q) != 0 {
		t.Fatalf("refused sends queued %v", q)
	}
	var sent map[string]any
	mcpOK(t, a, "send", map[string]any{"reply_to": id, "text": "Looking now.", "agent": "triage"}, &sent)
	if sent["success"] != true || !strings.HasPrefix(fmt.Sprint(sent["id"]), "email_out_") {
		t.Errorf("send = %v", sent)
	}
	msgs := sink.WaitMessages(t, 1, 20*time.Second)
	m, err := mail.ReadMessage(bytes.NewReader(msgs[0].Raw))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("In-Reply-To") != "<q1@example.com>" || m.Header.Get("Subject") != "Re: Logs please" || msgs[0].To[0] != "ann@example.com" {
		t.Errorf("reply: In-Reply-To %q Subject %q to %v", m.Header.Get("In-Reply-To"), m.Header.Get("Subject"), msgs[0].To)
	}

	var done mcpserver.VerbOut
	mcpOK(t, a, "done", map[string]any{"id": id, "agent": "triage"}, &done)
	if done.Status != "done" || !strings.Contains(done.Path, "archive/email/") {
		t.Errorf("done = %+v", done)
	}
	if mcpOK(t, a, "list", nil, &l); l.Count != 0 {
		t.Errorf("the inbox after done: %+v", l)
	}
	var th mcpListed
	res = mcpOK(t, a, "thread", map[string]any{"key": id}, &th)
	if th.Count != 2 {
		t.Errorf("thread: the message and the reply, got %+v", th)
	}
	if err := mcptest.ListingText(mcpTextOf(res), th.IDs(), ""); err != nil {
		t.Errorf("thread: %v", err)
	}

	mcpBadIDs(t, a)
	mcpFlagValues(t, a, id)
	if code := s.Stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM with MCP sessions open:\n%s", code, s.Log())
	}
}

// mcpBadIDs checks every tool's refusal of an id that is not there, or not
// an id at all: the CLI's message and exit code, nothing done.
func mcpBadIDs(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	const missing = "email_00000000000000000000"
	mcpRefused(t, cs, "read", map[string]any{"id": missing}, exitNotFound, missing)
	mcpRefused(t, cs, "read", map[string]any{"id": "--raw"}, exitUsage, "not a message id")
	mcpRefused(t, cs, "claim", map[string]any{"id": missing}, exitNotFound, missing)
	mcpRefused(t, cs, "done", map[string]any{"id": missing}, exitNotFound, missing)
	mcpRefused(t, cs, "fail", map[string]any{"id": missing, "reason": "x"}, exitNotFound, missing)
	mcpRefused(t, cs, "thread", map[string]any{"key": missing}, exitNotFound, missing)
	mcpRefused(t, cs, "context", map[string]any{"correlation_id": "nothing_here"}, exitNotFound, "nothing_here")
	mcpRefused(t, cs, "send", map[string]any{"reply_to": missing, "text": "hi"}, exitDataErr, "reply_to")
	mcpRefused(t, cs, "attachment", map[string]any{"id": "sha256:" + strings.Repeat("0", 64)}, exitNotFound, "")
	mcpRefused(t, cs, "attachment", map[string]any{"id": "report.pdf"}, exitUsage, "not a dropzone id")
	mcpRefused(t, cs, "list", map[string]any{"provider": []string{"fax"}}, exitUsage, `"fax"`)
	mcpRefused(t, cs, "list", map[string]any{"limit": mcpserver.MaxLimit + 1}, exitUsage, "limit")
	// A value is a value, never a flag of the CLI's.
	mcpRefused(t, cs, "list", map[string]any{"since": "--all"}, exitUsage, `--since "--all"`)
	ctx := context.Background()
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.MessageURI + missing}); err == nil {
		t.Errorf("resources/read of a missing message answered")
	}
}

// mcpFlagValues checks that every tool takes an argument that looks like
// a flag of the CLI's (--help) as a value: refused as a value (not found,
// not valid) or used as one (a dry run's text and subject), never help
// text or a flag. id is a message of the mailbox (issue 18, item 10).
func mcpFlagValues(t *testing.T, cs *mcp.ClientSession, id string) {
	t.Helper()
	const missing = "email_00000000000000000000"
	for _, c := range []struct {
		tool string
		args map[string]any
		code int
		want string
	}{
		{"list", map[string]any{"since": "--help"}, exitUsage, `--since "--help"`},
		{"list", map[string]any{"provider": []string{"--help"}}, exitUsage, `"--help"`},
		{"list", map[string]any{"status": []string{"--help"}}, exitUsage, `"--help"`},
		{"list", map[string]any{"cursor": "--help"}, exitUsage, `"--help"`},
		{"read", map[string]any{"id": "--help"}, exitUsage, `"--help" is not a message id`},
		{"thread", map[string]any{"key": "--help"}, exitUsage, `"--help"`},
		{"context", map[string]any{"correlation_id": "--help"}, exitUsage, `"--help"`},
		{"claim", map[string]any{"id": "--help"}, exitUsage, `"--help" is not a message id`},
		{"claim", map[string]any{"id": missing, "agent": "--help"}, exitNotFound, missing},
		{"claim", map[string]any{"id": id, "timeout": "--help"}, exitUsage, `"--help"`},
		{"done", map[string]any{"id": "--help"}, exitUsage, `"--help" is not a message id`},
		{"fail", map[string]any{"id": "--help", "reason": "--help"}, exitUsage, `"--help" is not a message id`},
		{"fail", map[string]any{"id": missing, "reason": "--help", "agent": "--help"}, exitNotFound, missing},
		{"send", map[string]any{"reply_to": "--help", "text": "hi"}, exitDataErr, "--help"},
		{"send", map[string]any{"draft": "--help"}, exitDataErr, "front matter missing"},
		{"send", map[string]any{"reply_to": id, "text": "hi", "provider": "--help", "dry_run": true}, exitDataErr, "--help"},
		{"send", map[string]any{"reply_to": id, "text": "hi", "account": "--help", "dry_run": true}, exitDataErr, "--help"},
		{"send", map[string]any{"reply_to": id, "text": "hi", "attach": []string{"--help"}, "dry_run": true}, 0, "--help"},
		{"send", map[string]any{"to": []string{"--help"}, "subject": "s", "text": "hi", "provider": "email", "dry_run": true}, exitDataErr, "--help"},
		{"attachment", map[string]any{"id": "--help"}, exitUsage, `"--help" is not a dropzone id`},
	} {
		res := mcpCall(t, cs, c.tool, c.args)
		text := mcpTextOf(res)
		if !res.IsError || strings.Contains(text, "Usage:") || !strings.Contains(text, c.want) ||
			(c.code != 0 && !strings.Contains(text, fmt.Sprintf("(exit %d)", c.code))) {
			t.Errorf("%s %v: want a refusal (exit %d) naming %q, got error=%v %.300q", c.tool, c.args, c.code, c.want, res.IsError, text)
		}
	}
	var l mcpListed
	if mcpOK(t, cs, "list", map[string]any{"correlation": "--help"}, &l); l.Count != 0 {
		t.Errorf("list correlation --help: %+v", l)
	}
	res := mcpOK(t, cs, "send", map[string]any{"reply_to": id, "text": "--help", "subject": "--version", "correlation": "--all", "dry_run": true}, nil)
	if text := mcpTextOf(res); !strings.Contains(text, `--help`) || !strings.Contains(text, `--version`) || !strings.Contains(text, `--all`) || strings.Contains(text, "Usage:") {
		t.Errorf("a dry run of text --help, subject --version, correlation --all: %.500s", text)
	}
}

// Over stdio, spawned by the agent: without the service the tools act on
// the mailbox directly (claims, done); with it, they go through its socket,
// exactly as the CLI decides, and a reply is delivered.
func TestMCPStdio(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	recv, web := mcpEmailConfig(t, ws, sink, "")
	emailThread(t, ws)
	updated := make(chan string, 16)
	spawn := func(opts *mcp.ClientOptions, env string, args ...string) *mcp.ClientSession {
		cmd := exec.Command(courierBin, append([]string{"--root", ws}, args...)...)
		cmd.Env = append(os.Environ(), env)
		return mcpConnect(t, &mcp.CommandTransport{Command: cmd}, opts)
	}
	// The agent's name as the CLI takes it: $COURIER_AGENT, --agent.
	a := spawn(&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI }},
		"COURIER_AGENT=alice", "mcp")
	b := spawn(nil, "COURIER_AGENT=", "--agent", "bob", "mcp")
	if err := a.Subscribe(context.Background(), &mcp.SubscribeParams{URI: mcpserver.InboxURI}); err != nil {
		t.Fatal(err)
	}
	var l mcpListed
	mcpOK(t, a, "list", nil, &l)
	if l.Count != 1 {
		t.Fatalf("list = %+v", l)
	}
	id := l.Messages[0].ID
	// Without the service: direct, under $COURIER_AGENT unless named.
	var c mcpserver.VerbOut
	mcpOK(t, a, "claim", map[string]any{"id": id}, &c)
	if c.ClaimedBy != "alice" {
		t.Errorf("claim = %+v", c)
	}
	mcpRefused(t, b, "claim", map[string]any{"id": id}, exitConflict, "alice")
	mcpOK(t, a, "fail", map[string]any{"id": id, "reason": "try later"}, &c)
	if c.Status != "failed" || c.Failures != 1 {
		t.Errorf("fail = %+v", c)
	}
	mcpBadIDs(t, a)
	mcpFlagValues(t, a, id)
	// With the service: the same tools, through its socket.
	s := startServe(t, ws, web)
	if err := sendMail(recv, "ann@example.com", "agent@corp.example", "q2@example.com", "Disk full", "The disk is full."); err != nil {
		t.Fatalf("send to the receiver: %v\n%s", err, s.Log())
	}
	// The stdio server beside the service hears of it (the file landed).
	select {
	case uri := <-updated:
		if uri != mcpserver.InboxURI {
			t.Errorf("updated %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("no notifications/resources/updated over stdio for the new mail")
	}
	mcpOK(t, b, "list", map[string]any{"status": []string{"new"}}, &l)
	if l.Count != 1 {
		t.Fatalf("list --status new = %+v", l)
	}
	id2 := l.Messages[0].ID
	mcpOK(t, b, "claim", map[string]any{"id": id2}, &c)
	if c.ClaimedBy != "bob" {
		t.Errorf("claim through the service = %+v", c)
	}
	mcpRefused(t, a, "claim", map[string]any{"id": id2}, exitConflict, "bob")
	var sent map[string]any
	draft := "---\nreply_to: " + id2 + "\ncorrelation_id: disk_1\n---\nCleaning up now.\n"
	mcpOK(t, b, "send", map[string]any{"draft": draft}, &sent)
	msgs := sink.WaitMessages(t, 1, 20*time.Second)
	m, err := mail.ReadMessage(bytes.NewReader(msgs[0].Raw))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("In-Reply-To") != "<q2@example.com>" || msgs[0].To[0] != "ann@example.com" {
		t.Errorf("reply: In-Reply-To %q to %v", m.Header.Get("In-Reply-To"), msgs[0].To)
	}
	mcpOK(t, b, "done", map[string]any{"id": id2}, &c)
	if c.Status != "done" {
		t.Errorf("done through the service = %+v", c)
	}
	var ctxd mcpListed
	mcpOK(t, a, "context", map[string]any{"correlation_id": "disk_1"}, &ctxd)
	if ctxd.Count != 1 {
		t.Errorf("context disk_1 = %+v", ctxd)
	}
	if code := s.Stop(t); code != 0 {
		t.Errorf("serve exit %d", code)
	}
}

// /mcp refuses a page of another site (DNS rebinding) and, with a token
// configured, a request without it.
func TestMCPHTTPGuards(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	tok := filepath.Join(ws, "mcp-token")
	if err := os.WriteFile(tok, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, web := mcpEmailConfig(t, ws, sink, "  mcp: {token_file: "+tok+", max_sessions: 4, max_request_bytes: 65536}\n")
	s := startServe(t, ws, web)
	url := "http://" + web + "/mcp"
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(hdr map[string]string) int {
		req, _ := http.NewRequest("POST", url, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", nil, 401},
		{"a wrong token", map[string]string{"Authorization": "Bearer s3cret-tokem"}, 401},
		{"not a bearer", map[string]string{"Authorization": "Basic s3cret-token"}, 401},
		{"another site", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "http://evil.example"}, 403},
		{"a rebound name", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "http://127.0.0.1.evil.example:8644"}, 403},
		{"the token", map[string]string{"Authorization": "Bearer s3cret-token"}, 200},
		{"the token from a local page", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "http://localhost:3000"}, 200},
	} {
		if got := post(c.hdr); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	// What a client may grow is bounded: its subscriptions (asked over
	// the 2025-06-18 protocol, where a refusal is the request's answer).
	rpc := func(sid, body string) (string, string) {
		return mcptest.Post(t, url, "s3cret-token", sid, "2025-06-18", body)
	}
	sid, _ := rpc("", init)
	rpc(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i := 0; i <= mcpserver.MaxSubscriptions; i++ {
		_, ans := rpc(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"courier://message/x%d"}}`, i+2, i))
		refused := strings.Contains(ans, "subscriptions, the most it may")
		if refused != (i == mcpserver.MaxSubscriptions) {
			t.Fatalf("subscription %d: %s", i, ans)
		}
	}

	// The go-sdk's client with the token works end to end.
	cs := mcpConnect(t, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: mcpBearer{"s3cret-token"}}}, nil)
	var l mcpListed
	mcpOK(t, cs, "list", nil, &l)
	// Four sessions are open (two above, the raw one, this client's):
	// a fifth gets in by ending the idlest without a stream (one of the
	// two above; not the raw one, used since, nor this client's, whose
	// event stream is open), and the log says so; a body past the bound
	// is refused.
	if got := post(map[string]string{"Authorization": "Bearer s3cret-token"}); got != http.StatusOK {
		t.Errorf("a fifth session: %d, want 200", got)
	}
	mcpOK(t, cs, "list", nil, &l)
	if !strings.Contains(s.Log(), "ended the idlest session") {
		t.Errorf("no session ended in the log")
	}
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"send","arguments":{"text":"` + strings.Repeat("x", 70000) + `"}}}`
	if _, ans := rpc(sid, big); !strings.Contains(ans, "exceeds 65536 bytes") {
		t.Errorf("a body over max_request_bytes: %.200s", ans)
	}
	if strings.Contains(s.Log(), "s3cret-token") {
		t.Errorf("the token is in the log")
	}
}

type mcpBearer struct{ token string }

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// The independent check: the official MCP conformance suite, pinned in
// testdata/mcpconformance (npm ci there; scripts/test.sh does), against
// the service's /mcp. Every scenario of its active suite must pass but
// those expected-failures.yaml lists, which drive fixtures of its
// reference server (and must keep failing: a stale entry fails too).
func TestMCPConformance(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("testdata", "mcpconformance"))
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	suite := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	for _, p := range []string{node, suite} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("the conformance suite is not installed (npm ci --prefix %s): %v", dir, err)
		}
	}
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	_, web := mcpEmailConfig(t, ws, sink, "  mcp: {allow_anonymous: true}\n")
	emailThread(t, ws)
	s := startServe(t, ws, web)
	out := t.TempDir()
	cmd := exec.Command(node, suite, "server", "--url", "http://"+web+"/mcp",
		"--expected-failures", filepath.Join(dir, "expected-failures.yaml"), "-o", out)
	cmd.Dir = out
	report, err := cmd.CombinedOutput()
	summary := string(report)
	if i := strings.Index(summary, "=== SUMMARY ==="); i >= 0 {
		summary = summary[i:]
	}
	if err != nil {
		t.Fatalf("conformance: %v\n%s\n%s", err, summary, s.Log())
	}
	// Guard against a suite that ran nothing.
	for _, want := range []string{"✓ server-initialize", "✓ ping", "✓ tools-list", "✓ resources-list", "✓ resources-subscribe", "✓ dns-rebinding-protection"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	t.Logf("%s", summary)
}

// courier.mcp in the service: a token file that cannot be read stops the
// start (exit 78, naming the key, never a token); http: false serves no
// /mcp.
func TestMCPHTTPConfig(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	mcpEmailConfig(t, ws, sink, "  mcp: {token_file: no-such-token}\n")
	cmd := exec.Command(courierBin, "--root", ws, "serve")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitConfig || !strings.Contains(string(out), "courier.mcp.token_file") || !strings.Contains(string(out), "no-such-token") {
		t.Errorf("unreadable token file: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	_, web := mcpEmailConfig(t, ws, sink, "  mcp: {http: false}\n")
	startServe(t, ws, web)
	resp, err := http.Post("http://"+web+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/mcp with mcp.http false: %d, want 404", resp.StatusCode)
	}

	// No token and no allow_anonymous: a TCP port is open to every local
	// user, so /mcp answers nobody, and says what to set.
	ws2 := newWorkspace(t)
	_, web2 := mcpEmailConfig(t, ws2, sink, "")
	startServe(t, ws2, web2)
	resp, err = http.Post("http://"+web2+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "courier.mcp.token_file") || !strings.Contains(string(body), "allow_anonymous") {
		t.Errorf("/mcp with no token configured: %d %q, want 401 naming the keys", resp.StatusCode, body)
	}
}
