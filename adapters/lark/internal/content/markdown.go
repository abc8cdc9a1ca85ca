package content

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"

	"github.com/monoco/courier/internal/mdsafe"
)

// mdParser reads drafts as CommonMark plus GFM strikethrough. It is safe
// for concurrent use.
var mdParser = goldmark.New(goldmark.WithExtensions(extension.Strikethrough)).Parser()

const (
	// maxDraft bounds a draft: Lark takes text messages up to 150 KB
	// and posts up to 30 KB (request bodies); a draft over 150 KiB can be
	// neither.
	maxDraft = 150 << 10
	// maxPost is what Lark takes as a post's request body; the content is
	// most of it.
	maxPost = 30 << 10
)

// ErrTooLarge is wrapped by FromMarkdown's error for a draft Lark would
// refuse for its size.
var ErrTooLarge = errors.New("content: draft too large for Lark")

// Message types FromMarkdown returns.
const (
	TypeText = "text"
	TypePost = "post"
)

// FromMarkdown converts an agent's Markdown draft to the content of a Lark
// message: msgType "post" (rich text under zh_cn, no title) with content
// its JSON, or "text" when the draft has no formatting a post would carry,
// so that plain words go out as plain words.
//
// Paragraph lines become post lines and paragraphs are separated by an
// empty line; **bold**, *italic*, ~~strike~~ and <u>underline</u> become
// styles; [links](url) and bare <url>s become a tags, but only to http,
// https and mailto (others are written as text beside their label); "@ou_…"
// becomes an at tag; fenced and indented code become code_block; a
// thematic break becomes hr; headings become bold lines; list items and
// quotes become text lines with their marker ("- ", "1. ", "> "); images
// become links to their address. Inline code keeps its text.
func FromMarkdown(md string) (msgType string, content json.RawMessage, err error) {
	if len(md) > maxDraft {
		return "", nil, fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, len(md), maxDraft)
	}
	md = strings.ToValidUTF8(md, "\uFFFD")
	if strings.TrimSpace(md) == "" {
		return "", nil, errors.New("content: empty draft")
	}
	src := []byte(mdsafe.Guard(md))
	doc := mdParser.Parse(text.NewReader(src))
	w := &postWriter{src: src}
	w.blocks(doc, "", 0)
	w.flush()
	// no empty lines at the ends
	for len(w.lines) > 0 && len(w.lines[len(w.lines)-1]) == 0 {
		w.lines = w.lines[:len(w.lines)-1]
	}
	if w.plain() {
		var b strings.Builder
		for i, l := range w.lines {
			if i > 0 {
				b.WriteByte('\n')
			}
			for _, e := range l {
				b.WriteString(e.Text)
			}
		}
		out, err := json.Marshal(map[string]string{"text": b.String()})
		return TypeText, out, err
	}
	out, err := json.Marshal(map[string]outPost{"zh_cn": {Content: w.lines}})
	if err != nil {
		return "", nil, fmt.Errorf("content: %v", err)
	}
	if len(out) > maxPost {
		return "", nil, fmt.Errorf("%w: the post is %d bytes, over %d", ErrTooLarge, len(out), maxPost)
	}
	return TypePost, out, nil
}

type outPost struct {
	Title   string      `json:"title,omitempty"`
	Content [][]outElem `json:"content"`
}

// outElem is a post element as the send API takes it.
type outElem struct {
	Tag      string   `json:"tag"`
	Text     string   `json:"text,omitempty"`
	Href     string   `json:"href,omitempty"`
	UserID   string   `json:"user_id,omitempty"`
	Language string   `json:"language,omitempty"`
	Style    []string `json:"style,omitempty"`
}

type postWriter struct {
	src   []byte
	lines [][]outElem
	cur   []outElem
	style []string // the styles open at this point of the inline walk
	// nested says the list about to be written is an item's sublist,
	// whose lines follow the item's without an empty line.
	nested bool
}

// plain reports whether the post is words only: no style, link, mention
// or block, and no "<" (a text message reads <at …> as a mention).
func (w *postWriter) plain() bool {
	for _, l := range w.lines {
		for _, e := range l {
			if e.Tag != "text" || len(e.Style) > 0 || strings.Contains(e.Text, "<") {
				return false
			}
		}
	}
	return true
}

