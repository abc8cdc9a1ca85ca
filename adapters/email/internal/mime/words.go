package mime

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxEncodedWord bounds the length of one encoded word (RFC 2047 says 75;
// broken encoders write longer ones).
const maxEncodedWord = 4096

// Decoder decodes the header text of one message: raw 8-bit bytes with the
// message's charset hint, then RFC 2047 encoded words. Its notes collect what
// had to be repaired or guessed.
type Decoder struct {
	hint  string // the charset of the message's text, for raw 8-bit bytes
	notes *Notes
}

// Text decodes an unstructured header value (Subject, a display name):
// raw 8-bit bytes as Raw does, then RFC 2047 encoded words, leniently. It
// makes the value one line: control characters become spaces. what names
// the value in notes.
func (d *Decoder) Text(raw []byte, what string) string {
	return OneLine(d.words(d.Raw(raw, what), what))
}

// Raw turns the bytes of a header value into UTF-8 without decoding encoded
// words: ASCII and UTF-8 (RFC 6532) as they are, other 8-bit bytes in the
// message's charset when valid in it, else guessed (noted).
func (d *Decoder) Raw(b []byte, what string) string {
	if isASCII(b) && !hasEscape(b) {
		return string(b)
	}
	return decode8bit(b, d.hint, what, d.notes)
}

// words decodes the RFC 2047 encoded words of s. It is more lenient than
// mime.WordDecoder: an encoded word may stand inside a word, its text may
// hold spaces, base64 is decoded leniently, an unknown charset keeps the
// text (noted), and the bytes of adjacent encoded words in the same charset
// are joined before they are decoded, so a character split across two words
// (as encoders of CJK text often do) comes out whole. White space between
// adjacent encoded words is dropped, as RFC 2047 says.
func (d *Decoder) words(s, what string) string {
	if !strings.Contains(s, "=?") {
		return s
	}
	var (
		out     strings.Builder
		pending []byte // decoded bytes of adjacent words in charset cs
		ends    []int  // where each word's bytes end in pending
		cs      string
		gap     string // white space after the last encoded word
	)
	flush := func() {
		if len(pending) > 0 || cs != "" {
			label := charsetLabel(cs)
			if len(ends) > 1 && !isUTF8Label(label) && lookupCharset(label) == nil && !utf8.Valid(pending) {
				// An unknown charset: joining cannot help, and each word
				// may be UTF-8 on its own.
				start := 0
				for _, e := range ends {
					out.WriteString(decodeCharset(pending[start:e], cs, d.hint, what, d.notes))
					start = e
				}
			} else {
				out.WriteString(decodeCharset(pending, cs, d.hint, what, d.notes))
			}
		}
		pending, ends, cs = pending[:0], ends[:0], ""
	}
	for len(s) > 0 {
		i := strings.Index(s, "=?")
		if i < 0 {
			break
		}
		w, charset, data, ok := parseWord(s[i:])
		if !ok {
			flush()
			out.WriteString(gap)
			gap = ""
			out.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		between := s[:i]
		adjacent := cs != "" && strings.TrimLeft(between, " \t\r\n") == ""
		if !adjacent {
			flush()
			out.WriteString(gap)
			out.WriteString(between)
		} else if charset != cs {
			flush()
		}
		gap = ""
		cs = charset
		pending = append(pending, data...)
		ends = append(ends, len(pending))
		s = s[i+len(w):]
		// White space that follows is kept only if no encoded word comes
		// next.
		j := 0
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		gap, s = s[:j], s[j:]
	}
	flush()
	out.WriteString(gap)
	out.WriteString(s)
	return out.String()
}

// parseWord parses the encoded word at the start of s ("=?charset?B?text?=").
// It returns the word's text, its charset label and its decoded bytes.
func parseWord(s string) (word, charset string, data []byte, ok bool) {
	// =?charset?e?text?=
	rest := s[2:]
	q := strings.IndexByte(rest[:min(len(rest), 66)], '?')
	if q <= 0 || q > 64 {
		return "", "", nil, false
	}
	charset = charsetLabel(rest[:q])
	for _, c := range rest[:q] {
		if !(c == '-' || c == '_' || c == '.' || c == ':' || c == '*' || c == '(' || c == ')' ||
			'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return "", "", nil, false
		}
	}
	rest = rest[q+1:]
	if len(rest) < 2 || rest[1] != '?' {
		return "", "", nil, false
	}
	enc := rest[0] | 0x20
	if enc != 'b' && enc != 'q' {
		return "", "", nil, false
	}
	rest = rest[2:]
	// Look no further than an encoded word can be long: a header full of
	// "=?" without "?=" must not cost quadratic time.
	end := strings.Index(rest[:min(len(rest), maxEncodedWord+2)], "?=")
	if end < 0 {
		return "", "", nil, false
	}
	text := rest[:end]
	word = s[:len(s)-len(rest)+end+2]
	if enc == 'b' {
		data = decodeB(text)
	} else {
		data = decodeQ(text)
	}
	return word, charset, data, true
}

// decodeB decodes the text of a "B" encoded word as base64Reader does a
// body, without its buffers.
func decodeB(text string) []byte {
	out := make([]byte, 0, len(text)*3/4+2)
	var q [4]byte
	nq := 0
	flush := func() {
		switch nq {
		case 2:
			out = append(out, q[0]<<2|q[1]>>4)
		case 3:
			out = append(out, q[0]<<2|q[1]>>4, q[1]<<4|q[2]>>2)
		}
		nq = 0
	}
	for i := 0; i < len(text); i++ {
		switch v := b64[text[i]]; v {
		case 0xfd, 0xff:
		case 0xfe:
			flush()
		default:
			q[nq] = v
			nq++
			if nq == 4 {
				out = append(out, q[0]<<2|q[1]>>4, q[1]<<4|q[2]>>2, q[2]<<6|q[3])
				nq = 0
			}
		}
	}
	flush()
	return out
}

func decodeQ(text string) []byte {
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '_':
			out = append(out, ' ')
		case c == '=' && i+2 < len(text):
			h, ok1 := unhex(text[i+1])
			l, ok2 := unhex(text[i+2])
			if ok1 && ok2 {
				out = append(out, h<<4|l)
				i += 2
			} else {
				out = append(out, c)
			}
		default:
			out = append(out, c)
		}
	}
	return out
}

