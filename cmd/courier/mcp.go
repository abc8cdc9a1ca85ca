package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// The MCP server (issue 12): the command line's verbs as MCP tools, and the
// inbox as resources, for agents that speak the Model Context Protocol.
//
// Every tool runs the command line's own code. The reading tools (list,
// read, thread, context) run the very cobra command `courier list ...
// --format json` runs, in this process, on a child app that shares the
// workspace's config and open mailbox and writes into a bounded buffer: the
// filters, ids, errors and exit codes are the CLI's by construction. The
// writing tools (claim, done, fail, send) go the way the CLI's go: over
// stdio they run the CLI's command too, which goes through the service's
// socket when it answers and acts on the mailbox itself when not (decided
// per call, as per run of the CLI); in the service, over HTTP, they call
// the agents' Backend (agents.go) with the HTTP caller, the layer the
// socket's requests go through.
//
// Who the caller is. Over stdio the process runs as the agent's user, so
// the CLI's rules apply unchanged (the socket tells the service who asks).
// Over HTTP there is no peer credential: whoever holds the bearer token
// (anyone who reaches the loopback listener when mcp.token_file is unset)
// is one caller, the user "mcp" of agentapi.Caller, not the service's
// owner. So an agent named "reviewer" over HTTP acts as "reviewer@mcp":
// HTTP agents cannot renew, finish or fail the claims of the socket's
// users, nor they theirs.

const (
	// mcpMaxResult bounds what one tool call or resource read returns:
	// the command's output is held in memory, and copied by the SDK as it
	// is encoded, before it is sent; and a frame over 16 MiB (a result is
	// sent twice in one, as structured content and as text) is more than
	// the go-sdk's clients read by default.
	mcpMaxResult = 6 << 20
	// mcpConcurrent bounds the commands run at once for the tools: each
	// holds its output, up to the bound above.
	mcpConcurrent = 4
	// mcpDefaultLimit is list's default page when the agent gives none:
	// an agent's context is small, a mailbox is not.
	mcpDefaultLimit = 1000
	// mcpMaxLimit is the most one list call returns: a page of 10,000
	// entries is about 5 MB, and its frame (the JSON twice, as structured
	// content and as text) must stay under the 16 MiB a client of the
	// go-sdk reads by default. Pages go on with next_cursor.
	mcpMaxLimit = 10_000
	// mcpMaxAttachment is what attachment returns of an object at most,
	// unless max_bytes asks for less.
	mcpMaxAttachment = 8 << 20
	// mcpPageSize is resources/list's page.
	mcpPageSize = 500
	// mcpInboxURI is the resource that stands for the inbox: subscribe to
	// it to be told when mail arrives.
	mcpInboxURI   = "courier://inbox"
	mcpMessageURI = "courier://message/"
	// mcpMaxSubscriptions bounds a session's subscriptions: the SDK
	// keeps each URI a client names.
	mcpMaxSubscriptions = 256
)

// mcpCapped is a buffer that refuses to grow past max.
type mcpCapped struct {
	bytes.Buffer
	max int
}

func (b *mcpCapped) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("the result is over %d bytes, the most one MCP call returns here; narrow it (a limit, a filter) or use the command line", b.max)
	}
	return b.Buffer.Write(p)
}

// mcpWriter is how the writing tools write: as the CLI does (stdio), or
// through the service's Backend for an HTTP caller.
type mcpWriter interface {
	verb(ctx context.Context, s *mcpServer, name string, in mcpVerbIn) (agentapi.Outcome, error)
	send(ctx context.Context, s *mcpServer, in mcpSendIn) (json.RawMessage, string, int, error)
}

// mcpServer is one MCP server over a workspace.
type mcpServer struct {
	a   *app // the workspace: config, root, open mailbox and dropzone
	w   mcpWriter
	srv *mcp.Server
	log *slog.Logger
	// max bounds a result (mcpMaxResult; tests lower it); slots bounds
	// the commands run at once.
	max   int
	slots chan struct{}

	mu   sync.Mutex
	subs map[*mcp.ServerSession]map[string]bool
}

// subscribe takes a subscription, up to mcpMaxSubscriptions a session.
// Any URI may be subscribed to; only courier://inbox is ever updated.
func (s *mcpServer) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[*mcp.ServerSession]map[string]bool{}
	}
	m := s.subs[req.Session]
	if m == nil {
		// A new session's first: forget those of sessions gone.
		live := map[*mcp.ServerSession]bool{}
		for ss := range s.srv.Sessions() {
			live[ss] = true
		}
		for ss := range s.subs {
			if !live[ss] {
				delete(s.subs, ss)
			}
		}
		m = map[string]bool{}
		s.subs[req.Session] = m
	}
	if !m[req.Params.URI] && len(m) >= mcpMaxSubscriptions {
		return fmt.Errorf("mcp: this session holds %d subscriptions, the most it may", len(m))
	}
	m[req.Params.URI] = true
	return nil
}

func (s *mcpServer) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs[req.Session], req.Params.URI)
	return nil
}

// newMCPServer makes the server; a must have its mailbox and dropzone
// open.
func newMCPServer(a *app, w mcpWriter, max int, log *slog.Logger) *mcpServer {
	s := &mcpServer{a: a, w: w, log: log, max: max, slots: make(chan struct{}, mcpConcurrent)}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "courier", Title: "Courier mailbox", Version: version()}, &mcp.ServerOptions{
		Instructions: "Courier is a mailbox of email, Slack and Lark messages. `list` the inbox, `read` a message, `claim` it " +
			"(so that no other agent works on it), answer with `send` (reply_to the message), then `done` (or `fail`). " +
			"Subscribe to " + mcpInboxURI + " to be told when mail arrives; each message is also the resource courier://message/<id>.",
		Logger:             log,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
		Capabilities:       &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}},
		KeepAlive:          time.Minute,
		// Pings go unanswered while a client waits on a long call of
		// its own; three in a row is a client gone.
		KeepAliveFailureThreshold: 3,
	})
	s.addTools()
	s.addResources()
	return s
}

