package mailview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Form is one of the forms read shows a message or draft in.
type Form struct {
	Raw     bool // the file as it is on disk (read --raw)
	Content bool // only the body (read --content)
	JSON    bool // the entry as list gives it, with the message or draft (read --format json)
	// Terminal says the output is a terminal: Raw then shows control
	// characters as escapes (VisibleControls).
	Terminal bool
}

// Read writes the message or draft id to w in form (see Write).
func Read(ctx context.Context, mb *mailbox.Mailbox, w io.Writer, id string, form Form) error {
	f, e, err := mb.OpenFile(ctx, id)
	if err != nil {
		return err
	}
	defer f.Close()
	return Write(w, f, e, form)
}

// joinEntry encodes e as list does and then rest (an object) as one
// object, the entry's fields first: it returns "{...the entry's fields,"
// and "...rest's fields}\n", for the caller to write one after the other.
func joinEntry(e *mailbox.Entry, rest any) (head, tail []byte, err error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, nil, err
	}
	head = bytes.TrimSuffix(bytes.Clone(buf.Bytes()), []byte("\n"))
	head = append(head[:len(head)-1], ',')
	buf.Reset()
	if err := enc.Encode(rest); err != nil {
		return nil, nil, err
	}
	return head, buf.Bytes()[1:], nil
}

// writeWhole writes a file read whole in form.
func writeWhole(w io.Writer, data []byte, e *mailbox.Entry, form Form) error {
	if form.Raw {
		if form.Terminal {
			data = VisibleControls(data) // see sanitize.go
		}
		_, err := w.Write(data)
		return err
	}
	var msg *schema.Message
	var draft *schema.Draft
	var err error
	if e.Direction == schema.Inbound {
		msg, err = schema.Decode(data)
	} else {
		draft, _, err = schema.DecodeDraft(data)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if form.Content {
		body := ""
		if msg != nil {
			body = msg.Body
		} else {
			body = draft.Body
			if body == "" {
				body = draft.Text()
			}
		}
		_, err := io.WriteString(w, SafeText(body))
		return err
	}
	if form.JSON {
		// The entry as list prints it, with the file's content added.
		head, tail, err := joinEntry(e, struct {
			Message *schema.Message `json:"message,omitempty"`
			Draft   *schema.Draft   `json:"draft,omitempty"`
		}{msg, draft})
		if err != nil {
			return err
		}
		_, err = w.Write(JSONSafe(append(head, tail...)))
		return err
	}
	var b bytes.Buffer
	if msg != nil {
		writeMessage(&b, e, msg)
	} else {
		writeDraft(&b, e, draft)
	}
	_, err = io.WriteString(w, SafeText(b.String()))
	return err
}

func party(p schema.Participant) string {
	switch {
	case p.Email != "" && p.Name != "" && p.Name != p.Email:
		return fmt.Sprintf("%s <%s>", p.Name, p.Email)
	case p.Email != "":
		return p.Email
	case p.Name != "" && p.Name != p.ID:
		return fmt.Sprintf("%s (%s)", p.Name, p.ID)
	}
	return p.ID
}

func parties(ps []schema.Participant) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = party(p)
	}
	return strings.Join(out, ", ")
}

// Rule is the line under which read shows a message's body.
const Rule = "────────────────────────────────────────────────────────────"

func field(b *bytes.Buffer, name, value string) {
	if value != "" {
		fmt.Fprintf(b, "%-13s %s\n", name+":", value)
	}
}

func when(t time.Time) string {
	s := t.UTC().Format("2006-01-02 15:04:05 UTC")
	if d := time.Since(t); d >= 0 && d < 7*24*time.Hour {
		s += " (" + Ago(time.Now(), t) + ")"
	}
	return s
}

func writeMessage(b *bytes.Buffer, e *mailbox.Entry, m *schema.Message) {
	writeMessageHead(b, e, m)
	b.WriteString(m.Body)
	if !strings.HasSuffix(m.Body, "\n") {
		b.WriteString("\n")
	}
}

