package main

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
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Who writes (DESIGN §7). While the service runs it is the only writer of
// the mailbox and its database: the writing verbs (send, claim, done,
// fail) go to it over its socket (package agentapi), and the agents that
// run them need only read access to the mailbox and access to the socket.
// Without the service, in a single-user workspace, they act on the
// mailbox themselves, as they always did. The read verbs (list, read,
// thread, context) always read the mailbox directly.

// exitNoPerm is EX_NOPERM: the service runs, but this user may not use
// its socket.
const exitNoPerm = 77

// service decides how a writing verb writes. It returns a client of the
// service when the service's socket answers; nil when no service answers
// and the verb may act on the mailbox itself; or an error saying why it
// can do neither. writes is false for a verb that only reads the mailbox
// without the service (send --dry-run).
func (a *app) service(ctx context.Context, writes bool) (*agentapi.Client, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	path := cfg.SocketPath(a.root)
	c, err := agentapi.Dial(ctx, path)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		// A writing verb must not fall back to writing directly while the
		// service runs; this user would not be allowed to anyway.
		u, g := currentUser(), groupOf(path)
		return nil, withCode(exitNoPerm, fmt.Errorf("cannot reach the service at %s: permission denied. While the service runs, writing verbs go through its socket: user %s must be in group %s "+
			"(usermod -aG %s %s, then log in again)", path, u, g, g, u))
	}
	if !writes {
		return nil, nil
	}
	// No service answers. Acting directly needs write access to the
	// database, its WAL and the staging folder; find out before the first
	// write rather than fail halfway.
	if p, ok := a.unwritable(); !ok {
		return nil, withCode(exitNoService, fmt.Errorf("the service is not running (nothing answers on %s), and user %s may not write the mailbox itself (%s): "+
			"start the service (systemctl start courier), or run this as the user that owns the workspace", path, currentUser(), p))
	}
	return nil, nil
}

// unwritable returns the first file or folder a direct write would need
// that this user may not write, and ok false; ok is true when there is
// none.
func (a *app) unwritable() (path string, ok bool) {
	l := mailbox.Layout{Root: a.root}
	for _, p := range []string{l.State(), l.DB(), l.DB() + "-wal", l.DB() + "-shm", l.Tmp()} {
		err := unix.Access(p, unix.W_OK)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Sprintf("%s: %v", p, err), false
		}
	}
	return "", true
}

// readOnly reports whether this user may only read the mailbox: the
// database exists and may not be written.
func (a *app) readOnly() bool {
	db := mailbox.Layout{Root: a.root}.DB()
	if _, err := os.Stat(db); err != nil {
		return false
	}
	_, ok := a.unwritable()
	return !ok
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid" + strconv.Itoa(os.Getuid())
}

// groupOf names the group of path, or of the nearest folder above it this
// user may look at: the group whose members may use it.
func groupOf(path string) string {
	for p := path; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			gid := fi.Sys().(*syscall.Stat_t).Gid
			if g, err := user.LookupGroupId(strconv.Itoa(int(gid))); err == nil {
				return g.Name
			}
			return strconv.Itoa(int(gid))
		}
		if filepath.Dir(p) == p {
			return "(unknown)"
		}
	}
}

// configError is a config that cannot be read. Permission denied is the
// workspace telling this user it is not one of its agents: say which group
// they are in (exit 77) rather than call the config bad.
func configError(err error, path string) error {
	if errors.Is(err, fs.ErrPermission) {
		u, g := currentUser(), groupOf(path)
		return withCode(exitNoPerm, fmt.Errorf("%w: user %s may not read this workspace; its agents are in group %s (usermod -aG %s %s, then log in again)", err, u, g, g, u))
	}
	return withCode(exitConfig, err)
}

// explicitAgent is the agent name the command line was given (--agent,
// $COURIER_AGENT), or "" for the default: the user's name, which the
// service takes from the socket.
func (a *app) explicitAgent() string {
	if a.agentFlag != "" {
		return a.agentFlag
	}
	return os.Getenv("COURIER_AGENT")
}

// serviceError turns what the service answered into what the command line
// prints and exits with: exactly what acting directly would have given.
func serviceError(err error) error {
	var e *agentapi.Error
	if errors.As(err, &e) {
		return &exitError{code: e.Code, err: errors.New(e.Message)}
	}
	return withCode(exitUnavailable, err)
}

