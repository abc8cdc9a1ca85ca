package schema

import (
	"strings"
	"unicode/utf8"
)

// StripControls removes from s what must not reach a terminal, nor a file
// agents read as text, and returns the rest with the number of characters
// removed:
//
//   - C0 control characters but tab and newline: ESC starts terminal escape
//     sequences (colours, cursor moves, a window title, OSC 52 writing the
//     clipboard), BEL rings, CR and BS overwrite what was shown;
//   - DEL, and the C1 controls U+0080–U+009F (U+009B is a CSI to terminals
//     that honour 8-bit controls);
//   - the bidirectional embeddings, overrides and isolates U+202A–U+202E and
//     U+2066–U+2069, which show text in another order than it is read
//     ("invoice\u202Efdp.exe" displays as "invoiceexe.pdf").
//
// Everything else stays, invalid UTF-8 bytes included (they are not
// runes a terminal acts on, and text fields are valid UTF-8 already). When
// nothing is removed, s itself is returned, without allocating.
func StripControls(s string) (string, int) {
	i, size := indexControl(s)
	if i < 0 {
		return s, 0
	}
	var b strings.Builder
	b.Grow(len(s))
	n := 0
	for i >= 0 {
		b.WriteString(s[:i])
		s = s[i+size:]
		n++
		i, size = indexControl(s)
	}
	b.WriteString(s)
	return b.String(), n
}

// indexControl returns the index and the length in bytes of the first
// character of s that IsStrippedControl holds, or -1. It reads bytes, not
// runes (decoding every rune of every text field was most of the cost of
// stripping): ASCII ones are tested as they are, and only the lead bytes
// of the other characters' encodings look further, 0xC2 (U+0080–U+009F)
// and 0xE2 (U+202A–U+202E, U+2066–U+2069). Neither is ever a continuation
// byte, so each starts a rune where utf8 would decode one, and invalid
// bytes stay as they are, as utf8.RuneError did.
func indexControl(s string) (int, int) {
	for i := 0; i < len(s); i++ {
		if !controlLead[s[i]] {
			continue // one load and a test
		}
		switch c := s[i]; {
		case c < 0x20:
			if c != '\t' && c != '\n' {
				return i, 1
			}
		case c < 0x7f:
		case c == 0x7f:
			return i, 1
		case c == 0xc2:
			if i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f {
				return i, 2
			}
		case c == 0xe2:
			if i+2 < len(s) && (s[i+1] == 0x80 && s[i+2] >= 0xaa && s[i+2] <= 0xae ||
				s[i+1] == 0x81 && s[i+2] >= 0xa6 && s[i+2] <= 0xa9) {
				return i, 3
			}
		}
	}
	return -1, 0
}

// controlLead marks the bytes indexControl looks at: the C0 controls but
// tab and newline, DEL, and the lead bytes 0xC2 and 0xE2.
var controlLead = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t' && c != '\n'
	}
	t[0x7f], t[0xc2], t[0xe2] = true, true, true
	return t
}()

// IsStrippedControl reports whether StripControls removes r.
func IsStrippedControl(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// CleanText makes s fit a message file's text field: valid UTF-8 (bad
// bytes as U+FFFD) and no NUL.
func CleanText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.ReplaceAll(s, "\x00", "")
}
