package content_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"

	"github.com/monoco/courier/adapters/lark/internal/content"
)

// The fuzzers check what must hold for any input: no panic, UTF-8 out,
// output within a multiple of the input, no link in our Markdown to
// anything but http, https or mailto, and (FromMarkdown) content Lark
// would read. Seeds: the table cases here and testdata/fuzz.

// unsafeLink returns a link in md to another scheme than http, https or
// mailto, or an image (we write none), or "".
func unsafeLink(md string) string {
	bad := ""
	for _, l := range links(md) {
		s := strings.ToLower(l)
		if !strings.HasPrefix(s, "http:") && !strings.HasPrefix(s, "https:") && !strings.HasPrefix(s, "mailto:") {
			bad = l
		}
	}
	return bad
}

var fuzzMentions = []content.Mention{{Key: "@_user_1", ID: "ou_a", Name: "Ann"}, {Key: "@_user_2", ID: "ou_b", Name: strings.Repeat("B", 300)}}

func FuzzParse(f *testing.F) {
	for _, c := range parseCases {
		f.Add(c.typ, c.content)
	}
	f.Add("post", `{"content":[[{"tag":"text","text":"x","style":["bold","italic","lineThrough","underline"]}]]}`)
	f.Add("interactive", strings.Repeat(`{"elements":[`, 40)+`{"tag":"markdown","content":"deep"}`+strings.Repeat(`]}`, 40))
	f.Fuzz(func(t *testing.T, typ, in string) {
		r, err := content.Parse(typ, in, fuzzMentions, content.Names{})
		if err != nil && !errors.Is(err, content.ErrMalformed) {
			t.Fatalf("error %v is no ErrMalformed", err)
		}
		if !utf8.ValidString(r.Text) || !utf8.ValidString(r.Markdown) {
			t.Fatalf("invalid UTF-8 from %q %q", typ, in)
		}
		// every byte escaped, style markers around one-byte elements,
		// names within the content's size plus 64 KiB
		if limit := 4*len(in) + len(typ) + 64<<10 + 1024; len(r.Markdown) > limit || len(r.Text) > limit {
			t.Fatalf("%d/%d bytes from %d: %q %q", len(r.Markdown), len(r.Text), len(in), typ, in)
		}
		if bad := unsafeLink(r.Markdown); bad != "" {
			t.Fatalf("%q %q gave a link to %q: %q", typ, in, bad, r.Markdown)
		}
		if !json.Valid(r.Raw) {
			t.Fatalf("raw %q is not JSON", r.Raw)
		}
		if len(r.Resources) > 100 {
			t.Fatalf("%d resources", len(r.Resources))
		}
	})
}

func FuzzFromMarkdown(f *testing.F) {
	for _, c := range fromMarkdownCases {
		f.Add(c.in)
	}
	for _, md := range roundTrips {
		f.Add(md)
	}
	f.Fuzz(func(t *testing.T, md string) {
		typ, c, err := content.FromMarkdown(md)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "content: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if !json.Valid(c) || !utf8.Valid(c) {
			t.Fatalf("%q gave %q", md, c)
		}
		// A post spends tens of bytes of JSON on an element of one
		// character; it is bounded by what Lark takes (30 KB), text by
		// its draft (JSON-escaped).
		if typ == content.TypePost && len(c) > 30<<10 || typ == content.TypeText && len(c) > 6*len(md)+16 {
			t.Fatalf("%s of %d bytes from %d: %q", typ, len(c), len(md), md)
		}
		switch typ {
		case content.TypeText:
			var v struct{ Text *string }
			if json.Unmarshal(c, &v) != nil || v.Text == nil {
				t.Fatalf("text %s", c)
			}
		case content.TypePost:
			var v map[string]struct {
				Content [][]struct {
					Tag, Href string
					UserID    string `json:"user_id"`
				}
			}
			if json.Unmarshal(c, &v) != nil || len(v) != 1 {
				t.Fatalf("post %s", c)
			}
			for _, line := range v["zh_cn"].Content {
				for _, e := range line {
					h := strings.ToLower(e.Href)
					switch e.Tag {
					case "text", "code_block", "hr":
					case "a":
						if !strings.HasPrefix(h, "http:") && !strings.HasPrefix(h, "https:") && !strings.HasPrefix(h, "mailto:") {
							t.Fatalf("%q gave a link to %q", md, e.Href)
						}
					case "at":
						if !strings.HasPrefix(e.UserID, "ou_") {
							t.Fatalf("%q gave an at of %q", md, e.UserID)
						}
					default:
						t.Fatalf("%q gave tag %q", md, e.Tag)
					}
				}
			}
		default:
			t.Fatalf("type %q", typ)
		}
		// what we send, we read
		if _, err := content.Parse(typ, string(c), nil, content.Names{}); err != nil {
			t.Fatalf("%s %s: %v", typ, c, err)
		}
	})
}

var _ = ast.KindLink
