package mime

import (
	"bytes"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
)

// The text steps of html-to-markdown v2.5.2 (base and commonmark plugins,
// default options) that the fast path in markdown_fast.go needs, ported
// from its internal packages (MIT License, Copyright (c) 2018 Johannes
// Kaufmann; the licence is LICENSE.html-to-markdown beside this file) to
// work on byte slices without the converter's locks. Each
// keeps the library's behaviour exactly; FuzzFastMarkdown compares them,
// through the fast path, with the library itself.

// placeholder marks a character that escaping may need: the library's
// marker.MarkerEscaping.
const placeholder = '\a'

// escapeClass says what appendEscaped does with a byte of text.
var escapeClass = func() (t [256]byte) {
	for _, c := range "\\*_-+.>|$#=[]()!~`\"'" {
		t[c] = 1
	}
	t[0], t['<'], t['>'], t[']'] = 2, 3, 4, 5
	return t
}()

// appendEscaped appends a text node's content as the library's text
// transformers leave it: '<' and '>' as entities, NUL as U+FFFD, and each
// markdown character after a placeholder (a ']' inside a link escaped
// outright).
func appendEscaped(b, s []byte, link bool) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := escapeClass[s[i]]
		if c == 0 {
			continue
		}
		b = append(b, s[start:i]...)
		start = i + 1
		switch c {
		case 1:
			b = append(b, placeholder, s[i])
		case 2:
			b = append(b, "\uFFFD"...)
		case 3:
			b = append(b, "&lt;"...)
		case 4:
			b = append(b, "&gt;"...)
		case 5:
			if link {
				b = append(b, '\\', ']')
			} else {
				b = append(b, placeholder, ']')
			}
		}
	}
	return append(b, s[start:]...)
}

