package email

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// DropzonePrefix is the workspace-relative directory of the dropzone: the
// Markdown of an email links its inline images as DropzonePrefix + the
// artifact's path, so that an agent reading the file from the workspace
// root finds them.
const DropzonePrefix = ".monoco/dropzone/"

// NormalizeOptions says where a message came from.
type NormalizeOptions struct {
	// Account is metadata.extra.account ("" for the embedded receiver).
	Account string
	// Folder is metadata.extra.folder: the IMAP folder, or "receiver".
	Folder string
	// Own holds the account's own addresses, left out of the external
	// participants.
	Own []string
	// ReceivedAt is when Courier got the message (IMAP INTERNALDATE or the
	// time of receipt). The zero time means now.
	ReceivedAt time.Time
	// UID and UIDValidity are the message's IMAP position; 0 for the
	// receiver.
	UID, UIDValidity uint32
	// MaxArtifact is the largest artifact kept, in bytes (0: no limit). A
	// part over it is skipped and noted in parse_error; the message is not
	// failed.
	MaxArtifact int64
}

// Normalize reads one raw RFC 5322 message from r and returns it as a
// protocol message. The caller has already streamed the raw bytes into b as
// rawObj (metadata.extra.raw references it; a zero rawObj leaves raw out).
// Attachments and inline parts are streamed into b, never held whole in
// memory; the caller commits b before writing the message.
//
// Normalize does not fail on bad input: whatever cannot be parsed is noted
// in metadata.extra.parse_error and a best-effort message is returned, which
// passes (*schema.Message).Validate. Only I/O errors (reading r, writing the
// dropzone) are returned.
func Normalize(r io.Reader, b *dropzone.Batch, rawObj dropzone.Object, opts NormalizeOptions) (*schema.Message, error) {
	var (
		id     string
		hasher *bodyHash
	)
	msg, err := mime.Read(r, b, mime.Options{
		MaxArtifact: opts.MaxArtifact,
		BodyTee: func(h mime.Header) io.Writer {
			id = threading.EmailID(string(h.Get("Message-Id")))
			if id != "" {
				return nil
			}
			// No usable Message-ID: the id is a hash of From, Date,
			// Subject and the body, which is read through the hash as it
			// is parsed.
			hasher = newBodyHash(string(h.Get("From")), string(h.Get("Date")), string(h.Get("Subject")))
			return hasher
		},
	})
	if err != nil {
		return nil, err
	}
	var synthetic string
	if hasher != nil {
		synthetic = hasher.uid()
	}
	return build(msg.Header, msg.Decoder, msg.Body, msg.Artifacts, msg.Notes, id, synthetic, rawObj, opts), nil
}

