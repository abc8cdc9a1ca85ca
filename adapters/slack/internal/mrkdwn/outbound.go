package mrkdwn

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/monoco/courier/internal/mdsafe"
)

// parser reads drafts as CommonMark plus GFM's strikethrough and tables
// (what agents write). It is safe for concurrent use.
var parser = goldmark.New(goldmark.WithExtensions(extension.Strikethrough, extension.Table)).Parser()

// FromMarkdown converts CommonMark (an agent's draft) to Slack mrkdwn for
// chat.postMessage: **bold** → *bold*, *em*/_em_ → _em_, ~~s~~ → ~s~,
// [text](url) → <url|text>, bare URLs kept, inline code and fenced code
// blocks (``` without the language), block quotes ("> " per line), bullet
// and ordered lists (nested by four spaces a level, as Slack's clients write
// them), headings as *bold* lines, hard breaks, images as <url|alt>. It
// escapes &, < and > in text as Slack requires, and in nothing it writes
// itself (the <...> of a link, the ">" of a quote).
//
// A link to a scheme other than http, https or mailto is written as text
// beside its label, not as a link: a draft is not trusted either.
func FromMarkdown(md string) string {
	md = strings.ToValidUTF8(md, "\uFFFD")
	if len(md) > maxDraft {
		// Eight times what Slack posts (40,000 characters): written as it
		// is, escaped, in one linear pass.
		return escapeSlack(md)
	}
	src := []byte(mdsafe.Guard(md))
	doc := parser.Parse(text.NewReader(src))
	r := &outRenderer{src: src}
	return strings.TrimRight(r.blocks(doc, 0), "\n")
}

// maxDraft bounds the drafts parsed as Markdown; mdsafe.Guard keeps
// goldmark linear within it (long lines, deep quotes).
const maxDraft = 320 << 10

type outRenderer struct {
	src []byte
}

var bullets = [...]string{"•", "◦", "▪"}

// blocks renders the block children of n, separated by blank lines.
func (r *outRenderer) blocks(n ast.Node, depth int) string {
	var parts []string
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if s := r.block(c, depth); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

func (r *outRenderer) block(n ast.Node, depth int) string {
	if depth > maxDepth {
		return escapeSlack(plainText(n, r.src))
	}
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return r.inlines(n, depth, false)
	case *ast.Heading:
		s := strings.TrimSpace(r.inlines(n, depth, true))
		if s == "" {
			return ""
		}
		return "*" + s + "*"
	case *ast.ThematicBreak:
		return "───"
	case *ast.CodeBlock, *ast.FencedCodeBlock:
		return "```\n" + escapeSlack(strings.TrimRight(lines(n, r.src), "\n")) + "\n```"
	case *ast.HTMLBlock:
		s := lines(n, r.src)
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(r.src))
		}
		return escapeSlack(strings.TrimRight(s, "\n"))
	case *ast.Blockquote:
		body := r.blocks(n, depth+1)
		ls := strings.Split(body, "\n")
		for i, l := range ls {
			ls[i] = strings.TrimRight("> "+l, " ")
		}
		return strings.Join(ls, "\n")
	case *ast.List:
		return r.list(n, depth, 0)
	case *east.Table:
		return r.table(n, depth)
	}
	return escapeSlack(plainText(n, r.src))
}

// list writes a list with its nested lists, indented four spaces a level
// with Slack's own bullets (•, ◦, ▪) or numbers.
func (r *outRenderer) list(l *ast.List, depth, level int) string {
	var out []string
	num := l.Start
	if num == 0 && l.IsOrdered() {
		num = 1
	}
	pad := strings.Repeat("    ", min(level, maxDepth))
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		marker := bullets[level%len(bullets)]
		if l.IsOrdered() {
			marker = strconv.Itoa(num) + "."
			num++
		}
		first := true
		var lines []string
		for c := item.FirstChild(); c != nil; c = c.NextSibling() {
			if sub, ok := c.(*ast.List); ok && depth < maxDepth {
				if first {
					lines = append(lines, pad+marker)
					first = false
				}
				lines = append(lines, r.list(sub, depth+1, level+1))
				continue
			}
			s := r.block(c, depth+1)
			if !first {
				lines = append(lines, "") // the item's blocks apart, as in the draft
			}
			for _, x := range strings.Split(s, "\n") {
				if first {
					lines = append(lines, pad+marker+" "+x)
					first = false
				} else if x == "" {
					lines = append(lines, "")
				} else {
					lines = append(lines, pad+"    "+x)
				}
			}
		}
		if first {
			lines = append(lines, pad+marker)
		}
		out = append(out, strings.Join(lines, "\n"))
	}
	return strings.Join(out, "\n")
}

// table writes a GFM table as a code block of aligned-by-pipes rows: mrkdwn
// has no tables, and monospace keeps the columns readable.
func (r *outRenderer) table(t *east.Table, depth int) string {
	var rows []string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.TrimSpace(plainText(c, r.src)))
		}
		rows = append(rows, strings.Join(cells, " | "))
	}
	return "```\n" + escapeSlack(strings.Join(rows, "\n")) + "\n```"
}

// inlines renders the inline children of n; in a heading (already bold)
// strong emphasis adds no second pair of asterisks.
func (r *outRenderer) inlines(n ast.Node, depth int, heading bool) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(&b, c, depth+1, heading)
	}
	return b.String()
}

