package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Workspace opens what Local needs only when it acts on the mailbox
// itself: a verb that goes through the service opens none of it.
type Workspace interface {
	Mailbox() (*mailbox.Mailbox, error)
	// Dropzone is held to limits.max_artifact_bytes.
	Dropzone() (*dropzone.Store, error)
	// Providers are built from the config; an error is a fault.Config.
	Providers() (providers.Set, error)
}

// Local is the command line's side of the writing verbs, for one
// workspace: each goes through the service's socket while the service
// runs (the socket names this process's user), and acts on the mailbox
// directly without it, as the user that owns the workspace may. It is
// decided anew for each Dial and Send.
type Local struct {
	Root   string
	Config *config.Config
	// User is the agent a verb acts as directly when it names none: the
	// user's name (through the service, the service names it).
	User      string
	Workspace Workspace
}

// Conn is one decision of Dial: the service's socket, or the mailbox.
type Conn struct {
	l   *Local
	svc *agentapi.Client // nil: directly
	mb  *mailbox.Mailbox
}

// Dial decides how the verbs that follow write: through the service when
// its socket answers, else directly, if this user may write the mailbox.
// Its error says why neither is possible.
func (l *Local) Dial(ctx context.Context) (*Conn, error) {
	svc, err := route(ctx, l.Config.SocketPath(l.Root), l.Root, true)
	if err != nil {
		return nil, err
	}
	if svc != nil {
		return &Conn{l: l, svc: svc}, nil
	}
	mb, err := l.Workspace.Mailbox()
	if err != nil {
		return nil, err
	}
	return &Conn{l: l, mb: mb}, nil
}

// Close closes the connection to the service, if there is one.
func (c *Conn) Close() {
	if c.svc != nil {
		c.svc.Close()
	}
}

// agent is the name a verb acts under directly: the one asked (checked
// as the service checks it), else the user's.
func (c *Conn) agent(asked string) (string, error) {
	if asked != "" {
		return asked, fault.Wrap(fault.Usage, agentapi.CheckAgent(asked))
	}
	return c.l.User, nil
}

// Claim claims req.ID; req.Agent is the name the agent gave itself ("" for
// none). An error means the service could not answer (or refused the
// request itself); a refusal of the claim is the Outcome's.
func (c *Conn) Claim(ctx context.Context, req agentapi.ClaimRequest) (agentapi.Outcome, error) {
	if c.svc != nil {
		o, err := c.svc.Claim(ctx, req)
		return o, c.remoteError(err)
	}
	agent, err := c.agent(req.Agent)
	if err != nil {
		return Refused(req.ID, err), nil
	}
	r, err := Claim(ctx, c.mb, req.ID, agent, req.Timeout)
	return Outcome(req.ID, r, err), nil
}

// Done marks req.ID processed, as Claim claims.
func (c *Conn) Done(ctx context.Context, req agentapi.DoneRequest) (agentapi.Outcome, error) {
	if c.svc != nil {
		o, err := c.svc.Done(ctx, req)
		return o, c.remoteError(err)
	}
	agent, err := c.agent(req.Agent)
	if err != nil {
		return Refused(req.ID, err), nil
	}
	r, err := Done(ctx, c.mb, req.ID, agent)
	return Outcome(req.ID, r, err), nil
}

// Fail gives req.ID back, as Claim claims.
func (c *Conn) Fail(ctx context.Context, req agentapi.FailRequest) (agentapi.Outcome, error) {
	if c.svc != nil {
		o, err := c.svc.Fail(ctx, req)
		return o, c.remoteError(err)
	}
	agent, err := c.agent(req.Agent)
	if err != nil {
		return Refused(req.ID, err), nil
	}
	r, err := Fail(ctx, c.mb, req.ID, agent, req.Reason, req.Retryable)
	return Outcome(req.ID, r, err), nil
}

func (c *Conn) remoteError(err error) error {
	if err == nil {
		return nil
	}
	return serviceError(err)
}

// Draft is a send as the command line takes it.
type Draft struct {
	// Name is what errors call the draft: its file as given, or "draft".
	Name string
	// Data is the draft file; nil in quick mode (Flags.Text).
	Data []byte
	// BaseDir is the folder the draft's artifact paths are relative to.
	BaseDir string
	Flags   Flags
	// Agent is the name the agent gave itself ("" for none).
	Agent string
}