// build assembles the message once the body is read.
func build(h mime.Header, d *mime.Decoder, col *mime.Body, drafts []mime.Artifact, n *mime.Notes, id, synthetic string, rawObj dropzone.Object, opts NormalizeOptions) *schema.Message {
	c := func(s, what string) string { return mime.CleanText(s, what, n) }

	m := &schema.Message{
		Provider:  schema.Email,
		Direction: schema.Inbound,
		Metadata: schema.Metadata{
			SchemaVersion:   schema.SchemaVersion,
			ProtocolVersion: schema.ProtocolVersion,
		},
	}
	x := &m.Metadata.Extra
	x.Account, x.Folder = c(opts.Account, "account"), c(opts.Folder, "folder")
	x.UID, x.UIDValidity = opts.UID, opts.UIDValidity

	// Identity and thread (DESIGN §2, §3; seed 003).
	th := threading.Headers{
		MessageID:  string(h.Get("Message-Id")),
		InReplyTo:  string(h.Get("In-Reply-To")),
		References: string(joinValues(h.All("References"), " ")),
	}
	thread := threading.EmailThread(th, synthetic)
	if id == "" {
		id = "email_" + synthetic
		x.SyntheticID = true
		if !h.Has("Message-Id") {
			n.Addf("no Message-ID: id made from From, Date, Subject and body")
		} else {
			n.Addf("Message-ID %s not usable: id made from From, Date, Subject and body", mime.QuoteShort(th.MessageID))
		}
	}
	m.ID = id
	subject := c(d.Text(h.Get("Subject"), "Subject"), "Subject")
	key := c(thread.Key, "thread key")
	m.Session = schema.Session{ID: key, Type: schema.Thread, Name: subject, ThreadKey: schema.NullString(key)}
	m.ReplyTo = schema.NullString(thread.ReplyToID())
	m.ThreadRoot = schema.NullString(thread.RootID())

	// Participants.
	list := func(key string) []mime.Address {
		v := joinValues(h.All(key), ", ")
		as := d.AddressList(v, key)
		for i := range as {
			as[i].Name = c(as[i].Name, key)
			as[i].Addr = c(as[i].Addr, key)
		}
		return as
	}
	from, replyTo, to, cc, bcc := list("From"), list("Reply-To"), list("To"), list("Cc"), list("Bcc")
	if !hasAddr(from) {
		if sender := list("Sender"); hasAddr(sender) {
			n.Addf("no From address: the Sender is the sender")
			from = sender
		}
	}
	m.Participants = schema.Participants{
		From:     sender(from, n),
		To:       participants(to),
		Cc:       participants(cc),
		Bcc:      participants(bcc),
		Mentions: []schema.Mention{},
	}
	set := threading.Participants(threadingAddrs(from), threadingAddrs(replyTo), threadingAddrs(to), threadingAddrs(cc), threadingAddrs(bcc), opts.Own)
	x.ExternalParticipants = set.External
	eligible := set.PersonalEligible
	x.PersonalEligible = &eligible

	// Times.
	received := opts.ReceivedAt
	rawDate := c(d.Raw(h.Get("Date"), "Date"), "Date")
	date, ok := mime.ParseDate(rawDate)
	switch {
	case ok:
	case !h.Has("Date"):
		n.Addf("no Date: timestamp is the time received")
	default:
		n.Addf("Date %s not understood: timestamp is the time received", mime.QuoteShort(rawDate))
	}
	if received.IsZero() {
		received = time.Now()
	}
	if !ok {
		date = received
	}
	m.Timestamp = schema.NewTime(date)
	m.ReceivedAt = schema.NewTime(received)

	// Artifacts, then content (the Markdown links inline images).
	paths := map[string]string{}
	for _, dr := range drafts {
		a := artifactOf(&dr, d)
		if dr.ContentID != "" {
			a.ContentID = c(dr.ContentID, "Content-ID")
			if dr.Inline {
				p := DropzonePrefix + a.Path
				paths[a.ContentID] = p
				if _, ok := paths[strings.ToLower(a.ContentID)]; !ok {
					paths[strings.ToLower(a.ContentID)] = p
				}
			}
		}
		m.Artifacts = append(m.Artifacts, a)
	}
	if m.Artifacts == nil {
		m.Artifacts = []schema.Artifact{}
	}
	r := mime.NewRenderer(d, paths)
	text := c(strings.Join(r.Texts(col), "\n"), "content.text")
	html := c(strings.Join(r.HTMLs(col), "\n"), "content.html")
	if strings.TrimSpace(text) == "" {
		text = ""
	}
	if strings.TrimSpace(html) == "" {
		html = ""
	}
	var md string
	if html != "" {
		md = c(strings.Join(r.Markdown(col), "\n\n"), "content.markdown")
	}
	m.Content = schema.Content{Text: schema.NullString(text), HTML: schema.NullString(html), Markdown: schema.NullString(md)}
	switch {
	case md != "":
		m.Body = md
	default:
		m.Body = text
	}
	if m.Body != "" && !strings.HasSuffix(m.Body, "\n") {
		m.Body += "\n"
	}
	m.Type = contentType(text != "" || html != "", m.Artifacts)

	// What a reader may need from the source.
	raw := map[string]any{}
	if h.Has("Message-Id") {
		raw["message_id"] = c(mime.OneLine(d.Raw(h.Get("Message-Id"), "Message-ID")), "Message-ID")
	}
	if h.Has("In-Reply-To") {
		raw["in_reply_to"] = c(mime.OneLine(d.Raw(h.Get("In-Reply-To"), "In-Reply-To")), "In-Reply-To")
	}
	if _, refs := threading.ReplyHeaders("", th.References, ""); len(refs) > 0 {
		for i := range refs {
			refs[i] = c(mime.OneLine(d.Raw([]byte(refs[i]), "References")), "References")
		}
		raw["references"] = refs
	}
	if h.Has("Subject") {
		raw["subject"] = subject
	}
	if h.Has("Date") {
		raw["date"] = rawDate
	}
	for _, f := range []struct {
		key  string
		list []mime.Address
	}{{"from", from}, {"to", to}, {"cc", cc}, {"reply_to", replyTo}} {
		hk := map[string]string{"from": "From", "to": "To", "cc": "Cc", "reply_to": "Reply-To"}[f.key]
		if !h.Has(hk) {
			continue
		}
		var ss []string
		for _, a := range f.list {
			ss = append(ss, a.String())
		}
		if len(ss) == 0 {
			if v := c(d.Text(joinValues(h.All(hk), ", "), hk), hk); v != "" {
				ss = []string{v} // "undisclosed-recipients:;" and the like
			}
		}
		if len(ss) > 0 {
			raw[f.key] = ss
		}
	}
	for _, f := range []struct{ key, mimeHeader string }{
		{"list_id", "List-Id"}, {"auto_submitted", "Auto-Submitted"}, {"precedence", "Precedence"},
		{"x_mailer", "X-Mailer"}, {"content_type", "Content-Type"},
	} {
		if h.Has(f.mimeHeader) {
			raw[f.key] = c(d.Text(h.Get(f.mimeHeader), f.mimeHeader), f.mimeHeader)
		}
	}
	m.Metadata.ProviderRaw = raw

	if rawObj.ID != "" {
		x.Raw = &schema.Artifact{
			ID: rawObj.ID, Name: "message.eml", Type: schema.ArtifactDocument,
			MimeType: "message/rfc822", Size: rawObj.Size, Path: rawObj.Path,
		}
	}
	x.ParseError = schema.Text(n.String())
	return m
}