func (r *outRenderer) inline(b *strings.Builder, n ast.Node, depth int, heading bool) {
	if depth > maxDepth {
		b.WriteString(escapeSlack(plainText(n, r.src)))
		return
	}
	switch n := n.(type) {
	case *ast.Text:
		b.WriteString(escapeSlack(mdsafe.Unescape(n.Value(r.src))))
		if n.HardLineBreak() || n.SoftLineBreak() {
			b.WriteByte('\n')
		}
	case *ast.String:
		b.WriteString(escapeSlack(string(n.Value)))
	case *ast.CodeSpan:
		b.WriteString("`" + escapeSlack(plainText(n, r.src)) + "`")
	case *ast.Emphasis:
		inner := r.inlines(n, depth, heading)
		switch {
		case n.Level >= 2 && heading:
			b.WriteString(inner)
		case n.Level >= 2:
			r.delimit(b, n, "*", inner, "*")
		default:
			r.delimit(b, n, "_", inner, "_")
		}
	case *east.Strikethrough:
		r.delimit(b, n, "~", r.inlines(n, depth, heading), "~")
	case *ast.Link:
		dest := mdsafe.Unescape(n.Destination)
		// Slack has no formatting inside a link's label; it writes a bold
		// link as *<url|label>* (its own text of such a message does), so
		// a label wholly emphasised takes its emphasis outside.
		open, close := labelStyle(n, heading)
		link := slackLink(dest, plainText(n, r.src))
		if open == "" {
			b.WriteString(link)
			return
		}
		r.delimit(b, n, open, link, close)
	case *ast.Image:
		dest := mdsafe.Unescape(n.Destination)
		b.WriteString(slackLink(dest, plainText(n, r.src)))
	case *ast.AutoLink:
		u := string(n.URL(r.src))
		if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(u), "mailto:") {
			b.WriteString(slackLink("mailto:"+u, u))
			return
		}
		b.WriteString(slackLink(u, ""))
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			s := n.Segments.At(i)
			b.WriteString(escapeSlack(string(s.Value(r.src))))
		}
	default:
		b.WriteString(escapeSlack(plainText(n, r.src)))
	}
}

// delimit writes inner between a pair of Slack's delimiters. Slack formats
// only at word boundaries, where Markdown's "*" also formats inside a word
// (**foo**bar): a zero-width space on a side where a letter or digit
// touches the delimiter makes that side a boundary for Slack, and shows as
// nothing.
func (r *outRenderer) delimit(b *strings.Builder, n ast.Node, open, inner, close string) {
	if inner == "" {
		return
	}
	if last, _ := utf8.DecodeLastRuneInString(b.String()); b.Len() > 0 && wordRune(last) {
		b.WriteString(zwsp)
	}
	b.WriteString(open + inner + close)
	if next, ok := n.NextSibling().(*ast.Text); ok {
		if first, _ := utf8.DecodeRune(next.Value(r.src)); wordRune(first) {
			b.WriteString(zwsp)
		}
	}
}

// labelStyle returns Slack's delimiters for the emphasis and strike that
// wrap the whole label of a link, outermost first.
func labelStyle(link ast.Node, heading bool) (open, close string) {
	for c := link.FirstChild(); c != nil && c.NextSibling() == nil && c.PreviousSibling() == nil; c = c.FirstChild() {
		d := ""
		switch c := c.(type) {
		case *ast.Emphasis:
			switch {
			case c.Level < 2:
				d = "_"
			case !heading:
				d = "*"
			}
		case *east.Strikethrough:
			d = "~"
		default:
			return open, close
		}
		open, close = open+d, d+close
	}
	return open, close
}

const zwsp = "\u200b"

// slackLink writes <url|label> for http, https and mailto, and the label
// and address as text for anything else.
func slackLink(url, label string) string {
	label = strings.Join(strings.Fields(label), " ")
	switch scheme(url) {
	case "http", "https", "mailto":
		u := slackURL(url)
		if label == "" || label == url {
			return "<" + u + ">"
		}
		return "<" + u + "|" + escapeSlack(label) + ">"
	}
	if label == "" || label == url {
		return escapeSlack(url)
	}
	return escapeSlack(label + " (" + url + ")")
}

// slackURL percent-encodes what would end or split a <url|label> sequence
// (and spaces, which Slack does not take in one).
func slackURL(u string) string {
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		switch c := u[i]; {
		case c == '|' || c == '<' || c == '>' || c <= ' ' || c == 0x7f:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// escapeSlack escapes the three characters Slack reserves in text.
var escapeSlack = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// lines returns the raw lines of a block (code, HTML).
func lines(n ast.Node, src []byte) string {
	var b strings.Builder
	ls := n.Lines()
	for i := 0; i < ls.Len(); i++ {
		s := ls.At(i)
		b.Write(s.Value(src))
	}
	return b.String()
}

// plainText returns the text of a node and its descendants, without markup,
// walking with an explicit stack so no nesting depth can exhaust ours.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 && n.FirstChild() == nil {
		return lines(n, src)
	}
	stack := []ast.Node{n}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch c := c.(type) {
		case *ast.Text:
			b.WriteString(mdsafe.Unescape(c.Value(src)))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
			continue
		case *ast.String:
			b.Write(c.Value)
			continue
		case *ast.AutoLink:
			b.Write(c.URL(src))
			continue
		case *ast.RawHTML:
			for i := 0; i < c.Segments.Len(); i++ {
				s := c.Segments.At(i)
				b.Write(s.Value(src))
			}
			continue
		}
		if c.Type() == ast.TypeBlock && c.FirstChild() == nil {
			b.WriteString(lines(c, src))
			continue
		}
		if c != n && c.Type() == ast.TypeBlock {
			b.WriteByte('\n')
		}
		// children pushed in reverse so they pop in order
		var kids []ast.Node
		for k := c.FirstChild(); k != nil; k = k.NextSibling() {
			kids = append(kids, k)
		}
		for i := len(kids) - 1; i >= 0; i-- {
			stack = append(stack, kids[i])
		}
	}
	return b.String()
}
