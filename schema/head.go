package schema

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// MaxReadText is how much text a reader of a mailbox file (`courier read`,
// reindex, the parent of a reply) takes from its front matter: the values
// of a file written under courier.limits.max_text_bytes, which may not
// exceed it, are read whole; the longer ones of a file written before
// that bound are cut (see ReadHead).
const MaxReadText = 16 << 20

const (
	// keepSmall is what any value keeps when the text budget is spent:
	// ids, names and dates are never cut.
	keepSmall = 64 << 10
	// headSlack bounds the front matter beyond its text budget: what
	// values may keep past the budget and the keys and indentation of
	// the lines. A head larger than budget + headSlack is an error.
	headSlack = 8 << 20
	// minHeadBuffer is the smallest reader buffer ReadHead works with: a
	// line's indentation and key (YAML allows keys of 1024 characters)
	// must fit in it.
	minHeadBuffer = 4096
)

// ErrHeadTooLarge is wrapped by the error of ReadHead for a front matter
// that holds more than its text budget and slack: not one Courier wrote.
var ErrHeadTooLarge = errors.New("schema: front matter too large to read")

// ReadHead reads a mailbox file's front matter from br: the lines from the
// opening "---" through the line that closes it, and no further, so that
// the caller streams the body from br after. The values hold at most
// budget bytes together (MaxReadText when 0): a longer value (the
// content.html of a file written before max_text_bytes bounded it) is cut
// at a character boundary, and what was left out is said inside it, as
// " [… N bytes more in the file, not read]", so that the head decodes
// (Decode, DecodeFile) and a file of any size is read in bounded memory.
// A value of up to 64 KiB is never cut. It cuts the forms of scalar
// Courier's files hold (plain, quoted, literal and folded blocks); others
// pass through whole. cut is how many values were cut; a file whose
// front matter is never closed is returned as far as it goes, for
// Decode to say so. Only reading br fails, or a head that is more than
// the budget and 8 MiB (ErrHeadTooLarge).
func ReadHead(br *bufio.Reader, budget int) (head []byte, cut int, err error) {
	if budget <= 0 {
		budget = MaxReadText
	}
	if br.Size() < minHeadBuffer {
		br = bufio.NewReaderSize(br, minHeadBuffer)
	}
	h := &headReader{br: br, left: budget, hard: budget + headSlack}
	if err := h.read(); err != nil {
		return nil, 0, err
	}
	return h.out, h.cut, nil
}

// headReader is the state of ReadHead.
type headReader struct {
	br   *bufio.Reader
	out  []byte
	left int // the text budget left
	hard int // the bound on len(out)
	cut  int

	// A block scalar whose content lines are being read.
	block       bool
	blockParent int // the column of its key: content is indented further
	blockIndent int // the indentation of its content; -1 before the first line
	blockVal    value

	// A quoted scalar that goes on past the end of its line.
	quote    byte // '"' or '\''; 0 when none
	quoteVal value
	qs       quoteScan
}

// value accounts for one scalar being read: how much it may keep, has
// kept and has left out.
type value struct {
	allow   int
	kept    int
	skipped int64
}

// startValue begins a value: it keeps what the budget has left, or
// keepSmall.
func (h *headReader) startValue() value { return value{allow: max(h.left, keepSmall)} }

// endValue charges a value to the budget and counts it if it was cut.
func (h *headReader) endValue(v *value) {
	h.left = max(0, h.left-v.kept)
	if v.skipped > 0 {
		h.cut++
	}
}

// marker says inside a cut value what was left out.
func marker(skipped int64) string {
	return "[… " + strconv.FormatInt(skipped, 10) + " bytes more in the file, not read]"
}

func (h *headReader) emit(b []byte) error {
	h.out = append(h.out, b...)
	if len(h.out) > h.hard {
		return fmt.Errorf("%w: over %d bytes", ErrHeadTooLarge, h.hard)
	}
	return nil
}

// fragment returns the next piece of the current line: all of it, or a
// buffer's worth when it is longer; last reports that it ends the line
// (or the input). io.EOF is returned only with nothing read.
func (h *headReader) fragment() (frag []byte, last bool, err error) {
	frag, err = h.br.ReadSlice('\n')
	switch {
	case err == nil:
		return frag, true, nil
	case errors.Is(err, bufio.ErrBufferFull):
		return frag, false, nil
	case err == io.EOF && len(frag) > 0:
		return frag, true, nil
	case err == io.EOF:
		return nil, true, io.EOF
	}
	return nil, true, fmt.Errorf("schema: read front matter: %w", err)
}

