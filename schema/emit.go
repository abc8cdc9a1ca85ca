package schema

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A message is written by a small emitter of our own rather than by
// yaml.v3's, which spent a quarter of the CPU of an IMAP backfill (about
// 180 µs a message) analysing every string character by character. The
// emitter writes a subset of YAML that yaml.v3 reads back to the same
// values: block mappings and sequences, plain scalars only for strings that
// cannot be read as anything else, double quotes with escapes for the
// rest, literal blocks for multi-line text that a literal block carries
// unchanged. Output is deterministic (map keys sorted), so a file Courier
// wrote re-encodes to the same bytes; FuzzDecode and the golden tests hold
// it to that.

// ynode is a value to write.
type ynode struct {
	kind  byte // 's' string, 'r' raw scalar (numbers, true, null), 'm' map, 'l' list
	s     string
	keys  []string
	vals  []*ynode
	items []*ynode
}

func ystr(s string) *ynode { return &ynode{kind: 's', s: s} }
func yraw(s string) *ynode { return &ynode{kind: 'r', s: s} }

var ynull = yraw("null")

func ynullstr(s NullString) *ynode {
	if s == "" {
		return ynull
	}
	return ystr(string(s))
}

func ybool(b bool) *ynode {
	if b {
		return yraw("true")
	}
	return yraw("false")
}

func yint(i int64) *ynode   { return yraw(strconv.FormatInt(i, 10)) }
func yuint(u uint64) *ynode { return yraw(strconv.FormatUint(u, 10)) }
func ytime(t Time) *ynode   { return ystr(t.Format()) }

// ymap builds a mapping in field order.
type ymap struct{ n *ynode }

func newMap() ymap { return ymap{&ynode{kind: 'm'}} }

func (m ymap) set(k string, v *ynode) ymap {
	m.n.keys = append(m.n.keys, k)
	m.n.vals = append(m.n.vals, v)
	return m
}

// opt sets k only when v is not empty (omitempty).
func (m ymap) opt(k, v string) ymap {
	if v != "" {
		m.set(k, ystr(v))
	}
	return m
}

func ylist(items []*ynode) *ynode { return &ynode{kind: 'l', items: items} }

// messageNode is the tree of a Message, in the order of its fields.
func messageNode(m *Message) (*ynode, error) {
	p := m.Participants
	parts := newMap().set("from", participantNode(p.From)).
		set("to", participantsNode(p.To)).set("cc", participantsNode(p.Cc)).set("bcc", participantsNode(p.Bcc))
	mentions := make([]*ynode, len(p.Mentions))
	for i, mn := range p.Mentions {
		mm := newMap().set("type", ystr(string(mn.Type))).set("target", ystr(mn.Target)).opt("name", mn.Name)
		if mn.Offset != nil {
			mm.set("offset", yint(int64(*mn.Offset)))
		}
		mentions[i] = mm.n
	}
	parts.set("mentions", ylist(mentions))
	sess := newMap().set("id", ystr(m.Session.ID)).set("type", ystr(string(m.Session.Type))).opt("name", m.Session.Name).
		set("thread_key", ynullstr(m.Session.ThreadKey))
	processed := ynull
	if m.ProcessedAt != nil {
		processed = ytime(*m.ProcessedAt)
	}
	arts := make([]*ynode, len(m.Artifacts))
	for i, a := range m.Artifacts {
		arts[i] = artifactNode(a)
	}
	meta := newMap().set("schema_version", ystr(m.Metadata.SchemaVersion)).set("protocol_version", ystr(m.Metadata.ProtocolVersion))
	if len(m.Metadata.ProviderRaw) > 0 {
		raw, err := anyNode(m.Metadata.ProviderRaw)
		if err != nil {
			return nil, fmt.Errorf("metadata.provider_raw: %w", err)
		}
		meta.set("provider_raw", raw)
	}
	if !m.Metadata.Extra.IsZero() {
		extra, err := extraNode(&m.Metadata.Extra)
		if err != nil {
			return nil, err
		}
		meta.set("extra", extra)
	}
	return newMap().set("id", ystr(m.ID)).set("provider", ystr(string(m.Provider))).set("direction", ystr(string(m.Direction))).
		set("session", sess.n).set("participants", parts.n).
		set("timestamp", ytime(m.Timestamp)).set("received_at", ytime(m.ReceivedAt)).set("processed_at", processed).
		set("type", ystr(string(m.Type))).
		set("content", newMap().set("text", ynullstr(m.Content.Text)).set("html", ynullstr(m.Content.HTML)).set("markdown", ynullstr(m.Content.Markdown)).n).
		set("artifacts", ylist(arts)).
		set("correlation_id", ynullstr(m.CorrelationID)).set("reply_to", ynullstr(m.ReplyTo)).set("thread_root", ynullstr(m.ThreadRoot)).
		set("metadata", meta.n).n, nil
}

func participantNode(p Participant) *ynode {
	return newMap().set("id", ystr(p.ID)).set("name", ystr(p.Name)).opt("email", p.Email).opt("platform_id", p.PlatformID).
		opt("role", string(p.Role)).opt("avatar", p.Avatar).n
}