// cli runs one of the command line's commands on a child of the
// workspace's app, its output captured (bounded), and returns what it
// printed and the exit code the CLI would exit with.
func (s *mcpServer) cli(ctx context.Context, stdin []byte, agent string, cmd func(*app) *cobra.Command, args ...string) (out []byte, msg string, code int) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-ctx.Done():
		return nil, ctx.Err().Error(), exitUnavailable
	}
	stdout := &mcpCapped{max: s.max}
	var stderr mcpCapped
	stderr.max = 64 << 10
	if agent == "" {
		agent = s.a.agentFlag // `courier --agent NAME mcp`
	}
	child := &app{stdin: bytes.NewReader(stdin), stdout: stdout, stderr: &stderr, agentFlag: agent,
		cfg: s.a.cfg, root: s.a.root, mb: s.a.mb, dz: s.a.dz, log: s.a.log}
	c := cmd(child)
	c.SetArgs(args)
	c.SetIn(child.stdin)
	c.SetOut(stdout)
	c.SetErr(&stderr)
	c.SilenceUsage, c.SilenceErrors = true, true
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return withCode(exitUsage, err) })
	err := c.ExecuteContext(ctx)
	if err == nil {
		return stdout.Bytes(), strings.TrimSpace(stderr.String()), child.exitCode
	}
	msg = strings.TrimSpace(stderr.String())
	var ee *exitError
	if !errors.As(err, &ee) || !ee.silent {
		if msg != "" {
			msg += "\n"
		}
		msg += strings.TrimSpace(err.Error())
	}
	return stdout.Bytes(), msg, exitCode(err)
}

// mcpRefusal is a refusal as a tool error: the CLI's message, and its
// exit code, so that an agent can tell "not found" (1) from "held by
// another agent" (2). The SDK makes it a result with isError set.
type mcpRefusal struct {
	msg  string
	code int
}

func (e *mcpRefusal) Error() string { return fmt.Sprintf("%s (exit %d)", e.msg, e.code) }

func mcpRefuse(msg string, code int) error { return &mcpRefusal{msg, code} }

// mcpToolError is a refusal as a result, for a tool that gives a
// structured result with it (claim's holder).
func mcpToolError(msg string, code int) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: (&mcpRefusal{msg, code}).Error()}}}
}

// mcpText is a tool result whose text is what the CLI prints.
func mcpText(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// The tools' input, in the words of the CLI's flags.

type mcpListIn struct {
	All         bool     `json:"all,omitempty" jsonschema:"include done and dead messages (by default: the inbox, that is new, claimed and failed)"`
	Outbound    bool     `json:"outbound,omitempty" jsonschema:"list queued, sent and dead drafts instead"`
	Provider    []string `json:"provider,omitempty" jsonschema:"only these providers: email, lark, slack"`
	Status      []string `json:"status,omitempty" jsonschema:"only these statuses: new, claimed, failed, done, dead (inbound); queued, sent (drafts)"`
	Since       string   `json:"since,omitempty" jsonschema:"only messages since a time: a duration back from now (2h, 30m, 7d) or a date (2026-02-06)"`
	Today       bool     `json:"today,omitempty" jsonschema:"only messages since midnight"`
	Correlation string   `json:"correlation,omitempty" jsonschema:"only messages with this correlation id"`
	Limit       int      `json:"limit,omitempty" jsonschema:"at most this many (default 1000, at most 10000); truncated says when more matched"`
	Cursor      string   `json:"cursor,omitempty" jsonschema:"the next_cursor of the page before, with the same filters: the entries after it"`
}

// mcpCursor is where a page of list ends: the time of its last entry and
// how many entries at that time were given (list is ordered by time, then
// id, and its since is inclusive), opaque to clients.
type mcpCursor struct {
	T    string `json:"t"`
	Skip int    `json:"n"`
}

type mcpKeyIn struct {
	Key string `json:"key" jsonschema:"a thread key (email-thread:..., a Slack thread ts, a Lark thread id) or the id of any message in the thread"`
}

type mcpCorrIn struct {
	CorrelationID string `json:"correlation_id" jsonschema:"the correlation id"`
}

type mcpReadIn struct {
	ID string `json:"id" jsonschema:"the id of a message or draft, as list gives it (email_..., slack_..., lark_..., <provider>_out_...)"`
}

type mcpVerbIn struct {
	ID    string `json:"id" jsonschema:"the id of the message"`
	Agent string `json:"agent,omitempty" jsonschema:"the agent acting (default: over stdio courier --agent, else $COURIER_AGENT, else the user's name; over HTTP mcp). Over HTTP the name is qualified as name@mcp"`
	// claim
	Timeout string `json:"timeout,omitempty" jsonschema:"claim: how long the claim holds, as a Go duration (300s, 10m); default from the config, 300s. Claiming again renews it"`
	// fail
	Reason    string `json:"reason,omitempty" jsonschema:"fail: why (recorded with the message)"`
	Permanent bool   `json:"permanent,omitempty" jsonschema:"fail: do not retry; set the message aside in .deadletter at once (a failure is retried after a backoff by default, dead after max_failures)"`
}

type mcpSendIn struct {
	Draft       string   `json:"draft,omitempty" jsonschema:"a whole draft: Markdown with YAML front matter, as a draft file holds (reply_to, to, subject, correlation_id, artifacts by id...); the fields below win over its own"`
	Text        string   `json:"text,omitempty" jsonschema:"the message text (quick mode, without a draft)"`
	ReplyTo     string   `json:"reply_to,omitempty" jsonschema:"id of the message answered: provider, recipients, subject, thread and correlation come from it"`
	Provider    string   `json:"provider,omitempty" jsonschema:"email, lark or slack (default: from the draft, the message answered, or the recipients)"`
	To          []string `json:"to,omitempty" jsonschema:"recipients (replace the draft's)"`
	Cc          []string `json:"cc,omitempty" jsonschema:"cc recipients (email)"`
	Bcc         []string `json:"bcc,omitempty" jsonschema:"bcc recipients (email)"`
	Subject     string   `json:"subject,omitempty" jsonschema:"subject (email)"`
	Correlation string   `json:"correlation,omitempty" jsonschema:"correlation id"`
	Account     string   `json:"account,omitempty" jsonschema:"email account to send from (default: the one the message answered came to, else the first)"`
	Attach      []string `json:"attach,omitempty" jsonschema:"attachments: dropzone objects by id (sha256:...), as read and attachment give them; over stdio also files by path, under the CLI's attach rules"`
	DryRun      bool     `json:"dry_run,omitempty" jsonschema:"validate and resolve, return the draft as it would be queued, queue nothing"`
	Agent       string   `json:"agent,omitempty" jsonschema:"the agent sending (recorded on the draft)"`
}

type mcpAttachmentIn struct {
	ID       string `json:"id" jsonschema:"the dropzone object's id (sha256:<64 hex>), as a message's artifacts give it"`
	As       string `json:"as,omitempty" jsonschema:"text (UTF-8; refused if the bytes are not) or base64 (the default)"`
	MaxBytes int64  `json:"max_bytes,omitempty" jsonschema:"return at most this many bytes (default and most: 8 MiB); truncated says when the object is longer"`
}

// The tools' output.

type mcpEntries struct {
	Messages   []json.RawMessage `json:"messages" jsonschema:"the entries, as list --format json prints them"`
	Count      int               `json:"count"`
	Truncated  bool              `json:"truncated,omitempty" jsonschema:"more matched than limit"`
	NextCursor string            `json:"next_cursor,omitempty" jsonschema:"list: the cursor of the next page, when truncated"`
}

type mcpVerbOut struct {
	agentapi.Result
	ExitCode int `json:"exit_code" jsonschema:"the exit code of the command line for this: 0 ok, 1 not found, 2 conflict, 4 database timeout, 64 and up usage and input errors"`
}

type mcpAttachmentOut struct {
	ID        string `json:"id"`
	Size      int64  `json:"size" jsonschema:"the object's whole size in bytes"`
	Encoding  string `json:"encoding" jsonschema:"text or base64"`
	Data      string `json:"data"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"data holds only the first max_bytes"`
}

// mcpSchema infers T's JSON Schema, the entries' schema for any
// []json.RawMessage being list's.
func mcpSchema[T any]() *jsonschema.Schema {
	sc, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): entrySchema(),
	}})
	if err != nil {
		panic(err)
	}
	return sc
}

