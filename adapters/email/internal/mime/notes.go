package email

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxParseError bounds metadata.extra.parse_error: a message broken in a
// thousand places says so in its first notes.
const maxParseError = 4000

// parseNotes collects what could not be parsed, or was repaired, in the order
// found, each once. They end up in metadata.extra.parse_error.
type parseNotes struct {
	list []string
	seen map[string]bool
	size int
	cut  bool
}

func (n *parseNotes) addf(format string, args ...any) {
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
func (n *parseNotes) String() string {
	s := strings.Join(n.list, "; ")
	if n.cut {
		s += "; …"
	}
	return s
}

// quoteShort quotes s for a note, cut to at most 60 bytes.
func quoteShort(s string) string {
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
