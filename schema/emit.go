package schema

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	kind byte // 's' string, 'r' raw scalar (numbers, true, null), 'm' map, 'l' list
	s    string
	keys []string
	vals []*ynode // a map's values, or a list's items
}

// tree allocates the nodes of one message's tree from slabs, not one by
// one: a message has some eighty nodes, and their allocation was a third of
// the emitter's time. A tree of the encoder pool keeps its slabs for the
// next message (reset).
type tree struct {
	nodes []ynode
	keys  []string
	vals  []*ynode

	// The slabs handed out since the last reset (used) and before it.
	nodeSlabs [][]ynode
	keySlabs  [][]string
	valSlabs  [][]*ynode
	usedNodes int
	usedKV    int
}

// Slab sizes: a message's nodes and map fields fit in about one of each.
const (
	nodeSlab   = 80
	fieldsSlab = 112
)

// node returns a new zero node.
func (t *tree) node() *ynode {
	if len(t.nodes) == cap(t.nodes) {
		if t.usedNodes == len(t.nodeSlabs) {
			t.nodeSlabs = append(t.nodeSlabs, make([]ynode, 0, nodeSlab))
		}
		t.nodes = t.nodeSlabs[t.usedNodes][:0]
		t.usedNodes++
	}
	t.nodes = t.nodes[:len(t.nodes)+1]
	return &t.nodes[len(t.nodes)-1]
}

// fields returns empty key and value slices with room for n entries, which
// appending to within n never shares.
func (t *tree) fields(n int) ([]string, []*ynode) {
	if cap(t.keys)-len(t.keys) < n {
		if t.usedKV == len(t.keySlabs) {
			t.keySlabs, t.valSlabs = append(t.keySlabs, nil), append(t.valSlabs, nil)
		}
		if cap(t.keySlabs[t.usedKV]) < n {
			t.keySlabs[t.usedKV], t.valSlabs[t.usedKV] = make([]string, 0, max(n, fieldsSlab)), make([]*ynode, 0, max(n, fieldsSlab))
		}
		t.keys, t.vals = t.keySlabs[t.usedKV][:0], t.valSlabs[t.usedKV][:0]
		t.usedKV++
	}
	k, v := len(t.keys), len(t.vals)
	t.keys, t.vals = t.keys[:k+n], t.vals[:v+n]
	return t.keys[k : k : k+n], t.vals[v : v : v+n]
}

// reset makes the tree's slabs free for the next message, zeroed so that
// they keep no string or node of this one alive. A tree that grew past
// what a message normally needs lets the extra slabs go, and a slab made
// larger than the usual for one large map or list.
func (t *tree) reset() {
	for _, s := range t.nodeSlabs[:t.usedNodes] {
		clear(s[:cap(s)])
	}
	for i := range t.usedKV {
		if cap(t.keySlabs[i]) > fieldsSlab {
			// Made for one large map or list: not kept for every message.
			t.keySlabs[i], t.valSlabs[i] = nil, nil
			continue
		}
		clear(t.keySlabs[i][:cap(t.keySlabs[i])])
		clear(t.valSlabs[i][:cap(t.valSlabs[i])])
	}
	const keep = 8
	if len(t.nodeSlabs) > keep {
		t.nodeSlabs = t.nodeSlabs[:keep:keep]
	}
	if len(t.keySlabs) > keep {
		t.keySlabs, t.valSlabs = t.keySlabs[:keep:keep], t.valSlabs[:keep:keep]
	}
	t.nodes, t.keys, t.vals = nil, nil, nil
	t.usedNodes, t.usedKV = 0, 0
}

// items returns a slice of n nodes to fill.
func (t *tree) items(n int) []*ynode {
	_, v := t.fields(n)
	return v[:n]
}

func (t *tree) str(s string) *ynode {
	n := t.node()
	n.kind, n.s = 's', s
	return n
}

