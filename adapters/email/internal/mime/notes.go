package mime

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxParseError bounds metadata.extra.parse_error: a message broken in a
// thousand places says so in its first notes.
const maxParseError = 4000

// Notes collects what could not be parsed, or was repaired, in the order
// found, each once; the email adapter puts them in
// metadata.extra.parse_error. The zero value is ready to use.
type Notes struct {
	list []string
	seen map[string]bool
	size int
	cut  bool
}

// Addf adds a note, formatted as fmt.Sprintf does, made one line of
// valid UTF-8 without control characters. A note already there is not
// added again; past 4000 bytes of notes, the rest are dropped and String
// ends in "…".
func (n *Notes) Addf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return -1
		}
		return r
	}, s)
	if n.seen[s] {
		return
	}
	if n.seen == nil {
		n.seen = make(map[string]bool)
	}
	n.seen[s] = true
	if n.size+len(s)+2 > maxParseError {
		n.cut = true
		return
	}
	n.size += len(s) + 2
	n.list = append(n.list, s)
}

// String joins the notes with "; ".
func (n *Notes) String() string {
	s := strings.Join(n.list, "; ")
	if n.cut {
		s += "; …"
	}
	return s
}

// QuoteShort quotes s for a note, cut to at most 60 bytes.
func QuoteShort(s string) string {
	const max = 60
	if len(s) > max {
		i := max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return fmt.Sprintf("%q", s)
}