func (s *mcpServer) addTools() {
	s.srv.AddReceivingMiddleware(mcpRawListings)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	mcpAddListing(s, &mcp.Tool{Name: "list", Annotations: ro,
		Description: "List messages: by default the inbox (new, claimed, failed), oldest first, as `courier list --format json` prints them; " +
			"a page of limit entries, next_cursor giving the next page."},
		func(ctx context.Context, in mcpListIn) (*mcp.CallToolResult, error) {
			limit := in.Limit
			switch {
			case limit < 0 || limit > mcpMaxLimit:
				return nil, mcpRefuse(fmt.Sprintf("limit %d is not between 1 and %d", limit, mcpMaxLimit), exitUsage)
			case limit == 0:
				limit = mcpDefaultLimit
			}
			var cur mcpCursor
			if in.Cursor != "" {
				b, err := base64.RawURLEncoding.DecodeString(in.Cursor)
				if err == nil {
					err = json.Unmarshal(b, &cur)
				}
				if err != nil || cur.T == "" || cur.Skip < 1 || cur.Skip > mcpMaxLimit*16 {
					return nil, mcpRefuse(fmt.Sprintf("cursor %q is not one list gave", in.Cursor), exitUsage)
				}
			}
			args := []string{"--format", "json", "--limit", strconv.Itoa(limit + cur.Skip + 1)}
			if in.All {
				args = append(args, "--all")
			}
			if in.Outbound {
				args = append(args, "--outbound")
			}
			for _, p := range in.Provider {
				args = append(args, "--provider="+p)
			}
			for _, st := range in.Status {
				args = append(args, "--status="+st)
			}
			switch {
			case cur.T != "":
				// The next page starts at the last entry's time, which
				// is at or after since or today's midnight.
				args = append(args, "--since="+cur.T)
			case in.Today:
				args = append(args, "--today")
			case in.Since != "":
				args = append(args, "--since="+in.Since)
			}
			if in.Correlation != "" {
				args = append(args, "--correlation="+in.Correlation)
			}
			return s.entries(ctx, limit, cur, (*app).listCommand, args...)
		})
	mcpAddListing(s, &mcp.Tool{Name: "thread", Annotations: ro,
		Description: "Every message and draft of a thread, in time order, as `courier thread KEY --format json`. Nothing found is an error (exit 1)."},
		func(ctx context.Context, in mcpKeyIn) (*mcp.CallToolResult, error) {
			return s.entries(ctx, 0, mcpCursor{}, (*app).threadCommand, in.Key, "--format", "json")
		})
	mcpAddListing(s, &mcp.Tool{Name: "context", Annotations: ro,
		Description: "Everything that carries a correlation id, inbound, archived and sent, in time order, as `courier context ID --format json`. Nothing found is an error (exit 1)."},
		func(ctx context.Context, in mcpCorrIn) (*mcp.CallToolResult, error) {
			return s.entries(ctx, 0, mcpCursor{}, (*app).contextCommand, in.CorrelationID, "--format", "json")
		})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "read", Annotations: ro, OutputSchema: readSchema(),
		Description: "Read a message or draft: its text as `courier read ID` shows it (header and body), and as structured content the entry and the whole message as `courier read ID --format json`."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpReadIn) (*mcp.CallToolResult, json.RawMessage, error) {
			if err := mcpArg(in.ID); err != nil {
				return nil, nil, mcpRefuse(err.Error(), exitUsage)
			}
			out, msg, code := s.cli(ctx, nil, "", (*app).readCommand, in.ID, "--format", "json")
			if code != 0 {
				return nil, nil, mcpRefuse(msg, code)
			}
			text, msg, code := s.cli(ctx, nil, "", (*app).readCommand, in.ID)
			if code != 0 {
				return nil, nil, mcpRefuse(msg, code)
			}
			return mcpText(string(text)), json.RawMessage(bytes.TrimSpace(out)), nil
		})
	verb := func(name, desc string, destructive bool) {
		mcp.AddTool(s.srv, &mcp.Tool{Name: name, Description: desc, OutputSchema: mcpSchema[mcpVerbOut](),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: new(bool)}},
			func(ctx context.Context, _ *mcp.CallToolRequest, in mcpVerbIn) (*mcp.CallToolResult, *mcpVerbOut, error) {
				if err := mcpArg(in.ID); err != nil {
					return nil, nil, mcpRefuse(err.Error(), exitUsage)
				}
				o, err := s.w.verb(ctx, s, name, in)
				if err != nil {
					return nil, nil, err
				}
				out := &mcpVerbOut{Result: o.Result, ExitCode: o.Code}
				if o.Code != 0 {
					return mcpToolError(o.Result.Message, o.Code), out, nil
				}
				return mcpText(o.Result.Message), out, nil
			})
	}
	verb("claim", "Claim a message for an agent, so that no other agent works on it: as `courier claim ID`. "+
		"A message another agent holds is an error (exit 2) naming the holder (claimed_by) and when the claim runs out.", false)
	verb("done", "Mark a claimed message processed: it moves to archive/ with processed_at, as `courier done ID`. Only the agent holding the claim may.", true)
	verb("fail", "Give back a claimed message that could not be processed, as `courier fail ID --reason ...`: retried after a backoff, "+
		"set aside in .deadletter after max_failures (or at once with permanent).", true)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "send", OutputSchema: sendSchema(),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(bool), OpenWorldHint: ptr(true)},
		Description: "Validate a draft and queue it for delivery, as `courier send`: a draft (Markdown with front matter) or the fields " +
			"(reply_to and text answer a message: recipients, subject, thread and correlation come from it). Errors name the field and line (exit 65)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpSendIn) (*mcp.CallToolResult, json.RawMessage, error) {
			if in.Draft == "" && in.Text == "" {
				return nil, nil, mcpRefuse("give a draft, or text for a quick message", exitUsage)
			}
			out, warn, code, err := s.w.send(ctx, s, in)
			if err != nil {
				return nil, nil, err
			}
			if code != 0 {
				return nil, nil, mcpRefuse(warn, code)
			}
			text := string(out)
			if warn != "" {
				text = warn + "\n" + text
			}
			return mcpText(text), out, nil
		})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "attachment", Annotations: ro, OutputSchema: mcpSchema[mcpAttachmentOut](),
		Description: "The bytes of a dropzone object (a message's attachment, by its sha256: id), as text or base64, at most 8 MiB."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpAttachmentIn) (*mcp.CallToolResult, *mcpAttachmentOut, error) {
			out, msg, code := s.attachment(in)
			if code != 0 {
				return nil, nil, mcpRefuse(msg, code)
			}
			return nil, out, nil
		})
}

