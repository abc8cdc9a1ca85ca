package mime

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// The fast path of toMarkdown: a renderer of our own for the HTML most
// mail is made of (paragraphs, divs, tables, spans, fonts, links, bold,
// italic, breaks, images, rules, headings, lists), run over the parsed tree
// without changing it. It follows html-to-markdown's pipeline step for
// step on that subset: the removal of head, script, style and comments,
// the collapse of white space, the rendering (text escaped with the
// library's placeholder, then unescaped by the same rules, see
// markdown_post.go) and the trimming. Anything it cannot render exactly as
// the library would (another tag, a tree the library rewrites before
// rendering, nesting deeper than fastDepth) makes it decline, and the
// library converts the same tree. The differential tests and
// FuzzFastMarkdown hold it to the library's output.

// mdKind is what the fast path makes of a node.
type mdKind uint8

const (
	kDecline mdKind = iota // outside the subset
	kRemove                // dropped with all it holds (head, script, comments, ...)
	kText
	kPlain  // the document, html, body, td, u, ...: their children
	kBlock  // p, div, table, ...: a block of their children
	kInline // span, font: their children
	kBold
	kItalic
	kLink
	kBr
	kImg
	kHr
	kHeading // h1 to h6
	kList    // ul, ol
	kItem    // li
)

// fastDepth bounds the nesting the fast path follows; deeper trees are
// the library's (whose recursion is no shallower).
const fastDepth = 256

func kindOf(n *html.Node) mdKind {
	switch n.Type {
	case html.TextNode:
		return kText
	case html.CommentNode, html.DoctypeNode:
		return kRemove
	case html.DocumentNode:
		return kPlain
	case html.ElementNode:
	default:
		return kDecline
	}
	if n.Namespace != "" {
		return kDecline
	}
	switch n.Data {
	case "head", "script", "style", "link", "meta", "iframe", "noscript", "input", "textarea":
		return kRemove
	case "html", "body":
		return kPlain
	case "p", "div":
		return kBlock
	case "span", "font":
		return kInline
	case "b", "strong":
		return kBold
	case "i", "em":
		return kItalic
	case "a":
		return kLink
	case "br":
		return kBr
	case "img":
		return kImg
	case "hr":
		return kHr
	case "h1", "h2", "h3", "h4", "h5", "h6":
		return kHeading
	case "ul", "ol":
		return kList
	case "li":
		return kItem
	case "address", "article", "aside", "details", "dialog", "dd", "dl", "dt", "fieldset",
		"figcaption", "figure", "footer", "form", "header", "hgroup", "main", "nav", "section", "table":
		// The rest of dom.NameIsBlockNode: rendered by the fallback.
		return kBlock
	case "blockquote", "pre", "code", "var", "samp", "kbd", "tt",
		// Void elements to the collapse of white space.
		"area", "base", "col", "command", "embed", "keygen", "param", "track", "wbr":
		return kDecline
	}
	// Any other element the library renders by its fallback, as its
	// children: td, center, u, a custom element, ...
	return kPlain
}

// keptNext returns the next sibling of n that the library keeps after its
// removal step, or nil.
func keptNext(n *html.Node) *html.Node {
	for n = n.NextSibling; n != nil && kindOf(n) == kRemove; n = n.NextSibling {
	}
	return n
}

func keptFirst(n *html.Node) *html.Node {
	c := n.FirstChild
	if c != nil && kindOf(c) == kRemove {
		c = keptNext(c)
	}
	return c
}

// mergesNext reports whether the library would merge the bold or italic
// element n with a following one (its MergeAdjacent, which looks through
// spans and beyond): the fast path declines those.
func mergesNext(n *html.Node) bool {
	node := keptNext(n)
	for node != nil {
		switch kindOf(node) {
		case kBold, kItalic:
			return true
		}
		if node.Type != html.ElementNode || node.Data != "span" {
			return false
		}
		node = nextNeighbor(node, true)
	}
	return false
}

// nextNeighbor is dom.GetNextNeighborNode (or, without children,
// GetNextNeighborNodeExcludingOwnChild) over the tree after removal.
func nextNeighbor(n *html.Node, children bool) *html.Node {
	var next *html.Node
	if children {
		next = keptFirst(n)
	}
	for p := n; next == nil && p != nil; p = p.Parent {
		next = keptNext(p)
	}
	return next
}

// plainList reports whether the list l renders without the library's
// list rewrites: only items (and blank text) in it, and no list after it
// that the library would keep apart with its end-of-list comment. Blank
// text between two lists may or may not survive the collapse of white
// space; such lists are declined.
func plainList(l *html.Node) bool {
	for c := keptFirst(l); c != nil; c = keptNext(c) {
		if kindOf(c) != kItem && (c.Type != html.TextNode || strings.TrimSpace(c.Data) != "") {
			return false
		}
	}
	for node := nextNeighbor(l, false); node != nil; node = nextNeighbor(node, true) {
		switch kindOf(node) {
		case kList:
			return false
		case kItem, kHr:
			return true
		case kText:
			if strings.Trim(node.Data, " \r\n\t") != "" {
				return true
			}
		}
	}
	return true
}

