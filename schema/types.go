package schema

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Versions written into metadata of every file (upstream 01 §5.1).
const (
	SchemaVersion   = "1.0.0"
	ProtocolVersion = "1.0.0"
)

// Provider names a messaging platform (protocol §7.1).
type Provider string

// The providers of the protocol. Courier implements Email, Lark and Slack;
// the others parse but have no adapter.
const (
	Email    Provider = "email"
	Lark     Provider = "lark"
	Slack    Provider = "slack"
	Discord  Provider = "discord"
	Teams    Provider = "teams"
	WeCom    Provider = "wecom"
	DingTalk Provider = "dingtalk"
)

// Providers lists every provider the protocol names, in its order.
var Providers = []Provider{Lark, Email, Slack, Discord, Teams, WeCom, DingTalk}

// Implemented lists the providers Courier has adapters for.
var Implemented = []Provider{Email, Lark, Slack}

// Valid reports whether p is one of the protocol's providers.
func (p Provider) Valid() bool { return contains(Providers, p) }

// Implemented reports whether Courier has an adapter for p.
func (p Provider) Implemented() bool { return contains(Implemented, p) }

// EventKey is the dedupe key of a provider's event id (a Slack event_id,
// a Lark header.event_id): "event:<provider>:<id>". A chat provider adds
// it to an Event's Keys, and the mailbox indexes a message's
// metadata.extra.event_id under it, so a redelivered event is known
// whichever path wrote the message first.
func EventKey(p Provider, eventID string) string { return "event:" + string(p) + ":" + eventID }

// Direction is inbound or outbound.
type Direction string

// Directions.
const (
	Inbound  Direction = "inbound"
	Outbound Direction = "outbound"
)

// SessionType is the kind of conversation (protocol §3.3).
type SessionType string

// Session types.
const (
	Direct SessionType = "direct"
	Group  SessionType = "group"
	Thread SessionType = "thread"
)

// ContentType is the type of an inbound message. Courier writes only the
// values the inbound JSON Schema (§7.2) allows.
type ContentType string

// Content types of inbound messages.
const (
	TypeText  ContentType = "text"
	TypeImage ContentType = "image"
	TypeFile  ContentType = "file"
	TypeAudio ContentType = "audio"
	TypeVideo ContentType = "video"
	TypeCard  ContentType = "card"
	TypeMixed ContentType = "mixed"
)

var contentTypes = []ContentType{TypeText, TypeImage, TypeFile, TypeAudio, TypeVideo, TypeCard, TypeMixed}

// TypeOf is the type of a message with words (or not) and artifacts: text
// without artifacts; mixed with both; with artifacts only, image, audio or
// video for one artifact of that kind, else file.
func TypeOf(hasWords bool, arts []Artifact) ContentType {
	switch {
	case len(arts) == 0:
		return TypeText
	case hasWords:
		return TypeMixed
	case len(arts) == 1:
		switch arts[0].Type {
		case ArtifactImage:
			return TypeImage
		case ArtifactAudio:
			return TypeAudio
		case ArtifactVideo:
			return TypeVideo
		}
	}
	return TypeFile
}

// ArtifactType classifies an attachment (the five values of §7.2).
type ArtifactType string

// Artifact types.
const (
	ArtifactImage    ArtifactType = "image"
	ArtifactDocument ArtifactType = "document"
	ArtifactAudio    ArtifactType = "audio"
	ArtifactVideo    ArtifactType = "video"
	ArtifactArchive  ArtifactType = "archive"
)

var artifactTypes = []ArtifactType{ArtifactImage, ArtifactDocument, ArtifactAudio, ArtifactVideo, ArtifactArchive}

// Role of a participant in a session.
type Role string

var roles = []Role{"owner", "admin", "member", "guest", "external"}

// MentionType is what an @mention targets.
type MentionType string

// Mention types.
const (
	MentionUser    MentionType = "user"
	MentionAll     MentionType = "all"
	MentionChannel MentionType = "channel"
	MentionRole    MentionType = "role"
)

var mentionTypes = []MentionType{MentionUser, MentionAll, MentionChannel, MentionRole}

// NullString is a string that is written as null when empty. The protocol
// uses null for absent values (thread_key, reply_to, content.html, ...).
type NullString string

// MarshalYAML writes null for the empty string.
func (s NullString) MarshalYAML() (any, error) {
	if s == "" {
		return nil, nil
	}
	if risky(string(s)) {
		return quotedNode(string(s)), nil
	}
	return string(s), nil
}

// Text is free text that may span lines (a reason, a server's reply). It
// is written so that it reads back the same whatever its lines hold.
type Text string

