package mime

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"golang.org/x/net/html"
)

// mdConverter is shared: a Converter holds no per-conversion state. (A
// pool of converters, against the RWMutex it takes for every escaped
// character, measured no different on two cores: BenchmarkToMarkdown.)
var mdConverter = sync.OnceValue(func() *converter.Converter {
	return converter.NewConverter(converter.WithPlugins(base.NewBasePlugin(), commonmark.NewCommonmarkPlugin()))
})

var cidRef = regexp.MustCompile(`(?i)\bcid:([^"'\s<>()]+)`)

// rewriteCIDs replaces the cid: references of html that name an inline
// artifact by its workspace-relative path. Content-IDs are compared exactly,
// then ignoring case; URL escapes are resolved (cid:a%40b names a@b).
func rewriteCIDs(html string, paths map[string]string) string {
	if len(paths) == 0 || !strings.Contains(strings.ToLower(html), "cid:") {
		return html
	}
	return cidRef.ReplaceAllStringFunc(html, func(m string) string {
		id := m[4:]
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
		if p, ok := paths[id]; ok {
			return p
		}
		if p, ok := paths[strings.ToLower(id)]; ok {
			return p
		}
		return m
	})
}

// toMarkdown converts HTML to Markdown. The HTML is parsed once; the fast
// path (markdown_fast.go) renders the mail it knows exactly as the
// library would, and the library converts the rest from the same tree.
// The converter is another library's code run on hostile input: a panic
// in it is recovered and reported as an error, never allowed to take the
// message down; one in the fast path leaves the tree to the library.
func toMarkdown(s string) (md string, err error) {
	defer func() {
		if r := recover(); r != nil {
			md, err = "", panicError{r}
		}
	}()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return "", err
	}
	if md, ok := tryFast(doc, len(s)); ok {
		return md, nil
	}
	return libraryMarkdown(doc)
}

// tryFast runs the fast path, which does not change doc: should it panic
// (a bug of ours; the tests fail on one), the library still converts doc.
func tryFast(doc *html.Node, size int) (md string, ok bool) {
	defer func() {
		if recover() != nil {
			md, ok = "", false
		}
	}()
	return fastMarkdown(doc, size)
}

// libraryMarkdown converts doc with html-to-markdown, which may change doc.
func libraryMarkdown(doc *html.Node) (string, error) {
	out, err := mdConverter().ConvertNode(doc)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

type panicError struct{ v any }

func (e panicError) Error() string { return "converter panicked" }

// The sizes of HTML converted at once: a part up to mdWhole is converted
// whole (most mail: its Markdown is exactly the converter's); a larger one
// a piece of up to mdChunk at a time.
const (
	mdWhole = 1 << 20
	mdChunk = 256 << 10
)

// htmlMarkdown writes the Markdown of the first limit bytes of an HTML
// part, in pieces, to out: a block per conversion. A part cut short is cut
// after its last tag, so that no half tag shows as text.
func (r *Renderer) htmlMarkdown(pieces []piece, limit int64, out *joined) error {
	var total int64
	for _, p := range pieces {
		total += p.size()
	}
	cut := limit < total
	total = min(total, limit)
	if total <= 0 {
		return nil
	}
	// each yields the first total bytes of the part, a string at a time.
	each := func(fn func(string) error) error {
		left := total
		for _, p := range pieces {
			if left <= 0 {
				break
			}
			err := p.each(func(s string) error {
				if left <= 0 {
					return nil
				}
				s = s[:min(int64(len(s)), left)]
				left -= int64(len(s))
				return fn(s)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	if total <= mdWhole {
		var b strings.Builder
		b.Grow(int(total))
		if err := each(func(s string) error { b.WriteString(s); return nil }); err != nil {
			return err
		}
		html := b.String()
		if cut {
			html = html[:tagEnd([]byte(html))]
		}
		return r.convert(html, out)
	}
	buf := make([]byte, 0, mdChunk+pieceChunk)
	err := each(func(s string) error {
		for s != "" {
			k := min(len(s), mdChunk+pieceChunk-len(buf))
			buf, s = append(buf, s[:k]...), s[k:]
			for len(buf) >= mdChunk {
				cut := htmlCut(buf[:mdChunk])
				if err := r.convert(string(buf[:cut]), out); err != nil {
					return err
				}
				buf = buf[:copy(buf, buf[cut:])]
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if cut {
		buf = buf[:tagEnd(buf)]
	}
	return r.convert(string(buf), out)
}

// tagEnd returns where a piece of HTML cut short ends usefully: after its
// last '>', unless that is far back (then at a character boundary).
func tagEnd(b []byte) int {
	if i := bytes.LastIndexByte(b, '>'); i >= 0 && len(b)-i < 4096 {
		return i + 1
	}
	return runeCut(b)
}

// convert writes the Markdown of html to out as a block of its own, if it
// has any; a failure of the converter is noted, and the HTML is still in
// content.html.
func (r *Renderer) convert(html string, out *joined) error {
	md, err := toMarkdown(rewriteCIDs(html, r.paths))
	if err != nil {
		r.d.notes.Addf("HTML to Markdown: %v", err)
	}
	if md == "" {
		return nil
	}
	if err := out.begin(); err != nil {
		return err
	}
	return out.write(md)
}

// blockEnds are the tags HTML is cut after, to be converted a piece at a
// time: ends of blocks, so that a cut splits no paragraph, list item or
// table row.
var blockEnds = []string{
	"</p>", "</div>", "</table>", "</tr>", "</li>", "</ul>", "</ol>", "</blockquote>", "</pre>",
	"</h1>", "</h2>", "</h3>", "</h4>", "</h5>", "</h6>", "</section>", "</article>",
	"<br>", "<br/>", "<br />", "<hr>", "<hr/>", "<hr />",
}

// htmlCut returns where to cut b, a piece of HTML: after the last end of
// a block in its second half, else after the last tag there, else at the
// last character boundary.
func htmlCut(b []byte) int {
	lo := len(b) / 2
	for end := len(b); ; {
		i := bytes.LastIndexByte(b[:end], '<')
		if i < lo {
			break
		}
		for _, t := range blockEnds {
			if len(b)-i >= len(t) && strings.EqualFold(string(b[i:i+len(t)]), t) {
				return i + len(t)
			}
		}
		end = i
	}
	if i := bytes.LastIndexByte(b, '>'); i >= lo {
		return i + 1
	}
	return runeCut(b)
}
