package agents

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Backend is the service's side of agentapi: the writing verbs, done for
// the Caller on the service's mailbox by the same code the command line
// runs without the service. The socket's Server calls it for each
// request; the MCP server over HTTP calls it with its own Caller.
type Backend struct {
	Config    *config.Config
	Mailbox   *mailbox.Mailbox
	Dropzone  *dropzone.Store // held to limits.max_artifact_bytes
	Providers providers.Set
	// Wake asks the outbound engine to look at the queue now (after an
	// outbound retry or requeue); nil does nothing.
	Wake func()
	// live replaces Config and Providers after a reload (Reload).
	live atomic.Pointer[backendLive]
}

var (
	_ agentapi.Backend  = (*Backend)(nil)
	_ agentapi.Operator = (*Backend)(nil)
)

// NewBackend is the Backend of the service of the workspace at root, with
// a dropzone of its own held to limits.max_artifact_bytes (the service's
// holds raw messages too, and is larger); Close releases it.
func NewBackend(root string, cfg *config.Config, mb *mailbox.Mailbox, set providers.Set) (*Backend, error) {
	dz, err := dropzone.Open(mailbox.Layout{Root: root}.Dropzone(), &dropzone.Options{MaxSize: cfg.Courier.Limits.MaxArtifactBytes})
	if err != nil {
		return nil, err
	}
	return &Backend{Config: cfg, Mailbox: mb, Dropzone: dz, Providers: set}, nil
}

// Close releases the dropzone NewBackend opened.
func (b *Backend) Close() error { return b.Dropzone.Close() }

// Socket is the service's agent socket: the agentapi server of b at
// courier.socket.path, as a component of the service.
func Socket(root string, b *Backend, log *slog.Logger) (service.Component, *agentapi.Server) {
	lim := b.Config.Courier.Limits
	srv := agentapi.New(agentapi.Options{
		Path:    b.Config.SocketPath(root),
		Backend: b,
		Logger:  log.With("component", "agents"),
		// The draft travels base64 in JSON, and --text escaped.
		MaxRequestBytes: 8*lim.MaxDraftBytes + 1<<20,
		MaxFileBytes:    lim.MaxArtifactBytes,
	})
	return service.Component{Name: "agent socket " + srv.Path(), Start: srv.Start, Stop: srv.Stop}, srv
}

func (b *Backend) Claim(ctx context.Context, c agentapi.Caller, req agentapi.ClaimRequest) agentapi.Outcome {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return Refused(req.ID, fault.Wrap(fault.Usage, err))
	}
	r, err := Claim(ctx, b.Mailbox, req.ID, agent, req.Timeout)
	return Outcome(req.ID, r, err)
}

func (b *Backend) Done(ctx context.Context, c agentapi.Caller, req agentapi.DoneRequest) agentapi.Outcome {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return Refused(req.ID, fault.Wrap(fault.Usage, err))
	}
	r, err := Done(ctx, b.Mailbox, req.ID, agent)
	return Outcome(req.ID, r, err)
}

func (b *Backend) Fail(ctx context.Context, c agentapi.Caller, req agentapi.FailRequest) agentapi.Outcome {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return Refused(req.ID, fault.Wrap(fault.Usage, err))
	}
	r, err := Fail(ctx, b.Mailbox, req.ID, agent, req.Reason, req.Retryable)
	return Outcome(req.ID, r, err)
}

// Send is `courier send` on the service's side: the draft parsed and
// resolved as the command line does it, its artifacts stored from what the
// agent's command line read. It opens no path the request names. A
// refusal is an *agentapi.Error.
func (b *Backend) Send(ctx context.Context, c agentapi.Caller, req *agentapi.SendRequest, files agentapi.Files) (*agentapi.SendResult, error) {
	res, err := b.send(ctx, c, req, files)
	if err != nil {
		return nil, refusal(err)
	}
	return res, nil
}

// refusal is err as the socket answers it: the exit code of its kind and
// its message.
func refusal(err error) *agentapi.Error {
	var e *agentapi.Error
	if !errors.As(err, &e) {
		e = &agentapi.Error{Code: fault.ExitCode(err), Message: strings.TrimSpace(err.Error())}
	}
	return e
}

func (b *Backend) send(ctx context.Context, c agentapi.Caller, req *agentapi.SendRequest, files agentapi.Files) (*agentapi.SendResult, error) {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return nil, fault.Wrap(fault.Usage, err)
	}
	cfg, set := b.current()
	d, src, err := parseDraft(req.Name, req.Draft, req.Text, cfg.Courier.Limits)
	if err != nil {
		return nil, err
	}
	applyFlags(d, flagsOf(req))
	for _, x := range req.Attach {
		// A path here is only a name: the content comes in files.
		d.Artifacts = append(d.Artifacts, schema.DraftArtifact{ID: x.ID, Path: x.Path})
	}
	if err := ResolveDraft(ctx, b.Mailbox, set, d, src, req.Account, cfg.Courier.Outbound.MaxRecipients); err != nil {
		return nil, withFile(err, req.Name)
	}
	if err := d.Validate(src); err != nil {
		return nil, withFile(err, req.Name)
	}
	if req.Refusal != nil {
		return nil, req.Refusal
	}
	if err := b.storeArtifacts(d, src, req, files); err != nil {
		return nil, withFile(err, req.Name)
	}
	res, err := finishDraft(ctx, b.Mailbox, d, agent, req.DryRun)
	if err == nil {
		res.Waiting = set.Undelivered(d.Provider)
	}
	return res, err
}
