package mime

import (
	"bufio"
	"bytes"
	"io"
	"iter"
	"net/textproto"
)

// MaxHeaderBytes bounds what is kept of one header block. Fields past it are
// read and dropped (and noted), so a huge header costs time, not memory.
const MaxHeaderBytes = 1 << 20

// headerField is one header field: its canonical key and its raw value, unfolded
// (each line trimmed, lines joined by one space) and not decoded.
type headerField struct {
	key   string
	value []byte
}

// Header is the fields of a message or a part, in order.
type Header []headerField

// Get returns the value of the first field named key (canonical form, as
// textproto.CanonicalMIMEHeaderKey makes it), or nil. Values are unfolded
// and not decoded.
func (h Header) Get(key string) []byte {
	for _, f := range h {
		if f.key == key {
			return f.value
		}
	}
	return nil
}

// Has reports whether a field named key exists.
func (h Header) Has(key string) bool {
	for _, f := range h {
		if f.key == key {
			return true
		}
	}
	return false
}

// All returns the values of every field named key, in order.
func (h Header) All(key string) [][]byte {
	var out [][]byte
	for _, f := range h {
		if f.key == key {
			out = append(out, f.value)
		}
	}
	return out
}

// Fields yields every field in order, its canonical key and raw value:
// for the readers whose meaning depends on where a field stands (the
// Authentication-Results above or below a Received).
func (h Header) Fields() iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for _, f := range h {
			if !yield(f.key, f.value) {
				return
			}
		}
	}
}

// readHeader reads a header block from br leniently: what RFC 5322 and the
// wild allow, and what neither does but mail holds anyway.
//
//   - An mbox "From " line before the first field (top is set) is skipped.
//   - A line that is not a field ("Key: value") nor a continuation, when the
//     line after it is a field again, is taken for broken folding and
//     appended to the field before it if that field ends in ';' or ',' or
//     the line looks like a parameter ("name=value"), and skipped
//     otherwise. When no field follows, the header ends there and the line
//     is the first of the body (a message without the blank line, or
//     without any header).
//   - An indented first line is read as a field if it is one.
//   - Past MaxHeaderBytes, fields are dropped.
//
// It returns the fields and the bytes it read that belong to the body, which
// the caller reads before the rest of br.
func readHeader(br *bufio.Reader, top bool, what string, n *Notes) (Header, []byte) {
	if lines, end := bufferedHeader(br); end > 0 {
		// The lines are br's buffer: parsed before br reads on.
		h, rest := parseHeaderLines(lines, top, what, n)
		br.Discard(end)
		return h, rest
	}
	lines, leftover := readHeaderLines(br, what, n)
	h, rest := parseHeaderLines(lines, top, what, n)
	return h, append(leftover, rest...)
}

// bufferedHeader returns the lines of a header block that br holds whole
// in its buffer, as readHeaderLines would read them, and the length of the
// block with the blank line that ends it; end is 0 when the block does not
// fit in the buffer or ends without a blank line. br reads on as
// readHeaderLines would, a fill whenever the buffer holds no further line
// end. The lines are slices of br's buffer, not copied: valid until br
// reads on.
func bufferedHeader(br *bufio.Reader) (lines [][]byte, end int) {
	var b []byte
	i, count := 0, 0 // the start of the line to look at, the lines before it
	for end == 0 {
		b, _ = br.Peek(br.Buffered())
		j := bytes.IndexByte(b[i:], '\n')
		switch {
		case j >= 0 && len(trimEOL(b[i:i+j+1])) == 0:
			end = i + j + 1
		case j >= 0:
			i += j + 1
			count++
		case len(b) == br.Size():
			return nil, 0
		default:
			if _, err := br.Peek(len(b) + 1); err != nil {
				return nil, 0
			}
		}
	}
	lines = make([][]byte, 0, count)
	for i := 0; len(lines) < count; {
		j := bytes.IndexByte(b[i:], '\n')
		lines = append(lines, b[i:i+j+1:i+j+1])
		i += j + 1
	}
	return lines, end
}

// readHeaderLines reads the lines of a header block up to the blank line
// that ends it (not returned), keeping MaxHeaderBytes of them; past that,
// skipOverLimit drops the rest of the header, noted, and returns the line
// that starts the body, if it read one.
func readHeaderLines(br *bufio.Reader, what string, n *Notes) (lines [][]byte, leftover []byte) {
	budget := MaxHeaderBytes
	arena := make([]byte, 0, 512) // the lines, one after the other: a few allocations for many
	for budget > 0 {
		var line []byte
		var err error
		arena, line, err = readLine(arena, br, budget)
		budget -= len(line)
		if len(line) > 0 {
			if len(trimEOL(line)) == 0 {
				return lines, nil // the blank line
			}
			lines = append(lines, line)
		}
		if err != nil {
			return lines, nil
		}
	}
	dropped, leftover := skipOverLimit(br)
	if dropped > 0 {
		n.Addf("%s: over %d bytes: %d fields dropped", what, MaxHeaderBytes, dropped)
	}
	return lines, leftover
}