// OneLine makes a decoded header value fit one line: line breaks, tabs and
// other control characters become spaces (NUL is left for CleanText to count),
// and the ends are trimmed.
func OneLine(s string) string {
	if !strings.ContainsFunc(s, isControlNotNUL) {
		return strings.TrimSpace(s)
	}
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if isControlNotNUL(r) {
			return ' '
		}
		return r
	}, s))
}

func isControlNotNUL(r rune) bool { return r != 0 && unicode.IsControl(r) }

// CleanText makes s fit the protocol: valid UTF-8 (invalid bytes become
// U+FFFD) without NUL bytes (dropped and noted in n as what).
func CleanText(s, what string, n *Notes) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if k := strings.Count(s, "\x00"); k > 0 {
		n.Addf("%s: NUL bytes removed (%d)", what, k)
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return s
}

// normalizeNewlines turns CRLF and lone CR line ends into LF.
func normalizeNewlines(s string) string {
	if !strings.Contains(s, "\r") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// normalizeNewlinesBytes is normalizeNewlines in place: it returns b, its
// CRLF and lone CR line ends turned into LF, shortened to fit.
func normalizeNewlinesBytes(b []byte) []byte {
	i := bytes.IndexByte(b, '\r')
	if i < 0 {
		return b
	}
	k := i
	for ; i < len(b); i++ {
		c := b[i]
		if c == '\r' {
			c = '\n'
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
		}
		b[k] = c
		k++
	}
	return b[:k]
}

// stripNUL drops NUL bytes from b, counting them.
func stripNUL(b []byte) ([]byte, int) {
	k := bytes.Count(b, []byte{0})
	if k == 0 {
		return b, 0
	}
	return bytes.ReplaceAll(b, []byte{0}, nil), k
}
