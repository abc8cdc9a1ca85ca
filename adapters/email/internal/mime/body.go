package mime

import (
	stdhtml "html"
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

// segment is one piece of a body: exactly one of its fields is set.
type segment struct {
	text, html string     // a text/plain or text/html part, decoded
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
		if s.text != "" || s.fwd != nil || (s.alt != nil && s.alt.text != nil) {
			return true
		}
	}
	return false
}

// hasHTML reports whether the body has HTML anywhere.
func (c *Body) hasHTML() bool {
	for _, s := range c.segs {
		if s.html != "" || (s.alt != nil && s.alt.html != nil) || (s.fwd != nil && s.fwd.body.hasHTML()) {
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

// Texts returns the plain text of b a part at a time: the text parts, the
// text alternative, and each forwarded message as its header block
// followed by its text. Line ends are LF.
func (r *Renderer) Texts(b *Body) []string { return r.texts(b, nil) }

// HTMLs returns the HTML of b a part at a time, as received (decoded to
// UTF-8); a forwarded message that has HTML is preceded by its header
// block in HTML.
func (r *Renderer) HTMLs(b *Body) []string { return r.htmls(b, nil) }

// Markdown returns the body of b as Markdown a block at a time: HTML
// converted (CommonMark, cid: links rewritten), text as it is, so that a
// text part beside the HTML is not lost.
func (r *Renderer) Markdown(b *Body) []string { return r.markdown(b, nil) }

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

// texts appends the plain text of c to out, a part at a time: the text
// parts, the text alternative, and each forwarded message as its header
// block followed by its text.
func (r *Renderer) texts(c *Body, out []string) []string {
	for _, s := range c.segs {
		switch {
		case s.text != "":
			out = append(out, s.text)
		case s.alt != nil && s.alt.text != nil:
			out = r.texts(s.alt.text, out)
		case s.fwd != nil:
			out = append(out, strings.Join(r.fwdBlock(s.fwd), "\n")+"\n")
			out = r.texts(s.fwd.body, out)
		}
	}
	return out
}

// htmls appends the HTML of c to out, as received; a forwarded message
// that has HTML is preceded by its header block in HTML.
func (r *Renderer) htmls(c *Body, out []string) []string {
	for _, s := range c.segs {
		switch {
		case s.html != "":
			out = append(out, s.html)
		case s.alt != nil && s.alt.html != nil:
			out = r.htmls(s.alt.html, out)
		case s.fwd != nil && s.fwd.body.hasHTML():
			var b strings.Builder
			b.WriteString("<p>")
			for i, l := range r.fwdBlock(s.fwd) {
				if i > 0 {
					b.WriteString("<br>\n")
				}
				b.WriteString(stdhtml.EscapeString(l))
			}
			b.WriteString("</p>\n")
			out = append(out, b.String())
			out = r.htmls(s.fwd.body, out)
		}
	}
	return out
}

// markdown appends the body of c as Markdown to out, a block at a time:
// HTML converted, text as it is, so that a text part beside the HTML (a
// list footer, a forwarded plain-text message) is not lost from the body.
func (r *Renderer) markdown(c *Body, out []string) []string {
	for _, s := range c.segs {
		switch {
		case s.html != "":
			md, err := toMarkdown(rewriteCIDs(s.html, r.paths))
			if err != nil {
				r.d.notes.Addf("HTML to Markdown: %v", err)
			}
			if md != "" {
				out = append(out, md)
			}
		case s.text != "":
			out = append(out, strings.TrimRight(s.text, "\n"))
		case s.alt != nil && s.alt.html != nil:
			out = r.markdown(s.alt.html, out)
		case s.alt != nil:
			out = r.markdown(s.alt.text, out)
		case s.fwd != nil:
			out = append(out, strings.Join(r.fwdBlock(s.fwd), "\n"))
			out = r.markdown(s.fwd.body, out)
		}
	}
	return out
}