func ptr[T any](v T) *T { return &v }

// mcpArg refuses an argument the CLI would read as a flag: an id is never
// one, and a "-" would read ids from standard input.
func mcpArg(s string) error {
	if s == "" || strings.HasPrefix(s, "-") {
		return fmt.Errorf("%q is not a message id", s)
	}
	return nil
}

// entries runs a listing command and returns its entries as the
// structured content {"messages": [...], "count": n, "truncated": bool},
// the CLI's JSON spliced in as it printed it (one entry a line): a
// listing is not decoded and encoded again entry by entry. limit, when
// not 0, is the most to return (the command was asked for one more, to
// tell whether there were more), after the cur.Skip entries the page
// before gave.
func (s *mcpServer) entries(ctx context.Context, limit int, cur mcpCursor, cmd func(*app) *cobra.Command, args ...string) (*mcp.CallToolResult, error) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "--") {
		if err := mcpArg(args[0]); err != nil {
			return nil, mcpRefuse(err.Error(), exitUsage)
		}
	}
	out, msg, code := s.cli(ctx, nil, "", cmd, args...)
	if code != 0 {
		return nil, mcpRefuse(msg, code)
	}
	list := bytes.TrimSpace(out)
	if !bytes.HasPrefix(list, []byte("[")) || !bytes.HasSuffix(list, []byte("]")) {
		return nil, fmt.Errorf("mcp: the listing is not a JSON array: %.100q", list)
	}
	var lines [][]byte
	if inner := bytes.TrimSpace(list[1 : len(list)-1]); len(inner) > 0 {
		lines = bytes.Split(inner, []byte("\n"))
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte(","))
	}
	lines = lines[min(cur.Skip, len(lines)):]
	var next string
	if limit > 0 && len(lines) > limit {
		lines = lines[:limit]
		// The next page: from the last entry's time, past the entries at
		// that time given so far.
		var last struct {
			Timestamp string `json:"timestamp"`
		}
		if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil {
			return nil, fmt.Errorf("mcp: reading the listing: %w", err)
		}
		c := mcpCursor{T: last.Timestamp}
		for i := len(lines) - 1; i >= 0; i-- {
			var e struct {
				Timestamp string `json:"timestamp"`
			}
			json.Unmarshal(lines[i], &e)
			if e.Timestamp != c.T {
				break
			}
			c.Skip++
		}
		if c.Skip == len(lines) && cur.T == c.T {
			c.Skip += cur.Skip // a page all at one time
		}
		b, _ := json.Marshal(c)
		next = base64.RawURLEncoding.EncodeToString(b)
	}
	doc := make([]byte, 0, len(list)+64)
	doc = append(doc, `{"messages":[`...)
	for i, l := range lines {
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = append(doc, '\n')
		doc = append(doc, l...)
	}
	doc = fmt.Appendf(doc, "\n],\"count\":%d,\"truncated\":%t", len(lines), next != "")
	if next != "" {
		doc = fmt.Appendf(doc, `,"next_cursor":%q`, next)
	}
	doc = append(doc, '}')
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(doc), Content: []mcp.Content{&mcp.TextContent{Text: string(doc)}}}, nil
}

// mcpRawListings encodes a tools/call result whose structured content is
// JSON already made (json.RawMessage) and whose one content is that same
// JSON as text, as entries returns a listing, without the go-sdk's own
// encoding: CallToolResult.MarshalJSON marshals the text and re-compacts
// both copies of the page, and jsonrpc2 compacts the result twice more,
// which for a page of 10,000 entries was most of the server's time. The
// result sent is the same (mcpRawResult). The middleware is outside the
// SDK's own (added by mcp.NewServer), so the SDK's result is final but for
// _meta and resultType, which it sets on the result after every
// middleware and which mcpRawResult encodes when it is sent.
func mcpRawListings(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || method != "tools/call" || len(r.Content) != 1 {
			return res, err
		}
		raw, ok := r.StructuredContent.(json.RawMessage)
		tc, isText := r.Content[0].(*mcp.TextContent)
		if !ok || !isText || tc.Meta != nil || tc.Annotations != nil || tc.Text != string(raw) {
			return res, err
		}
		return &mcpRawResult{r, raw}, nil
	}
}

