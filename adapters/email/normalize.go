package email

import (
	"bytes"
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
	// Verifier establishes who sent the message (metadata.extra.auth); nil
	// uses NewVerifier(nil), without a cache shared between messages.
	Verifier *Verifier
	// Envelope is the SMTP envelope the receiver took the message with;
	// nil for IMAP.
	Envelope *schema.Envelope
	// Bounds bound the text a file keeps and how many messages normalise
	// at once; nil keeps DefaultMaxText and waits for no turn.
	Bounds *Bounds
	// Raw holds rawObj's bytes when the caller has them in memory (a
	// message small enough to be fetched whole): DKIM reads them there
	// rather than opening the stored copy again. nil: it opens rawObj.
	Raw []byte
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
		id             string
		digest, hasher *bodyHash
	)
	opts.Bounds.enter()
	defer opts.Bounds.leave()
	msg, err := mime.Read(r, b, mime.Options{
		MaxArtifact: opts.MaxArtifact,
		MaxHeld:     opts.Bounds.maxText(),
		Spool:       b.Spool,
		BodyTee: func(h mime.Header) io.Writer {
			digest = newDigest(h)
			id = threading.EmailID(string(h.Get("Message-Id")))
			if id != "" {
				return digest
			}
			// No usable Message-ID: the id is a hash of From, Date,
			// Subject and the body, which is read through the hash as it
			// is parsed.
			hasher = newBodyHash(string(h.Get("From")), string(h.Get("Date")), string(h.Get("Subject")))
			return io.MultiWriter(digest, hasher)
		},
	})
	if err != nil {
		return nil, err
	}
	defer msg.Close()
	var synthetic string
	if hasher != nil {
		synthetic = hasher.uid()
	}
	var sum string
	if digest != nil {
		sum = digest.digest()
	}
	// Sender authenticity reads the raw message again (DKIM signs its
	// bytes as they are): from the dropzone copy, when the caller stored
	// one.
	var open func() (io.ReadCloser, error)
	switch {
	case rawObj.ID != "" && opts.Raw != nil:
		open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(opts.Raw)), nil }
	case rawObj.ID != "":
		open = func() (io.ReadCloser, error) { return b.Open(rawObj) }
	}
	m, err := build(msg, b, id, synthetic, rawObj, open, opts)
	if m != nil {
		m.Metadata.Extra.Digest = sum
	}
	return m, err
}

// build assembles the protocol message once the reader is done, one part
// of the mapping (DESIGN §2–§4) at a time. The order of the steps is the
// order of the notes in parse_error. open reopens the raw message (nil
// when it was not stored); the only error is one reading it.
func build(msg *mime.Message, batch *dropzone.Batch, id, synthetic string, rawObj dropzone.Object, open func() (io.ReadCloser, error), opts NormalizeOptions) (*schema.Message, error) {
	b := &builder{h: msg.Header, d: msg.Decoder, n: msg.Notes, notes: &mime.Notes{}, m: newMessage()}
	b.origin(opts)
	th, subject := b.identity(id, synthetic)
	addrs := b.participants(opts.Own)
	if err := b.authenticate(opts.Verifier, open, opts.Envelope); err != nil {
		return nil, err
	}
	rawDate := b.times(opts.ReceivedAt)
	paths := b.artifacts(msg.Artifacts)
	if err := b.content(msg.Body, paths, batch, opts.Bounds.maxText(), opts.MaxArtifact); err != nil {
		return nil, err
	}
	b.m.Metadata.ProviderRaw = b.providerRaw(th, subject, rawDate, addrs)
	if err := b.listRests(batch, opts.MaxArtifact); err != nil {
		return nil, err
	}
	b.stripControls()
	b.finish(rawObj)
	return b.m, nil
}