// sender makes the From participant (from is the Sender when From has no
// address). A From without any address keeps what it has (a name becomes
// the id too); no From at all gives the participant {id: "unknown", name:
// "(no sender)"}, which validates and says plainly that nothing was there.
// Both are noted.
func sender(from []mime.Address, n *mime.Notes) schema.Participant {
	for _, a := range from {
		if strings.TrimSpace(a.Addr) != "" {
			return participant(a)
		}
	}
	if len(from) > 0 && strings.TrimSpace(from[0].Name) != "" {
		n.Addf("From has no address")
		name := strings.TrimSpace(from[0].Name)
		return schema.Participant{ID: strings.ToLower(name), Name: name}
	}
	n.Addf("no From")
	return schema.Participant{ID: "unknown", Name: "(no sender)"}
}

// participant maps an address: id is the address lowercased, name the
// display name or the address, email the address when it is one the
// protocol's JSON Schema accepts (not an IDN, no odd local part), and
// platform_id the address as written.
func participant(a mime.Address) schema.Participant {
	addr := strings.TrimSpace(a.Addr)
	p := schema.Participant{ID: strings.ToLower(addr), Name: strings.TrimSpace(a.Name), PlatformID: addr}
	if p.Name == "" {
		p.Name = addr
	}
	if schema.ValidEmail(addr) {
		p.Email = addr
	}
	return p
}

func hasAddr(list []mime.Address) bool {
	for _, a := range list {
		if strings.TrimSpace(a.Addr) != "" {
			return true
		}
	}
	return false
}

func participants(list []mime.Address) []schema.Participant {
	out := []schema.Participant{}
	for _, a := range list {
		if strings.TrimSpace(a.Addr) != "" {
			out = append(out, participant(a))
		}
	}
	return out
}

func threadingAddrs(list []mime.Address) []threading.Address {
	var out []threading.Address
	for _, a := range list {
		out = append(out, threading.Address{Name: a.Name, Email: a.Addr})
	}
	return out
}

// contentType is the message's type: text without artifacts; mixed with a
// body and artifacts; with artifacts only, image, audio or video for one
// artifact of that kind, else file.
func contentType(hasBody bool, arts []schema.Artifact) schema.ContentType {
	switch {
	case len(arts) == 0:
		return schema.TypeText
	case hasBody:
		return schema.TypeMixed
	case len(arts) == 1:
		switch arts[0].Type {
		case schema.ArtifactImage:
			return schema.TypeImage
		case schema.ArtifactAudio:
			return schema.TypeAudio
		case schema.ArtifactVideo:
			return schema.TypeVideo
		}
	}
	return schema.TypeFile
}

// artifactOf names a stored part and describes it.
func artifactOf(a *mime.Artifact, d *mime.Decoder) schema.Artifact {
	name := a.FileName(d)
	return schema.Artifact{
		ID:       a.Object.ID,
		Name:     name,
		Type:     schema.ArtifactTypeOf(a.Media, name),
		MimeType: a.Media,
		Size:     a.Object.Size,
		Path:     a.Object.Path,
		Inline:   a.Inline,
	}
}

func joinValues(vs [][]byte, sep string) []byte {
	switch len(vs) {
	case 0:
		return nil
	case 1:
		return vs[0]
	}
	var out []byte
	for i, v := range vs {
		if i > 0 {
			out = append(out, sep...)
		}
		out = append(out, v...)
	}
	return out
}

// bodyHash computes threading.SyntheticUID(from, date, subject, body) while
// the body streams by, without holding it. Line ends are hashed as LF, so a
// message gets the same id whether it was read with CRLF (IMAP, SMTP) or LF
// (a maildir or mbox file) line ends.
type bodyHash struct {
	h  hash.Hash
	cr bool // the last byte written was a '\r' not yet hashed
}

func newBodyHash(from, date, subject string) *bodyHash {
	b := &bodyHash{h: sha256.New()}
	for _, f := range []string{from, date, subject} {
		b.h.Write([]byte(f))
		b.h.Write([]byte{0})
	}
	return b
}

func (b *bodyHash) Write(p []byte) (int, error) {
	start := 0
	for i, c := range p {
		switch {
		case b.cr && c == '\n':
			b.cr = false
		case b.cr:
			b.h.Write([]byte{'\r'})
			b.cr = false
		}
		if c == '\r' {
			b.h.Write(p[start:i])
			start = i + 1
			b.cr = true
		}
	}
	b.h.Write(p[start:])
	return len(p), nil
}

func (b *bodyHash) uid() string {
	if b.cr {
		b.h.Write([]byte{'\r'})
		b.cr = false
	}
	return hex.EncodeToString(b.h.Sum(nil))[:20]
}
