package mime

import (
	"slices"
	"strings"
	"testing"
)

// splitAddressListCopying is splitAddressList as it was, copying each item
// a byte at a time: the reference the slicing one is held to.
func splitAddressListCopying(s string) []string {
	var (
		items []string
		cur   strings.Builder
		depth int // comment nesting
		quote bool
		angle bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote:
			cur.WriteByte(c)
			if c == '\\' && i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			} else if c == '"' {
				quote = false
			}
		case depth > 0:
			cur.WriteByte(c)
			switch c {
			case '\\':
				if i+1 < len(s) {
					i++
					cur.WriteByte(s[i])
				}
			case '(':
				depth++
			case ')':
				depth--
			}
		case angle:
			cur.WriteByte(c)
			if c == '>' {
				angle = false
			}
		default:
			switch c {
			case '"':
				quote = true
				cur.WriteByte(c)
			case '(':
				depth = 1
				cur.WriteByte(c)
			case '<':
				angle = true
				cur.WriteByte(c)
			case ',', ';':
				items = append(items, cur.String())
				cur.Reset()
			case ':':
				// A group name ends here, unless this is not the first
				// thing in the item (a stray colon in an address).
				if !strings.ContainsAny(cur.String(), "@<") {
					cur.Reset()
				} else {
					cur.WriteByte(c)
				}
			default:
				cur.WriteByte(c)
			}
		}
	}
	items = append(items, cur.String())
	return items
}

// FuzzSplitAddressList: splitAddressList returns the items
// splitAddressListCopying built, as slices of the list instead of copies.
func FuzzSplitAddressList(f *testing.F) {
	for _, s := range []string{"", "a@b.c", "Ann <a@b.c>, bob@d.e; carol@f.g", "team: a@b.c, d@e.f;", "\"Last, First\" <a@b.c>",
		"(comment, with) a@b.c", "x:y@z <a:b@c>", "\"unclosed, a@b.c", "(unclosed a@b.c", "<unclosed, a@b.c", "a\\", "\"a\\\"b\"@c.d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := splitAddressList(s), splitAddressListCopying(s); !slices.Equal(got, want) {
			t.Fatalf("splitAddressList(%q) = %q, want %q", s, got, want)
		}
	})
}
