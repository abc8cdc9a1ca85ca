package mime

import (
	stdhtml "html"
	"io"
	"strings"
)

// Body gathers the body of an entity in order: the text/plain and
// text/html parts that are content, not attachments; the chosen forms of a
// multipart/alternative; and messages attached inline (a forward, the parts
// of a digest), shown as a mail reader shows them. It is rendered by
// Renderer once the headers can be decoded.
type Body struct {
	segs []segment
}

// segment is one part of a body: exactly one of its fields is set.
type segment struct {
	text, html []piece    // a text/plain or text/html part, decoded, in pieces
	alt        *altChoice // a multipart/alternative
	fwd        *forwarded // an inline message/rfc822
}

// altChoice holds the alternatives chosen for the text and for the HTML
// (RFC 2046 §5.1.4: the last that has each); either may be nil.
type altChoice struct{ text, html *Body }

// forwarded is a message attached inline: its header and its body.
type forwarded struct {
	h     Header
	body  *Body
	block []string // the header block, once rendered
}

// hasText reports whether the body has plain text (a forwarded message's
// header block counts).
func (c *Body) hasText() bool {
	for _, s := range c.segs {
		if len(s.text) > 0 || s.fwd != nil || (s.alt != nil && s.alt.text != nil) {
			return true
		}
	}
	return false
}

// hasHTML reports whether the body has HTML anywhere.
func (c *Body) hasHTML() bool {
	for _, s := range c.segs {
		if len(s.html) > 0 || (s.alt != nil && s.alt.html != nil) || (s.fwd != nil && s.fwd.body.hasHTML()) {
			return true
		}
	}
	return false
}

// Renderer turns a Body into plain text, HTML and Markdown, once the
// message's charset hint is known (the headers of forwarded messages are
// decoded with it) and inline artifacts have paths.
type Renderer struct {
	d     *Decoder
	paths map[string]string // Content-ID -> dropzone path, for cid: links
}

// NewRenderer returns a Renderer that decodes the headers of forwarded
// messages with d (and notes into d's notes) and, in the Markdown, replaces
// the cid: links of HTML by paths[Content-ID] (compared exactly, then
// lowercased; URL escapes resolved).
func NewRenderer(d *Decoder, paths map[string]string) *Renderer {
	return &Renderer{d: d, paths: paths}
}

// WriteText writes the plain text of b to w, a block at a time, the
// blocks separated by a line break: the text parts, the text alternative,
// and each forwarded message as its header block followed by its text.
// Line ends are LF. Text waiting in the spool is read back a chunk at a
// time, so the whole text is never in memory.
func (r *Renderer) WriteText(w io.Writer, b *Body) error {
	return r.texts(b, &joined{w: w, sep: "\n"})
}

// WriteHTML writes the HTML of b to w, as received (decoded to UTF-8), a
// block at a time, the blocks separated by a line break; a forwarded
// message that has HTML is preceded by its header block in HTML.
func (r *Renderer) WriteHTML(w io.Writer, b *Body) error {
	return r.htmls(b, &joined{w: w, sep: "\n"})
}

// WriteMarkdown writes the body of b to w as Markdown, a block at a time,
// the blocks separated by a blank line: HTML converted (CommonMark, cid:
// links rewritten), text as it is, so that a text part beside the HTML is
// not lost.
//
// html bounds the HTML converted: the first html bytes of what WriteHTML
// writes (a negative html converts it all). Where it runs out, the
// Markdown stops, and WriteMarkdown reports that it did: a message file
// keeps the start of a long HTML, and its Markdown is that start's, so a
// 120 MB HTML mail costs the conversion of what the file keeps, not two
// minutes of CPU. An HTML part over 1 MiB is converted a piece of about
// 256 KiB at a time, each ending after a block (a paragraph, a table, a
// list item): the converter builds a tree some 50 times the size of what
// it is given, so a 4 MB part converted whole would take 200 MB.
func (r *Renderer) WriteMarkdown(w io.Writer, b *Body, html int64) (stopped bool, err error) {
	budget := &htmlBudget{left: html}
	err = r.markdown(b, &joined{w: w, sep: "\n\n"}, budget)
	return budget.done, err
}

// htmlBudget follows the HTML converted to Markdown, counted as WriteHTML
// writes it (the blocks and the line breaks between them).
type htmlBudget struct {
	left int64 // bytes still to convert; negative: no bound
	n    int   // the HTML blocks met, for the breaks between them
	done bool  // the bound was reached: the Markdown stops
}

// take charges a block of k bytes of HTML and returns how many of its
// first bytes to convert: fewer than k when the bound falls inside it.
func (h *htmlBudget) take(k int64) int64 {
	if h.left < 0 {
		return k
	}
	if h.n++; h.n > 1 {
		h.left-- // the line break before the block
	}
	n := min(k, max(h.left, 0))
	h.left -= k
	if h.left < 0 {
		h.done = true
	}
	return n
}

// joined writes blocks to w, sep between them.
type joined struct {
	w   io.Writer
	sep string
	n   int
}

// begin starts a block.
func (j *joined) begin() error {
	j.n++
	if j.n == 1 {
		return nil
	}
	_, err := io.WriteString(j.w, j.sep)
	return err
}