// skipOverLimit reads and drops what still looks like header (fields,
// counted, and their continuation lines) up to the blank line. The first
// line that is not header is returned: the body starts there. A line
// longer than the peek is cut: it was past a megabyte of header anyway.
func skipOverLimit(br *bufio.Reader) (dropped int, leftover []byte) {
	for {
		_, line, _ := readLine(nil, br, 1<<10)
		if len(line) == 0 {
			return dropped, nil
		}
		l := trimEOL(line)
		if len(l) == 0 {
			return dropped, nil
		}
		if l[0] == ' ' || l[0] == '\t' {
			continue
		}
		if _, _, ok := splitField(l); ok {
			dropped++
			continue
		}
		return dropped, line
	}
}

// parseHeaderLines makes the fields of a header block's lines, as
// readHeader says. When the body starts before the last line, it returns
// the lines from there too.
func parseHeaderLines(lines [][]byte, top bool, what string, n *Notes) (Header, []byte) {
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	var (
		h = make(Header, 0, len(lines))
		a = values{b: make([]byte, 0, size)} // room for the values: folding shortens lines
	)
	cur := -1 // the field that continuation lines extend
	start := 0
	if top && len(lines) > 0 && bytes.HasPrefix(lines[0], []byte("From ")) {
		start = 1
	}
	for i := start; i < len(lines); i++ {
		l := trimEOL(lines[i])
		if l[0] == ' ' || l[0] == '\t' {
			h, cur = continueField(h, cur, l, &a, what, n)
			continue
		}
		if key, value, ok := splitField(l); ok {
			h = append(h, headerField{key: key, value: a.fold(nil, value)})
			cur = len(h) - 1
			continue
		}
		if key, value, ok := splitLooseField(l); ok && looseFollows(lines[i+1:]) {
			// A field name RFC 5322 does not allow (spaces, 8-bit
			// bytes) among fields: a field all the same.
			n.Addf("%s: malformed field name %s", what, QuoteShort(key))
			h = append(h, headerField{key: key, value: a.fold(nil, value)})
			cur = len(h) - 1
			continue
		}
		if i+1 < len(lines) && isFieldLine(trimEOL(lines[i+1])) {
			strayLine(h, cur, l, &a, what, n)
			continue
		}
		// The body starts here.
		if len(h) > 0 {
			n.Addf("%s: no blank line between header and body", what)
		}
		var body []byte
		for _, rest := range lines[i:] {
			body = append(body, rest...)
		}
		return h, body
	}
	return h, nil
}

// continueField appends an indented line to the field cur. Before the
// first field, the line is read as a field if it is one, else skipped;
// both are noted. It returns the fields and the field now current.
func continueField(h Header, cur int, l []byte, a *values, what string, n *Notes) (Header, int) {
	if cur >= 0 {
		h[cur].value = a.fold(h[cur].value, l)
		return h, cur
	}
	if key, value, ok := splitField(bytes.TrimLeft(l, " \t")); ok {
		n.Addf("%s: indented first field", what)
		h = append(h, headerField{key: key, value: a.fold(nil, value)})
		return h, len(h) - 1
	}
	n.Addf("%s: continuation line before the first field skipped", what)
	return h, cur
}

// strayLine handles a line that is neither a field nor a continuation,
// with more fields after it: a broken line inside the header. It continues
// the field cur when that one is a list cut after a separator or the line
// is a parameter ("name=value"), as when folding lost its indent; else it
// is dropped, as mime4j does. Both are noted.
func strayLine(h Header, cur int, l []byte, a *values, what string, n *Notes) {
	switch {
	case cur >= 0 && (bytes.HasSuffix(h[cur].value, []byte(";")) || bytes.HasSuffix(h[cur].value, []byte(",")) ||
		bytes.IndexByte(l, '=') > 0):
		n.Addf("%s: line without a field name joined to %s", what, h[cur].key)
		h[cur].value = a.fold(h[cur].value, l)
	default:
		n.Addf("%s: malformed line %s skipped", what, QuoteShort(string(l)))
	}
}