// writeMessageHead writes what read shows above a message's body, through
// the rule under which the body follows.
func writeMessageHead(b *bytes.Buffer, e *mailbox.Entry, m *schema.Message) {
	field(b, "Message", m.ID)
	field(b, "Provider", string(m.Provider))
	field(b, "Status", string(e.Status))
	if e.ClaimedBy != "" {
		field(b, "Claimed by", fmt.Sprintf("%s until %s", e.ClaimedBy, e.ClaimExpiresAt.UTC().Format(time.RFC3339)))
	}
	if e.FailReason != "" {
		field(b, "Failed", fmt.Sprintf("%d time(s): %s", e.Failures, e.FailReason))
	}
	field(b, "From", party(m.Participants.From))
	to := parties(m.Participants.To)
	if to == "" && m.Session.Name != "" {
		to = fmt.Sprintf("%s (%s)", m.Session.Name, m.Session.ID)
	}
	field(b, "To", to)
	field(b, "Cc", parties(m.Participants.Cc))
	// A conversation that is its thread (an email thread) has a subject;
	// a chat's thread lives in a session that has a name and a type.
	if m.Session.ID != "" && m.Session.ID == string(m.Session.ThreadKey) {
		field(b, "Subject", m.Session.Name)
	} else {
		field(b, "Session", fmt.Sprintf("%s (%s, %s)", m.Session.ID, m.Session.Type, m.Session.Name))
	}
	field(b, "Time", when(m.Timestamp.Time))
	field(b, "Type", string(m.Type))
	field(b, "Thread", string(m.Session.ThreadKey))
	field(b, "Reply to", string(m.ReplyTo))
	field(b, "Correlation", string(m.CorrelationID))
	if m.ProcessedAt != nil {
		field(b, "Processed", when(m.ProcessedAt.Time))
	}
	if len(m.Participants.Mentions) > 0 {
		var ms []string
		for _, mn := range m.Participants.Mentions {
			ms = append(ms, fmt.Sprintf("@%s (%s)", mn.Name, mn.Target))
		}
		field(b, "Mentions", strings.Join(ms, ", "))
	}
	for i, art := range m.Artifacts {
		label := ""
		if i == 0 {
			label = "Artifacts"
		}
		fmt.Fprintf(b, "%-13s %s (%s, %s) .monoco/dropzone/%s\n", label+":", art.Name, art.Type, size(art.Size), art.Path)
	}
	field(b, "File", e.Path)
	b.WriteString(Rule + "\n")
}

func writeDraft(b *bytes.Buffer, e *mailbox.Entry, d *schema.Draft) {
	field(b, "Draft", d.ID)
	field(b, "Provider", string(d.Provider))
	field(b, "Status", string(e.Status))
	field(b, "To", strings.Join(d.To, ", "))
	field(b, "Cc", strings.Join(d.Cc, ", "))
	field(b, "Subject", d.Subject)
	field(b, "Reply to", string(d.ReplyTo))
	field(b, "Correlation", string(d.CorrelationID))
	if d.CreatedAt != nil {
		field(b, "Queued", when(d.CreatedAt.Time))
	}
	if d.Options.ScheduleAt != nil {
		field(b, "Scheduled", when(d.Options.ScheduleAt.Time))
	}
	if dl := d.Delivery; dl != nil {
		s := fmt.Sprintf("%s after %d attempt(s)", dl.Status, dl.Attempts)
		if dl.ProviderMessageID != "" {
			s += ", provider id " + dl.ProviderMessageID
		}
		if dl.Reason != "" {
			s += ": " + string(dl.Reason)
		}
		field(b, "Delivery", s)
	}
	for i, art := range d.Artifacts {
		label := ""
		if i == 0 {
			label = "Artifacts"
		}
		fmt.Fprintf(b, "%-13s %s (%s) %s\n", label+":", art.Name, size(art.Size), art.ID)
	}
	field(b, "File", e.Path)
	b.WriteString(Rule + "\n")
	body := d.Body
	if strings.TrimSpace(body) == "" {
		body = d.Text()
	}
	b.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		b.WriteString("\n")
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Ago prints a time relative to now, as upstream's table does.
func Ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return t.UTC().Format("2006-01-02 15:04")
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	case d < 7*24*time.Hour:
		return fmt.Sprintf("%d d ago", int(d.Hours()/24))
	}
	return t.UTC().Format("2006-01-02")
}
