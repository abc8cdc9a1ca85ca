package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// sendFlags are send's options.
type sendFlags struct {
	provider, subject, text, replyTo, correlation, account, format string
	to, cc, bcc, attach                                            []string
	dryRun                                                         bool
}

func (a *app) sendCommand() *cobra.Command {
	var f sendFlags
	c := &cobra.Command{
		Use:   "send [DRAFT.md | -]",
		Short: "Validate a draft and queue it for delivery (the draft itself is left untouched)",
		Long: `Validate a draft and queue it in outbound/<provider>/ for the service to
deliver. Errors name the field and the line. The provider, recipients,
correlation id, thread and (email) reply headers are resolved from the
message answered (reply_to) when the draft does not give them.

Attachments: an artifact's path (relative to the draft's folder) and
--attach FILE (relative to the current folder) are copied into the
dropzone. They may name only a regular file beneath the workspace or a
folder of courier.outbound.attach_roots, reached without a symbolic link
that leads out of it; never under /proc, /sys or /dev, never in the
workspace's .monoco/, and no hidden file or folder (.env, .ssh, ...)
unless courier.outbound.attach_hidden is true. Anything else is refused
with exit 65, naming the field (or --attach) and why; nothing is queued
and nothing copied. --dry-run checks the same.

An email goes out from its account's first address; the draft's
email.from may name another of the account's own addresses (an alias),
and any other address is refused at that field. The service checks this
again before sending, for drafts that did not come through send.

Quick mode needs no file:  courier send --provider lark --to oc_123 --text "Fixed"`,
		Example: `  courier send reply.md
  courier send reply.md --dry-run
  courier send --reply-to email_3f2a9c0d1e2f3a4b5c6d --text "Thanks, on it."
  courier send --reply-to email_3f2a9c0d1e2f3a4b5c6d --text "The report." --attach report.pdf`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(f.format, []string{"text", "json"}); err != nil {
				return err
			}
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			if file == "" && f.text == "" {
				return usageError("give a draft file, or --text for a quick message")
			}
			return a.send(cmd.Context(), file, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.provider, "provider", "", "email, lark or slack (default: from the draft, the message answered, or the recipients)")
	fl.StringSliceVar(&f.to, "to", nil, "recipients (replace the draft's)")
	fl.StringSliceVar(&f.cc, "cc", nil, "cc recipients (email)")
	fl.StringSliceVar(&f.bcc, "bcc", nil, "bcc recipients (email)")
	fl.StringVar(&f.subject, "subject", "", "subject (email)")
	fl.StringVar(&f.text, "text", "", "the message text (quick mode without a draft file)")
	fl.StringVar(&f.replyTo, "reply-to", "", "id of the message answered")
	fl.StringArrayVar(&f.attach, "attach", nil, "attach a file, or a dropzone object by its sha256:... id (repeatable; added to the draft's)")
	fl.StringVar(&f.correlation, "correlation", "", "correlation id")
	fl.StringVar(&f.account, "account", "", "email account to send from (default: the one the message answered came to, else the first)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "validate and resolve, print the draft as it would be queued, queue nothing")
	fl.StringVar(&f.format, "format", "text", "text or json")
	return c
}

func (a *app) send(ctx context.Context, file string, f sendFlags) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	name := "draft"
	var d *schema.Draft
	var src *schema.Source
	var data []byte
	baseDir, _ := os.Getwd()
	if file != "" {
		data, err = a.readDraft(file, cfg.Courier.Limits.MaxDraftBytes)
		if err != nil {
			return err
		}
		if file != "-" {
			name = file
			baseDir = filepath.Dir(file)
		}
		d, src, err = schema.ParseDraft(data)
		if err != nil {
			return withFile(err, name)
		}
		if f.text != "" {
			if !d.Content.IsZero() || strings.TrimSpace(d.Body) != "" {
				return usageError("--text and a draft with content: give one")
			}
			d.Content.Text = schema.NullString(f.text)
		}
	} else {
		if int64(len(f.text)) > cfg.Courier.Limits.MaxDraftBytes {
			return withCode(exitDataErr, fmt.Errorf("--text is %d bytes, over the limit of %d (courier.limits.max_draft_bytes)", len(f.text), cfg.Courier.Limits.MaxDraftBytes))
		}
		d = &schema.Draft{Content: schema.DraftContent{Text: schema.NullString(f.text)}}
	}
	applyFlags(d, f)
	// Files given with --attach are held to the same rules as a draft's
	// paths (resolveArtifacts); their errors name the flag.
	flagged := map[int]string{}
	for _, x := range f.attach {
		if _, err := dropzone.ParseID(x); err == nil {
			d.Artifacts = append(d.Artifacts, schema.DraftArtifact{ID: x})
			continue
		}
		abs, err := filepath.Abs(x)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return withCode(exitNoInput, fmt.Errorf("--attach %s: %w", x, errors.Unwrap(err)))
		}
		flagged[len(d.Artifacts)] = x
		d.Artifacts = append(d.Artifacts, schema.DraftArtifact{Path: abs})
	}
	// While the service runs, it resolves and queues the draft (agents.go).
	svc, err := a.service(ctx, !f.dryRun)
	if err != nil {
		return err
	}
	if svc != nil {
		defer svc.Close()
		return a.sendViaService(ctx, svc, data, name, baseDir, d, src, f, flagged)
	}
	mb, err := a.mailbox()
	if err != nil {
		return err
	}
	set, err := a.buildProviders(cfg, providerEnv{})
	if err != nil {
		return withCode(exitConfig, err)
	}
	if err := a.resolveDraft(ctx, mb, set, d, src, f.account); err != nil {
		return withFile(err, name)
	}
	if err := d.Validate(src); err != nil {
		return withFile(err, name)
	}
	if err := a.resolveArtifacts(d, src, baseDir, f.dryRun, flagged); err != nil {
		return withFile(err, name)
	}
	res, err := finishDraft(ctx, mb, d, a.agent(), f.dryRun)
	if err != nil {
		return err
	}
	res.Waiting = set.undelivered(d.Provider)
	a.warnWaiting(res)
	return a.printSent(res, f.format)
}

