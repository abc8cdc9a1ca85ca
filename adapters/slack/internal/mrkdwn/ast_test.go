package mrkdwn_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// The tests judge Markdown by what a CommonMark parser (goldmark, with
// GFM's strikethrough and tables) reads in it, not by its bytes alone: an
// outline is the tree as a short string, e.g.
// p("see " a[https://x.com]("X") " and " strong("this")).

var gm = goldmark.New(goldmark.WithExtensions(extension.Strikethrough, extension.Table))

func parseMD(md string) (ast.Node, []byte) {
	src := []byte(md)
	return gm.Parser().Parse(text.NewReader(src)), src
}

// outline returns the tree of md. Paragraphs and the text blocks of tight
// lists are both p; hard and soft line breaks are both "\n" in text;
// adjacent text is merged.
func outline(md string) string {
	doc, src := parseMD(md)
	var b strings.Builder
	outlineChildren(&b, doc, src)
	return b.String()
}

func outlineChildren(b *strings.Builder, n ast.Node, src []byte) {
	first := true
	var text strings.Builder
	flush := func() {
		if text.Len() == 0 {
			return
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		fmt.Fprintf(b, "%q", text.String())
		text.Reset()
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			text.Write(unescape(c.Value(src)))
			if c.SoftLineBreak() || c.HardLineBreak() {
				text.WriteByte('\n')
			}
			continue
		case *ast.String:
			text.Write(c.Value)
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

func unescape(b []byte) []byte { return []byte(mrkdwn.UnescapeMarkdown(b)) }

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
		if n.IsOrdered() {
			head = fmt.Sprintf("ol%d", n.Start)
		} else {
			head = "ul"
		}
	case *ast.ListItem:
		head = "li"
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		fmt.Fprintf(b, "code%q", lines(n, src))
		return
	case *ast.CodeSpan:
		var t strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if s, ok := c.(*ast.Text); ok {
				t.Write(s.Value(src))
			} else if s, ok := c.(*ast.String); ok {
				t.Write(s.Value)
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
		b.WriteString("html")
		return
	case *ast.HTMLBlock:
		b.WriteString("htmlblock")
		return
	case *east.Table:
		head = "table"
	case *east.TableHeader, *east.TableRow:
		head = "tr"
	case *east.TableCell:
		head = "td"
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

// count returns how many nodes of a kind md holds, and visits each.
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

// plain returns the text a reader sees in md: the text of every node, link
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
			b.Write(unescape(n.Value(src)))
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

var listMarker = regexp.MustCompile(`^\s*(?:[-*+•◦▪]|\d{1,9}[.)]|[a-zA-Z][.)]|[ivxIVX]{1,5}[.)])\s+`)

// words returns the words (runs of letters and digits) of what a reader
// sees, dropping list markers at the start of a line: Slack's text writes
// "a." or "◦" where the blocks hold a list, and neither is a word of the
// message.
func words(md string) []string {
	var out []string
	for _, line := range strings.Split(plain(md), "\n") {
		line = listMarker.ReplaceAllString(line, "")
		out = append(out, strings.FieldsFunc(line, func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		})...)
	}
	return out
}

func TestOutlineHelper(t *testing.T) {
	// The helper the other tests stand on, checked on Markdown whose tree
	// the CommonMark spec fixes.
	for md, want := range map[string]string{
		"a **b** *c* ~~d~~ `e`": `p("a " strong("b") " " em("c") " " del("d") " " cs"e")`,
		"- x\n  - y\n- z":       `ul(li(p("x") ul(li(p("y")))) li(p("z")))`,
		"3. x\n4. y":            `ol3(li(p("x")) li(p("y")))`,
		"> q\n\nr":              `quote(p("q")) p("r")`,
		"[l](http://x.com/\\(a\\)) <http://y.com>": `p(a[http://x.com/(a)]("l") " " a[http://y.com]("http://y.com"))`,
		"```\nx\n```": `code"x\n"`,
		"a\\*b\\_c":   `p("a*b_c")`,
	} {
		if got := outline(md); got != want {
			t.Errorf("outline(%q)\n got %s\nwant %s", md, got, want)
		}
	}
	if got := words("1. one\n   a. two\n- three four"); strings.Join(got, " ") != "one two three four" {
		t.Errorf("words: %q", got)
	}
}

var (
	kindLink     = ast.KindLink
	kindAutoLink = ast.KindAutoLink
)