// swappedLink returns the link that is the only child of the bold or
// italic element n (white space aside): the library swaps the two, so
// that the emphasis goes inside the link.
func swappedLink(n *html.Node) *html.Node {
	var only *html.Node
	count := 0
	for c := keptFirst(n); c != nil; c = keptNext(c) {
		if c.Type == html.TextNode && strings.TrimSpace(c.Data) == "" {
			continue
		}
		count++
		only = c
	}
	if count == 1 && kindOf(only) == kLink {
		return only
	}
	return nil
}

// span is a piece of fastMD.arena.
type span struct{ start, end int }

// fastMD is the state of one fast conversion.
type fastMD struct {
	arena   []byte // the collapsed text of the kept text nodes
	texts   []span // where each kept text node's is in arena, in order
	prev    int    // collapse: index of the previous text, or -1
	keep    bool   // collapse: keep the next text's leading space
	next    int    // render: index of the next text
	decline bool   // render: met what the library does not render alike
	out     []byte
	scratch []byte
}

// fastMarkdown returns the Markdown of doc as toMarkdown returns it, or
// ok false where the library must convert it.
// size, the length of the HTML, sizes its buffers.
func fastMarkdown(doc *html.Node, size int) (md string, ok bool) {
	m := &fastMD{prev: -1, arena: make([]byte, 0, size)}
	if !m.check(doc, 0, 0) {
		return "", false
	}
	m.out = make([]byte, 0, len(m.arena)+len(m.arena)/4+size/8)
	m.trimPrev()
	m.render(doc, false)
	if m.decline {
		return "", false
	}
	return m.finish()
}

// Flags of check: the ancestors that constrain a node.
const (
	inInline = 1 << iota
	inBold
	inItalic
	inLink
)

// check walks the tree as the library's pre-render steps would see it:
// it declines what the fast path cannot render exactly, and collapses the
// white space of the text (collapse.Collapse, event for event).
func (m *fastMD) check(n *html.Node, depth int, flags int) bool {
	if depth > fastDepth {
		return false
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		k := kindOf(c)
		switch k {
		case kDecline:
			return false
		case kRemove:
			continue
		case kText:
			if !plainText(c.Data) {
				return false
			}
			m.collapseText(c.Data)
			continue
		}
		if !m.allowed(c, k, flags) {
			return false
		}
		m.collapseElement(k)
		if c.FirstChild != nil {
			if !m.check(c, depth+1, childFlags(k, flags)) {
				return false
			}
			m.collapseElement(k)
		}
	}
	return true
}

func childFlags(k mdKind, flags int) int {
	switch k {
	case kInline:
		flags |= inInline
	case kBold:
		flags |= inInline | inBold
	case kItalic:
		flags |= inInline | inItalic
	case kLink:
		flags |= inInline | inLink
	case kHeading:
		flags |= inInline
	}
	return flags
}

// allowed reports whether the element c of kind k, under flags, renders
// in the library without a pre-render step the fast path does not follow.
func (m *fastMD) allowed(c *html.Node, k mdKind, flags int) bool {
	switch k {
	case kBlock, kHr, kHeading, kItem:
		// A block inside an inline element or a heading: RenameFakeSpans
		// and LeafBlockAlternatives rewrite those.
		return flags&inInline == 0
	case kList:
		return flags&inInline == 0 && plainList(c)
	case kBold:
		return flags&inBold == 0 && !mergesNext(c)
	case kItalic:
		return flags&inItalic == 0 && !mergesNext(c)
	case kLink:
		return flags&inLink == 0 && plainAttrs(c, "href", "title")
	case kImg:
		return plainAttrs(c, "src", "alt", "title")
	}
	return true
}

// plainText reports whether s holds neither the library's escaping
// placeholder nor its code block marker, which it would read as its own.
func plainText(s string) bool {
	return strings.IndexByte(s, '\a') < 0 && !strings.Contains(s, "\uF002")
}

func plainAttrs(n *html.Node, keys ...string) bool {
	for _, a := range n.Attr {
		for _, k := range keys {
			if a.Key == k && !plainText(a.Val) {
				return false
			}
		}
	}
	return true
}

// collapseText is collapse.Collapse's step for a text node.
func (m *fastMD) collapseText(data string) {
	start := len(m.arena)
	m.arena = appendCollapsed(m.arena, data)
	if (m.prev < 0 || m.endsInSpace(m.texts[m.prev])) && !m.keep && start < len(m.arena) && m.arena[start] == ' ' {
		start++
	}
	m.texts = append(m.texts, span{start, len(m.arena)})
	if start < len(m.arena) {
		m.prev = len(m.texts) - 1
	}
}