// MarshalYAML double-quotes what a literal block would not carry.
func (t Text) MarshalYAML() (any, error) {
	if risky(string(t)) {
		return quotedNode(string(t)), nil
	}
	return string(t), nil
}

// MarshalJSON writes null for the empty string.
func (s NullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// UnmarshalYAML accepts a string or null.
func (s *NullString) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeError(n, "want a string or null")
	}
	if n.ShortTag() == "!!null" {
		*s = ""
		return nil
	}
	*s = NullString(n.Value)
	return nil
}

// String returns s as a plain string.
func (s NullString) String() string { return string(s) }

// Time is an instant written as an RFC 3339 string in UTC.
type Time struct{ time.Time }

// NewTime returns t as a Time in UTC.
func NewTime(t time.Time) Time { return Time{t.UTC()} }

// TimePtr returns a pointer to NewTime(t).
func TimePtr(t time.Time) *Time { v := NewTime(t); return &v }

// Format returns the canonical text of t: RFC 3339 in UTC with as many
// fractional digits as needed.
func (t Time) Format() string { return t.UTC().Format(time.RFC3339Nano) }

// MarshalYAML writes the canonical text.
func (t Time) MarshalYAML() (any, error) { return t.Format(), nil }

// MarshalJSON writes the canonical text.
func (t Time) MarshalJSON() ([]byte, error) { return json.Marshal(t.Format()) }

// UnmarshalYAML parses an RFC 3339 time.
func (t *Time) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return typeError(n, "not a time: want an RFC 3339 string such as 2026-02-06T20:45:00Z")
	}
	v, err := ParseTime(n.Value)
	if err != nil {
		return typeError(n, err.Error())
	}
	*t = v
	return nil
}

// ParseTime parses the RFC 3339 text of a time. A time without a zone is an
// error: the protocol stores UTC and a guess would be wrong for someone.
func ParseTime(s string) (Time, error) {
	v, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return Time{}, &timeError{s}
	}
	return NewTime(v), nil
}

type timeError struct{ s string }

func (e *timeError) Error() string {
	return "not a time: " + quote(e.s) + " (want RFC 3339 with a zone, e.g. 2026-02-06T20:45:00Z)"
}

// Session is the conversation a message belongs to (protocol §3.3).
type Session struct {
	ID        string      `yaml:"id" json:"id"`
	Type      SessionType `yaml:"type" json:"type"`
	Name      string      `yaml:"name,omitempty" json:"name,omitempty"`
	ThreadKey NullString  `yaml:"thread_key" json:"thread_key"`
}

// Participant is a sender or recipient (protocol §3.2.1).
type Participant struct {
	ID         string `yaml:"id" json:"id"`
	Name       string `yaml:"name" json:"name"`
	Email      string `yaml:"email,omitempty" json:"email,omitempty"`
	PlatformID string `yaml:"platform_id,omitempty" json:"platform_id,omitempty"`
	Role       Role   `yaml:"role,omitempty" json:"role,omitempty"`
	Avatar     string `yaml:"avatar,omitempty" json:"avatar,omitempty"`
}

// Mention is an @mention in an IM message (protocol §3.2.2).
type Mention struct {
	Type   MentionType `yaml:"type" json:"type"`
	Target string      `yaml:"target" json:"target"`
	Name   string      `yaml:"name,omitempty" json:"name,omitempty"`
	Offset *int        `yaml:"offset,omitempty" json:"offset,omitempty"`
}

// Participants of a message. The lists are always written, empty as [].
type Participants struct {
	From     Participant   `yaml:"from" json:"from"`
	To       []Participant `yaml:"to" json:"to"`
	Cc       []Participant `yaml:"cc" json:"cc"`
	Bcc      []Participant `yaml:"bcc" json:"bcc"`
	Mentions []Mention     `yaml:"mentions" json:"mentions"`
}

// Content holds the forms of a message's text.
type Content struct {
	Text     NullString `yaml:"text" json:"text"`
	HTML     NullString `yaml:"html" json:"html"`
	Markdown NullString `yaml:"markdown" json:"markdown"`
}

// Artifact is an attachment stored in the dropzone.
type Artifact struct {
	ID       string       `yaml:"id" json:"id"` // sha256:<64 hex>
	Name     string       `yaml:"name" json:"name"`
	Type     ArtifactType `yaml:"type" json:"type"`
	MimeType string       `yaml:"mime_type,omitempty" json:"mime_type,omitempty"`
	Size     int64        `yaml:"size" json:"size"`
	Path     string       `yaml:"path,omitempty" json:"path,omitempty"` // relative to .monoco/dropzone/
	Inline   bool         `yaml:"inline,omitempty" json:"inline,omitempty"`
	// ContentID is the Content-ID of an inline email part (without <>).
	ContentID string `yaml:"content_id,omitempty" json:"content_id,omitempty"`
}