// write adds s to the block.
func (j *joined) write(s string) error {
	_, err := io.WriteString(j.w, s)
	return err
}

// writePieces adds the text of pieces to the block.
func (j *joined) writePieces(pieces []piece) error {
	for _, p := range pieces {
		if err := p.each(j.write); err != nil {
			return err
		}
	}
	return nil
}

// fwdFields are the header fields of a forwarded message shown above its
// body, as mail readers show them.
var fwdFields = []string{"From", "Date", "Subject", "To", "Cc"}

// ForwardTitle is the first line of the block shown above a message
// forwarded inline, as mail readers show it.
const ForwardTitle = "---------- Forwarded message ----------"

// fwdBlock returns the lines shown above a forwarded message's body: the
// title, then its decoded header fields as "Name: value". They are decoded
// once, for the text, the HTML and the Markdown.
func (r *Renderer) fwdBlock(f *forwarded) []string {
	if f.block != nil {
		return f.block
	}
	f.block = []string{ForwardTitle}
	for _, k := range fwdFields {
		if !f.h.Has(k) {
			continue
		}
		v := CleanText(r.d.Text(f.h.Get(k), "attached message "+k), "attached message "+k, r.d.notes)
		if strings.TrimSpace(v) != "" {
			f.block = append(f.block, k+": "+v)
		}
	}
	return f.block
}

// fwdHTML is the header block of a forwarded message in HTML, shown above
// its HTML.
func (r *Renderer) fwdHTML(f *forwarded) string {
	var b strings.Builder
	b.WriteString("<p>")
	for i, l := range r.fwdBlock(f) {
		if i > 0 {
			b.WriteString("<br>\n")
		}
		b.WriteString(stdhtml.EscapeString(l))
	}
	b.WriteString("</p>\n")
	return b.String()
}

// texts writes the plain text of c to out, a block at a time: the text
// parts, the text alternative, and each forwarded message as its header
// block followed by its text.
func (r *Renderer) texts(c *Body, out *joined) error {
	for _, s := range c.segs {
		var err error
		switch {
		case len(s.text) > 0:
			if err = out.begin(); err == nil {
				err = out.writePieces(s.text)
			}
		case s.alt != nil && s.alt.text != nil:
			err = r.texts(s.alt.text, out)
		case s.fwd != nil:
			if err = out.begin(); err == nil {
				err = out.write(strings.Join(r.fwdBlock(s.fwd), "\n") + "\n")
			}
			if err == nil {
				err = r.texts(s.fwd.body, out)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// htmls writes the HTML of c to out, as received; a forwarded message
// that has HTML is preceded by its header block in HTML.
func (r *Renderer) htmls(c *Body, out *joined) error {
	for _, s := range c.segs {
		var err error
		switch {
		case len(s.html) > 0:
			if err = out.begin(); err == nil {
				err = out.writePieces(s.html)
			}
		case s.alt != nil && s.alt.html != nil:
			err = r.htmls(s.alt.html, out)
		case s.fwd != nil && s.fwd.body.hasHTML():
			if err = out.begin(); err == nil {
				err = out.write(r.fwdHTML(s.fwd))
			}
			if err == nil {
				err = r.htmls(s.fwd.body, out)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// markdown writes the body of c as Markdown to out, a block at a time:
// HTML converted, text as it is, so that a text part beside the HTML (a
// list footer, a forwarded plain-text message) is not lost from the body.
// It stops where the HTML budget runs out.
func (r *Renderer) markdown(c *Body, out *joined, budget *htmlBudget) error {
	for _, s := range c.segs {
		if budget.done {
			return nil
		}
		var err error
		switch {
		case len(s.html) > 0:
			var size int64
			for _, p := range s.html {
				size += p.size()
			}
			err = r.htmlMarkdown(s.html, budget.take(size), out)
		case len(s.text) > 0:
			if err = out.begin(); err == nil {
				err = writeTrimmed(out, s.text)
			}
		case s.alt != nil && s.alt.html != nil:
			err = r.markdown(s.alt.html, out, budget)
		case s.alt != nil:
			err = r.markdown(s.alt.text, out, budget)
		case s.fwd != nil:
			if s.fwd.body.hasHTML() {
				budget.take(int64(len(r.fwdHTML(s.fwd))))
				if budget.done {
					return nil
				}
			}
			if err = out.begin(); err == nil {
				err = out.write(strings.Join(r.fwdBlock(s.fwd), "\n"))
			}
			if err == nil {
				err = r.markdown(s.fwd.body, out, budget)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeTrimmed adds the text of pieces to out's block without the line
// breaks that end it. Breaks are held back until more text follows them,
// and written a few at a time: a part of nothing but line breaks costs no
// memory either.
func writeTrimmed(out *joined, pieces []piece) error {
	var held int64
	const newlines = "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n"
	for _, p := range pieces {
		err := p.each(func(s string) error {
			t := strings.TrimRight(s, "\n")
			if t == "" {
				held += int64(len(s))
				return nil
			}
			for ; held > 0; held -= int64(len(newlines)) {
				if err := out.write(newlines[:min(held, int64(len(newlines)))]); err != nil {
					return err
				}
			}
			held = int64(len(s) - len(t))
			return out.write(t)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
