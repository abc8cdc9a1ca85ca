package schema

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// DraftType is the content type of an outbound draft (protocol §5.1).
type DraftType string

// Draft types.
const (
	DraftText     DraftType = "text"
	DraftMarkdown DraftType = "markdown"
	DraftHTML     DraftType = "html"
	DraftCard     DraftType = "card"
)

var draftTypes = []DraftType{DraftText, DraftMarkdown, DraftHTML, DraftCard}

// Recipients is a list of addresses or ids, written in a draft either as one
// string or as a list.
type Recipients []string

// UnmarshalYAML accepts a string, a list of strings, or null.
func (r *Recipients) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" || n.Value == "" {
			*r = nil
			return nil
		}
		*r = Recipients{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(Recipients, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode || c.ShortTag() == "!!null" {
				return typeError(c, "want a recipient string")
			}
			out = append(out, c.Value)
		}
		*r = out
		return nil
	}
	return typeError(n, "want a string or a list of strings")
}

// MarshalYAML writes one recipient as a string and several as a list.
func (r Recipients) MarshalYAML() (any, error) {
	if len(r) == 1 {
		return r[0], nil
	}
	return []string(r), nil
}

// DraftContent is the content of a draft. Card is a Lark or Slack card.
type DraftContent struct {
	Text     NullString     `yaml:"text,omitempty" json:"text"`
	Markdown NullString     `yaml:"markdown,omitempty" json:"markdown"`
	HTML     NullString     `yaml:"html,omitempty" json:"html"`
	Card     map[string]any `yaml:"card,omitempty" json:"card,omitempty"`
}

// IsZero reports whether the content is empty.
func (c DraftContent) IsZero() bool {
	return c.Text == "" && c.Markdown == "" && c.HTML == "" && len(c.Card) == 0
}

// DraftArtifact is an attachment of a draft: either a dropzone id, or a
// local path that `courier send` copies into the dropzone and replaces with
// the id.
type DraftArtifact struct {
	ID        string       `yaml:"id,omitempty" json:"id,omitempty"`
	Name      string       `yaml:"name,omitempty" json:"name,omitempty"`
	Path      string       `yaml:"path,omitempty" json:"path,omitempty"`
	Inline    bool         `yaml:"inline,omitempty" json:"inline,omitempty"`
	MimeType  string       `yaml:"mime_type,omitempty" json:"mime_type,omitempty"`
	Size      int64        `yaml:"size,omitempty" json:"size,omitempty"`
	Type      ArtifactType `yaml:"type,omitempty" json:"type,omitempty"`
	ContentID string       `yaml:"content_id,omitempty" json:"content_id,omitempty"`
}

// Options of a draft.
type Options struct {
	Silent     bool  `yaml:"silent,omitempty" json:"silent,omitempty"`
	Urgent     bool  `yaml:"urgent,omitempty" json:"urgent,omitempty"`
	ScheduleAt *Time `yaml:"schedule_at,omitempty" json:"schedule_at,omitempty"`
}

// IsZero reports whether no option is set.
func (o Options) IsZero() bool { return !o.Silent && !o.Urgent && o.ScheduleAt == nil }

// EmailHeaders are the headers `courier send` fixes for an email when it
// queues it, so that every attempt sends the same message.
type EmailHeaders struct {
	From       string   `yaml:"from,omitempty" json:"from,omitempty"`
	Account    string   `yaml:"account,omitempty" json:"account,omitempty"`
	InReplyTo  string   `yaml:"in_reply_to,omitempty" json:"in_reply_to,omitempty"`
	References []string `yaml:"references,omitempty" json:"references,omitempty"`
}

// Delivery statuses.
const (
	DeliverySent   = "sent"
	DeliveryFailed = "failed"
)

// Delivery is the record of a draft's delivery, added when the draft is
// filed in archive/ (sent) or .deadletter/ (failed for good).
type Delivery struct {
	Status            string `yaml:"status" json:"status"`
	Attempts          int    `yaml:"attempts" json:"attempts"`
	SentAt            *Time  `yaml:"sent_at,omitempty" json:"sent_at,omitempty"`
	ProviderMessageID string `yaml:"provider_message_id,omitempty" json:"provider_message_id,omitempty"`
	// Channel is where the message went, for providers whose message ids
	// are unique only within a channel (Slack).
	Channel  string `yaml:"channel,omitempty" json:"channel,omitempty"`
	FailedAt *Time  `yaml:"failed_at,omitempty" json:"failed_at,omitempty"`
	Reason   Text   `yaml:"reason,omitempty" json:"reason,omitempty"`
	// Recipients holds per-recipient outcomes where the provider reports
	// them (SMTP).
	Recipients []RecipientResult `yaml:"recipients,omitempty" json:"recipients,omitempty"`
	// Approval is the decision a person took on a draft held for
	// approval: who approved it and when, or who rejected it, when and
	// why.
	Approval *Approval `yaml:"approval,omitempty" json:"approval,omitempty"`
}

// RecipientResult is the outcome for one recipient.
type RecipientResult struct {
	Address string `yaml:"address" json:"address"`
	Status  string `yaml:"status" json:"status"`
	Reply   Text   `yaml:"reply,omitempty" json:"reply,omitempty"`
}

