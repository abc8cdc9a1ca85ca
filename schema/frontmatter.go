package schema

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// A front matter file: line 1 is "---", the YAML follows up to the next
// "---" (or "...") line, and the body is everything after that line.
const delimiter = "---"

// document is a front matter file taken apart.
type document struct {
	root  *yaml.Node // the mapping node of the front matter
	path  string     // root's path in a larger document; "" for a whole one
	body  string
	lines *lineMap
}

// parseDocument splits data into front matter and body and parses the YAML.
// The errors it returns name lines of the file.
func parseDocument(data []byte) (*document, Errors) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, Errors{{Line: lineAt(data, i), Msg: "file contains a NUL byte"}}
	}
	if !utf8.Valid(data) {
		i := firstInvalidUTF8(data)
		return nil, Errors{{Line: lineAt(data, i), Msg: "file is not valid UTF-8"}}
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	first, rest, found := cutLine(data)
	if strings.TrimRight(string(first), " \t\r") != delimiter {
		return nil, Errors{{Line: 1, Msg: `front matter missing: the file must begin with a line "---"`}}
	}
	if !found {
		rest = nil
	}
	var fm []byte
	closed := false
	off, bodyStart := 0, 0
	for !closed {
		line, _, more := cutLine(rest[off:])
		next := off + len(line) + 1
		if t := strings.TrimRight(string(line), " \t\r"); t == delimiter || t == "..." {
			fm, bodyStart, closed = rest[:off], min(next, len(rest)), true
		}
		if !more {
			break
		}
		off = next
	}
	if !closed {
		return nil, Errors{{Line: 1, Msg: `front matter not closed: no line "---" ends the block opened on line 1`}}
	}
	body := string(rest[bodyStart:])

	var doc yaml.Node
	if err := yaml.Unmarshal(fm, &doc); err != nil {
		n, msg := syntaxError(fm, err, 1)
		if n > 0 {
			n++ // the opening delimiter is line 1
		}
		return nil, Errors{{Line: n, Msg: msg}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, Errors{{Line: 2, Msg: "front matter is empty"}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, Errors{{Line: root.Line + 1, Msg: "front matter must be a mapping of fields"}}
	}
	shiftLines(root, 1)
	return &document{root: root, body: body, lines: newLineMap(root)}, nil
}

// syntaxErrorLine finds the line (1-based, in fm) from which the YAML no
// longer parses: the first line k such that every prefix of fm ending at k
// or later fails. yaml.v3 reports the line of the enclosing construct, often
// lines away from the mistake. Large front matter keeps yaml.v3's answer.
// syntaxError is the line and the message of err, yaml's syntax error on
// data, whose lines are numbered from 1+off in the message. A tab in a line's indentation, which YAML forbids, is named: yaml
// says only "found character that cannot start any token".
func syntaxError(data []byte, err error, off int) (int, string) {
	n, msg := splitLine(err.Error())
	if k := syntaxErrorLine(data); k > 0 {
		n = k
	}
	msg = "YAML syntax error: " + msg
	if t := tabIndented(data, n); t > 0 {
		msg += fmt.Sprintf(" (line %d is indented with a tab: YAML indents with spaces only)", t+off)
	}
	return n, msg
}

// tabIndented is the first line, up to line n, whose indentation holds a
// tab; 0 when none does.
func tabIndented(data []byte, n int) int {
	for i, l := range bytes.Split(data, []byte("\n")) {
		if i+1 > n && n > 0 {
			break
		}
		ind := l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
		if bytes.IndexByte(ind, '\t') >= 0 {
			return i + 1
		}
	}
	return 0
}

func syntaxErrorLine(fm []byte) int {
	lines := bytes.SplitAfter(fm, []byte("\n"))
	if len(lines) > 400 {
		return 0
	}
	var v yaml.Node
	k := 0
	for j := len(lines); j >= 1; j-- {
		if yaml.Unmarshal(bytes.Join(lines[:j], nil), &v) == nil {
			break
		}
		k = j
	}
	return k
}

// decodeInto checks the front matter for unknown fields and decodes it into
// v, collecting every type error with its line and field path.
func (d *document) decodeInto(v any) Errors {
	var errs Errors
	checkKnown(d.root, reflect.TypeOf(v), d.path, d.lines, &errs)
	if err := d.root.Decode(v); err != nil {
		te, ok := err.(*yaml.TypeError)
		if !ok {
			n, msg := splitLine(err.Error())
			errs = append(errs, &FieldError{Line: n, Path: d.lines.pathAt(n), Msg: msg})
		} else {
			for _, s := range te.Errors {
				n, msg := splitLine(s)
				errs = append(errs, &FieldError{Line: n, Path: d.lines.pathAt(n), Msg: tidyTypeError(msg)})
			}
		}
	}
	return errs
}

// tidyTypeError rewrites yaml.v3's Go-flavoured messages for people.
func tidyTypeError(msg string) string {
	if strings.HasPrefix(msg, "cannot unmarshal ") {
		// cannot unmarshal !!seq into string
		f := strings.Fields(msg)
		if len(f) >= 5 {
			return fmt.Sprintf("want %s, found %s", goTypeWord(f[len(f)-1]), yamlKindWord(f[2]))
		}
	}
	return msg
}

func goTypeWord(t string) string {
	switch {
	case t == "string" || strings.HasSuffix(t, ".NullString") || strings.HasSuffix(t, ".Provider") ||
		strings.HasSuffix(t, "Type") || strings.HasSuffix(t, ".Direction") || strings.HasSuffix(t, ".Role"):
		return "a string"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	}
	return "a mapping"
}

func yamlKindWord(tag string) string {
	switch tag {
	case "!!seq":
		return "a list"
	case "!!map":
		return "a mapping"
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!bool":
		return "a boolean"
	case "!!float":
		return "a number"
	case "!!null":
		return "null"
	}
	s := strings.Trim(tag, "`")
	return "the value " + strconv.Quote(s)
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// checkKnown reports mapping keys that name no field of t. A typo in a
// draft (attachments for artifacts, say) would otherwise drop data silently.
func checkKnown(n *yaml.Node, t reflect.Type, path string, lines *lineMap, errs *Errors) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || n.Kind == yaml.AliasNode {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // a type error, reported by Decode
		}
		fields, open := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				if !open {
					*errs = append(*errs, &FieldError{Line: k.Line, Path: p, Msg: unknownField(k.Value, fields)})
				}
				continue
			}
			checkKnown(v, f, p, lines, errs)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			checkKnown(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), lines, errs)
		}
	}
}

