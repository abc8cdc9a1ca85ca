package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/schema"
)

// writer is how the writing tools write: as the command line does
// (localWriter, over stdio), or through the service's Backend for an HTTP
// caller (remoteWriter).
type writer interface {
	// verb runs claim, done or fail; its refusals are the Outcome's.
	verb(ctx context.Context, name string, in verbIn) agentapi.Outcome
	// send queues a draft and returns what `courier send --format json`
	// prints, with what it would warn of beside it.
	send(ctx context.Context, in sendIn) (out []byte, warn string, err error)
}

// HTTPCaller is who an HTTP request is (see the package doc).
var HTTPCaller = agentapi.Caller{UID: ^uint32(0), GID: ^uint32(0), User: "mcp"}

func (s *Server) addVerbs() {
	verb := func(name, desc string, destructive bool) {
		mcp.AddTool(s.srv, &mcp.Tool{Name: name, Description: desc, OutputSchema: schemaOf[VerbOut](),
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: new(bool)}},
			func(ctx context.Context, _ *mcp.CallToolRequest, in verbIn) (*mcp.CallToolResult, *VerbOut, error) {
				if err := checkID(in.ID); err != nil {
					return nil, nil, refuse(err)
				}
				o := s.w.verb(ctx, name, in)
				out := &VerbOut{Result: o.Result, ExitCode: o.Code}
				if o.Code != 0 {
					return toolError(&refusal{msg: o.Result.Message, code: o.Code}), out, nil
				}
				return textResult(o.Result.Message), out, nil
			})
	}
	verb("claim", "Claim a message for an agent, so that no other agent works on it: as `courier claim ID`. "+
		"A message another agent holds is an error (exit 2) naming the holder (claimed_by) and when the claim runs out.", false)
	verb("done", "Mark a claimed message processed: it moves to archive/ with processed_at, as `courier done ID`. Only the agent holding the claim may.", true)
	verb("fail", "Give back a claimed message that could not be processed, as `courier fail ID --reason ...`: retried after a backoff, "+
		"set aside in .deadletter after max_failures (or at once with permanent).", true)
}

// send is the send tool.
func (s *Server) send(ctx context.Context, _ *mcp.CallToolRequest, in sendIn) (*mcp.CallToolResult, json.RawMessage, error) {
	if in.Draft == "" && in.Text == "" {
		return nil, nil, refuse(fault.Errorf(fault.Usage, "give a draft, or text for a quick message"))
	}
	out, warn, err := s.w.send(ctx, in)
	if err != nil {
		return nil, nil, refuse(err)
	}
	out = bytes.TrimSpace(out)
	if len(out) > s.max {
		return nil, nil, refuse(tooLarge(s.max))
	}
	text := string(out)
	if warn != "" {
		text = warn + "\n" + text
	}
	return textResult(text), json.RawMessage(out), nil
}

// timeout reads a claim's timeout, over HTTP.
func timeout(in verbIn) (time.Duration, error) {
	if in.Timeout == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(in.Timeout)
	if err != nil || d < 0 {
		return 0, fault.Errorf(fault.Usage, "timeout %q is not a duration (300s, 10m)", in.Timeout)
	}
	return d, nil
}

// cliTimeout reads a claim's timeout over stdio, as `courier claim
// --timeout` reads it.
func cliTimeout(in verbIn) (time.Duration, error) {
	if in.Timeout == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(in.Timeout)
	if err != nil {
		return 0, fault.Errorf(fault.Usage, "invalid argument %q for %q flag: %v", in.Timeout, "--timeout", err)
	}
	return d, nil
}

// localWriter writes as the command line does: through the service's
// socket while it runs, on the mailbox without it, decided per call.
type localWriter struct {
	s     *Server
	l     *agents.Local
	agent string // the command's --agent or $COURIER_AGENT
}

// agentOf is the name a call acts under: its own, else the command's.
func (w *localWriter) agentOf(asked string) string {
	if asked != "" {
		return asked
	}
	return w.agent
}

func (w *localWriter) verb(ctx context.Context, name string, in verbIn) agentapi.Outcome {
	release, err := w.s.slot(ctx)
	if err != nil {
		return agents.Refused(in.ID, err)
	}
	defer release()
	d, err := cliTimeout(in)
	if err != nil {
		return agents.Refused(in.ID, err)
	}
	c, err := w.l.Dial(ctx)
	if err != nil {
		return agents.Refused(in.ID, err)
	}
	defer c.Close()
	agent := w.agentOf(in.Agent)
	var o agentapi.Outcome
	switch name {
	case "claim":
		o, err = c.Claim(ctx, agentapi.ClaimRequest{ID: in.ID, Agent: agent, Timeout: d})
	case "done":
		o, err = c.Done(ctx, agentapi.DoneRequest{ID: in.ID, Agent: agent})
	default:
		o, err = c.Fail(ctx, agentapi.FailRequest{ID: in.ID, Agent: agent, Reason: in.Reason, Retryable: !in.Permanent})
	}
	if err != nil {
		return agents.Refused(in.ID, err)
	}
	return o
}