// Send validates a draft, resolves it and queues it (or, for a dry run,
// says what it would queue): through the service while it runs, directly
// otherwise. The artifacts given by path are checked against the attach
// policy and read here, as this user, either way.
func (l *Local) Send(ctx context.Context, in *Draft) (*agentapi.SendResult, error) {
	d, src, err := parseDraft(in.Name, in.Data, in.Flags.Text, l.Config.Courier.Limits)
	if err != nil {
		return nil, err
	}
	applyFlags(d, in.Flags)
	flagged, err := attachFlags(d, in.Flags.Attach)
	if err != nil {
		return nil, err
	}
	svc, err := route(ctx, l.Config.SocketPath(l.Root), l.Root, !in.Flags.DryRun)
	if err != nil {
		return nil, err
	}
	if svc != nil {
		defer svc.Close()
		return l.sendViaService(ctx, svc, in, d, src, flagged)
	}
	mb, err := l.Workspace.Mailbox()
	if err != nil {
		return nil, err
	}
	set, err := l.Workspace.Providers()
	if err != nil {
		return nil, err
	}
	if err := ResolveDraft(ctx, mb, set, d, src, in.Flags.Account, l.Config.Courier.Outbound.MaxRecipients); err != nil {
		return nil, withFile(err, in.Name)
	}
	if err := d.Validate(src); err != nil {
		return nil, withFile(err, in.Name)
	}
	if err := l.resolveArtifacts(d, src, in.BaseDir, in.Flags.DryRun, flagged); err != nil {
		return nil, withFile(err, in.Name)
	}
	agent := in.Agent
	if agent == "" {
		agent = l.User
	} else if err := agentapi.CheckAgent(agent); err != nil {
		return nil, fault.Wrap(fault.Usage, err)
	}
	res, err := finishDraft(ctx, mb, d, agent, in.Flags.DryRun)
	if err != nil {
		return nil, err
	}
	res.Waiting = set.Undelivered(d.Provider)
	return res, nil
}

// attachFlags adds the --attach values to the draft's artifacts. Files are
// held to the same rules as a draft's paths (resolveArtifacts), and their
// errors name the flag: the map returned says which artifact came from
// which flag.
func attachFlags(d *schema.Draft, attach []string) (map[int]string, error) {
	flagged := map[int]string{}
	for _, x := range attach {
		if _, err := dropzone.ParseID(x); err == nil {
			d.Artifacts = append(d.Artifacts, schema.DraftArtifact{ID: x})
			continue
		}
		abs, err := filepath.Abs(x)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return nil, fault.Errorf(fault.NoInput, "--attach %s: %w", x, errors.Unwrap(err))
		}
		flagged[len(d.Artifacts)] = x
		d.Artifacts = append(d.Artifacts, schema.DraftArtifact{Path: abs})
	}
	return flagged, nil
}

// sendViaService sends a draft read and checked here (d, with the flags
// applied) to the service. The artifacts given by path are checked and
// opened here, as this user, under the attach policy, and their content
// streamed: the service never opens a path an agent names.
func (l *Local) sendViaService(ctx context.Context, svc *agentapi.Client, in *Draft, d *schema.Draft, src *schema.Source, flagged map[int]string) (*agentapi.SendResult, error) {
	f := in.Flags
	req := &agentapi.SendRequest{Name: in.Name, Draft: in.Data, Provider: f.Provider, To: f.To, Cc: f.Cc, Bcc: f.Bcc, Subject: f.Subject,
		Text: f.Text, ReplyTo: f.ReplyTo, Correlation: f.Correlation, Account: f.Account, DryRun: f.DryRun, Agent: in.Agent}
	n := len(d.Artifacts) - len(f.Attach)
	for _, art := range d.Artifacts[n:] {
		req.Attach = append(req.Attach, agentapi.Attach{ID: art.ID, Path: art.Path})
	}
	// The checks resolveArtifacts makes without the service, in a dry run
	// of it: nothing is stored here. Its refusal is the service's to
	// report, after the draft's own errors, which come first without the
	// service too.
	if err := l.resolveArtifacts(d, src, in.BaseDir, true, flagged); err != nil {
		err = withFile(err, in.Name)
		req.Refusal = &agentapi.Error{Code: fault.ExitCode(err), Message: strings.TrimSpace(err.Error())}
	} else {
		for i, art := range d.Artifacts {
			if art.Path != "" {
				req.Files = append(req.Files, agentapi.File{Index: i, Name: art.Name, MimeType: art.MimeType})
			}
		}
	}
	var policy *attachPolicy
	if len(req.Files) > 0 {
		var err error
		if policy, err = newAttachPolicy(l.Root, l.Config); err != nil {
			return nil, err
		}
	}
	open := func(i int) (io.ReadCloser, error) {
		f, err := policy.open(d.Artifacts[i].Path, in.BaseDir)
		if err != nil {
			return nil, err
		}
		return f.File, nil
	}
	res, err := svc.Send(ctx, req, open)
	if err != nil {
		return nil, serviceError(err)
	}
	return res, nil
}

// WaitingWarning is the warning the command line prints beside a draft
// nothing will deliver now (an agent would otherwise wait for a reply
// that never leaves); "" when a Sender will take it.
func WaitingWarning(res *agentapi.SendResult) string {
	if res == nil || res.Waiting == "" {
		return ""
	}
	return fmt.Sprintf("warning: nothing will deliver %s now: %s", res.ID, res.Waiting)
}
