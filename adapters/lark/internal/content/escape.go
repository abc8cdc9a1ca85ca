package content

import (
	"strings"

	"github.com/monoco/courier/internal/mdsafe"
)

// escape returns s as Markdown text that renders as s: inline markup
// characters are backslash-escaped, and so is what would start a block
// (a heading, quote, list item, thematic break, setext underline) at the
// start of a line. atStart says whether s begins a line of the output;
// every line after a newline in s does. Leading indentation is dropped
// (four spaces would make a code block, and Markdown shows none anyway).
func escape(s string, atStart bool) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		start := atStart || i > 0
		if start {
			line = strings.TrimLeft(line, " \t")
			line = escapeLineStart(line, &b)
		}
		escapeInline(line, &b)
	}
	return b.String()
}

// escapeLineStart writes the escaped block marker line begins with, if
// any, and returns the rest of the line.
func escapeLineStart(line string, b *strings.Builder) string {
	if line == "" {
		return line
	}
	switch line[0] {
	case '#', '>', '-', '+', '=', '|':
		b.WriteByte('\\')
		b.WriteByte(line[0])
		return line[1:]
	}
	// "1." and "1)" start an ordered list
	n := 0
	for n < len(line) && n < 10 && line[n] >= '0' && line[n] <= '9' {
		n++
	}
	if n > 0 && n < len(line) && (line[n] == '.' || line[n] == ')') {
		b.WriteString(line[:n])
		b.WriteByte('\\')
		b.WriteByte(line[n])
		return line[n+1:]
	}
	return line
}

// escapeInline writes s with its inline markup escaped; ">" and "!" too
// (an image's "![", a quote's ">" where a line is cut).
func escapeInline(s string, b *strings.Builder) { mdsafe.EscapeText(b, s, ">!") }

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// scheme returns the lower-cased scheme of a URL, or "".
func scheme(u string) string {
	i := strings.IndexByte(u, ':')
	if i <= 0 {
		return ""
	}
	s := strings.ToLower(u[:i])
	for j := 0; j < len(s); j++ {
		c := s[j]
		if !(c >= 'a' && c <= 'z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return s
}

// safeLink reports whether u may become a Markdown link.
func safeLink(u string) bool {
	switch scheme(u) {
	case "http", "https", "mailto":
		return true
	}
	return false
}

// link writes a link to u labelled label. Only http, https and mailto
// become Markdown links; any other address is written as text beside its
// label, so a reader sees where it points and nothing can be clicked.
func link(u, label string, atStart bool) string {
	if !safeLink(u) {
		if label == "" || label == u {
			return escape(u, atStart)
		}
		return escape(label+" ("+u+")", atStart)
	}
	if label == "" {
		label = u
	}
	return "[" + escape(label, false) + "](" + mdsafe.Destination(u) + ")"
}

// fenced writes body as a fenced code block, with a fence longer than
// any run of backticks in it, so the body cannot close it.
func fenced(lang, body string) string {
	body = strings.TrimRight(body, "\n")
	fence := mdsafe.Fence(body)
	// The info string is the language's word characters only: anything
	// else could end the line or be read as markup by a renderer.
	lang = strings.Map(func(r rune) rune {
		if r < 128 && (wordByte(byte(r)) || r == '-' || r == '+' || r == '#' || r == '.') {
			return r
		}
		return -1
	}, lang)
	if len(lang) > 32 {
		lang = lang[:32]
	}
	if body == "" {
		return fence + lang + "\n" + fence
	}
	return fence + lang + "\n" + body + "\n" + fence
}

// clean makes s valid UTF-8 and drops the controls that are not line
// breaks or tabs (Markdown renders none, and a NUL is never text).
func clean(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsFunc(s, isBadControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isBadControl(r) {
			return -1
		}
		return r
	}, s)
}

func isBadControl(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r == '\r'
}