// agentBackend is the service's side of agentapi: the writing verbs, done
// for the Caller on the service's mailbox by the same code the command
// line runs without the service. An MCP server in the service (issue 12)
// calls these methods with its own Caller.
type agentBackend struct {
	app *app // the service's
	cfg *config.Config
	mb  *mailbox.Mailbox
	dz  *dropzone.Store // held to limits.max_artifact_bytes
	set providerSet
}

var _ agentapi.Backend = (*agentBackend)(nil)

// refused is the Outcome of a request refused before it reached the
// mailbox.
func refused(id string, code int, err error) agentapi.Outcome {
	return agentapi.Outcome{Result: agentapi.Result{MessageID: id, Error: "error", Message: err.Error()}, Code: code}
}

func (b *agentBackend) Claim(ctx context.Context, c agentapi.Caller, req agentapi.ClaimRequest) agentapi.Outcome {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return refused(req.ID, exitUsage, err)
	}
	r, err := claimOne(ctx, b.mb, req.ID, agent, req.Timeout)
	return outcome(req.ID, r, err)
}

func (b *agentBackend) Done(ctx context.Context, c agentapi.Caller, req agentapi.DoneRequest) agentapi.Outcome {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return refused(req.ID, exitUsage, err)
	}
	r, err := doneOne(ctx, b.mb, req.ID, agent)
	return outcome(req.ID, r, err)
}

func (b *agentBackend) Fail(ctx context.Context, c agentapi.Caller, req agentapi.FailRequest) agentapi.Outcome {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return refused(req.ID, exitUsage, err)
	}
	r, err := failOne(ctx, b.mb, req.ID, agent, req.Reason, req.Retryable)
	return outcome(req.ID, r, err)
}

// Send is `courier send` on the service's side: the draft parsed and
// resolved as the command line does it, its artifacts stored from what the
// agent's command line read. It opens no path the request names.
func (b *agentBackend) Send(ctx context.Context, c agentapi.Caller, req *agentapi.SendRequest, files agentapi.Files) (*agentapi.SendResult, error) {
	res, err := b.send(ctx, c, req, files)
	if err != nil {
		var e *agentapi.Error
		if !errors.As(err, &e) {
			e = &agentapi.Error{Code: exitCode(err), Message: strings.TrimSpace(err.Error())}
		}
		return nil, e
	}
	return res, nil
}