// Metadata holds the versions, what a reader may need from the source, and
// Courier's own extensions.
type Metadata struct {
	SchemaVersion   string         `yaml:"schema_version" json:"schema_version"`
	ProtocolVersion string         `yaml:"protocol_version" json:"protocol_version"`
	ProviderRaw     map[string]any `yaml:"provider_raw,omitempty" json:"provider_raw,omitempty"`
	Extra           Extra          `yaml:"extra,omitempty" json:"extra,omitzero"`
}

// Extra is metadata.extra: the fields Courier itself sets are typed; keys it
// does not know are kept in Other and written back sorted.
type Extra struct {
	// Email.
	Account              string   `yaml:"account,omitempty" json:"account,omitempty"`
	Folder               string   `yaml:"folder,omitempty" json:"folder,omitempty"`
	Folders              []string `yaml:"folders,omitempty" json:"folders,omitempty"`
	UIDValidity          uint32   `yaml:"uidvalidity,omitempty" json:"uidvalidity,omitempty"`
	UID                  uint32   `yaml:"uid,omitempty" json:"uid,omitempty"`
	ExternalParticipants []string `yaml:"external_participants,omitempty" json:"external_participants,omitempty"`
	PersonalEligible     *bool    `yaml:"personal_eligible,omitempty" json:"personal_eligible,omitempty"`
	// SyntheticID is set when the message had no usable Message-ID and its
	// id was derived from From, Date, Subject and body.
	SyntheticID bool `yaml:"synthetic_id,omitempty" json:"synthetic_id,omitempty"`
	// Digest names the message's content: "sha256:" and the hex SHA-256 of
	// the raw message less the fields each hop adds (email: Received,
	// Return-Path, Delivered-To and the like), line ends as LF. With the
	// Message-ID it is the message's identity: a different mail that
	// repeats a filed Message-ID is a message of its own.
	Digest string `yaml:"digest,omitempty" json:"digest,omitempty"`
	// Raw references the message as received (email: the MIME source).
	Raw *Artifact `yaml:"raw,omitempty" json:"raw,omitempty"`
	// Auth records who sent the message, as far as it could be verified.
	Auth *Auth `yaml:"auth,omitempty" json:"auth,omitempty"`
	// ParseError says what could not be parsed; the message is still written.
	ParseError Text `yaml:"parse_error,omitempty" json:"parse_error,omitempty"`
	// Notes say what the message lacks that its provider makes optional
	// in practice and Courier filled in (an email submitted without a
	// Message-ID or a Date, as local programs submit mail): nothing was
	// wrong with what it has.
	Notes Text `yaml:"notes,omitempty" json:"notes,omitempty"`
	// Overflow lists the text fields longer than a message file keeps:
	// each goes on in artifacts.
	Overflow []Overflow `yaml:"overflow,omitempty" json:"overflow,omitempty"`

	// IM.
	MergedIDs []string `yaml:"merged_ids,omitempty" json:"merged_ids,omitempty"`
	Edits     string   `yaml:"edits,omitempty" json:"edits,omitempty"`
	Recalls   string   `yaml:"recalls,omitempty" json:"recalls,omitempty"`
	EventID   string   `yaml:"event_id,omitempty" json:"event_id,omitempty"`

	// Failure is set when an agent failed the message for good and it was
	// set aside in .deadletter/.
	Failure *Failure `yaml:"failure,omitempty" json:"failure,omitempty"`

	Other map[string]any `yaml:",inline" json:"-"`
}

// IsZero reports whether e holds nothing (so that it is omitted): whether
// every field, whichever Extra has, is empty as omitempty has it (Other:
// no keys).
func (e Extra) IsZero() bool { return fieldsEmpty(reflect.ValueOf(&e).Elem()) }

// MarshalYAML writes the known keys and then the unknown ones, their
// strings made safe to read back.
func (e Extra) MarshalYAML() (any, error) {
	type plain Extra
	p := plain(e)
	p.Other = safeMap(e.Other)
	return p, nil
}