// flush ends the current line.
func (w *postWriter) flush() {
	if len(w.cur) > 0 {
		w.lines = append(w.lines, w.cur)
		w.cur = nil
	}
}

// gap separates blocks with an empty line.
func (w *postWriter) gap() {
	w.flush()
	if len(w.lines) > 0 && len(w.lines[len(w.lines)-1]) > 0 {
		w.lines = append(w.lines, []outElem{})
	}
}

// blocks writes n's block children; prefix starts each of their lines
// (a quote's "> ", a list item's indentation).
func (w *postWriter) blocks(n ast.Node, prefix string, depth int) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.block(c, prefix, depth)
	}
}

func (w *postWriter) block(n ast.Node, prefix string, depth int) {
	if depth > maxDepth {
		w.gap()
		w.text(prefix + plainText(n, w.src))
		w.flush()
		return
	}
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		if _, tight := n.(*ast.TextBlock); !tight {
			w.gap()
		}
		w.text(prefix)
		w.inlines(n, prefix)
		w.flush()
	case *ast.Heading:
		w.gap()
		w.text(prefix)
		w.style = append(w.style, "bold")
		w.inlines(n, prefix)
		w.style = w.style[:len(w.style)-1]
		w.flush()
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		w.gap()
		lang := ""
		if f, ok := n.(*ast.FencedCodeBlock); ok {
			lang = string(f.Language(w.src))
		}
		var b strings.Builder
		for i := 0; i < n.Lines().Len(); i++ {
			s := n.Lines().At(i)
			b.Write(s.Value(w.src))
		}
		w.cur = append(w.cur, outElem{Tag: "code_block", Language: lang, Text: strings.TrimSuffix(b.String(), "\n")})
		w.flush()
	case *ast.ThematicBreak:
		w.gap()
		w.cur = append(w.cur, outElem{Tag: "hr"})
		w.flush()
	case *ast.Blockquote:
		w.gap()
		w.blocks(n, prefix+"> ", depth+1)
	case *ast.List:
		if !w.nested {
			w.gap()
		}
		w.nested = false
		num := n.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			marker := "- "
			if n.IsOrdered() {
				marker = fmt.Sprintf("%d. ", num)
				num++
			}
			w.listItem(item, prefix, marker, depth+1)
		}
	case *ast.HTMLBlock:
		w.gap()
		for i := 0; i < n.Lines().Len(); i++ {
			s := n.Lines().At(i)
			w.text(prefix + strings.TrimRight(string(s.Value(w.src)), "\n"))
			w.flush()
		}
	default:
		w.gap()
		w.text(prefix + plainText(n, w.src))
		w.flush()
	}
}

// listItem writes an item's first block after its marker and the rest
// indented beneath it.
func (w *postWriter) listItem(item ast.Node, prefix, marker string, depth int) {
	indent := prefix + strings.Repeat(" ", len(marker))
	first := true
	for c := item.FirstChild(); c != nil; c = c.NextSibling() {
		switch c.(type) {
		case *ast.Paragraph, *ast.TextBlock:
			w.flush()
			if first {
				w.text(prefix + marker)
			} else {
				w.text(indent)
			}
			w.inlines(c, indent)
			w.flush()
		default:
			if first {
				w.flush()
				w.text(prefix + marker)
				w.flush()
			}
			_, w.nested = c.(*ast.List) // a sublist follows its item's line
			w.block(c, indent, depth+1)
		}
		first = false
	}
	if first { // an empty item
		w.flush()
		w.text(prefix + strings.TrimSpace(marker))
		w.flush()
	}
}