// builder holds what the steps of build share: the reader's output and
// the message being built.
type builder struct {
	h mime.Header
	d *mime.Decoder
	n *mime.Notes
	// notes are what was missing and filled in (metadata.extra.notes),
	// apart from what could not be parsed (n, parse_error).
	notes *mime.Notes
	m     *schema.Message
	// from is the From field's address list as written (before the Sender
	// stands in for it), which sender verification aligns.
	from []mime.Address
	// rests are the lists cut at MaxListItems, for listRests to store.
	rests []listRest
}

// addressFields are the decoded address lists of the header.
type addressFields struct {
	from, replyTo, to, cc, bcc []mime.Address
}

// newMessage returns an inbound email message of the current schema and
// protocol versions, with nothing else set.
func newMessage() *schema.Message {
	return &schema.Message{
		Provider:  schema.Email,
		Direction: schema.Inbound,
		Metadata: schema.Metadata{
			SchemaVersion:   schema.SchemaVersion,
			ProtocolVersion: schema.ProtocolVersion,
		},
	}
}

// clean makes s fit the protocol (valid UTF-8, no NUL), noting as what.
func (b *builder) clean(s, what string) string { return mime.CleanText(s, what, b.n) }

// origin records where the message came from: account, folder, and its
// IMAP position.
func (b *builder) origin(opts NormalizeOptions) {
	x := &b.m.Metadata.Extra
	x.Account, x.Folder = b.clean(opts.Account, "account"), b.clean(opts.Folder, "folder")
	x.UID, x.UIDValidity = opts.UID, opts.UIDValidity
}

// identity sets the message's id, its session (the thread, named by the
// decoded Subject), reply_to and thread_root (DESIGN §2, §3; seed 003).
// id is threading.EmailID of the Message-ID, or "" when it has none that
// is usable: then the id is "email_" + synthetic, noted. It returns the
// threading headers and the subject, which provider_raw reports.
func (b *builder) identity(id, synthetic string) (threading.Headers, string) {
	h, m := b.h, b.m
	th := threading.Headers{
		MessageID:  string(h.Get("Message-Id")),
		InReplyTo:  string(h.Get("In-Reply-To")),
		References: string(joinValues(h.All("References"), " ")),
	}
	thread := threading.EmailThread(th, synthetic)
	if id == "" {
		id = "email_" + synthetic
		m.Metadata.Extra.SyntheticID = true
		if !h.Has("Message-Id") {
			b.notes.Addf("no Message-ID: id made from From, Date, Subject and body; %s", sameWithin)
		} else {
			b.n.Addf("Message-ID %s not usable: id made from From, Date, Subject and body; %s", mime.QuoteShort(th.MessageID), sameWithin)
		}
	}
	m.ID = id
	subject := b.clean(b.d.Text(h.Get("Subject"), "Subject"), "Subject")
	key := b.clean(thread.Key, "thread key")
	m.Session = schema.Session{ID: key, Type: schema.Thread, Name: subject, ThreadKey: schema.NullString(key)}
	m.ReplyTo = schema.NullString(thread.ReplyToID())
	m.ThreadRoot = schema.NullString(thread.RootID())
	return th, subject
}

// sameWithin is what the notes of a mail without a Message-ID say of its
// copies (adapters.Content, docs/email.md, "Email identity").
const sameWithin = "the same mail received again within receiver.dedupe_window is this message, later a new one"

// addressList decodes every field named key as one address list.
func (b *builder) addressList(key string) []mime.Address {
	v := joinValues(b.h.All(key), ", ")
	as := b.d.AddressList(v, key)
	for i := range as {
		as[i].Name = b.clean(as[i].Name, key)
		as[i].Addr = b.clean(as[i].Addr, key)
	}
	return as
}