// MarshalJSON includes the unknown keys alongside the known ones.
func (e Extra) MarshalJSON() ([]byte, error) {
	type plain Extra
	b, err := json.Marshal(plain(e))
	if err != nil || len(e.Other) == 0 {
		return b, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range e.Other {
		if _, known := m[k]; !known {
			m[k] = jsonable(v)
		}
	}
	return json.Marshal(m)
}

// Failure records why an agent gave up on a message.
type Failure struct {
	Reason    Text   `yaml:"reason" json:"reason"`
	Agent     string `yaml:"agent,omitempty" json:"agent,omitempty"`
	Attempts  int    `yaml:"attempts" json:"attempts"`
	Retryable bool   `yaml:"retryable" json:"retryable"`
	FailedAt  Time   `yaml:"failed_at" json:"failed_at"`
}

// Message is an inbound message (protocol §3.1). Body is the Markdown under
// the front matter.
type Message struct {
	ID            string       `yaml:"id" json:"id"`
	Provider      Provider     `yaml:"provider" json:"provider"`
	Direction     Direction    `yaml:"direction" json:"direction"`
	Session       Session      `yaml:"session" json:"session"`
	Participants  Participants `yaml:"participants" json:"participants"`
	Timestamp     Time         `yaml:"timestamp" json:"timestamp"`
	ReceivedAt    Time         `yaml:"received_at" json:"received_at"`
	ProcessedAt   *Time        `yaml:"processed_at" json:"processed_at"`
	Type          ContentType  `yaml:"type" json:"type"`
	Content       Content      `yaml:"content" json:"content"`
	Artifacts     []Artifact   `yaml:"artifacts" json:"artifacts"`
	CorrelationID NullString   `yaml:"correlation_id" json:"correlation_id"`
	ReplyTo       NullString   `yaml:"reply_to" json:"reply_to"`
	ThreadRoot    NullString   `yaml:"thread_root" json:"thread_root"`
	Metadata      Metadata     `yaml:"metadata" json:"metadata"`

	Body string `yaml:"-" json:"body"`
}

// Preview returns the first line of the message's text, at most n runes.
func (m *Message) Preview(n int) string {
	s := m.Body
	if s == "" {
		s = string(m.Content.Markdown)
	}
	if s == "" {
		s = string(m.Content.Text)
	}
	return Preview(s, n)
}

// Preview collapses white space in s and cuts it to at most n runes, with an
// ellipsis when cut.
func Preview(s string, n int) string {
	// The words are joined only as far as the preview reaches (n+1
	// runes tell that it is cut): a text of megabytes is not split and
	// decoded whole for a line of n.
	var b []byte
	count := 0
	for f := range strings.FieldsSeq(s) {
		if count > 0 {
			b = append(b, ' ')
			count++
		}
		i := 0
		for ; count <= n && i < len(f); count++ {
			_, w := utf8.DecodeRuneInString(f[i:])
			i += w
		}
		b = append(b, f[:i]...)
		if count > n {
			break
		}
	}
	if count <= n {
		return string(b)
	}
	r := []rune(string(b))
	return string(r[:n-1]) + "…"
}

// idPattern is the id rule of the protocol's JSON Schema.
var idPattern = regexp.MustCompile(`^[a-z]+_[a-zA-Z0-9_-]+$`)

// ValidID reports whether id has the protocol's form {provider}_{uid}.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// jsonable turns values decoded from YAML (map[string]any, []any, ...) into
// values encoding/json accepts.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = jsonable(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[toString(k)] = jsonable(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = jsonable(x)
		}
		return out
	default:
		return v
	}
}

// ArtifactTypeOf classifies an attachment by its MIME type, falling back on
// the name's extension, into the five types of §7.2.
func ArtifactTypeOf(mimeType, name string) ArtifactType {
	mt := strings.ToLower(strings.TrimSpace(mimeType))
	if i := strings.IndexByte(mt, ';'); i >= 0 {
		mt = strings.TrimSpace(mt[:i])
	}
	switch {
	case strings.HasPrefix(mt, "image/"):
		return ArtifactImage
	case strings.HasPrefix(mt, "audio/"):
		return ArtifactAudio
	case strings.HasPrefix(mt, "video/"):
		return ArtifactVideo
	}
	switch mt {
	case "application/zip", "application/x-zip-compressed", "application/gzip", "application/x-gzip",
		"application/x-tar", "application/x-7z-compressed", "application/x-rar-compressed",
		"application/vnd.rar", "application/x-bzip2", "application/x-xz", "application/zstd":
		return ArtifactArchive
	}
	ext := strings.ToLower(name)
	if i := strings.LastIndexByte(ext, '.'); i >= 0 {
		ext = ext[i+1:]
	} else {
		ext = ""
	}
	switch ext {
	case "png", "jpg", "jpeg", "gif", "webp", "bmp", "svg", "heic", "tif", "tiff":
		return ArtifactImage
	case "mp3", "wav", "ogg", "m4a", "flac", "opus", "amr":
		return ArtifactAudio
	case "mp4", "mov", "webm", "mkv", "avi":
		return ArtifactVideo
	case "zip", "gz", "tgz", "tar", "7z", "rar", "bz2", "xz", "zst":
		return ArtifactArchive
	}
	return ArtifactDocument
}