// mcpRawResult is a CallToolResult (every method the SDK calls on a
// result is the embedded one's) sent as
// {"content":[{"type":"text","text":RAW}],"structuredContent":RAW,...}
// with RAW, JSON made by entries, copied in once as a value and once as
// a string, and the result's other fields as the SDK encodes them.
type mcpRawResult struct {
	*mcp.CallToolResult
	raw json.RawMessage
}

func (r *mcpRawResult) MarshalJSON() ([]byte, error) {
	rest := *r.CallToolResult
	rest.Content, rest.StructuredContent = []mcp.Content{}, nil
	small, err := rest.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(small, &fields); err != nil {
		return nil, err
	}
	delete(fields, "content")
	delete(fields, "structuredContent")
	// One buffer of about the result's size: escaped, a page of entries
	// is about a fifth longer (a quote for every ~5 bytes).
	out := make([]byte, 0, 2*len(r.raw)+len(r.raw)/4+len(small)+64)
	out = append(out, `{"content":[{"type":"text","text":`...)
	out = mcpAppendString(out, r.raw)
	out = append(out, `}],"structuredContent":`...)
	out = append(out, r.raw...)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		key, _ := json.Marshal(k)
		out = append(append(append(append(out, ','), key...), ':'), fields[k]...)
	}
	return append(out, '}'), nil
}

// mcpAppendString appends s as a JSON string, escaped as encoding/json
// escapes it but for HTML's <, > and & (which jsonrpc2 leaves too):
// encoding it with encoding/json would copy the page twice more.
func mcpAppendString(out, s []byte) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(s[i:])
			if (r != utf8.RuneError || n != 1) && r != '\u2028' && r != '\u2029' {
				i += n
				continue
			}
			out = append(out, s[start:i]...)
			if r == utf8.RuneError {
				out = append(out, `\ufffd`...)
			} else {
				out = append(out, `\u202`...)
				out = append(out, hex[r&0xf])
			}
			i += n
			start = i
			continue
		}
		out = append(out, s[start:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}

// mcpAddListing adds a tool whose result is a listing (entries): the
// SDK's typed AddTool would decode the listing and encode it again, and
// validate it entry by entry, which for 100,000 entries takes seconds.
// The input is decoded here as AddTool would, unknown fields refused.
func mcpAddListing[In any](s *mcpServer, t *mcp.Tool, h func(context.Context, In) (*mcp.CallToolResult, error)) {
	t.InputSchema = mcpSchema[In]()
	t.OutputSchema = mcpSchema[mcpEntries]()
	s.srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		args := req.Params.Arguments
		if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
			args = []byte("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return mcpToolError(fmt.Sprintf("%s: the arguments: %v", t.Name, err), exitUsage), nil
		}
		res, err := h(ctx, in)
		if err != nil {
			return mcpToolError(mcpMessage(err), mcpCode(err)), nil
		}
		return res, nil
	})
}

func mcpMessage(err error) string {
	var r *mcpRefusal
	if errors.As(err, &r) {
		return r.msg
	}
	return err.Error()
}

func mcpCode(err error) int {
	var r *mcpRefusal
	if errors.As(err, &r) {
		return r.code
	}
	return exitSoftware
}