func (b *agentBackend) send(ctx context.Context, c agentapi.Caller, req *agentapi.SendRequest, files agentapi.Files) (*agentapi.SendResult, error) {
	agent, err := c.Agent(req.Agent)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	limits := b.cfg.Courier.Limits
	var d *schema.Draft
	var src *schema.Source
	if req.Draft != nil {
		if int64(len(req.Draft)) > limits.MaxDraftBytes {
			return nil, withCode(exitDataErr, fmt.Errorf("%s: draft is over the size limit of %d bytes (courier.limits.max_draft_bytes); attach large content as an artifact", req.Name, limits.MaxDraftBytes))
		}
		if d, src, err = schema.ParseDraft(req.Draft); err != nil {
			return nil, withFile(err, req.Name)
		}
		if req.Text != "" {
			if !d.Content.IsZero() || strings.TrimSpace(d.Body) != "" {
				return nil, usageError("--text and a draft with content: give one")
			}
			d.Content.Text = schema.NullString(req.Text)
		}
	} else {
		if int64(len(req.Text)) > limits.MaxDraftBytes {
			return nil, withCode(exitDataErr, fmt.Errorf("--text is %d bytes, over the limit of %d (courier.limits.max_draft_bytes)", len(req.Text), limits.MaxDraftBytes))
		}
		d = &schema.Draft{Content: schema.DraftContent{Text: schema.NullString(req.Text)}}
	}
	applyFlags(d, sendFlags{provider: req.Provider, to: req.To, cc: req.Cc, bcc: req.Bcc, subject: req.Subject,
		replyTo: req.ReplyTo, correlation: req.Correlation})
	for _, x := range req.Attach {
		// A path here is only a name: the content comes in files.
		d.Artifacts = append(d.Artifacts, schema.DraftArtifact{ID: x.ID, Path: x.Path})
	}
	if err := b.app.resolveDraft(ctx, b.mb, b.set, d, src, req.Account); err != nil {
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
	res, err := finishDraft(ctx, b.mb, d, agent, req.DryRun)
	if err == nil {
		res.Waiting = b.set.undelivered(d.Provider)
	}
	return res, err
}

// storeArtifacts is resolveArtifacts on the service's side: an artifact
// given by path is stored from the content the agent's command line sent
// (and checked against its own attach policy first), never read from the
// path; one given by id must be in the dropzone. One batch: a refusal
// leaves nothing in the dropzone.
func (b *agentBackend) storeArtifacts(d *schema.Draft, src *schema.Source, req *agentapi.SendRequest, files agentapi.Files) error {
	meta := map[int]agentapi.File{}
	for _, f := range req.Files {
		meta[f.Index] = f
	}
	for i, art := range d.Artifacts {
		if _, ok := meta[i]; ok != (art.Path != "") {
			return withCode(exitUsage, fmt.Errorf("agentapi: the request's files do not match the draft's artifacts given by path (artifacts[%d])", i))
		}
	}
	batch := b.dz.NewBatch()
	committed := false
	defer func() {
		if !committed {
			batch.Abort()
		}
	}()
	max := b.cfg.Courier.Limits.MaxArtifactBytes
	for i := range d.Artifacts {
		art := &d.Artifacts[i]
		p := fmt.Sprintf("artifacts[%d]", i)
		if art.Path == "" {
			obj, err := b.dz.Stat(art.ID)
			if err != nil {
				return src.Errorf(p+".id", "%s is not in the dropzone", art.ID)
			}
			art.Size = obj.Size
			if art.Name == "" {
				art.Name = strings.TrimPrefix(art.ID, "sha256:")[:12]
			}
		} else {
			f := meta[i]
			if art.Name == "" {
				art.Name = dropzone.SanitizeName(f.Name)
			}
			if art.Name == "" {
				art.Name = dropzone.SanitizeName(filepath.Base(art.Path))
			}
			r, err := files.Open(i)
			if err != nil {
				return err
			}
			br := bufio.NewReaderSize(r, 512)
			if art.MimeType == "" {
				art.MimeType = f.MimeType
			}
			if art.MimeType == "" {
				art.MimeType = sniffReader(br, art.Name)
			}
			if req.DryRun {
				n, err := io.Copy(io.Discard, br)
				if err != nil {
					return err
				}
				if max > 0 && n > max {
					return src.Errorf(p+".path", "%s is over the artifact limit of %d bytes (courier.limits.max_artifact_bytes)", art.Path, max)
				}
				art.Size = n
			} else {
				obj, err := batch.Put(br)
				if err != nil {
					if errors.Is(err, dropzone.ErrTooLarge) {
						return src.Errorf(p+".path", "%s: %v", art.Path, err)
					}
					return err
				}
				art.ID, art.Size, art.Path = obj.ID, obj.Size, ""
			}
		}
		if art.Type == "" {
			art.Type = schema.ArtifactTypeOf(art.MimeType, art.Name)
		}
	}
	if req.DryRun {
		return nil
	}
	committed = true
	return batch.Commit()
}

// sniffReader names the type of content by its name, else by its first
// bytes (peeked: the reader still starts at them).
func sniffReader(br *bufio.Reader, name string) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	head, _ := br.Peek(512)
	return http.DetectContentType(head)
}

// finishDraft gives a resolved draft its id and agent and queues it (or,
// for a dry run, only says what it would queue).
func finishDraft(ctx context.Context, mb *mailbox.Mailbox, d *schema.Draft, agent string, dryRun bool) (*agentapi.SendResult, error) {
	d.Status = ""
	d.Agent = agent
	d.CreatedAt = schema.TimePtr(time.Now())
	d.ID = fmt.Sprintf("%s_out_%s", d.Provider, newID())
	res := &agentapi.SendResult{ID: d.ID, Provider: string(d.Provider), DryRun: dryRun}
	if !dryRun {
		rel, err := mb.Queue(ctx, d)
		if err != nil {
			return nil, err
		}
		res.Path = rel
	}
	file, err := schema.EncodeDraft(d)
	if err != nil {
		return nil, err
	}
	res.File = string(file)
	if res.Draft, err = json.Marshal(d); err != nil {
		return nil, err
	}
	res.Summary, err = json.Marshal(map[string]any{"success": true, "id": d.ID, "provider": d.Provider, "path": res.Path,
		"to": d.To, "correlation_id": d.CorrelationID, "schedule_at": d.Options.ScheduleAt})
	return res, err
}

