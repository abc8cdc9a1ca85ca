package schema

import (
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// validator collects errors with the line of each field when the value came
// from a file.
type validator struct {
	lines *lineMap
	errs  Errors
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Line: v.lines.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) required(path, value string) bool {
	if strings.TrimSpace(value) == "" {
		v.errorf(path, "required field is missing or empty")
		return false
	}
	return true
}

func oneOf[T ~string](v *validator, path string, value T, allowed []T) {
	if value == "" {
		v.errorf(path, "required field is missing or empty")
		return
	}
	if !contains(allowed, value) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		v.errorf(path, "%s is not one of %s", quote(string(value)), strings.Join(names, ", "))
	}
}

// Validate checks m against the protocol: required fields, enums, id and
// address forms, and what Courier promises of every file it writes (UTC
// times, artifact ids and paths inside the dropzone). The error is Errors.
func (m *Message) Validate() error {
	if errs := m.validate(nil); len(errs) > 0 {
		return errs
	}
	return nil
}

func (m *Message) validate(lines *lineMap) Errors {
	v := &validator{lines: lines}
	if v.required("id", m.ID) {
		if !ValidID(m.ID) {
			v.errorf("id", "%s does not match {provider}_{uid} (^[a-z]+_[a-zA-Z0-9_-]+$)", quote(m.ID))
		} else if m.Provider != "" && !strings.HasPrefix(m.ID, string(m.Provider)+"_") {
			v.errorf("id", "%s does not start with the provider %q", quote(m.ID), m.Provider+"_")
		}
	}
	if m.Provider != "" && !m.Provider.Valid() {
		v.errorf("provider", "unknown provider %s (want one of %s)", quote(string(m.Provider)), providerList(Providers))
	} else if m.Provider == "" {
		v.errorf("provider", "required field is missing or empty")
	}
	oneOf(v, "direction", m.Direction, []Direction{Inbound, Outbound})
	v.required("session.id", m.Session.ID)
	oneOf(v, "session.type", m.Session.Type, []SessionType{Direct, Group, Thread})
	v.participant("participants.from", m.Participants.From)
	for i, p := range m.Participants.To {
		v.participant(fmt.Sprintf("participants.to[%d]", i), p)
	}
	for i, p := range m.Participants.Cc {
		v.participant(fmt.Sprintf("participants.cc[%d]", i), p)
	}
	for i, p := range m.Participants.Bcc {
		v.participant(fmt.Sprintf("participants.bcc[%d]", i), p)
	}
	for i, mn := range m.Participants.Mentions {
		p := fmt.Sprintf("participants.mentions[%d]", i)
		oneOf(v, p+".type", mn.Type, mentionTypes)
		v.required(p+".target", mn.Target)
		if mn.Offset != nil && *mn.Offset < 0 {
			v.errorf(p+".offset", "must not be negative")
		}
	}
	if m.Timestamp.IsZero() {
		v.errorf("timestamp", "required field is missing or empty")
	}
	if m.ReceivedAt.IsZero() {
		v.errorf("received_at", "required field is missing or empty")
	}
	oneOf(v, "type", m.Type, contentTypes)
	for i, a := range m.Artifacts {
		v.artifact(fmt.Sprintf("artifacts[%d]", i), a)
	}
	if strings.ContainsRune(m.Body, 0) || !utf8.ValidString(m.Body) {
		v.errorf("body", "the body is written as it is and must be UTF-8 without NUL bytes")
	}
	if m.Metadata.Extra.Raw != nil {
		v.artifact("metadata.extra.raw", *m.Metadata.Extra.Raw)
	}
	for _, f := range []struct {
		path string
		val  NullString
	}{{"correlation_id", m.CorrelationID}, {"reply_to", m.ReplyTo}, {"thread_root", m.ThreadRoot}} {
		if f.path != "correlation_id" && f.val != "" && !ValidID(string(f.val)) {
			v.errorf(f.path, "%s is not a message id ({provider}_{uid})", quote(string(f.val)))
		}
		if hasControl(string(f.val)) {
			v.errorf(f.path, "contains a control character")
		}
	}
	return v.errs
}