// attachment reads a dropzone object, bounded.
func (s *mcpServer) attachment(in mcpAttachmentIn) (*mcpAttachmentOut, string, int) {
	if _, err := dropzone.ParseID(in.ID); err != nil {
		return nil, fmt.Sprintf("%q is not a dropzone id (sha256:<64 hex>)", in.ID), exitUsage
	}
	max := in.MaxBytes
	if max <= 0 || max > mcpMaxAttachment {
		max = mcpMaxAttachment
	}
	f, err := s.a.dz.Open(in.ID)
	if err != nil {
		return nil, err.Error(), exitCode(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err.Error(), exitIOErr
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, err.Error(), exitIOErr
	}
	out := &mcpAttachmentOut{ID: in.ID, Size: fi.Size(), Truncated: int64(len(data)) < fi.Size()}
	switch in.As {
	case "text":
		if out.Truncated { // do not cut a character in two
			for i := 0; i < utf8.UTFMax && len(data) > 0 && !utf8.Valid(data); i++ {
				data = data[:len(data)-1]
			}
		}
		if !utf8.Valid(data) {
			return nil, in.ID + " is not UTF-8 text: ask for it as base64", exitDataErr
		}
		out.Encoding, out.Data = "text", string(data)
	case "", "base64":
		out.Encoding, out.Data = "base64", base64.StdEncoding.EncodeToString(data)
	default:
		return nil, fmt.Sprintf("as %q is not one of text, base64", in.As), exitUsage
	}
	return out, "", 0
}

// The writing verbs over stdio: the CLI's commands, which decide, as for
// every run of the CLI, whether the service takes them.
type mcpLocal struct{}

func (mcpLocal) verb(ctx context.Context, s *mcpServer, name string, in mcpVerbIn) (agentapi.Outcome, error) {
	args := []string{in.ID, "--format", "json"}
	var cmd func(*app) *cobra.Command
	switch name {
	case "claim":
		cmd = (*app).claimCommand
		if in.Timeout != "" {
			args = append(args, "--timeout="+in.Timeout)
		}
	case "done":
		cmd = (*app).doneCommand
	case "fail":
		cmd = (*app).failCommand
		args = append(args, "--reason="+in.Reason)
		if in.Permanent {
			args = append(args, "--permanent")
		}
	}
	out, msg, code := s.cli(ctx, nil, in.Agent, cmd, args...)
	var o agentapi.Outcome
	if err := json.Unmarshal(out, &o.Result); err != nil {
		// Refused before a result: a usage error, the service
		// unreachable...
		o.Result = agentapi.Result{MessageID: in.ID, Error: "error", Message: msg}
	}
	o.Code = code
	if code != 0 && o.Result.Message == "" {
		o.Result.Message = msg
	}
	return o, nil
}

func (mcpLocal) send(ctx context.Context, s *mcpServer, in mcpSendIn) (json.RawMessage, string, int, error) {
	var args []string
	var stdin []byte
	if in.Draft != "" {
		args, stdin = append(args, "-"), []byte(in.Draft)
	}
	args = append(args, "--format", "json")
	flag := func(name, v string) {
		if v != "" {
			args = append(args, "--"+name+"="+v) // one argument: a value is never read as a flag
		}
	}
	flag("text", in.Text)
	flag("reply-to", in.ReplyTo)
	flag("provider", in.Provider)
	flag("subject", in.Subject)
	flag("correlation", in.Correlation)
	flag("account", in.Account)
	for _, v := range in.To {
		flag("to", v)
	}
	for _, v := range in.Cc {
		flag("cc", v)
	}
	for _, v := range in.Bcc {
		flag("bcc", v)
	}
	for _, v := range in.Attach {
		flag("attach", v)
	}
	if in.DryRun {
		args = append(args, "--dry-run")
	}
	out, msg, code := s.cli(ctx, stdin, in.Agent, (*app).sendCommand, args...)
	return json.RawMessage(bytes.TrimSpace(out)), msg, code, nil
}

// mcpRemote is the writing verbs of an HTTP caller, in the service: the
// agents' Backend, as the socket's requests reach it.
type mcpRemote struct {
	b      agentapi.Backend
	caller agentapi.Caller
}

// mcpHTTPCaller is who an HTTP request is (see the top of this file).
var mcpHTTPCaller = agentapi.Caller{UID: ^uint32(0), GID: ^uint32(0), User: "mcp"}

func (r mcpRemote) verb(ctx context.Context, s *mcpServer, name string, in mcpVerbIn) (agentapi.Outcome, error) {
	switch name {
	case "claim":
		var timeout time.Duration
		if in.Timeout != "" {
			d, err := time.ParseDuration(in.Timeout)
			if err != nil || d < 0 {
				return refused(in.ID, exitUsage, fmt.Errorf("timeout %q is not a duration (300s, 10m)", in.Timeout)), nil
			}
			timeout = d
		}
		return r.b.Claim(ctx, r.caller, agentapi.ClaimRequest{ID: in.ID, Agent: in.Agent, Timeout: timeout}), nil
	case "done":
		return r.b.Done(ctx, r.caller, agentapi.DoneRequest{ID: in.ID, Agent: in.Agent}), nil
	}
	return r.b.Fail(ctx, r.caller, agentapi.FailRequest{ID: in.ID, Agent: in.Agent, Reason: in.Reason, Retryable: !in.Permanent}), nil
}

func (r mcpRemote) send(ctx context.Context, s *mcpServer, in mcpSendIn) (json.RawMessage, string, int, error) {
	req := &agentapi.SendRequest{Name: "draft", Provider: in.Provider, To: in.To, Cc: in.Cc, Bcc: in.Bcc, Subject: in.Subject,
		Text: in.Text, ReplyTo: in.ReplyTo, Correlation: in.Correlation, Account: in.Account, DryRun: in.DryRun, Agent: in.Agent}
	if in.Draft != "" {
		req.Draft = []byte(in.Draft)
		// The service never opens a path an agent names, and over HTTP
		// no command line of the agent's reads it: a draft's artifacts
		// are dropzone objects here.
		if d, _, err := schema.ParseDraft(req.Draft); err == nil {
			for i, art := range d.Artifacts {
				if art.Path != "" {
					req.Refusal = &agentapi.Error{Code: exitDataErr, Message: fmt.Sprintf("draft: artifacts[%d].path: over HTTP an attachment is a dropzone object by id (sha256:...); a file by path is attached over stdio (`courier mcp`) or by `courier send`", i)}
					break
				}
			}
		}
	}
	for _, x := range in.Attach {
		if _, err := dropzone.ParseID(x); err != nil {
			if req.Refusal == nil {
				req.Refusal = &agentapi.Error{Code: exitDataErr, Message: fmt.Sprintf("attach %s: over HTTP an attachment is a dropzone object by id (sha256:...)", x)}
			}
			continue
		}
		req.Attach = append(req.Attach, agentapi.Attach{ID: x})
	}
	res, err := r.b.Send(ctx, r.caller, req, nil)
	if err != nil {
		var e *agentapi.Error
		if errors.As(err, &e) {
			return nil, e.Message, e.Code, nil
		}
		return nil, err.Error(), exitSoftware, nil
	}
	// What `courier send --format json` prints, by the same function.
	var buf mcpCapped
	buf.max = s.max
	if err := (&app{stdout: &buf}).printSent(res, "json"); err != nil {
		return nil, "", 0, err
	}
	return json.RawMessage(bytes.TrimSpace(buf.Bytes())), "", 0, nil
}

// Resources: each message as courier://message/<id> (its file, Markdown
// with front matter), and courier://inbox, the inbox as list gives it,
// which a client subscribes to to hear of new mail.

func (s *mcpServer) addResources() {
	s.srv.AddResource(s.inboxResource(), s.readInbox)
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: mcpMessageURI + "{id}", Name: "message", MIMEType: "text/markdown",
		Description: "A message or draft: its file as Courier wrote it, Markdown with YAML front matter"}, s.readMessage)
	// resources/list lists the inbox's messages from the index, paged,
	// rather than from resources registered one by one (which would hold
	// the whole mailbox in memory and go stale).
	s.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			p, _ := req.GetParams().(*mcp.ListResourcesParams)
			cursor := ""
			if p != nil {
				cursor = p.Cursor
			}
			return s.listResources(ctx, cursor)
		}
	})
}

func (s *mcpServer) inboxResource() *mcp.Resource {
	return &mcp.Resource{URI: mcpInboxURI, Name: "inbox", Title: "The inbox", MIMEType: "application/json",
		Description: "The inbox (new, claimed, failed) as `courier list --format json`, the first 1,000; subscribe to it to be notified when mail arrives"}
}

func (s *mcpServer) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	out, msg, code := s.cli(ctx, nil, "", (*app).listCommand, "--format", "json", "--limit", strconv.Itoa(mcpDefaultLimit))
	if code != 0 {
		return nil, errors.New(msg)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: mcpInboxURI, MIMEType: "application/json", Text: string(out)}}}, nil
}

func (s *mcpServer) readMessage(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, mcpMessageURI)
	if !ok || mcpArg(id) != nil || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	out, msg, code := s.cli(ctx, nil, "", (*app).readCommand, id, "--raw")
	switch {
	case code == exitNotFound:
		return nil, mcp.ResourceNotFoundError(uri)
	case code != 0:
		return nil, errors.New(msg)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: string(out)}}}, nil
}