var percentEncoding = strings.NewReplacer(" ", "%20", "[", "%5B", "]", "%5D", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E")

// absoluteURL is the converter's defaultAssembleAbsoluteURL without a
// domain.
func absoluteURL(raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "#" {
		return raw
	}
	raw = strings.ReplaceAll(raw, "\n", "%0A")
	raw = strings.ReplaceAll(raw, "\t", "%09")
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "data" {
		return percentEncoding.Replace(raw)
	}
	u.RawQuery = converter.ParseAndEncodeQuery(u.RawQuery)
	u.RawQuery = strings.ReplaceAll(u.RawQuery, "+", "%20")
	return percentEncoding.Replace(u.String())
}

// surroundingSpaces is textutils.SurroundingSpaces.
func surroundingSpaces(content []byte) (left, trimmed, right []byte) {
	rightTrimmed := bytes.TrimRightFunc(content, unicode.IsSpace)
	right = content[len(rightTrimmed):]
	trimmed = bytes.TrimLeftFunc(rightTrimmed, unicode.IsSpace)
	left = content[0 : len(rightTrimmed)-len(trimmed)]
	return left, trimmed, right
}

// trimConsecutiveNewlines is textutils.TrimConsecutiveNewlines, appending
// to dst (which may be in[:0]): no more than two newlines in a row, and
// the spaces before a dropped one dropped with it.
func trimConsecutiveNewlines(dst, in []byte) []byte {
	for {
		i := bytes.IndexByte(in, '\n')
		if i < 0 {
			return append(dst, in...)
		}
		// The run of spaces and newlines around in[i]; the count of
		// newlines starts again after it.
		s, e := i, i
		for s > 0 && in[s-1] == ' ' {
			s--
		}
		for e < len(in) && (in[e] == ' ' || in[e] == '\n') {
			e++
		}
		dst = append(dst, in[:s]...)
		newlines, spaces := 0, 0
		for _, c := range in[s:e] {
			if c == ' ' {
				spaces++
				continue
			}
			if newlines++; newlines <= 2 {
				dst = appendSpaces(dst, spaces)
				dst = append(dst, '\n')
			}
			spaces = 0
		}
		dst = appendSpaces(dst, spaces)
		in = in[e:]
	}
}

func appendSpaces(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return b
}

// trimHardLineBreaks is textutils.TrimUnnecessaryHardLineBreaks.
func trimHardLineBreaks(b []byte) []byte {
	for _, r := range [...][2]string{{"  \n\n", "\n\n"}, {"  \n  \n", "\n\n"}, {"  \n \n", "\n\n"}} {
		if bytes.Contains(b, []byte(r[0])) {
			b = bytes.ReplaceAll(b, []byte(r[0]), []byte(r[1]))
		}
	}
	return b
}

// escapeMultiLine is textutils.EscapeMultiLine: the lines of a link's
// text joined by hard line breaks, a blank one escaped.
func escapeMultiLine(content []byte) []byte {
	if bytes.IndexByte(content, '\n') < 0 {
		return content
	}
	parts := bytes.Split(content, []byte{'\n'})
	out := make([]byte, 0, len(content))
	for i, part := range parts {
		trimmedLeft := bytes.TrimLeftFunc(part, unicode.IsSpace)
		switch {
		case len(trimmedLeft) == 0:
			out = append(out, '\\', '\n')
		case i == len(parts)-1:
			out = append(out, trimmedLeft...)
		case bytes.HasSuffix(trimmedLeft, []byte("  ")):
			out = append(out, trimmedLeft...)
			out = append(out, '\n')
		default:
			out = append(out, trimmedLeft...)
			out = append(out, ' ', ' ', '\n')
		}
	}
	return out
}

// delimitLines is textutils.DelimiterForEveryLine, appending to dst.
func delimitLines(dst, text []byte, delim string) []byte {
	for i := 0; ; i++ {
		line := text
		nl := bytes.IndexByte(text, '\n')
		if nl >= 0 {
			line, text = text[:nl], text[nl+1:]
		}
		left, trimmed, right := surroundingSpaces(line)
		dst = append(dst, left...)
		if len(trimmed) > 0 {
			dst = append(dst, delim...)
			dst = append(dst, trimmed...)
			dst = append(dst, delim...)
		}
		dst = append(dst, right...)
		if nl < 0 {
			return dst
		}
		dst = append(dst, '\n')
	}
}

// appendQuoted is textutils.SurroundByQuotes for a non-empty title.
func appendQuoted(b []byte, title string) []byte {
	double := strings.Contains(title, `"`)
	switch {
	case double && strings.Contains(title, "'"):
		b = append(b, '"')
		b = append(b, strings.ReplaceAll(title, `"`, `\"`)...)
		return append(b, '"')
	case double:
		b = append(b, '\'')
		b = append(b, title...)
		return append(b, '\'')
	}
	b = append(b, '"')
	b = append(b, title...)
	return append(b, '"')
}

// unescape is the converter's unEscapeContent with the commonmark
// plugin's unescapers: a placeholder becomes a backslash where the
// character after it would mean something to Markdown there, and goes
// away elsewhere.
func unescape(chars []byte) []byte {
	if bytes.IndexByte(chars, placeholder) < 0 {
		return chars
	}
	var escaped []int // the placeholders that become backslashes
	for i := 0; i < len(chars); i++ {
		if chars[i] != placeholder {
			continue
		}
		if i+1 >= len(chars) {
			break
		}
		if skip := unescaper(chars, i+1); skip != -1 {
			escaped = append(escaped, i)
			i += skip - 1
		}
	}
	// Decided on the whole text, the placeholders go in place.
	w := 0
	for i, c := range chars {
		if c != placeholder {
			chars[w] = c
			w++
		} else if len(escaped) > 0 && escaped[0] == i {
			chars[w] = '\\'
			w++
			escaped = escaped[1:]
		}
	}
	return chars[:w]
}

// unescaper runs the unescapers in the order the commonmark plugin
// registers them; the first that matches says how far to skip.
func unescaper(chars []byte, i int) int {
	for _, fn := range [...]func([]byte, int) int{
		isItalicOrBold, isBlockQuote, isAtxHeader, isSetextHeader, isDivider,
		isOrderedList, isUnorderedList, isImageOrLink, isFencedCode, isInlineCode, isBackslash,
	} {
		if skip := fn(chars, i); skip != -1 {
			return skip
		}
	}
	return -1
}

// lineStart reports whether only spaces and placeholders precede index
// on its line.
func lineStart(chars []byte, index int) bool {
	for i := index - 1; i >= 0; i-- {
		switch chars[i] {
		case '\n':
			return true
		case placeholder, ' ':
			continue
		}
		return false
	}
	return true
}

func isItalicOrBold(chars []byte, index int) int {
	if chars[index] != '*' && chars[index] != '_' {
		return -1
	}
	next := nextRune(chars, index)
	if unicode.IsSpace(next) || next == 0 {
		return -1
	}
	return 1
}

func isBlockQuote(chars []byte, index int) int {
	if chars[index] != '>' || !lineStart(chars, index) {
		return -1
	}
	return 1
}

func isAtxHeader(chars []byte, index int) int {
	if chars[index] != '#' || !lineStart(chars, index) {
		return -1
	}
	pounds := 1
	for i := index + 1; i < len(chars); i++ {
		switch chars[i] {
		case '#':
			pounds++
			if pounds > 6 {
				return -1
			}
			continue
		case placeholder:
			continue
		case ' ', '\t', '\n', '\r':
			return i - index
		}
		return -1
	}
	return 1
}

func isSetextHeader(chars []byte, index int) int {
	if chars[index] != '=' && chars[index] != '-' {
		return -1
	}
	newlines := 0
	for i := index - 1; i >= 0; i-- {
		switch chars[i] {
		case placeholder, ' ':
			continue
		case '\n':
			newlines++
			continue
		}
		if newlines == 1 {
			return 1
		}
		return -1
	}
	return -1
}

func isDivider(chars []byte, index int) int {
	c := chars[index]
	if c != '-' && c != '_' && c != '*' || !lineStart(chars, index) {
		return -1
	}
	count, last := 1, len(chars)
	for i := index + 1; i < len(chars); i++ {
		switch chars[i] {
		case placeholder, ' ':
			continue
		case c:
			count++
			continue
		case '\n':
			last = i
		default:
			return -1
		}
		break
	}
	if count >= 3 {
		return last - index
	}
	return -1
}

func isOrderedList(chars []byte, index int) int {
	if chars[index] != '.' && chars[index] != ')' {
		return -1
	}
	if !unicode.IsDigit(prevRune(chars, index)) {
		return -1
	}
	for i := index - 1; i >= 0; i-- {
		c := chars[i]
		if c == '\n' {
			break
		}
		if c == ' ' || c == placeholder || '0' <= c && c <= '9' {
			continue
		}
		return -1
	}
	if next := nextByte(chars, index); isSpaceByte(next) || next == 0 {
		return 1
	}
	return -1
}

func isUnorderedList(chars []byte, index int) int {
	c := chars[index]
	if c != '-' && c != '*' && c != '+' || !lineStart(chars, index) {
		return -1
	}
	if next := nextByte(chars, index); isSpaceByte(next) || next == 0 {
		return 1
	}
	return -1
}

func isImageOrLink(chars []byte, index int) int {
	switch chars[index] {
	case '!':
		if index+1 < len(chars) && chars[index+1] == '[' {
			return 1
		}
	case '[':
		for i := index + 1; i < len(chars); i++ {
			if chars[i] == '\n' {
				return -1
			}
			if chars[i] == ']' {
				return 1
			}
		}
	}
	return -1
}

func isFencedCode(chars []byte, index int) int {
	if chars[index] != '`' && chars[index] != '~' {
		return -1
	}
	for i := index - 1; i >= 0; i-- {
		if chars[i] == ' ' || chars[i] == placeholder {
			continue
		}
		if chars[i] == '\n' {
			break
		}
		return -1
	}
	count := 1
	i := index + 1
	for ; i < len(chars); i++ {
		if chars[i] == placeholder {
			continue
		}
		if chars[i] == '`' || chars[i] == '~' {
			count++
			continue
		}
		break
	}
	if count < 3 {
		return -1
	}
	return i - index
}

func isInlineCode(chars []byte, index int) int {
	if chars[index] != '`' {
		return -1
	}
	return 1
}

func isBackslash(chars []byte, index int) int {
	if chars[index] != '\\' {
		return -1
	}
	return 1
}

// isSpaceByte is the escape package's IsSpace.
func isSpaceByte(b byte) bool {
	switch b {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0:
		return true
	}
	return false
}

func nextByte(chars []byte, index int) byte {
	for i := index + 1; i < len(chars); i++ {
		if chars[i] != placeholder {
			return chars[i]
		}
	}
	return 0
}

func nextRune(chars []byte, index int) rune {
	for i := index + 1; i < len(chars); i++ {
		if chars[i] != placeholder {
			r, _ := utf8.DecodeRune(chars[i:])
			return r
		}
	}
	return 0
}

func prevRune(chars []byte, index int) rune {
	for i := index - 1; i >= 0; i-- {
		if chars[i] != placeholder {
			r, _ := utf8.DecodeLastRune(chars[:i+1])
			return r
		}
	}
	return 0
}