func (h *headReader) read() error {
	frag, last, err := h.fragment()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if err := h.emit(frag); err != nil {
		return err
	}
	first := bytes.TrimPrefix(frag, []byte("\ufeff"))
	if !last || string(bytes.TrimRight(first, " \t\r\n")) != delimiter {
		return nil // no front matter: Decode says so
	}
	for {
		frag, last, err := h.fragment()
		if err == io.EOF {
			h.endBlock()
			return nil
		}
		if err != nil {
			return err
		}
		done, err := h.line(frag, last)
		if done || err != nil {
			return err
		}
	}
}

// line handles a line of the front matter, given its first fragment. done
// reports the closing delimiter.
func (h *headReader) line(frag []byte, last bool) (done bool, err error) {
	if h.quote != 0 {
		return false, h.quoted(frag, last)
	}
	indent, blank := indentOf(frag, last)
	if h.block {
		switch {
		case blank:
			return false, h.blockLine(frag, last)
		case h.blockIndent < 0 && indent > h.blockParent:
			h.blockIndent = indent
			return false, h.blockLine(frag, last)
		case h.blockIndent >= 0 && indent >= h.blockIndent:
			return false, h.blockLine(frag, last)
		}
		h.endBlock()
	}
	if indent == 0 && last {
		if t := string(bytes.TrimRight(frag, " \t\r\n")); t == delimiter || t == "..." {
			return true, h.emit(frag)
		}
	}
	col, start, kind := valueStart(frag, indent)
	switch kind {
	case '|', '>':
		if err := h.passLine(frag, last); err != nil {
			return false, err
		}
		h.block, h.blockParent, h.blockIndent, h.blockVal = true, col, -1, h.startValue()
		return false, nil
	case '"', '\'':
		if err := h.emit(frag[:start+1]); err != nil {
			return false, err
		}
		h.quote, h.quoteVal, h.qs = kind, h.startValue(), quoteScan{q: kind, safeOut: len(h.out)}
		return false, h.quoted(frag[start+1:], last)
	case 'p':
		if err := h.emit(frag[:start]); err != nil {
			return false, err
		}
		v := h.startValue()
		err := h.plain(&v, frag[start:], last)
		h.endValue(&v)
		return false, err
	}
	return false, h.passLine(frag, last)
}

