package content_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/monoco/courier/adapters/lark/internal/content"
)

// The tests judge Markdown by what a CommonMark parser (goldmark, with
// GFM strikethrough) reads in it, not by its bytes alone: an outline is
// the tree as a short string, e.g. p("see " a[https://x.com]("X")).

var gm = goldmark.New(goldmark.WithExtensions(extension.Strikethrough))

func parseMD(md string) (ast.Node, []byte) {
	src := []byte(md)
	return gm.Parser().Parse(text.NewReader(src)), src
}

func unescape(b []byte) string { return content.UnescapeMarkdown(b) }

// outline returns the tree of md. Paragraphs and tight list text are both
// p; soft and hard line breaks are both "\n" in text; adjacent text is
// merged.
func outline(md string) string {
	doc, src := parseMD(md)
	var b strings.Builder
	outlineChildren(&b, doc, src)
	return b.String()
}

func outlineChildren(b *strings.Builder, n ast.Node, src []byte) {
	first := true
	var txt strings.Builder
	flush := func() {
		if txt.Len() == 0 {
			return
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		fmt.Fprintf(b, "%q", txt.String())
		txt.Reset()
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			txt.WriteString(unescape(c.Value(src)))
			if c.SoftLineBreak() || c.HardLineBreak() {
				txt.WriteByte('\n')
			}
			continue
		case *ast.String:
			txt.Write(c.Value)
			continue
		}
		flush()
		if !first {
			b.WriteByte(' ')
		}
		first = false
		outlineNode(b, c, src)
	}
	flush()
}

func outlineNode(b *strings.Builder, n ast.Node, src []byte) {
	head := ""
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		head = "p"
	case *ast.Heading:
		head = fmt.Sprintf("h%d", n.Level)
	case *ast.Blockquote:
		head = "quote"
	case *ast.List:
		head = "ul"
		if n.IsOrdered() {
			head = fmt.Sprintf("ol%d", n.Start)
		}
	case *ast.ListItem:
		head = "li"
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		lang := ""
		if f, ok := n.(*ast.FencedCodeBlock); ok {
			lang = string(f.Language(src))
		}
		fmt.Fprintf(b, "code%s%q", lang, lines(n, src))
		return
	case *ast.CodeSpan:
		var t strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if s, ok := c.(*ast.Text); ok {
				t.Write(s.Value(src))
			}
		}
		fmt.Fprintf(b, "cs%q", t.String())
		return
	case *ast.Emphasis:
		head = "em"
		if n.Level == 2 {
			head = "strong"
		}
	case *east.Strikethrough:
		head = "del"
	case *ast.Link:
		head = fmt.Sprintf("a[%s]", unescape(n.Destination))
	case *ast.Image:
		head = fmt.Sprintf("img[%s]", unescape(n.Destination))
	case *ast.AutoLink:
		fmt.Fprintf(b, "a[%s](%q)", n.URL(src), n.Label(src))
		return
	case *ast.ThematicBreak:
		b.WriteString("hr")
		return
	case *ast.RawHTML:
		var t strings.Builder
		for i := 0; i < n.Segments.Len(); i++ {
			s := n.Segments.At(i)
			t.Write(s.Value(src))
		}
		fmt.Fprintf(b, "html%q", t.String())
		return
	case *ast.HTMLBlock:
		b.WriteString("htmlblock")
		return
	default:
		head = n.Kind().String()
	}
	b.WriteString(head + "(")
	outlineChildren(b, n, src)
	b.WriteString(")")
}

func lines(n ast.Node, src []byte) string {
	var b strings.Builder
	for i := 0; i < n.Lines().Len(); i++ {
		s := n.Lines().At(i)
		b.Write(s.Value(src))
	}
	return b.String()
}

// find counts the nodes of a kind in md, visiting each.
func find(md string, kind ast.NodeKind, visit func(n ast.Node, src []byte)) int {
	doc, src := parseMD(md)
	count := 0
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering && n.Kind() == kind {
			count++
			if visit != nil {
				visit(n, src)
			}
		}
		return ast.WalkContinue, nil
	})
	return count
}

// plain returns the text a reader sees in md: every node's text, link
// labels included and destinations not, code as it is.
func plain(md string) string {
	doc, src := parseMD(md)
	var b strings.Builder
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			if n.Type() == ast.TypeBlock {
				b.WriteByte('\n')
			}
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Text:
			b.WriteString(unescape(n.Value(src)))
			if n.SoftLineBreak() || n.HardLineBreak() {
				b.WriteByte('\n')
			}
		case *ast.String:
			b.Write(n.Value)
		case *ast.AutoLink:
			b.Write(n.Label(src))
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			b.WriteString(lines(n, src))
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// words returns the words (runs of letters and digits) of s.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// links returns the destinations of md's links, in order.
func links(md string) []string {
	var out []string
	doc, src := parseMD(md)
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			out = append(out, unescape(n.Destination))
		case *ast.AutoLink:
			out = append(out, string(n.URL(src)))
		case *ast.Image:
			out = append(out, "image:"+unescape(n.Destination))
		}
		return ast.WalkContinue, nil
	})
	return out
}

func TestOutlineHelper(t *testing.T) {
	// The helpers the other tests stand on, checked on Markdown whose
	// tree the CommonMark spec fixes.
	for md, want := range map[string]string{
		"a **b** *c* ~~d~~ `e`":           `p("a " strong("b") " " em("c") " " del("d") " " cs"e")`,
		"- x\n  - y\n- z":                 `ul(li(p("x") ul(li(p("y")))) li(p("z")))`,
		"3. x\n4. y":                      `ol3(li(p("x")) li(p("y")))`,
		"> q\n\nr":                        `quote(p("q")) p("r")`,
		"[l](http://x.com/\\(a\\))":       `p(a[http://x.com/(a)]("l"))`,
		"```go\nx\n```":                   `codego"x\n"`,
		"a\\*b\\_c &amp; <u>d</u>\n\n---": `p("a*b_c & " html"<u>" "d" html"</u>") hr`,
	} {
		if got := outline(md); got != want {
			t.Errorf("outline(%q)\n got %s\nwant %s", md, got, want)
		}
	}
	if got := strings.Join(words(plain("**a** [b](http://c) `d`")), " "); got != "a b d" {
		t.Errorf("words of plain: %q", got)
	}
}

type astNode = ast.Node

var kindFenced = ast.KindFencedCodeBlock