func (v *validator) participant(path string, p Participant) {
	v.required(path+".id", p.ID)
	v.required(path+".name", p.Name)
	if p.Email != "" && !ValidEmail(p.Email) {
		v.errorf(path+".email", "%s is not an email address", quote(p.Email))
	}
	if p.Role != "" && !contains(roles, p.Role) {
		v.errorf(path+".role", "%s is not one of owner, admin, member, guest, external", quote(string(p.Role)))
	}
	if p.Avatar != "" && !validURI(p.Avatar) {
		v.errorf(path+".avatar", "%s is not an absolute URI", quote(p.Avatar))
	}
}

var artifactIDRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidArtifactID reports whether id has the form sha256:<64 lowercase hex>.
func ValidArtifactID(id string) bool { return artifactIDRE.MatchString(id) }

func (v *validator) artifact(path string, a Artifact) {
	// The protocol allows a SHA-256 or a UUID here; Courier writes
	// sha256:<hex>, but a file from elsewhere may hold either.
	if v.required(path+".id", a.ID) && hasControl(a.ID) {
		v.errorf(path+".id", "contains a control character")
	}
	if v.required(path+".name", a.Name) {
		if msg := BadName(a.Name); msg != "" {
			v.errorf(path+".name", "%s", msg)
		}
	}
	oneOf(v, path+".type", a.Type, artifactTypes)
	if a.Size < 0 {
		v.errorf(path+".size", "must not be negative")
	}
	if a.Path != "" {
		if msg := BadRelPath(a.Path); msg != "" {
			v.errorf(path+".path", "%s", msg)
		}
	}
}

// Validate checks a draft on its own terms: the provider if named, the type,
// recipients (unless reply_to will supply them), content, artifacts and
// header safety. src, from DecodeDraft, gives errors their lines; it may be
// nil. The error is Errors.
func (d *Draft) Validate(src *Source) error {
	var lines *lineMap
	if src != nil {
		lines = src.lines
	}
	v := &validator{lines: lines}
	if d.ID != "" && !ValidID(d.ID) {
		v.errorf("id", "%s does not match {provider}_{uid}", quote(d.ID))
	}
	// Whether Courier has an adapter for the provider is the service's
	// to say (its provider table), not the format's.
	if d.Provider != "" && !d.Provider.Valid() {
		v.errorf("provider", "unknown provider %s (want one of %s)", quote(string(d.Provider)), providerList(Implemented))
	}
	if d.Type != "" {
		oneOf(v, "type", d.Type, draftTypes)
	}
	if d.Type == DraftCard && len(d.Content.Card) == 0 {
		v.errorf("content.card", "type is card but content.card is empty")
	}
	if len(d.Content.Card) > 0 && d.Provider == Email {
		v.errorf("content.card", "cards are for lark and slack, not email")
	}
	if d.Content.IsZero() && strings.TrimSpace(d.Body) == "" && len(d.Artifacts) == 0 {
		v.errorf("content", "draft has no content: write a body under the front matter, or set content.text, content.markdown, content.html or content.card")
	}
	if len(d.To) == 0 && d.ReplyTo == "" {
		v.errorf("to", "draft has no recipient: set to, or reply_to to answer a message")
	}
	v.recipients(d)
	if hasControl(d.Subject) {
		v.errorf("subject", "subject contains a line break or control character")
	}
	if d.ReplyTo != "" && !ValidID(string(d.ReplyTo)) {
		v.errorf("reply_to", "%s is not a message id ({provider}_{uid})", quote(string(d.ReplyTo)))
	}
	if hasControl(string(d.ThreadKey)) || hasControl(string(d.CorrelationID)) {
		v.errorf("thread_key", "contains a control character")
	}
	for i, a := range d.Artifacts {
		v.draftArtifact(fmt.Sprintf("artifacts[%d]", i), a)
	}
	if d.Delivery != nil && d.Delivery.Status != DeliverySent && d.Delivery.Status != DeliveryFailed {
		v.errorf("delivery.status", "%s is not one of sent, failed", quote(d.Delivery.Status))
	}
	v.approval("approval", d.Approval)
	if d.Delivery != nil {
		v.approval("delivery.approval", d.Delivery.Approval)
	}
	if len(v.errs) > 0 {
		return v.errs.sorted()
	}
	return nil
}