// applyFlags gives the flags precedence over the draft's fields (--attach
// aside, which names files).
func applyFlags(d *schema.Draft, f sendFlags) {
	if f.provider != "" {
		d.Provider = schema.Provider(f.provider)
	}
	if len(f.to) > 0 {
		d.To = f.to
	}
	if len(f.cc) > 0 {
		d.Cc = f.cc
	}
	if len(f.bcc) > 0 {
		d.Bcc = f.bcc
	}
	if f.subject != "" {
		d.Subject = f.subject
	}
	if f.replyTo != "" {
		d.ReplyTo = schema.NullString(f.replyTo)
	}
	if f.correlation != "" {
		d.CorrelationID = schema.NullString(f.correlation)
	}
}

// readDraft reads a draft, refusing one over the size limit before reading
// it whole.
func (a *app) readDraft(file string, limit int64) ([]byte, error) {
	var r io.Reader
	if file == "-" {
		r = a.stdin
	} else {
		fd, err := os.Open(file)
		if err != nil {
			return nil, withCode(exitNoInput, err)
		}
		defer fd.Close()
		if fi, err := fd.Stat(); err == nil && fi.IsDir() {
			return nil, withCode(exitNoInput, fmt.Errorf("%s is a directory, not a draft", file))
		}
		r = fd
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, withCode(exitIOErr, err)
	}
	if int64(len(data)) > limit {
		return nil, withCode(exitDataErr, fmt.Errorf("%s: draft is over the size limit of %d bytes (courier.limits.max_draft_bytes); attach large content as an artifact", file, limit))
	}
	return data, nil
}

func withFile(err error, name string) error {
	var errs schema.Errors
	if errors.As(err, &errs) {
		return errs.WithFile(name)
	}
	return err
}

