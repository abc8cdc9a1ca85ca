package mdsafe

import (
	"bytes"
	"html"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// firstLink parses md with goldmark and returns its first link's
// destination.
func firstLink(t *testing.T, md string) string {
	t.Helper()
	doc := goldmark.New().Parser().Parse(text.NewReader([]byte(md)))
	var dest string
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if l, ok := n.(*ast.Link); ok && entering && dest == "" {
			// The node keeps the backslashes; a renderer drops them.
			dest = string(util.UnescapePunctuations(l.Destination))
		}
		return ast.WalkContinue, nil
	})
	return dest
}

func TestDestinationReadsBack(t *testing.T) {
	for _, u := range []string{
		"https://example.com/a_(b)?q=1&r=2",
		"https://example.com/sp ace/tab\tend",
		"https://example.com/<x>`y`\\z",
		"mailto:ann@example.com",
	} {
		got := firstLink(t, "[x]("+Destination(u)+")")
		want := strings.NewReplacer(" ", "%20", "\t", "%09").Replace(u)
		if got != want {
			t.Errorf("%q: goldmark reads %q, want %q", u, got, want)
		}
	}
}

func TestGuard(t *testing.T) {
	long := strings.Repeat("[a](", MaxLine)
	deep := strings.Repeat(">", 3*MaxQuoteDepth) + " deep\n"
	code := "```\n" + long + "\n```\n"
	g := Guard("# title\n" + long + "\n" + deep + code)
	lines := strings.Split(g, "\n")
	if lines[0] != "# title" {
		t.Errorf("a short line changed: %q", lines[0])
	}
	if lines[1] != EscapeLine(long) || strings.Contains(firstLink(t, g), "a") {
		t.Error("a long line is not escaped to text")
	}
	if !strings.HasPrefix(lines[2], strings.Repeat(">", MaxQuoteDepth)+`\>`) {
		t.Errorf("quotes past the depth not escaped: %.60q", lines[2])
	}
	if !strings.Contains(g, code) {
		t.Error("fenced code changed")
	}
	// Escaped, the long line reads back as the text it was.
	var out bytes.Buffer
	if err := goldmark.Convert([]byte(EscapeLine(long)), &out); err != nil || !strings.Contains(out.String(), "[a](") {
		t.Errorf("escaped line renders as %.40q, %v", out.String(), err)
	}
}

// EscapeText: inline markup escaped, "_" only where it could be
// emphasis, "&" only before an entity, the extra characters too; goldmark
// reads the result back as the text given.
func TestEscapeText(t *testing.T) {
	for _, c := range []struct{ in, more, want string }{
		{`a*b_c snake_case _lead trail_ [x](y) <z> \ ~s~ ` + "`c`", "", `a\*b_c snake_case \_lead trail\_ \[x\](y) \<z> \\ \~s\~ \` + "`c\\`"},
		{"&amp; & &#35; a&b", "", `\&amp; & \&#35; a&b`},
		{"see > that!", ">!", `see \> that\!`},
		{"see > that!", "", "see > that!"},
	} {
		var b strings.Builder
		EscapeText(&b, c.in, c.more)
		if b.String() != c.want {
			t.Errorf("EscapeText(%q, %q) = %q, want %q", c.in, c.more, b.String(), c.want)
		}
		var out bytes.Buffer
		if err := goldmark.New().Convert([]byte(b.String()), &out); err != nil {
			t.Fatal(err)
		}
		if want := "<p>" + html.EscapeString(c.in) + "</p>\n"; out.String() != want {
			t.Errorf("%q renders as %q, want %q", b.String(), out.String(), want)
		}
	}
}

// Fence: three backticks, or one more than the longest run in the body.
func TestFence(t *testing.T) {
	for body, want := range map[string]string{"": "```", "a `b` ``c``": "```", "x ```` y ``": "`````"} {
		if got := Fence(body); got != want {
			t.Errorf("Fence(%q) = %q, want %q", body, got, want)
		}
	}
}
