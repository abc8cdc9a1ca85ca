package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Flags are send's options (`courier send --provider ... --to ...`, the
// send tool's fields), which win over the draft's own fields.
type Flags struct {
	Provider, Subject, Text, ReplyTo, Correlation, Account string
	To, Cc, Bcc                                            []string
	// Attach are the --attach values: a dropzone object by id
	// (sha256:...), or a file by path, relative to the current folder.
	Attach []string
	DryRun bool
}

// flagsOf are the flags of a request the service received.
func flagsOf(req *agentapi.SendRequest) Flags {
	return Flags{Provider: req.Provider, To: req.To, Cc: req.Cc, Bcc: req.Bcc, Subject: req.Subject, Text: req.Text,
		ReplyTo: req.ReplyTo, Correlation: req.Correlation, Account: req.Account, DryRun: req.DryRun}
}

// parseDraft reads a draft as send takes it: the file data (nil in quick
// mode, which text alone makes), named name in errors, with text as its
// content if it has none.
func parseDraft(name string, data []byte, text string, limits confkit.Limits) (*schema.Draft, *schema.Source, error) {
	if data == nil {
		if int64(len(text)) > limits.MaxDraftBytes {
			return nil, nil, fault.Errorf(fault.Invalid, "--text is %d bytes, over the limit of %d (courier.limits.max_draft_bytes)", len(text), limits.MaxDraftBytes)
		}
		return &schema.Draft{Content: schema.DraftContent{Text: schema.NullString(text)}}, nil, nil
	}
	if int64(len(data)) > limits.MaxDraftBytes {
		return nil, nil, fault.Errorf(fault.Invalid, "%s: draft is over the size limit of %d bytes (courier.limits.max_draft_bytes); attach large content as an artifact", name, limits.MaxDraftBytes)
	}
	d, src, err := schema.ParseDraft(data)
	if err != nil {
		return nil, nil, withFile(err, name)
	}
	if text != "" {
		if !d.Content.IsZero() || strings.TrimSpace(d.Body) != "" {
			return nil, nil, fault.Errorf(fault.Usage, "--text and a draft with content: give one")
		}
		d.Content.Text = schema.NullString(text)
	}
	return d, src, nil
}

// applyFlags gives the flags precedence over the draft's fields (--attach
// aside, which names files).
func applyFlags(d *schema.Draft, f Flags) {
	if f.Provider != "" {
		d.Provider = schema.Provider(f.Provider)
	}
	if len(f.To) > 0 {
		d.To = f.To
	}
	if len(f.Cc) > 0 {
		d.Cc = f.Cc
	}
	if len(f.Bcc) > 0 {
		d.Bcc = f.Bcc
	}
	if f.Subject != "" {
		d.Subject = f.Subject
	}
	if f.ReplyTo != "" {
		d.ReplyTo = schema.NullString(f.ReplyTo)
	}
	if f.Correlation != "" {
		d.CorrelationID = schema.NullString(f.Correlation)
	}
}

// withFile names the draft's file in its field errors.
func withFile(err error, name string) error {
	var errs schema.Errors
	if errors.As(err, &errs) {
		return errs.WithFile(name)
	}
	return err
}

// ResolveDraft fills in what the draft leaves to Courier (DESIGN §6): the
// provider (from the message answered, else from the recipients), what a
// reply inherits whatever the provider (inheritFromParent), then what the
// provider's Resolver derives: recipients, its own fields, the idempotency
// key. account is send's --account. A draft with more recipients than
// maxRcpt (courier.outbound.max_recipients), those derived from the
// message answered included, is refused.
func ResolveDraft(ctx context.Context, mb *mailbox.Mailbox, set providers.Set, d *schema.Draft, src *schema.Source, account string, maxRcpt int) error {
	par, entry, err := parentOf(ctx, mb, d, src)
	if err != nil {
		return err
	}
	if d.Provider == "" {
		switch {
		case par != nil:
			d.Provider = entry.Provider
		default:
			d.Provider = set.Guess(d.To)
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
	p := set.Get(d.Provider)
	if p == nil {
		return src.Errorf("provider", "provider %q has no adapter in Courier (implemented: %s)", d.Provider, set.Names())
	}
	if err := p.Resolver.Resolve(d, par, adapters.ResolveOptions{Account: account}, src); err != nil {
		return err
	}
	if len(d.To) == 0 {
		return src.Errorf("to", "draft has no recipient: set to, or reply_to to answer a message")
	}
	return d.CheckRecipients(src, maxRcpt)
}

// parentOf reads the message (or draft) a draft's reply_to names; nil for
// a draft that answers none.
func parentOf(ctx context.Context, mb *mailbox.Mailbox, d *schema.Draft, src *schema.Source) (*adapters.Parent, *mailbox.Entry, error) {
	if d.ReplyTo == "" {
		return nil, nil, nil
	}
	id, ok, err := mb.Lookup(ctx, string(d.ReplyTo))
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, src.Errorf("reply_to", "message %q is not in the mailbox", d.ReplyTo)
	}
	par := &adapters.Parent{}
	var entry *mailbox.Entry
	if par.Message, entry, err = mb.Message(ctx, id); err != nil {
		if entry == nil || entry.Direction != schema.Outbound {
			return nil, nil, err
		}
		if par.Draft, entry, err = mb.Draft(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	return par, entry, nil
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
	sum := map[string]any{"success": true, "id": d.ID, "provider": d.Provider, "path": res.Path,
		"to": d.To, "correlation_id": d.CorrelationID, "schedule_at": d.Options.ScheduleAt}
	if d.Awaiting() && !dryRun {
		sum["awaiting_approval"] = true // held by courier.outbound.approval
	}
	res.Summary, err = json.Marshal(sum)
	return res, err
}

// SentJSON is what `courier send --format json` prints of what send did
// (the send tool's result too): the queued draft's summary, or for a dry
// run the draft, on one line.
func SentJSON(res *agentapi.SendResult) ([]byte, error) {
	if !res.DryRun {
		return append(bytes.Clone(res.Summary), '\n'), nil
	}
	var b bytes.Buffer
	err := json.NewEncoder(&b).Encode(struct {
		DryRun bool            `json:"dry_run"`
		Draft  json.RawMessage `json:"draft"`
	}{true, res.Draft})
	return b.Bytes(), err
}

// newID returns a random UUID without dashes, for ids and Message-IDs.
func newID() string { return strings.ReplaceAll(uuid.NewString(), "-", "") }
