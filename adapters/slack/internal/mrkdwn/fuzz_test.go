package mrkdwn_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
)

// The fuzzers check what must hold for any input: no panic, UTF-8 out,
// output within a multiple of the input, and no link to anything but
// http, https or mailto in the Markdown we write; in the mrkdwn we write,
// no "<" but those that open our own links. Seeds: the table cases here
// and testdata/fuzz.

// safeLinks reports a link in md to another scheme than http, https or
// mailto, or "".
func unsafeLink(md string) string {
	bad := ""
	check := func(dest string) {
		s := strings.ToLower(dest)
		if !strings.HasPrefix(s, "http:") && !strings.HasPrefix(s, "https:") && !strings.HasPrefix(s, "mailto:") {
			bad = dest
		}
	}
	find(md, ast.KindLink, func(n ast.Node, _ []byte) { check(string(unescape(n.(*ast.Link).Destination))) })
	find(md, ast.KindAutoLink, func(n ast.Node, src []byte) {
		if n.(*ast.AutoLink).AutoLinkType == ast.AutoLinkURL {
			check(string(n.(*ast.AutoLink).URL(src)))
		}
	})
	find(md, ast.KindImage, func(n ast.Node, _ []byte) { bad = "image " + string(n.(*ast.Image).Destination) })
	return bad
}

func FuzzToMarkdown(f *testing.F) {
	for _, c := range toMarkdownCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := mrkdwn.ToMarkdown(in, names)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", in)
		}
		// every byte escaped, a fence or a quote mark each line, a
		// resolved name (at most "Ann Lee") each mention of 5 bytes
		if len(out) > 4*len(in)+64 {
			t.Fatalf("%d bytes from %d: %q", len(out), len(in), in)
		}
		if bad := unsafeLink(out); bad != "" {
			t.Fatalf("%q gave a link to %q: %q", in, bad, out)
		}
	})
}

func FuzzBlocksToMarkdown(f *testing.F) {
	for _, c := range blocksCases {
		f.Add(c.blocks)
	}
	f.Add(`[{"type":"rich_text","elements":[{"type":"rich_text_list","elements":[{"type":"rich_text_list","elements":[]}]}]}]`)
	f.Add(`[{"type":"table","rows":[[null],[{"type":"rich_text","elements":[{"type":"rich_text_quote"}]}]]}]`)
	f.Fuzz(func(t *testing.T, blocks string) {
		out, ok := mrkdwn.BlocksToMarkdown([]byte(blocks), names)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", blocks)
		}
		if ok != (out != "") {
			t.Fatalf("ok %v with %q", ok, out)
		}
		if bad := unsafeLink(out); bad != "" {
			t.Fatalf("%q gave a link to %q: %q", blocks, bad, out)
		}
		if len(out) > 8*len(blocks)+64 {
			t.Fatalf("%d bytes from %d: %q", len(out), len(blocks), blocks)
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
		out := mrkdwn.FromMarkdown(md)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", md)
		}
		if len(out) > 8*len(md)+64 {
			t.Fatalf("%d bytes from %d: %q", len(out), len(md), md)
		}
		// Every "<" opens a link we wrote; text's are &lt;.
		for rest := out; ; {
			i := strings.IndexByte(rest, '<')
			if i < 0 {
				break
			}
			rest = rest[i+1:]
			s := strings.ToLower(rest)
			if !strings.HasPrefix(s, "http:") && !strings.HasPrefix(s, "https:") && !strings.HasPrefix(s, "mailto:") {
				t.Fatalf("a bare < in %q from %q", out, md)
			}
			end := strings.IndexAny(rest, "<>\n")
			if end < 0 || rest[end] != '>' {
				t.Fatalf("an unclosed <%s in %q from %q", rest, out, md)
			}
		}
	})
}