func participantsNode(ps []Participant) *ynode {
	out := make([]*ynode, len(ps))
	for i, p := range ps {
		out[i] = participantNode(p)
	}
	return ylist(out)
}

func artifactNode(a Artifact) *ynode {
	m := newMap().set("id", ystr(a.ID)).set("name", ystr(a.Name)).set("type", ystr(string(a.Type))).opt("mime_type", a.MimeType).
		set("size", yint(a.Size)).opt("path", a.Path)
	if a.Inline {
		m.set("inline", ybool(true))
	}
	return m.opt("content_id", a.ContentID).n
}

func extraNode(e *Extra) (*ynode, error) {
	m := newMap().opt("account", e.Account).opt("folder", e.Folder)
	strs := func(k string, v []string) {
		if len(v) > 0 {
			items := make([]*ynode, len(v))
			for i, s := range v {
				items[i] = ystr(s)
			}
			m.set(k, ylist(items))
		}
	}
	strs("folders", e.Folders)
	if e.UIDValidity != 0 {
		m.set("uidvalidity", yuint(uint64(e.UIDValidity)))
	}
	if e.UID != 0 {
		m.set("uid", yuint(uint64(e.UID)))
	}
	strs("external_participants", e.ExternalParticipants)
	if e.PersonalEligible != nil {
		m.set("personal_eligible", ybool(*e.PersonalEligible))
	}
	if e.SyntheticID {
		m.set("synthetic_id", ybool(true))
	}
	if e.Raw != nil {
		m.set("raw", artifactNode(*e.Raw))
	}
	m.opt("parse_error", string(e.ParseError))
	strs("merged_ids", e.MergedIDs)
	m.opt("edits", e.Edits).opt("recalls", e.Recalls).opt("event_id", e.EventID)
	if f := e.Failure; f != nil {
		m.set("failure", newMap().set("reason", ystr(string(f.Reason))).opt("agent", f.Agent).set("attempts", yint(int64(f.Attempts))).
			set("retryable", ybool(f.Retryable)).set("failed_at", ytime(f.FailedAt)).n)
	}
	// Keys Courier does not know come after, sorted (as yaml.v3's inline
	// map does).
	if len(e.Other) > 0 {
		other, err := anyNode(e.Other)
		if err != nil {
			return nil, fmt.Errorf("metadata.extra: %w", err)
		}
		for i, k := range other.keys {
			if _, known := extraKnown[k]; !known {
				m.set(k, other.vals[i])
			}
		}
	}
	return m.n, nil
}

// extraKnown are the typed keys of Extra.
var extraKnown = func() map[string]bool {
	fields, _ := yamlFields(reflect.TypeOf(Extra{}))
	out := map[string]bool{}
	for k := range fields {
		out[k] = true
	}
	return out
}()