func (m *fastMD) endsInSpace(t span) bool {
	return t.end > t.start && m.arena[t.end-1] == ' '
}

// trimPrev drops the trailing space of the previous text, if any.
func (m *fastMD) trimPrev() {
	if m.prev >= 0 && m.endsInSpace(m.texts[m.prev]) {
		m.texts[m.prev].end--
	}
}

// collapseElement is collapse.Collapse's step for an element, taken on
// the way in and again on the way out.
func (m *fastMD) collapseElement(k mdKind) {
	switch k {
	case kBlock, kHr, kBr, kHeading, kList, kItem:
		m.trimPrev()
		m.prev, m.keep = -1, false
	case kImg:
		m.prev, m.keep = -1, true
	default:
		if m.prev >= 0 {
			m.keep = false
		}
	}
}

// appendCollapsed appends s with each run of ' ', '\r', '\n' and '\t'
// replaced by one space.
func appendCollapsed(b []byte, s string) []byte {
	space := func(c byte) bool { return c == ' ' || c == '\r' || c == '\n' || c == '\t' }
	for len(s) > 0 {
		i := 0
		for i < len(s) && !space(s[i]) {
			i++
		}
		b = append(b, s[:i]...)
		if i == len(s) {
			break
		}
		b = append(b, ' ')
		for i < len(s) && space(s[i]) {
			i++
		}
		s = s[i:]
	}
	return b
}

// render writes the Markdown of n's children, before post-processing.
func (m *fastMD) render(n *html.Node, link bool) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		m.renderNode(c, link)
	}
}

func (m *fastMD) renderNode(c *html.Node, link bool) {
	switch kindOf(c) {
	case kRemove:
	case kText:
		m.out = m.appendText(link)
	case kBlock, kItem:
		m.out = append(m.out, "\n\n"...)
		m.render(c, link)
		m.out = append(m.out, "\n\n"...)
	case kHr:
		m.out = append(m.out, "\n\n* * *\n\n"...)
	case kBr:
		m.out = append(m.out, "  \n"...)
	case kImg:
		m.out = appendImage(m.out, c)
	case kBold, kItalic:
		if a := swappedLink(c); a != nil {
			m.renderLink(a, func() { m.renderSwapped(c, a) })
		} else {
			m.renderEmphasis(c, func() { m.render(c, link) })
		}
	case kLink:
		m.renderLink(c, func() { m.render(c, true) })
	case kHeading:
		m.renderHeading(c, link)
	case kList:
		m.renderList(c, link)
	default: // kPlain, kInline
		m.render(c, link)
	}
}

// appendText appends the next text, escaped.
func (m *fastMD) appendText(link bool) []byte {
	t := m.texts[m.next]
	m.next++
	return appendEscaped(m.out, m.arena[t.start:t.end], link)
}

// renderSwapped renders the emphasis e whose only child is the link a as
// the library does after swapping the two: e's other (blank) children,
// and a's children inside e's delimiters.
func (m *fastMD) renderSwapped(e, a *html.Node) {
	for c := e.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c == a:
			m.renderEmphasis(e, func() { m.render(a, true) })
		case c.Type == html.TextNode:
			m.out = m.appendText(true)
		}
	}
}

func emphasisDelim(e *html.Node) string {
	if kindOf(e) == kBold {
		return "**"
	}
	return "*"
}

// renderEmphasis writes what children renders, between e's delimiters on
// every line (commonmark's renderBoldItalic).
func (m *fastMD) renderEmphasis(e *html.Node, children func()) {
	start := len(m.out)
	children()
	m.scratch = delimitLines(m.scratch[:0], m.out[start:], emphasisDelim(e))
	m.out = append(m.out[:start], m.scratch...)
}

// renderLink writes an inline link to what a names, around what children
// renders (commonmark's renderLink, with its defaults).
func (m *fastMD) renderLink(a *html.Node, children func()) {
	href := absoluteURL(strings.TrimSpace(attr(a, "href")))
	title := strings.ReplaceAll(attr(a, "title"), "\n", " ")
	if href == "" {
		title = ""
	}
	start := len(m.out)
	children()
	left, trimmed, right := surroundingSpaces(m.out[start:])
	trimmed = escapeMultiLine(trimConsecutiveNewlines(nil, trimmed))
	s := append(m.scratch[:0], left...)
	s = append(s, '[')
	s = append(s, trimmed...)
	s = append(s, "]("...)
	s = append(s, href...)
	if title != "" {
		s = append(s, ' ')
		s = appendQuoted(s, title)
	}
	s = append(s, ')')
	s = append(s, right...)
	m.scratch = s
	m.out = append(m.out[:start], s...)
}