func (w *localWriter) send(ctx context.Context, in sendIn) ([]byte, string, error) {
	release, err := w.s.slot(ctx)
	if err != nil {
		return nil, "", err
	}
	defer release()
	cwd, _ := os.Getwd()
	d := &agents.Draft{Name: "draft", BaseDir: cwd, Agent: w.agentOf(in.Agent), Flags: agents.Flags{
		Provider: in.Provider, To: in.To, Cc: in.Cc, Bcc: in.Bcc, Subject: in.Subject, Text: in.Text, ReplyTo: in.ReplyTo,
		Correlation: in.Correlation, Account: in.Account, Attach: in.Attach, DryRun: in.DryRun}}
	if in.Draft != "" {
		d.Data = []byte(in.Draft)
	}
	res, err := w.l.Send(ctx, d)
	if err != nil {
		return nil, "", err
	}
	out, err := agents.SentJSON(res)
	if err != nil {
		return nil, "", err
	}
	warn := ""
	if wr := agents.WaitingWarning(res); wr != "" {
		warn = "courier: " + wr
	}
	return out, warn, nil
}

// remoteWriter writes for an HTTP caller: the agents' Backend, as the
// socket's requests reach it.
type remoteWriter struct {
	s      *Server
	b      agentapi.Backend
	caller agentapi.Caller
}

func (w *remoteWriter) verb(ctx context.Context, name string, in verbIn) agentapi.Outcome {
	switch name {
	case "claim":
		d, err := timeout(in)
		if err != nil {
			return agents.Refused(in.ID, err)
		}
		return w.b.Claim(ctx, w.caller, agentapi.ClaimRequest{ID: in.ID, Agent: in.Agent, Timeout: d})
	case "done":
		return w.b.Done(ctx, w.caller, agentapi.DoneRequest{ID: in.ID, Agent: in.Agent})
	}
	return w.b.Fail(ctx, w.caller, agentapi.FailRequest{ID: in.ID, Agent: in.Agent, Reason: in.Reason, Retryable: !in.Permanent})
}

func (w *remoteWriter) send(ctx context.Context, in sendIn) ([]byte, string, error) {
	req := &agentapi.SendRequest{Name: "draft", Provider: in.Provider, To: in.To, Cc: in.Cc, Bcc: in.Bcc, Subject: in.Subject,
		Text: in.Text, ReplyTo: in.ReplyTo, Correlation: in.Correlation, Account: in.Account, DryRun: in.DryRun, Agent: in.Agent}
	if in.Draft != "" {
		req.Draft = []byte(in.Draft)
		req.Refusal = pathRefusal(req.Draft)
	}
	for _, x := range in.Attach {
		if _, err := dropzone.ParseID(x); err != nil {
			if req.Refusal == nil {
				req.Refusal = &agentapi.Error{Code: fault.Invalid.ExitCode(), Message: fmt.Sprintf("attach %s: over HTTP an attachment is a dropzone object by id (sha256:...)", x)}
			}
			continue
		}
		req.Attach = append(req.Attach, agentapi.Attach{ID: x})
	}
	res, err := w.b.Send(ctx, w.caller, req, nil)
	if err != nil {
		var e *agentapi.Error
		if errors.As(err, &e) {
			return nil, "", fault.Wrap(fault.OfExitCode(e.Code), errors.New(e.Message))
		}
		return nil, "", err
	}
	out, err := agents.SentJSON(res)
	return out, "", err
}

// pathRefusal refuses a draft's artifact given by path: the service never
// opens a path an agent names, and over HTTP no command line of the
// agent's reads it, so a draft's artifacts are dropzone objects here.
func pathRefusal(draft []byte) *agentapi.Error {
	d, _, err := schema.ParseDraft(draft)
	if err != nil {
		return nil
	}
	for i, art := range d.Artifacts {
		if art.Path != "" {
			return &agentapi.Error{Code: fault.Invalid.ExitCode(), Message: fmt.Sprintf("draft: artifacts[%d].path: over HTTP an attachment is a dropzone object by id (sha256:...); a file by path is attached over stdio (`courier mcp`) or by `courier send`", i)}
		}
	}
	return nil
}