// mistakes maps field names people reach for to the protocol's own.
var mistakes = map[string]string{
	"attachments": "artifacts", "attachment": "artifacts", "files": "artifacts",
	"recipients": "to", "recipient": "to", "title": "subject", "text": "content",
	"body": "content", "markdown": "content", "html": "content", "thread": "thread_key",
	"in_reply_to": "reply_to", "correlation": "correlation_id", "schedule_at": "options",
	"urgent": "options", "silent": "options", "from": "participants",
}

// UnknownField is the message for a key that names none of known, with
// the nearest as a guess: unknown field "emial" (did you mean "email"?).
// Config readers whose keys are not struct fields (the providers' names
// under courier.adapters) use it to say what the decoder would.
func UnknownField(key string, known []string) string {
	fields := make(map[string]reflect.Type, len(known))
	for _, k := range known {
		fields[k] = nil
	}
	return unknownField(key, fields)
}

func unknownField(name string, fields map[string]reflect.Type) string {
	if want, ok := mistakes[name]; ok {
		if _, exists := fields[want]; exists {
			return fmt.Sprintf("unknown field %q (did you mean %q?)", name, want)
		}
	}
	best, bestD := "", 3
	for f := range fields {
		if d := editDistance(name, f); d < bestD || (d == bestD && f < best) {
			best, bestD = f, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field %q (did you mean %q?)", name, best)
	}
	return fmt.Sprintf("unknown field %q", name)
}

// yamlFields maps the YAML names of t's fields to their types; open is true
// when t has an inline map that takes any other key.
func yamlFields(t reflect.Type) (map[string]reflect.Type, bool) {
	out := map[string]reflect.Type{}
	open := false
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			if f.Type.Kind() == reflect.Map {
				open = true
				continue
			}
			sub, o := yamlFields(f.Type)
			for k, v := range sub {
				out[k] = v
			}
			open = open || o
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out, open
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

// lineMap records the line of every field path in a document, and the
// deepest path on each line.
type lineMap struct {
	byPath map[string]int
	byLine map[int]string
}

func newLineMap(root *yaml.Node) *lineMap { return newLineMapAt(root, "") }

// newLineMapAt maps the lines of root, the value at path in a larger
// document, to whole paths.
func newLineMapAt(root *yaml.Node, path string) *lineMap {
	m := &lineMap{byPath: map[string]int{}, byLine: map[int]string{}}
	if path != "" {
		m.byPath[path] = root.Line
		m.byLine[root.Line] = path
	}
	m.walk(root, path)
	return m
}

func (m *lineMap) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			m.byPath[p] = k.Line
			m.byLine[k.Line] = p
			if v.Line != k.Line {
				m.byLine[v.Line] = p
			}
			m.walk(v, p)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			m.byPath[p] = c.Line
			if _, taken := m.byLine[c.Line]; !taken {
				m.byLine[c.Line] = p
			}
			m.walk(c, p)
		}
	}
}