// participants sets the participants (the Sender stands in for a From
// without an address) and the external participants less own, and
// returns the address lists, each cut at MaxListItems: the external
// participants and personal_eligible are those of the whole lists.
func (b *builder) participants(own []string) addressFields {
	a := addressFields{
		from: b.addressList("From"), replyTo: b.addressList("Reply-To"),
		to: b.addressList("To"), cc: b.addressList("Cc"), bcc: b.addressList("Bcc"),
	}
	b.from = a.from
	if !hasAddr(a.from) {
		if sender := b.addressList("Sender"); hasAddr(sender) {
			b.n.Addf("no From address: the Sender is the sender")
			a.from = sender
		}
	}
	set := threading.Participants(threadingAddrs(a.from), threadingAddrs(a.replyTo), threadingAddrs(a.to), threadingAddrs(a.cc), threadingAddrs(a.bcc), own)
	a = addressFields{
		from: b.cutAddresses("provider_raw.from", a.from), replyTo: b.cutAddresses("provider_raw.reply_to", a.replyTo),
		to: b.cutAddresses("participants.to", a.to), cc: b.cutAddresses("participants.cc", a.cc), bcc: b.cutAddresses("participants.bcc", a.bcc),
	}
	b.m.Participants = schema.Participants{
		From:     sender(a.from, b.n),
		To:       participants(a.to),
		Cc:       participants(a.cc),
		Bcc:      participants(a.bcc),
		Mentions: []schema.Mention{},
	}
	x := &b.m.Metadata.Extra
	x.ExternalParticipants = b.cutStrings("metadata.extra.external_participants", set.External, false)
	eligible := set.PersonalEligible
	x.PersonalEligible = &eligible
	return a
}

// times sets timestamp, the Date in UTC (the time received when it is
// missing or not understood, noted), and received_at (now when received is
// zero). It returns the Date as written, for provider_raw.
func (b *builder) times(received time.Time) string {
	rawDate := b.clean(b.d.Raw(b.h.Get("Date"), "Date"), "Date")
	date, ok := mime.ParseDate(rawDate)
	switch {
	case ok:
	case !b.h.Has("Date"):
		b.notes.Addf("no Date: timestamp is the time received")
	default:
		b.n.Addf("Date %s not understood: timestamp is the time received", mime.QuoteShort(rawDate))
	}
	if received.IsZero() {
		received = time.Now()
	}
	if !ok {
		date = received
	}
	b.m.Timestamp = schema.NewTime(date)
	b.m.ReceivedAt = schema.NewTime(received)
	return rawDate
}

// artifacts sets the artifacts, in the order the reader stored them, and
// returns the workspace paths of the inline ones by Content-ID (as
// written, and lowercased), for the Markdown's cid: links.
func (b *builder) artifacts(stored []mime.Artifact) map[string]string {
	paths := map[string]string{}
	for _, dr := range stored {
		a := artifactOf(&dr, b.d)
		if dr.ContentID != "" {
			a.ContentID = b.clean(dr.ContentID, "Content-ID")
			if dr.Inline {
				p := DropzonePrefix + a.Path
				paths[a.ContentID] = p
				if _, ok := paths[strings.ToLower(a.ContentID)]; !ok {
					paths[strings.ToLower(a.ContentID)] = p
				}
			}
		}
		b.m.Artifacts = append(b.m.Artifacts, a)
	}
	if b.m.Artifacts == nil {
		b.m.Artifacts = []schema.Artifact{}
	}
	return paths
}

// providerRaw returns metadata.provider_raw: what a reader may need from
// the source, each key only when the header has its field.
func (b *builder) providerRaw(th threading.Headers, subject, rawDate string, addrs addressFields) map[string]any {
	raw := map[string]any{}
	b.rawThreading(raw, th)
	if b.h.Has("Subject") {
		raw["subject"] = subject
	}
	if b.h.Has("Date") {
		raw["date"] = rawDate
	}
	b.rawAddresses(raw, addrs)
	b.rawFields(raw)
	return raw
}