// readLine reads one line, its line end included, appended to arena: it
// returns arena and the line, a slice of it that appending to arena never
// changes. Bytes past max are read and dropped.
func readLine(arena []byte, br *bufio.Reader, max int) ([]byte, []byte, error) {
	start := len(arena)
	for {
		chunk, err := br.ReadSlice('\n')
		if room := max - (len(arena) - start); room > 0 {
			arena = append(arena, chunk[:min(len(chunk), room)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil && arena[len(arena)-1] != '\n' {
			arena = append(arena, '\n') // the cut line still ends
		}
		if len(arena) == start {
			return arena, nil, err
		}
		return arena, arena[start:len(arena):len(arena)], err
	}
}

// splitField splits a "Key: value" line. A key holds printable ASCII other
// than ':' and may be followed by spaces before the colon.
func splitField(l []byte) (key string, value []byte, ok bool) {
	i := bytes.IndexByte(l, ':')
	if i <= 0 {
		return "", nil, false
	}
	k := bytes.TrimRight(l[:i], " \t")
	if len(k) == 0 {
		return "", nil, false
	}
	for _, c := range k {
		if c < 33 || c > 126 {
			return "", nil, false
		}
	}
	return canonicalKey(k), l[i+1:], true
}

// commonKeys maps the field names most mail has, as senders write them,
// to their canonical form: looked up without allocating, where
// textproto.CanonicalMIMEHeaderKey takes a string of each.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Return-Path", "Received", "DKIM-Signature", "ARC-Seal", "ARC-Message-Signature", "ARC-Authentication-Results",
		"Authentication-Results", "Received-SPF", "Message-ID", "In-Reply-To", "References", "Date", "From", "Sender",
		"Reply-To", "To", "Cc", "Bcc", "Subject", "MIME-Version", "Content-Type", "Content-Transfer-Encoding",
		"Content-Disposition", "Content-ID", "Content-Language", "Delivered-To", "X-Mailer", "List-Id",
		"List-Unsubscribe", "List-Unsubscribe-Post", "Precedence", "Auto-Submitted", "Thread-Topic", "Thread-Index",
		"X-Original-To", "User-Agent", "Feedback-ID", "X-Google-DKIM-Signature", "X-Gm-Message-State", "X-Received",
	} {
		c := textproto.CanonicalMIMEHeaderKey(k)
		m[k], m[c] = c, c
	}
	return m
}()

// canonicalKey is textproto.CanonicalMIMEHeaderKey of k.
func canonicalKey(k []byte) string {
	if c, ok := commonKeys[string(k)]; ok {
		return c
	}
	return textproto.CanonicalMIMEHeaderKey(string(k))
}

// splitLooseField splits a "Key: value" line whose key holds bytes RFC 5322
// does not allow (white space, 8-bit bytes), but no control characters. It
// must start with a letter.
func splitLooseField(l []byte) (key string, value []byte, ok bool) {
	i := bytes.IndexByte(l, ':')
	if i <= 0 || i > 200 {
		return "", nil, false
	}
	k := bytes.TrimRight(l[:i], " \t")
	if len(k) == 0 || !('a' <= k[0]|0x20 && k[0]|0x20 <= 'z') {
		return "", nil, false
	}
	for _, c := range k {
		if c < 32 && c != '\t' || c == 127 {
			return "", nil, false
		}
	}
	return textproto.CanonicalMIMEHeaderKey(string(k)), l[i+1:], true
}

// looseFollows reports whether the lines after a loosely formed field show
// it is in the header: past its continuation lines comes another field
// (strict or loose) or the end of the header block.
func looseFollows(rest [][]byte) bool {
	for _, line := range rest {
		l := trimEOL(line)
		if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
			continue
		}
		if _, _, ok := splitLooseField(l); ok {
			return true
		}
		return false
	}
	return true
}

func isFieldLine(l []byte) bool {
	_, _, ok := splitField(l)
	return ok
}

// values holds the values of a header's fields one after the other, so
// that a header of twenty fields allocates a few times, not twenty.
type values struct{ b []byte }

// fold returns v with one physical line l of a field's value appended,
// trimmed, with one space before it when v is not empty: in place when v is the last value held (a field and its continuation
// lines), else copied to the end first. Each value returned is a slice that
// appending to another never changes.
func (a *values) fold(v, l []byte) []byte {
	l = bytes.Trim(l, " \t\r")
	if len(l) == 0 {
		return v
	}
	start := len(a.b)
	if len(v) > 0 && len(v) <= len(a.b) && &a.b[len(a.b)-1] == &v[len(v)-1] {
		start -= len(v) // v ends the buffer: extend it there
	} else {
		a.b = append(a.b, v...)
	}
	if len(a.b) > start {
		a.b = append(a.b, ' ')
	}
	a.b = append(a.b, l...)
	return a.b[start:len(a.b):len(a.b)]
}

// trimEOL strips the line end (LF or CRLF) of a line.
func trimEOL(l []byte) []byte {
	l = bytes.TrimSuffix(l, []byte("\n"))
	return bytes.TrimSuffix(l, []byte("\r"))
}

// bodyReader returns the body of an entity whose header readHeader read
// from br: the leftover lines, then the rest of br.
func bodyReader(br *bufio.Reader, leftover []byte) *bufio.Reader {
	if len(leftover) == 0 {
		return br
	}
	return bufio.NewReaderSize(io.MultiReader(bytes.NewReader(leftover), br), bufSize)
}