// recipients checks a draft's to, cc and bcc: cc and bcc are for email
// only; a recipient is not empty, has no control character, and is an
// address for email.
func (v *validator) recipients(d *Draft) {
	for _, list := range []struct {
		name string
		r    Recipients
	}{{"to", d.To}, {"cc", d.Cc}, {"bcc", d.Bcc}} {
		if (list.name == "cc" || list.name == "bcc") && len(list.r) > 0 && d.Provider != "" && d.Provider != Email {
			v.errorf(list.name, "%s is for email only; %s has no such field", list.name, d.Provider)
		}
		for i, r := range list.r {
			p := list.name
			if len(list.r) > 1 {
				p = fmt.Sprintf("%s[%d]", list.name, i)
			}
			switch {
			case strings.TrimSpace(r) == "":
				v.errorf(p, "empty recipient")
			case hasControl(r):
				v.errorf(p, "recipient contains a control character")
			case d.Provider == Email:
				if _, err := mail.ParseAddress(r); err != nil {
					v.errorf(p, "%s is not an email address", quote(r))
				}
			}
		}
	}
}

// draftArtifact checks a draft's artifact at path: an id (a dropzone
// object) or a local path, one of them, and the name and type if given.
func (v *validator) draftArtifact(p string, a DraftArtifact) {
	switch {
	case a.ID == "" && a.Path == "":
		v.errorf(p, "artifact needs an id (sha256:...) or a path to a local file")
	case a.ID != "" && a.Path != "":
		v.errorf(p, "artifact has both id and path: give one")
	case a.ID != "" && !ValidArtifactID(a.ID):
		v.errorf(p+".id", "%s is not a dropzone id (sha256:<64 hex>)", quote(a.ID))
	}
	if a.Name != "" {
		if msg := BadName(a.Name); msg != "" {
			v.errorf(p+".name", "%s", msg)
		}
	}
	if a.Type != "" {
		oneOf(v, p+".type", a.Type, artifactTypes)
	}
}

// BadName says what is wrong with an attachment name, or "" when it is a
// plain file name: no directory parts, no "..", no control characters.
func BadName(name string) string {
	switch {
	case strings.ContainsAny(name, `/\`):
		return fmt.Sprintf("name %s contains a path separator", quote(name))
	case name == "." || strings.Contains(name, ".."):
		return fmt.Sprintf("name %s contains \"..\"", quote(name))
	case hasControl(name):
		return fmt.Sprintf("name %s contains a control character", quote(name))
	case len(name) > 255:
		return "name is longer than 255 bytes"
	}
	return ""
}

// BadRelPath says what is wrong with a dropzone-relative path, or "".
func BadRelPath(p string) string {
	if strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || hasControl(p) {
		return fmt.Sprintf("path %s is not a relative path inside the dropzone", quote(p))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." || part == "" {
			return fmt.Sprintf("path %s is not a clean relative path inside the dropzone", quote(p))
		}
	}
	return ""
}

// ValidEmail reports whether s is a bare addr-spec (local@domain) that JSON
// Schema's "email" format accepts.
func ValidEmail(s string) bool {
	if len(s) > 254 {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return false
	}
	local, domain := s[:at], s[at+1:]
	if len(local) > 64 || strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return false
	}
	for _, r := range local {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".!#$%&'*+-/=?^_`{|}~", r)) {
			return false
		}
	}
	return validHostname(domain)
}

func validHostname(h string) bool {
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return false // address literals: rare, and validators disagree on them
	}
	h = strings.TrimSuffix(h, ".")
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

func validURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && !hasControl(s) && !strings.ContainsAny(s, " ")
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

func providerList(ps []Provider) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}
