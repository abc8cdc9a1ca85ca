// Package mdsafe holds what Courier's text converters need to read and
// write Markdown that comes from outsiders: a guard that keeps goldmark's
// parse time linear whatever a draft holds, and a link destination that
// CommonMark reads back as the URL given. The Slack and Lark converters
// share it.
package mdsafe

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark/util"
)

const (
	// MaxLine bounds the lines whose inline Markdown is parsed: goldmark
	// takes quadratic time on some long lines (seconds for 64 KiB), and
	// no message needs markup in a line longer than this.
	MaxLine = 4 << 10
	// MaxQuoteDepth bounds the nesting of block quotes goldmark reads (7 s
	// for 140 KiB of ">" otherwise).
	MaxQuoteDepth = 32
)

// Guard prepares Markdown for goldmark, whose time is quadratic in two
// shapes no message needs: a line longer than MaxLine (escaped, so it has
// no inline markup to try) and quotes nested deeper than MaxQuoteDepth
// (the markers past it escaped, so they are text). Lines in fenced code
// are left alone: goldmark reads them without inline parsing.
func Guard(md string) string {
	var b strings.Builder
	fence := ""
	for rest := md; rest != ""; {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		t := strings.TrimLeft(line, " ")
		if len(line)-len(t) < 4 {
			switch {
			case fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
				fence = t[:3]
			case fence != "" && strings.HasPrefix(t, fence):
				fence = ""
				b.WriteString(line)
				continue
			}
		}
		if fence == "" {
			line = capQuotes(line)
			if len(line) > MaxLine {
				line = EscapeLine(line)
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

// capQuotes escapes the quote marker past MaxQuoteDepth at the start of a
// line.
func capQuotes(line string) string {
	depth := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case ' ', '\t':
		case '>':
			if depth++; depth > MaxQuoteDepth {
				return line[:i] + `\` + line[i:]
			}
		default:
			return line
		}
	}
	return line
}

// EscapeLine backslash-escapes every ASCII punctuation character of a line
// (CommonMark lets any be escaped), so none is markup.
func EscapeLine(line string) string {
	var b strings.Builder
	b.Grow(len(line) * 2)
	for i := 0; i < len(line); i++ {
		if c := line[i]; c < 0x80 && util.IsPunct(c) {
			b.WriteByte('\\')
		}
		b.WriteByte(line[i])
	}
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

// Destination writes a link destination CommonMark reads back as url:
// a backslash before the characters that would end or change it, spaces
// and controls percent-encoded.
func Destination(url string) string {
	var b strings.Builder
	for _, r := range url {
		switch {
		case r == '\\' || r == '(' || r == ')' || r == '<' || r == '>' || r == '&' || r == '`':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r <= ' ' || r == 0x7f || unicode.IsSpace(r):
			var buf [4]byte
			for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
				b.WriteByte('%')
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&15])
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// EscapeText writes s to b as CommonMark text that renders as s, for
// words someone typed: a backslash before what opens inline markup (\ *
// ~ ` [ ] <, and the characters of more), before an "&" that would start
// an entity, and before a "_" that could open or close emphasis (one
// between two letters or digits cannot: snake_case stays readable).
func EscapeText(b *strings.Builder, s, more string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '_':
			if i == 0 || i+1 >= len(s) || !wordByte(s[i-1]) || !wordByte(s[i+1]) {
				b.WriteByte('\\')
			}
		case '\\', '*', '~', '`', '[', ']', '<':
			b.WriteByte('\\')
		case '&':
			if EntityAt(s[i:]) {
				b.WriteByte('\\')
			}
		default:
			if more != "" && strings.IndexByte(more, c) >= 0 {
				b.WriteByte('\\')
			}
		}
		b.WriteByte(c)
	}
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Fence is the fence of a code block holding body: backticks, three or
// one more than the longest run of them in body, so that the body cannot
// close it.
func Fence(body string) string {
	longest, run := 0, 0
	for i := 0; i < len(body); i++ {
		if body[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// EntityAt reports whether s starts with what CommonMark may read as an
// entity or numeric character reference: "&", then a name or "#" and
// digits (at most 32 in all), then ";".
func EntityAt(s string) bool {
	for i := 1; i < len(s) && i < 34; i++ {
		c := s[i]
		switch {
		case c == ';':
			return i > 1
		case c == '#' && i == 1:
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return false
}

// Unescape reads Markdown text as goldmark's renderer would print it: a
// backslash before punctuation dropped, entity and numeric references
// resolved. (goldmark's AST keeps both as written.)
func Unescape(b []byte) string {
	var out strings.Builder
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\' && i+1 < len(b) && util.IsPunct(b[i+1]):
			out.WriteByte(b[i+1])
			i++
		case c == '&' && EntityAt(string(b[i:min(len(b), i+34)])):
			end := i + bytes.IndexByte(b[i:], ';') + 1
			ref := b[i:end]
			if ref[1] == '#' {
				ref = util.ResolveNumericReferences(ref)
			} else {
				ref = util.ResolveEntityNames(ref)
			}
			out.Write(ref)
			i = end - 1
		default:
			out.WriteByte(c)
		}
	}
	return out.String()
}
