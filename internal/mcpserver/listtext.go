package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/monoco/courier/internal/mailview"
)

// A listing's text is what a model reads of it (hosts give a model a
// tool's content, not its structured content): a line saying how many
// entries and how to get the next page, then one line an entry of the
// fields an agent acts on, tab-separated under a header. It is not a
// second copy of the structured content's JSON, which the MCP
// specification suggests for clients older than structured content:
// that copy doubled what each page costs the client to read (the
// TypeScript SDK's client spent about as long on the escaped copy as on
// the structured content), and a model read a page of 500 entries as
// about 300 KB of JSON, where these lines are about a third of it.
var textColumns = [...]string{"id", "provider", "direction", "from", "status", "claimed_by", "timestamp", "correlation_id", "reply_to", "preview"}

// textHeader is the header line of a listing's text.
var textHeader = strings.Join(textColumns[:], "\t") + "\n"

// columnOf is the place in textColumns of an entry's member, -1 for
// those the text leaves out; from is read apart.
func columnOf(key []byte) int {
	switch string(key) {
	case "id":
		return 0
	case "provider":
		return 1
	case "direction":
		return 2
	case "status":
		return 4
	case "claimed_by":
		return 5
	case "timestamp":
		return 6
	case "correlation_id":
		return 7
	case "reply_to":
		return 8
	case "preview":
		return 9
	}
	return -1
}

// entryLine appends e's line of a listing's text to out: textColumns
// read out of the entry's JSON (as list --format json prints it, by
// encoding/json) without decoding the rest, each value on one line, with
// no control characters.
func entryLine(out, e []byte) []byte {
	out, _ = appendLine(out, nil, e)
	return out
}

// appendLine appends e's line (entryLine) to text, and to esc the line
// as it is sent: escaped in a JSON string, as ASCII (appendEscaped).
func appendLine(text, esc, e []byte) ([]byte, []byte) {
	var vals [len(textColumns)][]byte
	if !layoutColumns(e, &vals) {
		vals = [len(textColumns)][]byte{}
		members(e, func(key, val []byte) {
			if string(key) == "from" {
				vals[3] = sender(val)
			} else if i := columnOf(key); i >= 0 {
				vals[i] = val
			}
		})
	}
	for i, v := range vals {
		if i > 0 {
			text, esc = append(text, '\t'), append(esc, `\t`...)
		}
		start := len(text)
		text = appendValue(text, v)
		if len(v) > 0 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
			// A string as it is in the entry: no quote, backslash or
			// control character to escape.
			esc = appendASCII(esc, text[start:])
		} else {
			esc = appendEscaped(esc, text[start:])
		}
	}
	return append(text, '\n'), append(esc, `\n`...)
}

// sender is the column from of an entry's from: its name, else its id.
func sender(from []byte) []byte {
	var id, name []byte
	members(from, func(k, v []byte) {
		switch string(k) {
		case "id":
			id = v
		case "name":
			name = v
		}
	})
	if name == nil || string(name) == `""` {
		return id
	}
	return name
}

// entryLayout is how list --format json prints an entry of the inbox
// (mailbox.Entry, by encoding/json): these members, in this order, and
// nothing after them. Each is the column it gives (textColumns), -1 for
// none, or from's.
var entryLayout = [...]struct {
	member string
	column int
}{{`{"id":`, 0}, {`,"provider":`, 1}, {`,"direction":`, 2}, {`,"path":`, -1}, {`,"timestamp":`, 6},
	{`,"received_at":`, -1}, {`,"processed_at":`, -1}, {`,"session":`, -1}, {`,"from":`, 3}, {`,"type":`, -1},
	{`,"preview":`, 9}, {`,"correlation_id":`, 7}, {`,"reply_to":`, 8}, {`,"thread_root":`, -1}, {`,"status":`, 4}}

// layoutColumns reads the columns of e if it is laid out as entryLayout
// says, which is most of a listing (a claim or a failure adds members
// after status), and says whether it was: reading the members in the
// order they come, by their place, takes about half as long as reading
// each key (members).
func layoutColumns(e []byte, vals *[len(textColumns)][]byte) bool {
	i := 0
	for _, m := range entryLayout {
		if !bytes.HasPrefix(e[i:], []byte(m.member)) {
			return false
		}
		i += len(m.member)
		end := valueEnd(e, i)
		switch {
		case m.column == 3:
			vals[3] = sender(e[i:end])
		case m.column >= 0:
			vals[m.column] = e[i:end]
		}
		i = end
	}
	return string(e[i:]) == "}"
}

// appendValue appends a JSON value as text: a string's characters, "" for
// null or nothing, any other value as it is. A string without escapes is
// copied as it is: encoding/json escapes control characters, U+2028 and
// U+2029, and JSONSafe the runes a terminal acts on, so it has none.
// One with escapes is decoded and made one safe line.
func appendValue(out, v []byte) []byte {
	switch {
	case len(v) == 0 || string(v) == "null":
		return out
	case v[0] != '"':
		return append(out, v...)
	case bytes.IndexByte(v, '\\') < 0:
		return append(out, v[1:len(v)-1]...)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return append(out, "?"...)
	}
	return append(out, mailview.OneLine(mailview.SafeText(s))...)
}

// textHead is the first line of a listing's text: the count, and the
// cursor of the next page.
func textHead(count int, next string) string {
	if next == "" {
		return fmt.Sprintf("%d entries.\n", count)
	}
	return fmt.Sprintf("%d entries; more follow: call list again with the same arguments and cursor %q for the next page.\n", count, next)
}

// members calls fn with each member of the JSON object obj: its key as
// it is between its quotes, its value as it is. obj is valid JSON, as
// encoding/json writes it; members stops at what it does not expect.
func members(obj []byte, fn func(key, val []byte)) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	for i++; ; i++ {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := stringEnd(obj, i)
		key := obj[i+1 : max(end-1, i+1)]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		end = valueEnd(obj, i)
		fn(key, obj[i:end])
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index after the string that starts at b[i] (a quote).
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		j += k
		if b[j-1] != '\\' {
			return j + 1
		}
		esc := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			esc++
		}
		j++
		if esc%2 == 0 {
			return j
		}
	}
}

// valueEnd is the index after the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' {
		j++
	}
	return j
}