// printSent prints what send did, the same whoever queued the draft.
func (a *app) printSent(res *agentapi.SendResult, format string) error {
	switch {
	case res.DryRun && format == "json":
		return json.NewEncoder(a.stdout).Encode(struct {
			DryRun bool            `json:"dry_run"`
			Draft  json.RawMessage `json:"draft"`
		}{true, res.Draft})
	case res.DryRun:
		fmt.Fprintf(a.stdout, "# dry run: %s would be queued in outbound/%s/ as:\n", res.ID, res.Provider)
		_, err := io.WriteString(a.stdout, res.File)
		return err
	case format == "json":
		_, err := fmt.Fprintf(a.stdout, "%s\n", res.Summary)
		return err
	}
	fmt.Fprintf(a.stdout, "queued %s -> %s\n", res.ID, res.Path)
	return nil
}

// warnWaiting tells on stderr that nothing will deliver a draft just
// queued (or that would be): an agent would otherwise wait for a reply
// that never leaves.
func (a *app) warnWaiting(res *agentapi.SendResult) {
	if res != nil && res.Waiting != "" {
		fmt.Fprintf(a.stderr, "%swarning: nothing will deliver %s now: %s\n", errPrefix, res.ID, res.Waiting)
	}
}

// sendViaService sends a draft the command line has read and checked
// (d, with the flags applied) to the service. The artifacts given by path
// are checked and opened here, as this user, under the attach policy, and
// their content streamed: the service never opens a path an agent names.
func (a *app) sendViaService(ctx context.Context, svc *agentapi.Client, data []byte, name, baseDir string, d *schema.Draft, src *schema.Source, f sendFlags, flagged map[int]string) error {
	req := &agentapi.SendRequest{Name: name, Draft: data, Provider: f.provider, To: f.to, Cc: f.cc, Bcc: f.bcc, Subject: f.subject,
		Text: f.text, ReplyTo: f.replyTo, Correlation: f.correlation, Account: f.account, DryRun: f.dryRun, Agent: a.explicitAgent()}
	n := len(d.Artifacts) - len(f.attach)
	for _, art := range d.Artifacts[n:] {
		req.Attach = append(req.Attach, agentapi.Attach{ID: art.ID, Path: art.Path})
	}
	// The checks resolveArtifacts makes without the service, in a dry run
	// of it: nothing is stored here. Its refusal is the service's to
	// report, after the draft's own errors, which come first without the
	// service too.
	if err := a.resolveArtifacts(d, src, baseDir, true, flagged); err != nil {
		err = withFile(err, name)
		req.Refusal = &agentapi.Error{Code: exitCode(err), Message: strings.TrimSpace(err.Error())}
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
		if policy, err = a.attachPolicy(); err != nil {
			return err
		}
	}
	open := func(i int) (io.ReadCloser, error) {
		f, err := policy.open(d.Artifacts[i].Path, baseDir)
		if err != nil {
			return nil, err
		}
		return f.File, nil
	}
	res, err := svc.Send(ctx, req, open)
	if err != nil {
		return serviceError(err)
	}
	a.warnWaiting(res)
	return a.printSent(res, f.format)
}

// agentSocket is the service's socket component: the agentapi server over
// a backend of the service's mailbox and providers. The dropzone it stores
// artifacts in is held to limits.max_artifact_bytes; close releases it.
func (a *app) agentSocket(cfg *config.Config, mb *mailbox.Mailbox, set providerSet, log *slog.Logger) (c service.Component, srv *agentapi.Server, close func(), err error) {
	lim := cfg.Courier.Limits
	dz, err := dropzone.Open(mailbox.Layout{Root: a.root}.Dropzone(), &dropzone.Options{MaxSize: lim.MaxArtifactBytes})
	if err != nil {
		return service.Component{}, nil, nil, err
	}
	srv = agentapi.New(agentapi.Options{
		Path:    cfg.SocketPath(a.root),
		Backend: &agentBackend{app: a, cfg: cfg, mb: mb, dz: dz, set: set},
		Logger:  log.With("component", "agents"),
		// The draft travels base64 in JSON, and --text escaped.
		MaxRequestBytes: 8*lim.MaxDraftBytes + 1<<20,
		MaxFileBytes:    lim.MaxArtifactBytes,
	})
	return service.Component{Name: "agent socket " + srv.Path(), Start: srv.Start, Stop: srv.Stop}, srv, func() { dz.Close() }, nil
}