// Draft is an outbound message (protocol §5.1) as an agent writes it and as
// Courier queues, delivers and files it. The fields after Options are set by
// Courier.
type Draft struct {
	ID            string          `yaml:"id,omitempty" json:"id,omitempty"`
	Provider      Provider        `yaml:"provider,omitempty" json:"provider,omitempty"`
	To            Recipients      `yaml:"to,omitempty" json:"to,omitempty"`
	Cc            Recipients      `yaml:"cc,omitempty" json:"cc,omitempty"`
	Bcc           Recipients      `yaml:"bcc,omitempty" json:"bcc,omitempty"`
	Subject       string          `yaml:"subject,omitempty" json:"subject,omitempty"`
	ReplyTo       NullString      `yaml:"reply_to,omitempty" json:"reply_to,omitempty"`
	ThreadKey     NullString      `yaml:"thread_key,omitempty" json:"thread_key,omitempty"`
	CorrelationID NullString      `yaml:"correlation_id,omitempty" json:"correlation_id,omitempty"`
	Type          DraftType       `yaml:"type,omitempty" json:"type,omitempty"`
	Content       DraftContent    `yaml:"content,omitempty" json:"content"`
	Artifacts     []DraftArtifact `yaml:"artifacts,omitempty" json:"artifacts,omitempty"`
	Options       Options         `yaml:"options,omitempty" json:"options"`

	// Status is accepted for compatibility with upstream drafts (pending).
	Status string `yaml:"status,omitempty" json:"status,omitempty"`
	// CreatedAt is when the draft was queued.
	CreatedAt *Time `yaml:"created_at,omitempty" json:"created_at,omitempty"`
	// Agent is who queued it.
	Agent string `yaml:"agent,omitempty" json:"agent,omitempty"`
	// IdempotencyKey is fixed at queue time and sent with every attempt:
	// the Message-ID of an email, the uuid of a Lark message; a Slack
	// post carries it in its metadata (Slack has no idempotent post).
	IdempotencyKey string `yaml:"idempotency_key,omitempty" json:"idempotency_key,omitempty"`
	// InboundID is the id this message has in the inbound id space when it
	// is seen coming back (an IMAP copy of mail we sent, Slack's echo of
	// our post): fixed at queue time when the provider can tell it (email:
	// from the Message-ID), else from the provider's receipt.
	InboundID string `yaml:"inbound_id,omitempty" json:"inbound_id,omitempty"`
	// Email holds the threading headers of an email, fixed at queue time.
	Email *EmailHeaders `yaml:"email,omitempty" json:"email,omitempty"`
	// Approval says a queued draft is held until a person approves it
	// (courier.outbound.approval).
	Approval *Approval `yaml:"approval,omitempty" json:"approval,omitempty"`
	// Delivery is set once the draft is delivered or given up on.
	Delivery *Delivery `yaml:"delivery,omitempty" json:"delivery,omitempty"`

	Body string `yaml:"-" json:"body,omitempty"`
}

// Recipients returns all of To, Cc and Bcc.
func (d *Draft) Recipients() []string {
	out := make([]string, 0, len(d.To)+len(d.Cc)+len(d.Bcc))
	out = append(out, d.To...)
	out = append(out, d.Cc...)
	return append(out, d.Bcc...)
}

// CheckRecipients refuses a draft whose to, cc and bcc together name more
// than max addresses (max <= 0: no bound), naming the fields, their counts
// and the key that sets max: a reply to a mail whose Reply-To lists 5,000
// addresses would otherwise mail them all. The error is at the largest
// field; src may be nil.
func (d *Draft) CheckRecipients(src *Source, max int) error {
	n := len(d.To) + len(d.Cc) + len(d.Bcc)
	if max <= 0 || n <= max {
		return nil
	}
	var parts []string
	field, most := "to", -1
	for _, f := range []struct {
		name string
		n    int
	}{{"to", len(d.To)}, {"cc", len(d.Cc)}, {"bcc", len(d.Bcc)}} {
		if f.n == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d", f.name, f.n))
		if f.n > most {
			field, most = f.name, f.n
		}
	}
	return src.Errorf(field, "%d recipients (%s), more than courier.outbound.max_recipients (%d) allows", n, strings.Join(parts, ", "), max)
}

// EffectiveType returns the draft's type, inferring it from the content when
// the draft names none.
func (d *Draft) EffectiveType() DraftType {
	if d.Type != "" {
		return d.Type
	}
	switch {
	case len(d.Content.Card) > 0:
		return DraftCard
	case d.Content.Markdown != "":
		return DraftMarkdown
	case d.Content.HTML != "" && d.Content.Text == "":
		return DraftHTML
	case d.Content.Text != "":
		return DraftText
	}
	return DraftMarkdown // the body is Markdown
}

// Markdown returns the Markdown of the draft: content.markdown, else the
// body.
func (d *Draft) Markdown() string {
	if d.Content.Markdown != "" {
		return string(d.Content.Markdown)
	}
	return d.Body
}

// Text returns the plain text of the draft: content.text, else the Markdown.
func (d *Draft) Text() string {
	if d.Content.Text != "" {
		return string(d.Content.Text)
	}
	return d.Markdown()
}