// line returns the line of path, or of its nearest ancestor that has one.
func (m *lineMap) line(path string) int {
	if m == nil {
		return 0
	}
	for p := path; p != ""; p = parentPath(p) {
		if n, ok := m.byPath[p]; ok {
			return n
		}
	}
	return 1 // a missing top-level field: point at the front matter
}

func (m *lineMap) pathAt(line int) string {
	if m == nil {
		return ""
	}
	return m.byLine[line]
}

func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

func shiftLines(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftLines(c, by)
	}
}

// encodeDocument writes v as front matter followed by body.
func encodeDocument(v any, body string) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(1024 + len(body))
	buf.WriteString(delimiter + "\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("schema: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("schema: encode: %w", err)
	}
	buf.WriteString(delimiter + "\n")
	buf.WriteString(body)
	return buf.Bytes(), nil
}

// risky reports whether yaml.v3 would write s in a literal block it cannot
// read back the same: a multi-line string with a line that starts with a
// space or a tab (a literal block takes its indentation from its first
// line, and yaml.v3 emits tabs there that it then refuses), or that starts
// with a newline.
func risky(s string) bool {
	if !strings.Contains(s, "\n") {
		return false
	}
	if strings.HasPrefix(s, "\n") {
		return true
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			return true
		}
	}
	return false
}

// quotedNode is s as a double-quoted YAML string.
func quotedNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
}

// safeValue returns v with every risky string, however deep in maps and
// lists, replaced by a double-quoted node. v is not changed.
func safeValue(v any) any {
	switch v := v.(type) {
	case string:
		if risky(v) {
			return quotedNode(v)
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = safeValue(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = safeValue(x)
		}
		return out
	}
	return v
}

func safeMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return safeValue(m).(map[string]any)
}

// cutLine returns the first line of b (without its "\n"), the rest, and
// whether a newline was found.
func cutLine(b []byte) (line, rest []byte, found bool) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

func lineAt(b []byte, off int) int { return bytes.Count(b[:off], []byte("\n")) + 1 }

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func editDistance(a, b string) int {
	if a == b {
		return 0
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