// listResources answers resources/list: the inbox resource, then the
// inbox's messages, mcpPageSize a page. The cursor is the offset.
func (s *mcpServer) listResources(ctx context.Context, cursor string) (*mcp.ListResourcesResult, error) {
	off := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("mcp: cursor %q is not one this server gave", cursor)
		}
		off = n
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	if off == 0 {
		res.Resources = append(res.Resources, s.inboxResource())
	}
	i := 0
	err := s.a.mb.List(ctx, mailbox.Filter{Limit: off + mcpPageSize + 1}, func(e *mailbox.Entry) error {
		i++
		if i <= off {
			return nil
		}
		if i > off+mcpPageSize {
			res.NextCursor = strconv.Itoa(off + mcpPageSize)
			return nil
		}
		title := safeText(e.Session.Name)
		if title == "" {
			title = safeText(e.Preview)
		}
		res.Resources = append(res.Resources, &mcp.Resource{URI: mcpMessageURI + e.ID, Name: e.ID, Title: oneLine(title),
			MIMEType: "text/markdown", Description: oneLine(fmt.Sprintf("%s from %s: %s", e.Status, safeText(e.From.Name), safeText(e.Preview)))})
		return nil
	})
	return res, err
}

// watch tells subscribers when mail arrives until ctx ends: an inbound
// event in the mailbox's journal (written with the message's index row),
// whoever wrote it (this service, or the service the stdio server sits
// beside), read as `courier watch` reads it. A burst is one notification.
func (s *mcpServer) watch(ctx context.Context) error {
	mb, err := s.a.mailbox()
	if err != nil {
		return err
	}
	wake, stop := journalWaker(ctx, mb)
	cursor, _, err := mb.LastEvent(ctx)
	if err != nil {
		stop()
		return err
	}
	go func() {
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			arrived := false
			for {
				evs, err := mb.Events(ctx, cursor, 256)
				if err != nil {
					if ctx.Err() == nil {
						s.log.Warn("mcp: reading the journal for new mail", "err", err)
					}
					break
				}
				for _, ev := range evs {
					cursor = ev.Seq
					arrived = arrived || ev.Kind == mailbox.EventInbound
				}
				if len(evs) < 256 {
					break
				}
			}
			if arrived {
				s.notify(ctx)
			}
		}
	}()
	return nil
}

// notify tells every session that the list of messages changed, and the
// subscribers of the inbox that it was updated.
func (s *mcpServer) notify(ctx context.Context) {
	s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: mcpInboxURI})
	s.srv.AddResource(s.inboxResource(), s.readInbox) // the same again: the SDK sends list_changed
}

// The stdio command.

func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the mailbox to an agent over MCP on standard input and output (the agent spawns it)",
		Long: `Serve the mailbox over the Model Context Protocol on standard input and
output, for an agent that spawns it (claude mcp add courier -- courier mcp).
Tools: list, read, thread, context, claim, done, fail, send, attachment, with
the command line's rules, ids, errors and exit codes; resources: each
message as courier://message/<id>, and courier://inbox, whose subscribers are
told when mail arrives. The writing tools go through the service while it
runs, and act on the mailbox directly without it, as the command line does.
The service also serves MCP over HTTP at /mcp (courier.mcp).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := a.mailbox(); err != nil {
				return err
			}
			if _, err := a.dropzone(); err != nil {
				return err
			}
			s := newMCPServer(a, mcpLocal{}, mcpMaxResult, a.logger())
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if err := s.watch(wctx); err != nil {
				a.logger().Warn("mcp: new mail will not be notified", "err", err)
			}
			err := s.srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(a.stdin), Writer: mcpNopWriteCloser{a.stdout}})
			if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
				return err
			}
			return nil
		},
	}
}

type mcpNopWriteCloser struct{ io.Writer }

func (mcpNopWriteCloser) Close() error { return nil }

// The HTTP endpoint, in the service.

// mcpHTTP is /mcp: the streamable HTTP transport, behind the Origin check
// and the bearer token, with bounded bodies and sessions.
type mcpHTTP struct {
	s     *mcpServer
	h     http.Handler
	token []byte // sha256 of the token; nil: none is asked for
	// closed refuses every request: no token is configured and anonymous
	// use was not allowed (courier.mcp.allow_anonymous).
	closed  bool
	max     int // sessions at once
	cancel  context.CancelFunc
	mu      sync.Mutex
	started bool
}

// newMCPHTTP makes the /mcp handler of the service.
func newMCPHTTP(a *app, cfg *config.Config, b agentapi.Backend, log *slog.Logger) (*mcpHTTP, error) {
	m := cfg.Courier.MCP
	log = log.With("component", "mcp")
	s := newMCPServer(a, mcpRemote{b: b, caller: mcpHTTPCaller}, mcpMaxResult, log)
	h := &mcpHTTP{s: s, max: m.MaxSessions, closed: m.TokenFile == "" && !m.AllowAnonymous}
	if m.TokenFile != "" {
		path := m.TokenFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(a.root, path)
		}
		tok, err := os.ReadFile(path)
		if err != nil {
			return nil, withCode(exitConfig, fmt.Errorf("courier.mcp.token_file: %w", err))
		}
		t := bytes.TrimSpace(tok)
		if len(t) == 0 {
			return nil, withCode(exitConfig, fmt.Errorf("courier.mcp.token_file: %s is empty", m.TokenFile))
		}
		sum := sha256.Sum256(t)
		h.token = sum[:]
	}
	h.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		Logger:              log,
		SessionTimeout:      m.SessionTimeout.D(),
		MaxRequestBodyBytes: m.MaxRequestBytes,
	})
	return h, nil
}

// Start watches for new mail; Stop ends the sessions.
func (h *mcpHTTP) Start(ctx context.Context) error {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	if err := h.s.watch(wctx); err != nil {
		h.s.log.Warn("mcp: new mail will not be notified", "err", err)
	}
	return nil
}

func (h *mcpHTTP) Stop(ctx context.Context) error {
	if h.cancel != nil {
		h.cancel()
	}
	for ss := range h.s.srv.Sessions() {
		ss.Close()
	}
	return nil
}

func (h *mcpHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		// The session's event stream lasts as long as the session: the
		// listener's write timeout would cut it every minute. Sessions
		// are bounded in number, idle ones time out, and a client that
		// stops answering pings is dropped.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
	}
	// DNS rebinding: a page elsewhere that got its name resolved to
	// 127.0.0.1 sends its own Origin. Browsers send one on every
	// cross-origin request; agents send none.
	if o := r.Header.Get("Origin"); o != "" && !mcpLocalOrigin(o) {
		http.Error(w, "mcp: origin "+strconv.Quote(o)+" is not allowed", http.StatusForbidden)
		return
	}
	if h.closed {
		w.Header().Set("WWW-Authenticate", `Bearer realm="courier"`)
		http.Error(w, "mcp: /mcp needs a bearer token: set courier.mcp.token_file (or courier.mcp.allow_anonymous: true where every local user may read this mailbox); `courier mcp` over stdio needs none", http.StatusUnauthorized)
		return
	}
	if h.token != nil {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || subtle.ConstantTimeCompare(sum[:], h.token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="courier"`)
			http.Error(w, "mcp: a bearer token is needed (courier.mcp.token_file)", http.StatusUnauthorized)
			return
		}
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && h.max > 0 && mcpOpensSession(r) {
		n := 0
		for range h.s.srv.Sessions() {
			n++
		}
		if n >= h.max {
			w.Header().Set("Retry-After", "10")
			http.Error(w, fmt.Sprintf("mcp: %d sessions are open, the most there may be (courier.mcp.max_sessions)", n), http.StatusServiceUnavailable)
			return
		}
	}
	h.h.ServeHTTP(w, r)
}

