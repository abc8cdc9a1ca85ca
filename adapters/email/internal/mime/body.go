package email

import (
	stdhtml "html"
	"strings"
)

// bodyRenderer turns a bodyCollector into content.text, content.html and
// the Markdown, once the message's charset hint is known (the headers of
// forwarded messages are decoded with it) and inline artifacts have paths.
type bodyRenderer struct {
	d     *hdrDecoder
	paths map[string]string // Content-ID -> dropzone path, for cid: links
}

// fwdFields are the header fields of a forwarded message shown above its
// body, as mail readers show them.
var fwdFields = []string{"From", "Date", "Subject", "To", "Cc"}

const fwdTitle = "---------- Forwarded message ----------"

// fwdBlock returns the lines shown above a forwarded message's body: the
// title, then its decoded header fields as "Name: value". They are decoded
// once, for the text, the HTML and the Markdown.
func (r *bodyRenderer) fwdBlock(f *forwarded) []string {
	if f.block != nil {
		return f.block
	}
	f.block = []string{fwdTitle}
	for _, k := range fwdFields {
		if !f.h.has(k) {
			continue
		}
		v := cleanText(r.d.text(f.h.get(k), "attached message "+k), "attached message "+k, r.d.notes)
		if strings.TrimSpace(v) != "" {
			f.block = append(f.block, k+": "+v)
		}
	}
	return f.block
}

// texts appends the plain text of c to out, a part at a time: the text
// parts, the text alternative, and each forwarded message as its header
// block followed by its text.
func (r *bodyRenderer) texts(c *bodyCollector, out []string) []string {
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
func (r *bodyRenderer) htmls(c *bodyCollector, out []string) []string {
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
func (r *bodyRenderer) markdown(c *bodyCollector, out []string) []string {
	for _, s := range c.segs {
		switch {
		case s.html != "":
			md, err := toMarkdown(rewriteCIDs(s.html, r.paths))
			if err != nil {
				r.d.notes.addf("HTML to Markdown: %v", err)
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