func (t *tree) raw(s string) *ynode {
	n := t.node()
	n.kind, n.s = 'r', s
	return n
}

func yraw(s string) *ynode { return &ynode{kind: 'r', s: s} }

var (
	ynull  = yraw("null")
	ytrue  = yraw("true")
	yfalse = yraw("false")
)

func ybool(b bool) *ynode {
	if b {
		return ytrue
	}
	return yfalse
}

func (t *tree) int(i int64) *ynode   { return t.raw(strconv.FormatInt(i, 10)) }
func (t *tree) uint(u uint64) *ynode { return t.raw(strconv.FormatUint(u, 10)) }

func (t *tree) list(items []*ynode) *ynode {
	n := t.node()
	n.kind, n.vals = 'l', items
	return n
}

// The tree of a message is built from its types, as yaml.v3 would marshal
// them: every field YAML sees is written under its key, in field order;
// omitempty leaves out what yaml.v3 leaves out (IsZero where the type has
// it); an inline map's keys follow the fields, sorted, those that are also
// a field's key left out. A NullString is null when empty and a Time its
// canonical text. So a field added to Message, or to anything in it, is
// written without a line here.

var (
	nullStringType = reflect.TypeFor[NullString]()
	timeType       = reflect.TypeFor[Time]()
	isZeroerType   = reflect.TypeFor[interface{ IsZero() bool }]()
)

// valueNode is the tree of v, the value at path.
func (t *tree) valueNode(v reflect.Value, path string) (*ynode, error) {
	if n := t.leafNode(v); n != nil {
		return n, nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return ynull, nil
		}
		return t.valueNode(v.Elem(), path)
	case reflect.Struct:
		return t.structNode(v, path)
	case reflect.Slice, reflect.Array:
		items := t.items(v.Len())
		for i := range items {
			if items[i] = t.leafNode(v.Index(i)); items[i] != nil {
				continue
			}
			n, err := t.valueNode(v.Index(i), path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			items[i] = n
		}
		return t.list(items), nil
	}
	n, err := t.anyNode(v.Interface()) // maps, interfaces
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// leafNode is the node of a scalar v (a string, a number, a bool, a
// NullString, a Time), or nil: a leaf needs no path, which is built only
// for what can fail (maps and interfaces) and what holds it.
func (t *tree) leafNode(v reflect.Value) *ynode {
	switch v.Type() {
	case nullStringType:
		if v.Len() == 0 {
			return ynull
		}
		return t.str(v.String())
	case timeType:
		return t.str(timeOf(v).Format())
	}
	switch v.Kind() {
	case reflect.String:
		return t.str(v.String())
	case reflect.Bool:
		return ybool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return t.int(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t.uint(v.Uint())
	case reflect.Float32, reflect.Float64:
		return t.floatNode(v.Float())
	}
	return nil
}

func timeOf(v reflect.Value) Time {
	if v.CanAddr() {
		return *v.Addr().Interface().(*Time)
	}
	return v.Interface().(Time)
}

func (t *tree) structNode(v reflect.Value, path string) (*ynode, error) {
	plan := planOf(v.Type())
	m := t.node()
	m.kind = 'm'
	m.keys, m.vals = t.fields(len(plan.fields))
	for _, f := range plan.fields {
		fv := v.Field(f.index)
		if f.omitEmpty && emptyValue(fv, f.isZeroer) {
			continue
		}
		n := t.leafNode(fv)
		if n == nil {
			var err error
			if n, err = t.valueNode(fv, joinPath(path, f.key)); err != nil {
				return nil, err
			}
		}
		m.keys = append(m.keys, f.key)
		m.vals = append(m.vals, n)
	}
	if plan.inline >= 0 {
		if iv := v.Field(plan.inline); iv.Len() > 0 {
			other, err := t.anyNode(iv.Interface())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			for i, k := range other.keys {
				if !plan.known[k] {
					m.keys = append(m.keys, k)
					m.vals = append(m.vals, other.vals[i])
				}
			}
		}
	}
	return m, nil
}

// structPlan is how a struct type is written.
type structPlan struct {
	fields []fieldPlan
	known  map[string]bool // the fields' keys
	inline int             // the index of the inline map, or -1
}

type fieldPlan struct {
	key       string
	index     int
	omitEmpty bool
	isZeroer  bool // the field's type has IsZero
}

var plans sync.Map // reflect.Type -> *structPlan

func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{known: map[string]bool{}, inline: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if !f.IsExported() || tag == "-" {
			continue
		}
		key, opts, _ := strings.Cut(tag, ",")
		if hasOpt(opts, "inline") {
			if f.Type.Kind() != reflect.Map || p.inline >= 0 {
				// yaml.v3 also inlines structs; no type here does.
				panic(fmt.Sprintf("schema: %s.%s: the emitter inlines one map per struct only", t.Name(), f.Name))
			}
			p.inline = i
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		p.known[key] = true
		p.fields = append(p.fields, fieldPlan{key: key, index: i, omitEmpty: hasOpt(opts, "omitempty"),
			isZeroer: f.Type.Implements(isZeroerType)})
	}
	p2, _ := plans.LoadOrStore(t, p)
	return p2.(*structPlan)
}

func hasOpt(opts, opt string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// emptyValue reports whether omitempty leaves v out, as yaml.v3 decides:
// IsZero when the type has it, else the zero value, with empty lists and
// maps and structs whose fields are all empty counting as zero.
func emptyValue(v reflect.Value, isZeroer bool) bool {
	if isZeroer {
		if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			return true
		}
		if v.Kind() != reflect.Pointer && v.CanAddr() {
			return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
		}
		if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
			return z.IsZero()
		}
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Struct:
		return fieldsEmpty(v)
	}
	return v.IsZero()
}

// fieldsEmpty reports whether every field of the struct v that YAML sees
// is empty as omitempty has it (an inline map: when it has no keys).
func fieldsEmpty(v reflect.Value) bool {
	t := v.Type()
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && f.Tag.Get("yaml") != "-" && !emptyValue(v.Field(i), f.Type.Implements(isZeroerType)) {
			return false
		}
	}
	return true
}

