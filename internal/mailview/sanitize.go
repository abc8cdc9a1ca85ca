package mailview

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/monoco/courier/schema"
)

// What list and read print comes from files anyone may have written (an
// older Courier kept control characters, another program may write
// there), so it is made safe for a terminal on the way out, whatever the
// file holds:
//
//   - the text formats (table, compact, read's text and --content) lose
//     control characters but tab and newline, and bidi overrides
//     (schema.StripControls, SafeText): an ESC sequence in a subject could retitle
//     the window, clear the screen or write the clipboard, and an RLO
//     reorder a file name;
//   - JSON stays lossless: encoding/json escapes C0 already, and DEL, C1
//     and the bidi overrides are escaped as \uXXXX too (JSONSafe);
//   - read --raw prints the file byte for byte into a pipe, and on a
//     terminal shows those characters as escapes (VisibleControls).

// SafeText strips what schema.StripControls strips.
func SafeText(s string) string {
	s, _ = schema.StripControls(s)
	return s
}

// JSONSafe escapes, in encoded JSON, the runes encoding/json leaves as
// they are and a terminal acts on (DEL, C1, the bidi overrides). They can
// only be inside strings (the structure of JSON is ASCII), where \uXXXX
// means the same rune. Only the bytes that can start one are looked at
// (0x7f, 0xc2, 0xe2), so a listing of 100,000 entries pays a byte scan.
func JSONSafe(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); i++ {
		if c := b[i]; c != 0x7f && c != 0xc2 && c != 0xe2 {
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r < 0x20 || !schema.IsStrippedControl(r) {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b)+16)
		}
		out = append(out, b[last:i]...)
		out = fmt.Appendf(out, `\u%04x`, r)
		i += size - 1
		last = i + 1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// JSONSafeWriter applies JSONSafe to a stream of JSON (ListJSON writes
// entries as they are read), holding back a rune cut by a write's end.
type JSONSafeWriter struct {
	W     io.Writer
	carry []byte
}

func (j *JSONSafeWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(j.carry) > 0 {
		p = append(j.carry, p...)
		j.carry = nil
	}
	// A lead byte of a rune JSONSafe may escape, without its continuation
	// bytes yet: keep it for the next write.
	cut := len(p)
	switch {
	case cut >= 1 && (p[cut-1] == 0xc2 || p[cut-1] == 0xe2):
		cut--
	case cut >= 2 && p[cut-2] == 0xe2:
		cut -= 2
	}
	j.carry = append(j.carry, p[cut:]...)
	if _, err := j.W.Write(JSONSafe(p[:cut])); err != nil {
		return 0, err
	}
	return n, nil
}

// Close writes what is held back.
func (j *JSONSafeWriter) Close() error {
	if len(j.carry) == 0 {
		return nil
	}
	_, err := j.W.Write(j.carry)
	j.carry = nil
	return err
}

// VisibleControls shows control characters (but tab and newline) and bidi
// overrides as escapes: \x1b, \u202e.
func VisibleControls(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError || !schema.IsStrippedControl(r) {
			if out != nil {
				out = append(out, b[i:i+size]...)
			}
			i += size
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		if r < 0x80 {
			out = fmt.Appendf(out, `\x%02x`, r)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	if out == nil {
		return b
	}
	return out
}

// OneLine folds s onto one line, its runs of white space made one space.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