// passLine copies the line, whole, to the head.
func (h *headReader) passLine(frag []byte, last bool) error {
	for {
		if err := h.emit(frag); err != nil {
			return err
		}
		if last {
			return nil
		}
		var err error
		if frag, last, err = h.fragment(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// keep copies to the head what of b the value may still keep, cut at a
// character boundary, and reports whether all of b was kept.
func (h *headReader) keep(v *value, b []byte) (bool, error) {
	room := v.allow - v.kept
	if len(b) <= room {
		v.kept += len(b)
		return true, h.emit(b)
	}
	k := room
	for k > 0 && !utf8.RuneStart(b[k]) {
		k--
	}
	v.kept += k
	v.skipped += int64(len(b) - k)
	return false, h.emit(b[:k])
}

// plain reads the rest of a line holding a plain scalar, keeping what the
// value may.
func (h *headReader) plain(v *value, frag []byte, last bool) error {
	for {
		body, nl := splitNewline(frag, last)
		if v.skipped > 0 {
			v.skipped += int64(len(body))
		} else if _, err := h.keep(v, body); err != nil {
			return err
		}
		if last {
			if v.skipped > 0 {
				if err := h.emit([]byte(" " + marker(v.skipped))); err != nil {
					return err
				}
			}
			return h.emit(nl)
		}
		var err error
		if frag, last, err = h.fragment(); err == io.EOF {
			frag, last = nil, true
		} else if err != nil {
			return err
		}
	}
}

// blockLine reads a content line of a block scalar: kept, or as much of
// it as the value may keep (then ended), or counted and left out. The
// block's last line says what was (endBlock).
func (h *headReader) blockLine(frag []byte, last bool) error {
	v := &h.blockVal
	for {
		body, nl := splitNewline(frag, last)
		if v.skipped > 0 {
			v.skipped += int64(len(frag))
		} else {
			all, err := h.keep(v, body)
			if err != nil {
				return err
			}
			if !all || last {
				if err := h.emit([]byte("\n")); err != nil {
					return err
				}
				if !all {
					v.skipped += int64(len(nl))
				}
			}
		}
		if last {
			return nil
		}
		var err error
		if frag, last, err = h.fragment(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// endBlock ends the block scalar being read: a cut one ends with a line
// saying so, at its indentation.
func (h *headReader) endBlock() {
	if !h.block {
		return
	}
	h.block = false
	v := &h.blockVal
	if v.skipped > 0 {
		// Charged as the block's own text: the hard bound holds it.
		h.out = append(h.out, bytes.Repeat([]byte(" "), max(h.blockIndent, h.blockParent+2))...)
		h.out = append(h.out, marker(v.skipped)+"\n"...)
	}
	h.endValue(v)
}

// quoted reads a quoted scalar from frag on, to its closing quote, which
// may be lines away; what follows the quote passes through. A double-
// quoted scalar is cut where no escape is left open; a single-quoted one
// (Courier writes none) passes whole.
func (h *headReader) quoted(frag []byte, last bool) error {
	v := &h.quoteVal
	for {
		start := h.qs // the scan's state at the fragment's start
		end := h.qs.scan(frag)
		if end == 0 {
			// A single quote that ended the last fragment closed the
			// scalar: it is in the head already.
			h.endValue(v)
			h.quote = 0
			return h.passLine(frag, last)
		}
		body := frag
		if end >= 0 {
			body = frag[:end-1]
		}
		switch {
		case v.skipped > 0:
			v.skipped += int64(len(body))
		case h.quote == '\'' || v.kept+len(body) <= v.allow:
			if err := h.emit(body); err != nil {
				return err
			}
			v.kept += len(body)
			h.qs.markSafe(len(h.out), body, start)
		default:
			// Keep up to the last point, within what the value may
			// keep, that is outside an escape and between characters.
			k, ok := start.lastSafe(body, v.allow-v.kept)
			if ok {
				if err := h.emit(body[:k]); err != nil {
					return err
				}
				v.kept += k
			} else {
				// The escape open at the fragment's start began before
				// it: take back what of it was kept.
				drop := len(h.out) - h.qs.safeOut
				h.out = h.out[:h.qs.safeOut]
				v.kept -= drop
				k = 0
				v.skipped += int64(drop)
			}
			v.skipped += int64(len(body) - k)
		}
		if end >= 0 {
			if v.skipped > 0 {
				if err := h.emit([]byte(" " + marker(v.skipped))); err != nil {
					return err
				}
			}
			if err := h.emit([]byte{h.quote}); err != nil {
				return err
			}
			h.endValue(v)
			h.quote = 0
			return h.passLine(frag[end:], last)
		}
		if last {
			return nil // the scalar goes on on the next line
		}
		var err error
		if frag, last, err = h.fragment(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// quoteScan follows a quoted scalar through its escapes: "\x41",
// "\u00e9", "\"" in double quotes, "”" in single ones.
type quoteScan struct {
	q        byte
	esc      int  // double: -1 after a backslash, else the hex digits to come
	pendingQ bool // single: a quote seen; the next byte says whether it closes
	safeOut  int  // the length of the head at the last point outside an escape
}

// step takes the next byte and reports whether the scalar closed: at this
// byte (double), or at the byte before it (single).
func (s *quoteScan) step(c byte) bool {
	if s.q == '\'' {
		if s.pendingQ {
			s.pendingQ = false
			return c != '\''
		}
		s.pendingQ = c == '\''
		return false
	}
	switch {
	case s.esc == -1:
		switch c {
		case 'x':
			s.esc = 2
		case 'u':
			s.esc = 4
		case 'U':
			s.esc = 8
		default:
			s.esc = 0
		}
	case s.esc > 0:
		s.esc--
	case c == '\\':
		s.esc = -1
	case c == '"':
		return true
	}
	return false
}

// clean reports whether the scan is outside any escape.
func (s *quoteScan) clean() bool { return s.esc == 0 && !s.pendingQ }

// scan reads frag and returns the index just after the closing quote, or
// -1 when the scalar goes on past frag.
func (s *quoteScan) scan(frag []byte) int {
	for i, c := range frag {
		if s.step(c) {
			if s.q == '\'' {
				return i // the quote was frag[i-1]
			}
			return i + 1
		}
	}
	return -1
}

// markSafe records, after body (scanned from the state start) was copied
// to a head now out bytes long, the last point of the head that is
// outside an escape and between characters: where a later cut may fall
// back to.
func (s *quoteScan) markSafe(out int, body []byte, start quoteScan) {
	if k, ok := start.lastSafe(body, len(body)); ok {
		s.safeOut = out - len(body) + k
	}
}

// lastSafe returns the largest k <= limit such that body[:k], scanned
// from state s, ends outside an escape and between characters; ok is
// false when there is none in body (an escape began before it).
func (s quoteScan) lastSafe(body []byte, limit int) (k int, ok bool) {
	k, ok = 0, s.clean()
	for i := 0; i < len(body) && i < limit; i++ {
		s.step(body[i])
		if s.clean() && boundary(body, i+1) {
			k, ok = i+1, true
		}
	}
	return k, ok
}

// boundary reports whether b[:i] ends between characters.
func boundary(b []byte, i int) bool {
	if i < len(b) {
		return utf8.RuneStart(b[i])
	}
	for j := i - 1; j >= 0 && j >= i-utf8.UTFMax; j-- {
		if utf8.RuneStart(b[j]) {
			return utf8.FullRune(b[j:i])
		}
	}
	return true
}

// valueStart finds where the value of a line starts: after its
// indentation, its "- " item marks and its key. col is the column of the
// key (or of the item's content); kind is the value's first character
// when it is a quote or a block indicator, 'p' for another scalar, 0 when
// the line holds no scalar value to cut (a key alone, a flow collection,
// a comment).
func valueStart(frag []byte, indent int) (col, start int, kind byte) {
	i := indent
	for i < len(frag) && frag[i] == '-' && (i+1 == len(frag) || frag[i+1] == ' ' || frag[i+1] == '\n' || frag[i+1] == '\r') {
		i++
		for i < len(frag) && frag[i] == ' ' {
			i++
		}
	}
	col = i
	if i < len(frag) && (frag[i] == '?' || frag[i] == ':') && (i+1 < len(frag) && frag[i+1] == ' ') {
		i += 2
	} else if k := keyEnd(frag[i:]); k > 0 {
		i += k
	}
	for i < len(frag) && frag[i] == ' ' {
		i++
	}
	if i >= len(frag) {
		return col, i, 0
	}
	switch c := frag[i]; c {
	case '"', '\'', '|', '>':
		return col, i, c
	case '\n', '\r', '#', '[', '{', '&', '*', '!', '%', '@', '`':
		return col, i, 0
	}
	return col, i, 'p'
}

// keyEnd returns the length of "key:" at the start of b (its colon
// followed by a space or the line end), or 0 when b starts with no key.
func keyEnd(b []byte) int {
	i := 0
	if len(b) > 0 && (b[0] == '"' || b[0] == '\'') {
		q := b[0]
		for i = 1; i < len(b); i++ {
			if b[i] == '\\' && q == '"' {
				i++
				continue
			}
			if b[i] == q {
				if q == '\'' && i+1 < len(b) && b[i+1] == '\'' {
					i++
					continue
				}
				break
			}
		}
		if i >= len(b) {
			return 0
		}
		i++
		for i < len(b) && b[i] == ' ' {
			i++
		}
		if i < len(b) && b[i] == ':' && (i+1 == len(b) || b[i+1] == ' ' || b[i+1] == '\n' || b[i+1] == '\r') {
			return i + 1
		}
		return 0
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case '\n':
			return 0
		case ':':
			if i+1 == len(b) || b[i+1] == ' ' || b[i+1] == '\n' || b[i+1] == '\r' {
				return i + 1
			}
		case ' ':
			if i+1 < len(b) && b[i+1] == '#' {
				return 0 // a comment
			}
		}
	}
	return 0
}

// indentOf returns the indentation of a line from its first fragment,
// and whether the line is blank.
func indentOf(frag []byte, last bool) (int, bool) {
	i := 0
	for i < len(frag) && frag[i] == ' ' {
		i++
	}
	rest := bytes.TrimRight(frag[i:], "\r\n")
	return i, last && len(rest) == 0
}

// splitNewline splits the line end off the last fragment of a line.
func splitNewline(frag []byte, last bool) (body, nl []byte) {
	if !last {
		return frag, nil
	}
	k := len(frag)
	if k > 0 && frag[k-1] == '\n' {
		k--
		if k > 0 && frag[k-1] == '\r' {
			k--
		}
	}
	return frag[:k], frag[k:]
}