// anyNode converts a decoded YAML value (and the Go values adapters put in
// provider_raw) to a node; maps are written with their keys sorted.
func (t *tree) anyNode(v any) (*ynode, error) {
	switch v := v.(type) {
	case nil:
		return ynull, nil
	case string:
		return t.str(v), nil
	case bool:
		return ybool(v), nil
	case int:
		return t.int(int64(v)), nil
	case int64:
		return t.int(v), nil
	case float64:
		return t.floatNode(v), nil
	case []any:
		return t.listNode(v)
	case []string:
		items := t.items(len(v))
		for i, x := range v {
			items[i] = t.str(x)
		}
		return t.list(items), nil
	case map[string]any:
		return t.mapNode(v)
	}
	return t.reflectNode(v)
}

// listNode converts a decoded YAML sequence.
func (t *tree) listNode(v []any) (*ynode, error) {
	items := t.items(len(v))
	for i, x := range v {
		n, err := t.anyNode(x)
		if err != nil {
			return nil, err
		}
		items[i] = n
	}
	return t.list(items), nil
}

// mapNode converts a decoded YAML mapping, its keys sorted.
func (t *tree) mapNode(v map[string]any) (*ynode, error) {
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m := t.node()
	m.kind, m.keys = 'm', keys
	_, m.vals = t.fields(len(keys))
	m.vals = m.vals[:len(keys)]
	for i, k := range keys {
		n, err := t.anyNode(v[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		m.vals[i] = n
	}
	return m, nil
}

// reflectNode converts a Go value of a type anyNode does not list (a
// pointer, a named type, a typed slice or map) by its kind.
func (t *tree) reflectNode(v any) (*ynode, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return ynull, nil
		}
		return t.anyNode(rv.Elem().Interface())
	case reflect.String:
		return t.str(rv.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return t.int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t.uint(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return t.floatNode(rv.Float()), nil
	case reflect.Bool:
		return ybool(rv.Bool()), nil
	case reflect.Slice, reflect.Array:
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return t.anyNode(items)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("a map with %s keys cannot be written", rv.Type().Key())
		}
		m := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return t.anyNode(m)
	}
	return nil, fmt.Errorf("a %T cannot be written", v)
}

func (t *tree) floatNode(f float64) *ynode {
	switch {
	case math.IsNaN(f):
		return t.raw(".nan")
	case math.IsInf(f, 1):
		return t.raw(".inf")
	case math.IsInf(f, -1):
		return t.raw("-.inf")
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0" // keep it a float when read back
	}
	return t.raw(s)
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
		if len(n.vals) == 0 {
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
	for _, it := range n.vals {
		writeIndent(b, indent)
		b.WriteString("-")
		switch {
		case it.kind == 'm' && len(it.keys) > 0:
			b.WriteByte(' ')
			emitMap(b, it, indent+2, true)
		case it.kind == 'l' && len(it.vals) > 0:
			b.WriteByte('\n')
			emitList(b, it, indent+2)
		default:
			emit(b, it, indent)
		}
	}
}

// spaces is what writeIndent writes from, a slice at a time.
const spaces = "                                                                "

func writeIndent(b *bytes.Buffer, n int) {
	for ; n > len(spaces); n -= len(spaces) {
		b.WriteString(spaces)
	}
	b.WriteString(spaces[:n])
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
	if len(s) > len("false") {
		return true // longer than any reserved word
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
	for line := range strings.SplitSeq(strings.TrimRight(s, "\n"), "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' || strings.TrimLeft(line, " \t") == "" {
			return false
		}
	}
	for _, r := range s {
		if r >= 0x20 && r < 0x7f || r == '\n' || r == '\t' {
			continue // the usual case, decided without printable
		}
		if !printable(r) {
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
	for line := range strings.SplitSeq(body, "\n") {
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
	for len(s) > 0 {
		// A run of printable ASCII that needs no escape, written whole.
		i := 0
		for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\' {
			i++
		}
		b.WriteString(s[:i])
		s = s[i:]
		if s == "" {
			break
		}
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		writeQuotedRune(b, r)
	}
	b.WriteByte('"')
}

// writeQuotedRune writes r inside double quotes, escaped as YAML requires.
func writeQuotedRune(b *bytes.Buffer, r rune) {
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

// encoder is the scratch of one encoding, kept in a pool: the tree's
// slabs and the output buffer serve message after message, so encoding
// one costs about one allocation, its file's bytes.
type encoder struct {
	t tree
	b bytes.Buffer
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// maxPooledBuffer bounds the buffer an encoder keeps: a message of
// megabytes does not pin its buffer for the messages after it.
const maxPooledBuffer = 1 << 20

// encodeMessage writes m as a front matter file with the emitter.
func encodeMessage(m *Message) ([]byte, error) {
	e := encoders.Get().(*encoder)
	defer func() {
		e.t.reset()
		e.b.Reset()
		if e.b.Cap() > maxPooledBuffer {
			e.b = bytes.Buffer{}
		}
		encoders.Put(e)
	}()
	n, err := e.t.valueNode(reflect.ValueOf(m).Elem(), "")
	if err != nil {
		return nil, fmt.Errorf("schema: encode %s: %w", m.ID, err)
	}
	b := &e.b
	b.Grow(2048 + len(m.Body) + 3*len(m.Content.Text))
	b.WriteString(delimiter + "\n")
	emitMap(b, n, 0, false)
	b.WriteString(delimiter + "\n")
	b.WriteString(m.Body)
	return bytes.Clone(b.Bytes()), nil
}
