package main

import (
	"fmt"
	"io"
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
//     (schema.StripControls): an ESC sequence in a subject could retitle
//     the window, clear the screen or write the clipboard, and an RLO
//     reorder a file name;
//   - JSON stays lossless: encoding/json escapes C0 already, and DEL, C1
//     and the bidi overrides are escaped as \uXXXX too (jsonSafe);
//   - read --raw prints the file byte for byte into a pipe, and on a
//     terminal shows those characters as escapes (visibleControls).

// safeText strips what schema.StripControls strips.
func safeText(s string) string {
	s, _ = schema.StripControls(s)
	return s
}

// jsonSafe escapes, in encoded JSON, the runes encoding/json leaves as
// they are and a terminal acts on (DEL, C1, the bidi overrides). They can
// only be inside strings (the structure of JSON is ASCII), where \uXXXX
// means the same rune. Only the bytes that can start one are looked at
// (0x7f, 0xc2, 0xe2), so a listing of 100,000 entries pays a byte scan.
func jsonSafe(b []byte) []byte {
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

// jsonSafeWriter applies jsonSafe to a stream of JSON (ListJSON writes
// entries as they are read), holding back a rune cut by a write's end.
type jsonSafeWriter struct {
	w     io.Writer
	carry []byte
}

func (j *jsonSafeWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(j.carry) > 0 {
		p = append(j.carry, p...)
		j.carry = nil
	}
	// A lead byte of a rune jsonSafe may escape, without its continuation
	// bytes yet: keep it for the next write.
	cut := len(p)
	switch {
	case cut >= 1 && (p[cut-1] == 0xc2 || p[cut-1] == 0xe2):
		cut--
	case cut >= 2 && p[cut-2] == 0xe2:
		cut -= 2
	}
	j.carry = append(j.carry, p[cut:]...)
	if _, err := j.w.Write(jsonSafe(p[:cut])); err != nil {
		return 0, err
	}
	return n, nil
}

// Close writes what is held back.
func (j *jsonSafeWriter) Close() error {
	if len(j.carry) == 0 {
		return nil
	}
	_, err := j.w.Write(j.carry)
	j.carry = nil
	return err
}

// visibleControls shows control characters (but tab and newline) and bidi
// overrides as escapes: \x1b, \u202e.
func visibleControls(b []byte) []byte {
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
