package dropzone

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	maxNameLen = 255 // bytes: NAME_MAX of most file systems
	maxExtLen  = 16  // bytes, dot included: longer tails are not taken for an extension
	// fallbackName replaces a name with nothing usable left.
	fallbackName = "attachment"
)

// SanitizeName makes an attachment name safe to show and to store in
// metadata:
//
//   - only the last element after a '/' or '\' is kept;
//   - control characters (C0 with NUL, DEL, C1) are dropped, and so are the
//     bidirectional formatting characters (U+202E and kin, which make
//     "x\u202Efdp.exe" display as "xexe.pdf"), U+2028, U+2029 and U+FEFF;
//   - invalid UTF-8 bytes become U+FFFD;
//   - every run of dots becomes one dot, so the result never contains "..";
//   - leading and trailing spaces (Unicode white space) and dots are trimmed;
//   - a result over 255 bytes is cut on a rune boundary, keeping its
//     extension (a last ".xyz" of at most 16 bytes);
//   - an empty result becomes "attachment".
//
// Anything else stays, including names reserved on Windows such as "CON":
// the name is metadata, never a path in the dropzone. SanitizeName is
// idempotent: SanitizeName(SanitizeName(x)) == SanitizeName(x).
func SanitizeName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	b.Grow(len(name))
	prevDot := false
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		i += size
		// r is RuneError with size 1 for an invalid byte: it is written as
		// U+FFFD, as a genuine U+FFFD (size 3) is.
		if dropRune(r) {
			continue
		}
		if r == '.' {
			if prevDot {
				continue
			}
			prevDot = true
		} else {
			prevDot = false
		}
		b.WriteRune(r)
	}
	s := strings.TrimFunc(b.String(), trimRune)
	if len(s) > maxNameLen {
		s = cutName(s)
	}
	if s == "" {
		return fallbackName
	}
	return s
}

// dropRune reports whether r is removed from names.
func dropRune(r rune) bool {
	if unicode.IsControl(r) { // U+0000–U+001F, U+007F–U+009F
		return true
	}
	switch {
	case r == '\u061c', // arabic letter mark
		r == '\u200e', r == '\u200f', // LRM, RLM
		r >= '\u202a' && r <= '\u202e', // LRE, RLE, PDF, LRO, RLO
		r >= '\u2066' && r <= '\u2069', // LRI, RLI, FSI, PDI
		r == '\u2028', r == '\u2029',   // line and paragraph separators
		r == '\ufeff': // byte order mark
		return true
	}
	return false
}

func trimRune(r rune) bool { return r == '.' || unicode.IsSpace(r) }

// cutName shortens a sanitised, trimmed name longer than maxNameLen to at
// most maxNameLen bytes, keeping its extension. The result stays trimmed and
// free of "..": the cut stem loses its trailing dots and spaces.
func cutName(s string) string {
	ext := ""
	if i := strings.LastIndexByte(s, '.'); i > 0 && len(s)-i <= maxExtLen {
		ext = s[i:]
	}
	stem := truncate(s[:len(s)-len(ext)], maxNameLen-len(ext))
	// stem is at least maxNameLen-maxExtLen-3 bytes long and starts with a
	// rune trimRune refuses, so it is not empty after this.
	stem = strings.TrimRightFunc(stem, trimRune)
	return stem + ext
}

// truncate returns the longest prefix of s of at most n bytes that does not
// split a rune. s is valid UTF-8.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