// text appends s in the open styles, joined to the text before it when
// that has the same styles.
func (w *postWriter) text(s string) {
	if s == "" {
		return
	}
	if k := len(w.cur) - 1; k >= 0 && w.cur[k].Tag == "text" && equal(w.cur[k].Style, w.style) {
		w.cur[k].Text += s
		return
	}
	w.cur = append(w.cur, outElem{Tag: "text", Text: s, Style: clone(w.style)})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// clone returns the styles in Lark's words, each once.
func clone(s []string) []string {
	var out []string
	for _, x := range s {
		dup := false
		for _, y := range out {
			dup = dup || x == y
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

// mentionID is an @ of an open_id in a draft.
var mentionID = regexp.MustCompile(`@(ou_[A-Za-z0-9_-]+)`)

// inlines writes n's inline children; prefix continues a line broken
// inside them.
func (w *postWriter) inlines(n ast.Node, prefix string) {
	// Adjacent text is read as one run: goldmark splits text where
	// emphasis might have begun ("@ou" "_abc").
	var run strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			run.WriteString(mdsafe.Unescape(c.Value(w.src)))
			if c.SoftLineBreak() || c.HardLineBreak() {
				w.words(run.String())
				run.Reset()
				w.flush()
				w.text(prefix)
			}
			continue
		case *ast.String:
			run.WriteString(string(c.Value))
			continue
		}
		w.words(run.String())
		run.Reset()
		switch c := c.(type) {
		case *ast.CodeSpan:
			w.text(codeText(c, w.src))
		case *ast.Emphasis:
			st := "italic"
			if c.Level == 2 {
				st = "bold"
			}
			w.style = append(w.style, st)
			w.inlines(c, prefix)
			w.style = w.style[:len(w.style)-1]
		case *east.Strikethrough:
			w.style = append(w.style, "lineThrough")
			w.inlines(c, prefix)
			w.style = w.style[:len(w.style)-1]
		case *ast.Link:
			w.link(mdsafe.Unescape(c.Destination), plainText(c, w.src))
		case *ast.Image:
			alt := plainText(c, w.src)
			if alt == "" {
				alt = "image"
			}
			w.link(mdsafe.Unescape(c.Destination), alt)
		case *ast.AutoLink:
			u := string(c.URL(w.src))
			if c.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(u), "mailto:") {
				u = "mailto:" + u
			}
			w.link(u, string(c.Label(w.src)))
		case *ast.RawHTML:
			var b strings.Builder
			for i := 0; i < c.Segments.Len(); i++ {
				s := c.Segments.At(i)
				b.Write(s.Value(w.src))
			}
			switch tag := strings.ToLower(b.String()); tag {
			case "<u>", "<ins>":
				w.style = append(w.style, "underline")
			case "</u>", "</ins>":
				for i := len(w.style) - 1; i >= 0; i-- {
					if w.style[i] == "underline" {
						w.style = append(w.style[:i], w.style[i+1:]...)
						break
					}
				}
			case "<br>", "<br/>", "<br />":
				w.flush()
				w.text(prefix)
			default:
				w.text(b.String())
			}
		default:
			w.inlines(c, prefix)
		}
	}
	w.words(run.String())
}

// words appends text, its @ou_… as at tags (an @ inside a word, as in an
// address, is no mention).
func (w *postWriter) words(s string) {
	last := 0
	for _, m := range mentionID.FindAllStringSubmatchIndex(s, -1) {
		if m[0] > 0 && (wordByte(s[m[0]-1]) || s[m[0]-1] == '.' || s[m[0]-1] == '_') {
			continue
		}
		w.text(s[last:m[0]])
		w.cur = append(w.cur, outElem{Tag: "at", UserID: s[m[2]:m[3]]})
		last = m[1]
	}
	w.text(s[last:])
}

// link appends an a tag, or text for an address that is no http, https
// or mailto link.
func (w *postWriter) link(u, label string) {
	if !safeLink(u) {
		if label == "" || label == u {
			w.text(u)
		} else {
			w.text(label + " (" + u + ")")
		}
		return
	}
	if label == "" {
		label = u
	}
	w.cur = append(w.cur, outElem{Tag: "a", Text: label, Href: u, Style: clone(w.style)})
}

// plainText is the text of an inline node's children.
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.WriteString(mdsafe.Unescape(c.Value(src)))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// codeText is a code span's text as written.
func codeText(n ast.Node, src []byte) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Value(src))
		case *ast.String:
			b.Write(c.Value)
		}
	}
	return b.String()
}