// resolveDraft fills in what the draft leaves to Courier: the provider
// (from the message answered, else from the recipients), what a reply
// inherits whatever the provider (correlation, thread, the names of the
// attachments it sends back), then what the provider's Resolver derives:
// recipients, its own fields, the idempotency key.
func (a *app) resolveDraft(ctx context.Context, mb *mailbox.Mailbox, set providerSet, d *schema.Draft, src *schema.Source, account string) error {
	var (
		par   *adapters.Parent
		entry *mailbox.Entry
	)
	if d.ReplyTo != "" {
		id, ok, err := mb.Lookup(ctx, string(d.ReplyTo))
		if err != nil {
			return err
		}
		if !ok {
			return src.Errorf("reply_to", "message %q is not in the mailbox", d.ReplyTo)
		}
		par = &adapters.Parent{}
		if par.Message, entry, err = mb.Message(ctx, id); err != nil {
			if entry == nil || entry.Direction != schema.Outbound {
				return err
			}
			if par.Draft, entry, err = mb.Draft(ctx, id); err != nil {
				return err
			}
		}
	}
	if d.Provider == "" {
		switch {
		case par != nil:
			d.Provider = entry.Provider
		default:
			d.Provider = set.guess(d.To)
		}
		if d.Provider == "" {
			return src.Errorf("provider", "cannot tell the provider: set provider (email, lark or slack)")
		}
	}
	if par != nil && entry.Provider != d.Provider {
		return src.Errorf("reply_to", "%s is a %s message; it cannot be answered over %s", d.ReplyTo, entry.Provider, d.Provider)
	}
	if par != nil {
		inheritFromParent(d, par.Message, entry)
	}
	if len(d.To) == 0 && par == nil {
		return src.Errorf("to", "draft has no recipient: set to, or reply_to to answer a message")
	}
	if !d.Provider.Valid() {
		return nil // not a provider at all: validation says so
	}
	p := set.get(d.Provider)
	if p == nil {
		return src.Errorf("provider", "provider %q has no adapter in Courier (implemented: %s)", d.Provider, set.names())
	}
	if err := p.Resolver.Resolve(d, par, adapters.ResolveOptions{Account: account}, src); err != nil {
		return err
	}
	if len(d.To) == 0 {
		return src.Errorf("to", "draft has no recipient: set to, or reply_to to answer a message")
	}
	return nil
}

// inheritFromParent gives a reply what it inherits whatever the provider:
// the parent's correlation id and thread, and, for an attachment given by
// id alone that the parent carries (a file sent back, forwarded on), that
// attachment's name and type.
func inheritFromParent(d *schema.Draft, m *schema.Message, entry *mailbox.Entry) {
	if m != nil {
		for i := range d.Artifacts {
			art := &d.Artifacts[i]
			for _, pa := range m.Artifacts {
				if art.ID != "" && art.ID == pa.ID && art.Name == "" {
					art.Name = pa.Name
					if art.MimeType == "" {
						art.MimeType = pa.MimeType
					}
				}
			}
		}
	}
	if d.CorrelationID == "" {
		d.CorrelationID = schema.NullString(entry.CorrelationID)
	}
	if d.ThreadKey == "" {
		d.ThreadKey = schema.NullString(entry.Session.ThreadKey)
	}
}

// names lists the providers, for messages.
func (s providerSet) names() string {
	names := make([]string, len(s))
	for i, p := range s {
		names[i] = string(p.Name)
	}
	return strings.Join(names, ", ")
}

// guess tells the provider from recipient ids when one provider
// recognises every one of them.
func (s providerSet) guess(to []string) schema.Provider {
	if len(to) == 0 {
		return ""
	}
	var found schema.Provider
	for _, p := range s {
		all := true
		for _, r := range to {
			if !p.Resolver.Recognizes(r) {
				all = false
				break
			}
		}
		if all {
			if found != "" {
				return "" // two providers claim them: the draft must say
			}
			found = p.Name
		}
	}
	return found
}