// rawThreading reports message_id, in_reply_to and references, each id
// "<...>" as written.
func (b *builder) rawThreading(raw map[string]any, th threading.Headers) {
	h, d := b.h, b.d
	if h.Has("Message-Id") {
		raw["message_id"] = b.clean(mime.OneLine(d.Raw(h.Get("Message-Id"), "Message-ID")), "Message-ID")
	}
	if h.Has("In-Reply-To") {
		raw["in_reply_to"] = b.clean(mime.OneLine(d.Raw(h.Get("In-Reply-To"), "In-Reply-To")), "In-Reply-To")
	}
	if _, refs := threading.ReplyHeaders("", th.References, ""); len(refs) > 0 {
		refs = b.cutStrings("provider_raw.references", refs, true)
		for i := range refs {
			refs[i] = b.clean(mime.OneLine(d.Raw([]byte(refs[i]), "References")), "References")
		}
		raw["references"] = refs
	}
}

// rawAddresses reports from, to, cc and reply_to as "Name <addr>" strings;
// a list with no address keeps its text ("undisclosed-recipients:;").
func (b *builder) rawAddresses(raw map[string]any, addrs addressFields) {
	for _, f := range []struct {
		key  string
		list []mime.Address
	}{{"from", addrs.from}, {"to", addrs.to}, {"cc", addrs.cc}, {"reply_to", addrs.replyTo}} {
		hk := map[string]string{"from": "From", "to": "To", "cc": "Cc", "reply_to": "Reply-To"}[f.key]
		if !b.h.Has(hk) {
			continue
		}
		var ss []string
		for _, a := range f.list {
			ss = append(ss, a.String())
		}
		if len(ss) == 0 {
			if v := b.clean(b.d.Text(joinValues(b.h.All(hk), ", "), hk), hk); v != "" {
				ss = []string{v} // "undisclosed-recipients:;" and the like
			}
		}
		if len(ss) > 0 {
			raw[f.key] = ss
		}
	}
}

// rawFields reports list_id, auto_submitted, precedence, x_mailer and the
// top-level content_type, decoded, when the header has them.
func (b *builder) rawFields(raw map[string]any) {
	for _, f := range []struct{ key, mimeHeader string }{
		{"list_id", "List-Id"}, {"auto_submitted", "Auto-Submitted"}, {"precedence", "Precedence"},
		{"x_mailer", "X-Mailer"}, {"content_type", "Content-Type"},
	} {
		if b.h.Has(f.mimeHeader) {
			raw[f.key] = b.clean(b.d.Text(b.h.Get(f.mimeHeader), f.mimeHeader), f.mimeHeader)
		}
	}
}

// finish references the raw message (when the caller stored it) and
// writes the notes, all of them now: what could not be parsed to
// parse_error, what was missing and filled in to notes.
func (b *builder) finish(rawObj dropzone.Object) {
	x := &b.m.Metadata.Extra
	if rawObj.ID != "" {
		x.Raw = &schema.Artifact{
			ID: rawObj.ID, Name: "message.eml", Type: schema.ArtifactDocument,
			MimeType: "message/rfc822", Size: rawObj.Size, Path: rawObj.Path,
		}
	}
	x.ParseError = schema.Text(b.n.String())
	x.Notes = schema.Text(b.notes.String())
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
	n := len(p)
	if b.cr && len(p) > 0 {
		b.cr = false
		if p[0] != '\n' {
			b.h.Write(crByte)
		}
	}
	for {
		i := bytes.IndexByte(p, '\r')
		if i < 0 {
			b.h.Write(p)
			return n, nil
		}
		b.h.Write(p[:i])
		p = p[i+1:]
		if len(p) == 0 {
			b.cr = true // a '\n' may come with the next write
			return n, nil
		}
		if p[0] != '\n' {
			b.h.Write(crByte)
		}
	}
}

var crByte = []byte{'\r'}

// flush hashes a '\r' held back at the end: no '\n' came after it.
func (b *bodyHash) flush() {
	if b.cr {
		b.h.Write(crByte)
		b.cr = false
	}
}

func (b *bodyHash) uid() string {
	b.flush()
	return hex.EncodeToString(b.h.Sum(nil))[:20]
}