// anyNode converts a decoded YAML value (and the Go values adapters put in
// provider_raw) to a node; maps are written with their keys sorted.
func anyNode(v any) (*ynode, error) {
	switch v := v.(type) {
	case nil:
		return ynull, nil
	case string:
		return ystr(v), nil
	case bool:
		return ybool(v), nil
	case int:
		return yint(int64(v)), nil
	case int64:
		return yint(v), nil
	case float64:
		return floatNode(v), nil
	case []any:
		items := make([]*ynode, len(v))
		for i, x := range v {
			n, err := anyNode(x)
			if err != nil {
				return nil, err
			}
			items[i] = n
		}
		return ylist(items), nil
	case []string:
		items := make([]*ynode, len(v))
		for i, x := range v {
			items[i] = ystr(x)
		}
		return ylist(items), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := newMap()
		for _, k := range keys {
			n, err := anyNode(v[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			m.set(k, n)
		}
		return m.n, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return ynull, nil
		}
		return anyNode(rv.Elem().Interface())
	case reflect.String:
		return ystr(rv.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return yint(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return yuint(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return floatNode(rv.Float()), nil
	case reflect.Bool:
		return ybool(rv.Bool()), nil
	case reflect.Slice, reflect.Array:
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return anyNode(items)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("a map with %s keys cannot be written", rv.Type().Key())
		}
		m := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return anyNode(m)
	}
	return nil, fmt.Errorf("a %T cannot be written", v)
}

func floatNode(f float64) *ynode {
	switch {
	case math.IsNaN(f):
		return yraw(".nan")
	case math.IsInf(f, 1):
		return yraw(".inf")
	case math.IsInf(f, -1):
		return yraw("-.inf")
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0" // keep it a float when read back
	}
	return yraw(s)
}

// emit writes a node as the value of a mapping key or sequence item at
// indent (the column of its key or dash).
func emit(b *bytes.Buffer, n *ynode, indent int) {
	switch n.kind {
	case 'm':
		if len(n.keys) == 0 {
			b.WriteString(" {}\n")
			return
		}
		b.WriteByte('\n')
		emitMap(b, n, indent+2, false)
	case 'l':
		if len(n.items) == 0 {
			b.WriteString(" []\n")
			return
		}
		b.WriteByte('\n')
		emitList(b, n, indent+2)
	default:
		b.WriteByte(' ')
		emitScalar(b, n, indent)
	}
}

// emitMap writes a mapping's entries at indent; inItem means the first
// entry follows a "- " already written.
func emitMap(b *bytes.Buffer, n *ynode, indent int, inItem bool) {
	for i, k := range n.keys {
		if i > 0 || !inItem {
			writeIndent(b, indent)
		}
		if len(k) > 200 {
			// YAML limits implicit keys to 1024 characters: a long key
			// takes the explicit form, "? key" then ": value".
			b.WriteString("? ")
			emitKey(b, k)
			b.WriteByte('\n')
			writeIndent(b, indent)
		} else {
			emitKey(b, k)
		}
		b.WriteByte(':')
		emit(b, n.vals[i], indent)
	}
}

func emitList(b *bytes.Buffer, n *ynode, indent int) {
	for _, it := range n.items {
		writeIndent(b, indent)
		b.WriteString("-")
		switch {
		case it.kind == 'm' && len(it.keys) > 0:
			b.WriteByte(' ')
			emitMap(b, it, indent+2, true)
		case it.kind == 'l' && len(it.items) > 0:
			b.WriteByte('\n')
			emitList(b, it, indent+2)
		default:
			emit(b, it, indent)
		}
	}
}

func writeIndent(b *bytes.Buffer, n int) {
	for ; n > 0; n-- {
		b.WriteByte(' ')
	}
}

func emitKey(b *bytes.Buffer, k string) {
	if plainSafe(k) {
		b.WriteString(k)
		return
	}
	writeQuoted(b, k)
}

// emitScalar writes a scalar after "key: " or "- ", ending the line.
func emitScalar(b *bytes.Buffer, n *ynode, indent int) {
	if n.kind == 'r' {
		b.WriteString(n.s)
		b.WriteByte('\n')
		return
	}
	s := n.s
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	switch {
	case plainSafe(s):
		b.WriteString(s)
		b.WriteByte('\n')
	case strings.Contains(s, "\n") && literalSafe(s):
		emitLiteral(b, s, indent+2)
	default:
		writeQuoted(b, s)
		b.WriteByte('\n')
	}
}

// plainSafe reports whether s can be written unquoted and read back as the
// same string: a restricted alphabet, starting with a letter, not one of
// YAML's reserved words.
func plainSafe(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	c := s[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/' || c == '@' || c == '+') {
			return false
		}
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf":
		return false
	}
	return true
}

// literalSafe reports whether a literal block carries s unchanged: no line
// that starts with a space or tab or holds only blanks, no carriage return
// or other line breaks YAML knows, nothing unprintable, and not only line
// breaks.
func literalSafe(s string) bool {
	if strings.TrimRight(s, "\n") == "" || strings.HasPrefix(s, "\n") || strings.ContainsRune(s, '\r') {
		return false
	}
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' || strings.TrimLeft(line, " \t") == "" {
			return false
		}
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && !printable(r) {
			return false
		}
	}
	return true
}

// emitLiteral writes s as a literal block whose lines sit at indent.
func emitLiteral(b *bytes.Buffer, s string, indent int) {
	body := strings.TrimRight(s, "\n")
	trailing := len(s) - len(body)
	switch trailing {
	case 0:
		b.WriteString("|-\n")
	case 1:
		b.WriteString("|\n")
	default:
		b.WriteString("|+\n")
	}
	for _, line := range strings.Split(body, "\n") {
		if line != "" {
			writeIndent(b, indent)
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
	for i := 1; i < trailing; i++ {
		b.WriteByte('\n')
	}
}

// printable reports whether YAML 1.2 allows r unescaped.
func printable(r rune) bool {
	switch {
	case r == 0x09 || r == 0x0A || r == 0x0D:
		return true
	case r >= 0x20 && r <= 0x7E:
		return true
	case r == 0x2028 || r == 0x2029: // line breaks to YAML
		return false
	case r >= 0xA0 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD && r != 0xFEFF, r >= 0x10000 && r <= 0x10FFFF:
		return true
	}
	return false
}

// quote writes s double-quoted, escaping what YAML requires.
func writeQuoted(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\0`)
		default:
			if printable(r) {
				b.WriteRune(r)
			} else if r < 0x100 {
				fmt.Fprintf(b, `\x%02X`, r)
			} else if r < 0x10000 {
				fmt.Fprintf(b, `\u%04X`, r)
			} else {
				fmt.Fprintf(b, `\U%08X`, r)
			}
		}
	}
	b.WriteByte('"')
}

// encodeMessage writes m as a front matter file with the emitter.
func encodeMessage(m *Message) ([]byte, error) {
	n, err := messageNode(m)
	if err != nil {
		return nil, fmt.Errorf("schema: encode %s: %w", m.ID, err)
	}
	var b bytes.Buffer
	b.Grow(2048 + len(m.Body) + 3*len(m.Content.Text))
	b.WriteString(delimiter + "\n")
	emitMap(&b, n, 0, false)
	b.WriteString(delimiter + "\n")
	b.WriteString(m.Body)
	return b.Bytes(), nil
}