// resolveArtifacts copies artifacts given by local path into the dropzone
// and checks those given by id. A path must pass the attach policy
// (attach.go); the file copied is the one checked, still open. Every copy
// goes into one batch, committed only when every artifact is resolved:
// a refusal leaves nothing in the dropzone. fromFlag maps the index of an
// artifact that came from --attach to what the flag said, so that its
// error names the flag (a draft's name their field and line).
func (a *app) resolveArtifacts(d *schema.Draft, src *schema.Source, baseDir string, dryRun bool, fromFlag map[int]string) error {
	if len(d.Artifacts) == 0 {
		return nil
	}
	dz, err := a.dropzone()
	if err != nil {
		return err
	}
	policy, err := a.attachPolicy()
	if err != nil {
		return err
	}
	if baseDir, err = filepath.Abs(baseDir); err != nil {
		return err
	}
	batch := dz.NewBatch()
	committed := false
	defer func() {
		if !committed {
			batch.Abort()
		}
	}()
	for i := range d.Artifacts {
		art := &d.Artifacts[i]
		p := fmt.Sprintf("artifacts[%d]", i)
		refuse := func(format string, args ...any) error {
			if x, ok := fromFlag[i]; ok {
				return withCode(exitDataErr, fmt.Errorf("--attach %s: %s", x, fmt.Sprintf(format, args...)))
			}
			return src.Errorf(p+".path", format, args...)
		}
		if art.Path != "" {
			if err := a.copyArtifact(art, policy, baseDir, batch, dryRun, refuse); err != nil {
				return err
			}
		} else {
			obj, err := dz.Stat(art.ID)
			if err != nil {
				return src.Errorf(p+".id", "%s is not in the dropzone", art.ID)
			}
			art.Size = obj.Size
			if art.Name == "" {
				art.Name = strings.TrimPrefix(art.ID, "sha256:")[:12]
			}
		}
		if art.Type == "" {
			art.Type = schema.ArtifactTypeOf(art.MimeType, art.Name)
		}
	}
	if dryRun {
		return nil
	}
	committed = true
	return batch.Commit()
}

// copyArtifact opens the file an artifact's path names, if the policy
// allows it, and streams it into the batch (or only measures it, for a
// dry run).
func (a *app) copyArtifact(art *schema.DraftArtifact, policy *attachPolicy, baseDir string, batch *dropzone.Batch, dryRun bool, refuse func(string, ...any) error) error {
	f, err := policy.open(art.Path, baseDir)
	if err != nil {
		return refuse("%v", err)
	}
	defer f.Close()
	if art.Name == "" {
		art.Name = dropzone.SanitizeName(filepath.Base(f.abs))
	}
	size := f.info.Size()
	if max := a.cfg.Courier.Limits.MaxArtifactBytes; max > 0 && size > max {
		return refuse("%s is %d bytes, over the artifact limit of %d (courier.limits.max_artifact_bytes)", art.Path, size, max)
	}
	if art.MimeType == "" {
		art.MimeType = sniffType(f.File, art.Name)
	}
	if dryRun {
		art.Size = size
		return nil
	}
	obj, err := batch.Put(f)
	if err != nil {
		if errors.Is(err, dropzone.ErrTooLarge) {
			return refuse("%s: %v", art.Path, err)
		}
		return err
	}
	art.ID, art.Size, art.Path = obj.ID, obj.Size, ""
	return nil
}

// sniffType names the type of an attachment by its name, else by its
// first bytes, read at their offset so that the copy still starts at 0.
func sniffType(f *os.File, name string) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	buf := make([]byte, 512)
	n, _ := f.ReadAt(buf, 0)
	return http.DetectContentType(buf[:n])
}

// newID returns a random UUID without dashes, for ids and Message-IDs.
func newID() string { return strings.ReplaceAll(uuid.NewString(), "-", "") }