// mcpOpensSession reports whether a request without a session opens one:
// an initialize (or what cannot be read as a single request, left to the
// SDK to refuse). A client of the 2026-07-28 protocol first asks
// server/discover, which opens none; counted, the session the SDK keeps
// for it a moment after answering made the bound refuse the initialize
// that follows (now and then: TestMCPHTTPGuards). The body's first 64 KiB
// are read (an initialize is far smaller) and put back.
func mcpOpensSession(r *http.Request) bool {
	head, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil {
		return true
	}
	var call struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(head, &call) != nil {
		return true
	}
	return call.Method != "server/discover"
}

// mcpLocalOrigin reports whether an Origin is a page of this machine.
func mcpLocalOrigin(o string) bool {
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

// The schemas of outputs the CLI prints, which Go types do not describe:
// the entry of list (mailbox.Entry marshals itself), read's document and
// send's summary. They name what agents rely on and allow the rest.

func mcpObject(desc string, required []string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Description: desc, Required: required, Properties: props}
}

func mcpType(t, desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: t, Description: desc}
}

func mcpNullable(t, desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{t, "null"}, Description: desc}
}

func entrySchema() *jsonschema.Schema {
	return mcpObject("a message or draft as the index knows it", []string{"id", "provider", "direction", "path", "timestamp", "status"},
		map[string]*jsonschema.Schema{
			"id":             mcpType("string", "the message's id"),
			"provider":       mcpType("string", "email, lark, slack"),
			"direction":      mcpType("string", "inbound or outbound"),
			"path":           mcpType("string", "its file, relative to the workspace"),
			"timestamp":      mcpType("string", "the message's own time (RFC 3339)"),
			"status":         mcpType("string", "new, claimed, failed, done, dead; queued, sent (drafts)"),
			"preview":        mcpType("string", "the start of its text"),
			"correlation_id": mcpType("string", "the correlation id, or empty"),
			"reply_to":       mcpType("string", "the id of the message it answers, or empty"),
			"claimed_by":     mcpType("string", "the agent holding its claim"),
		})
}

func readSchema() *jsonschema.Schema {
	sc := entrySchema()
	sc.Description = "the entry, with the message (inbound) or the draft (outbound) as its file holds it"
	sc.Properties["message"] = mcpType("object", "the message: front matter fields and body")
	sc.Properties["draft"] = mcpType("object", "the draft: front matter fields, body and delivery")
	return sc
}

func sendSchema() *jsonschema.Schema {
	return mcpObject("what `courier send --format json` prints: the queued draft's summary, or for a dry run the draft", nil,
		map[string]*jsonschema.Schema{
			"success":        mcpType("boolean", "queued"),
			"id":             mcpType("string", "the draft's id (<provider>_out_<uuid>)"),
			"provider":       mcpType("string", "email, lark or slack"),
			"path":           mcpType("string", "the queued file, relative to the workspace"),
			"to":             {Types: []string{"array", "null"}, Items: mcpType("string", ""), Description: "the recipients"},
			"correlation_id": mcpNullable("string", "the correlation id it carries"),
			"schedule_at":    mcpNullable("string", "when it is to go, if held"),
			"dry_run":        mcpType("boolean", "nothing was queued"),
			"draft":          mcpType("object", "the draft as it would be queued (dry run)"),
		})
}

// mcpMount serves /mcp in the service, on the HTTP listener serveHTTP
// makes: it returns serveHTTP with /mcp routed to the MCP server (unless
// courier.mcp.http is false), whose sessions end before the listener
// shuts down (an open event stream would hold the shutdown to its
// deadline), and what to close after the service stops. Its writing tools
// go through a Backend of the service's mailbox and providers, as the
// socket's requests do.
func (a *app) mcpMount(cfg *config.Config, mb *mailbox.Mailbox, set providerSet, log *slog.Logger,
	serveHTTP func(http.Handler) service.Component) (func(http.Handler) service.Component, func(), error) {
	if !cfg.Courier.MCP.Enabled() {
		return serveHTTP, func() {}, nil
	}
	dz, err := dropzone.Open(mailbox.Layout{Root: a.root}.Dropzone(), &dropzone.Options{MaxSize: cfg.Courier.Limits.MaxArtifactBytes})
	if err != nil {
		return nil, nil, err
	}
	h, err := newMCPHTTP(a, cfg, &agentBackend{app: a, cfg: cfg, mb: mb, dz: dz, set: set}, log)
	if err != nil {
		dz.Close()
		return nil, nil, err
	}
	return func(next http.Handler) service.Component {
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		mux.Handle("/", next)
		c := serveHTTP(mux)
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
	}, func() { dz.Close() }, nil
}