// renderHeading writes an ATX heading (commonmark's renderHeading): its
// content on one line, a '#' at its end escaped; nothing if it is blank.
func (m *fastMD) renderHeading(h *html.Node, link bool) {
	start := len(m.out)
	m.render(h, link)
	content := m.out[start:]
	if len(bytes.TrimSpace(content)) == 0 {
		m.out = m.out[:start]
		return
	}
	s := m.scratch[:0]
	for _, c := range content {
		if c == '\n' || c == '\r' {
			c = ' '
		}
		if c != ' ' || len(s) == 0 || s[len(s)-1] != ' ' {
			s = append(s, c)
		}
	}
	m.scratch = s
	s = bytes.TrimSpace(s)
	if n := len(s); s[n-1] == '#' && (n < 3 || s[n-3] != '\\') {
		if n < 2 {
			m.decline = true // the library's escapePoundSignAtEnd panics
			return
		}
		s[n-2] = '\\'
	}
	m.out = append(m.out[:start], "\n\n"...)
	m.out = append(m.out, "######"[:h.Data[1]-'0']...)
	m.out = append(m.out, ' ')
	m.out = append(m.out, s...)
	m.out = append(m.out, "\n\n"...)
}

// renderList writes a list (commonmark's renderListContainer): each
// non-blank child after its marker, unescaped on its own, its lines
// indented under the first.
func (m *fastMD) renderList(l *html.Node, link bool) {
	start := len(m.out)
	var items [][]byte
	for c := keptFirst(l); c != nil; c = keptNext(c) {
		at := len(m.out)
		m.renderNode(c, link)
		if item := bytes.TrimSpace(m.out[at:]); len(item) > 0 {
			items = append(items, bytes.Clone(item))
		}
		m.out = m.out[:at]
	}
	if len(items) == 0 {
		return
	}
	prefix := listPrefix(l, len(items))
	indent := strings.Repeat(" ", utf8.RuneCountInString(prefix(0)))
	m.out = append(m.out[:start], "\n\n"...)
	for i, item := range items {
		m.out = append(m.out, prefix(i)...)
		item = unescape(trimHardLineBreaks(trimConsecutiveNewlines(nil, item)))
		for k, line := range bytes.Split(item, []byte{'\n'}) {
			if k > 0 {
				m.out = append(m.out, '\n')
				m.out = append(m.out, indent...)
			}
			m.out = append(m.out, line...)
		}
		if i < len(items)-1 {
			m.out = append(m.out, '\n')
		}
	}
	m.out = append(m.out, "\n\n"...)
}

// listPrefix is commonmark's getPrefixFunc: "- ", or the item's number
// padded to the width of the last one.
func listPrefix(l *html.Node, count int) func(int) string {
	if l.Data == "ul" {
		return func(int) string { return "- " }
	}
	startAt, err := strconv.Atoi(attrOr(l, "start", "1"))
	if err != nil {
		startAt = 1
	}
	width := utf8.RuneCountInString(strconv.Itoa(startAt + count - 1))
	format := "%0" + strconv.Itoa(width) + "d. "
	return func(i int) string { return fmt.Sprintf(format, startAt+i) }
}

// appendImage writes an image (commonmark's renderImage); one without a
// source writes nothing.
func appendImage(b []byte, n *html.Node) []byte {
	src := strings.TrimSpace(attr(n, "src"))
	if src == "" {
		return b
	}
	src = absoluteURL(src)
	title := strings.ReplaceAll(attr(n, "title"), "\n", " ")
	alt := strings.ReplaceAll(attr(n, "alt"), "\n", " ")
	b = append(b, "!["...)
	for i := 0; i < len(alt); i++ {
		if (alt[i] == '[' || alt[i] == ']') && (i == 0 || alt[i-1] != '\\') {
			b = append(b, '\\')
		}
		b = append(b, alt[i])
	}
	b = append(b, "]("...)
	b = append(b, src...)
	if title != "" {
		b = append(b, ' ')
		b = appendQuoted(b, title)
	}
	return append(b, ')')
}

// attr is dom.GetAttributeOr(n, key, "").
func attr(n *html.Node, key string) string { return attrOr(n, key, "") }

func attrOr(n *html.Node, key, fallback string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return fallback
}

// finish post-processes the rendered Markdown as the library's
// post-renderers do, then trims it as toMarkdown does.
func (m *fastMD) finish() (string, bool) {
	b := bytes.TrimSpace(m.out)
	b = trimConsecutiveNewlines(b[:0], b)
	b = trimHardLineBreaks(b)
	b = unescape(b)
	if bytes.Contains(b, []byte("\uF002")) {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
