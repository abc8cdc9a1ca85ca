package mime

import (
	"regexp"
	"strings"
)

// Address is one mailbox of an address list, decoded: Addr is the
// addr-spec as written (may be empty when only a name was given), Name the
// display name.
type Address struct {
	Name, Addr string
}

// String formats the address as "Name <addr>", "addr" or "Name".
func (a Address) String() string {
	switch {
	case a.Name == "":
		return a.Addr
	case a.Addr == "":
		return a.Name
	}
	return a.Name + " <" + a.Addr + ">"
}

// AddressList parses an address list header value leniently. It never
// fails: group syntax ("undisclosed-recipients:;", "Team: a@x, b@y;")
// yields the group's members; comments are dropped (a comment after a bare
// address is its name, as in "a@x (Ann)"); an item without angle brackets
// that holds several words takes the word with an '@' as the address and
// the rest as the name; an item with no address at all is kept with its
// name only. Display names are decoded by d (encoded words, 8-bit bytes),
// inside quotes too.
func (d *Decoder) AddressList(raw []byte, what string) []Address {
	var out []Address
	for _, item := range splitAddressList(string(raw)) {
		if a, ok := d.parseAddress(item, what); ok {
			out = append(out, a)
		}
	}
	return out
}

// splitAddressList splits at the commas and semicolons that are outside
// quotes, comments and angle brackets, and drops group names ("name:").
func splitAddressList(s string) []string {
	var (
		items []string
		start int // where the item being read starts: it is s[start:i], never copied
		depth int // comment nesting
		quote bool
		angle bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote:
			if c == '\\' && i+1 < len(s) {
				i++
			} else if c == '"' {
				quote = false
			}
		case depth > 0:
			switch c {
			case '\\':
				if i+1 < len(s) {
					i++
				}
			case '(':
				depth++
			case ')':
				depth--
			}
		case angle:
			if c == '>' {
				angle = false
			}
		default:
			switch c {
			case '"':
				quote = true
			case '(':
				depth = 1
			case '<':
				angle = true
			case ',', ';':
				items = append(items, s[start:i])
				start = i + 1
			case ':':
				// A group name ends here, unless this is not the first
				// thing in the item (a stray colon in an address).
				if !strings.ContainsAny(s[start:i], "@<") {
					start = i + 1
				}
			}
		}
	}
	items = append(items, s[start:])
	return items
}

// quotedLocal matches an addr-spec whose local part is a quoted string,
// without angle brackets: "odd local"@example.com.
var quotedLocal = regexp.MustCompile(`^\s*("(?:[^"\\]|\\.)*"@[^\s(<>,;]+)\s*(?:\((.*)\))?\s*$`)

// quotedLocalOf is quotedLocal.FindStringSubmatch(item), run only on an
// item that holds `"@`, which every match does.
func quotedLocalOf(item string) []string {
	if !strings.Contains(item, `"@`) {
		return nil
	}
	return quotedLocal.FindStringSubmatch(item)
}

// parseAddress parses one mailbox; ok is false for an empty item.
func (d *Decoder) parseAddress(item, what string) (Address, bool) {
	if m := quotedLocalOf(item); m != nil {
		addr := d.Raw([]byte(m[1]), what)
		name := d.Text([]byte(m[2]), what)
		return Address{Name: name, Addr: OneLine(addr)}, true
	}
	mb := scanMailbox(item)
	name := strings.TrimSpace(mb.text)
	addr := mb.addr
	if mb.hasAddr {
		addr = cleanAddr(addr)
	} else {
		addr, name = bareAddress(name, mb.comment, mb.quoted)
	}
	name = d.Text([]byte(name), what)
	name = strings.Trim(name, ` "'`)
	if addr == "" && name == "" {
		return Address{}, false
	}
	if !isASCII([]byte(addr)) {
		addr = d.Raw([]byte(addr), what)
	}
	addr = OneLine(addr)
	if strings.EqualFold(name, addr) {
		name = ""
	}
	return Address{Name: name, Addr: addr}, true
}

// mailbox is one item of an address list, split by scanMailbox.
type mailbox struct {
	text    string // the item without its comments and angle address, quotes resolved
	comment string // the first comment, without its parentheses
	addr    string // what is between the angle brackets
	hasAddr bool   // the item has angle brackets
	quoted  bool   // the item has a quoted string
}

// scanMailbox splits an address list item into its text, its first
// comment and its angle address. Unclosed quotes, comments and angle
// brackets end at the end of the item.
func scanMailbox(item string) mailbox {
	var (
		mb   mailbox
		text strings.Builder
	)
	for i := 0; i < len(item); i++ {
		c := item[i]
		switch c {
		case '"':
			mb.quoted = true
			j := i + 1
			for ; j < len(item); j++ {
				if item[j] == '\\' && j+1 < len(item) {
					j++
					continue
				}
				if item[j] == '"' {
					break
				}
			}
			text.WriteString(unescapeQuoted(item[i+1 : min(j, len(item))]))
			i = j
		case '(':
			depth, j := 1, i+1
			for ; j < len(item) && depth > 0; j++ {
				switch item[j] {
				case '\\':
					j++
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			if mb.comment == "" {
				mb.comment = strings.TrimSuffix(item[i+1:min(j, len(item))], ")")
			}
			text.WriteByte(' ')
			i = j - 1
		case '<':
			j := strings.IndexByte(item[i:], '>')
			if j < 0 {
				j = len(item) - i
			}
			mb.addr = item[i+1 : i+j]
			mb.hasAddr = true
			i += j
		default:
			text.WriteByte(c)
		}
	}
	mb.text = text.String()
	return mb
}

// bareAddress finds the address of a mailbox written without angle
// brackets: the word with an '@' (the other words are the name), or a lone
// word without spaces, unquoted (a local address, as "root"). A comment
// names an address that has no other name ("a@x (Ann)"). It returns the
// address ("" when there is none) and the name.
func bareAddress(name, comment string, quoted bool) (string, string) {
	var addr string
	words := strings.Fields(name)
	at := -1
	for i, w := range words {
		if strings.Contains(w, "@") {
			at = i
		}
	}
	switch {
	case at >= 0:
		addr = cleanAddr(words[at])
		name = strings.Join(append(words[:at:at], words[at+1:]...), " ")
	case len(words) == 1 && !quoted:
		addr, name = cleanAddr(words[0]), ""
	}
	if name == "" && comment != "" && addr != "" {
		name = comment
	}
	return addr, name
}

// cleanAddr trims an addr-spec: white space and quotes around it, a
// "mailto:" prefix, an obsolete source route ("@a,@b:user@c").
func cleanAddr(a string) string {
	a = strings.TrimSpace(a)
	a = strings.Trim(a, `<>"' `)
	if len(a) >= 7 && strings.EqualFold(a[:7], "mailto:") {
		a = a[7:]
	}
	if strings.HasPrefix(a, "@") {
		if i := strings.IndexByte(a, ':'); i >= 0 {
			a = a[i+1:]
		}
	}
	return strings.Join(strings.Fields(a), "")
}

func unescapeQuoted(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
