package mime

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gomessage "github.com/emersion/go-message"
	"golang.org/x/net/html"

	"github.com/monoco/courier/internal/testutil"
)

// libraryOnly is toMarkdown without the fast path: the reference.
func libraryOnly(t testing.TB, s string) string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	md, err := libraryMarkdown(doc)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// fastOnly is the fast path alone; ok false where it declines.
func fastOnly(t testing.TB, s string) (string, bool) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return fastMarkdown(doc, len(s))
}

// checkFast fails t if the fast path accepts s and differs from the
// library; it reports whether it accepted.
func checkFast(t testing.TB, name, s string) bool {
	t.Helper()
	got, ok := fastOnly(t, s)
	if !ok {
		return false
	}
	if want := libraryOnly(t, s); got != want {
		t.Errorf("%s: the fast path differs from the library\nhtml: %q\nfast: %q\nlib:  %q", name, s, got, want)
	}
	return true
}

// emailHTMLs returns the text/html parts of the .eml files under dirs.
func emailHTMLs(t testing.TB, dirs ...string) (names, parts []string) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".eml") {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			e, err := gomessage.Read(f)
			if e == nil {
				return nil // go-message cannot read it; the corpus tests cover it
			}
			k := 0
			_ = e.Walk(func(_ []int, part *gomessage.Entity, err error) error {
				if err != nil || part == nil {
					return nil
				}
				if typ, _, _ := part.Header.ContentType(); typ == "text/html" {
					b, _ := io.ReadAll(part.Body)
					rel, _ := filepath.Rel(dir, p)
					names = append(names, fmt.Sprintf("%s#%d", rel, k))
					parts = append(parts, string(b))
					k++
				}
				return nil
			})
			return nil // a part go-message cannot read ends its walk
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names, parts
}

// TestFastMarkdownEqualsLibrary converts every HTML part of the repo's
// test mail, and of the shared corpus when COURIER_CORPUS names it, both
// ways: wherever the fast path accepts, it must equal the library.
func TestFastMarkdownEqualsLibrary(t *testing.T) {
	dirs := []string{filepath.Join("..", "..", "testdata")}
	if os.Getenv("COURIER_CORPUS") != "" {
		dirs = append(dirs, testutil.CorpusDir(t))
	}
	names, parts := emailHTMLs(t, dirs...)
	accepted := 0
	for i, s := range parts {
		if checkFast(t, names[i], s) {
			accepted++
		} else {
			t.Logf("declined: %s", names[i])
		}
	}
	if len(parts) == 0 {
		t.Fatal("no HTML parts found")
	}
	t.Logf("fast path accepted %d of %d HTML parts (%.0f%%)", accepted, len(parts), 100*float64(accepted)/float64(len(parts)))
}

// benchHTML is the HTML of a message of bench/emailbench (its
// syntheticMessage), the mail the fetch benchmark converts.
func benchHTML(paras int) string {
	var b strings.Builder
	b.WriteString("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\"></head>\r\n<body style=\"font-family: Calibri, Arial, sans-serif; font-size: 11pt;\">\r\n<div dir=\"ltr\"><p>Hi,</p>\r\n")
	p := "Could you take a look at the quarterly numbers before Friday? I think the forecast for the north region is off by a few points, and we should fix it before the review (it's on the 14th)."
	for k := range paras {
		if k == 1 {
			fmt.Fprintf(&b, "<p style=\"margin:0 0 8px 0\">%s <a href=\"https://example.org/t/%d\">ticket %d</a>.</p>\r\n", p, 42, 42)
		} else {
			fmt.Fprintf(&b, "<p style=\"margin:0 0 8px 0\">%s</p>\r\n", strings.Replace(p, " the ", " <b>the</b> ", 1))
		}
	}
	b.WriteString("<p>Best,<br>Zoë Müller-Lüdenscheidt</p></div>\r\n</body></html>\r\n")
	return b.String()
}

// newsletterHTML is a corpus-like newsletter: a layout table, headings,
// lists and a quote, which the fast path leaves to the library.
func newsletterHTML() string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><title>News</title><style>td{padding:0}</style></head><body><table width="600"><tr><td><blockquote>Quote</blockquote>`)
	for k := range 6 {
		fmt.Fprintf(&b, `<h2>Item %d: what's new</h2><p>Some <em>text</em> about it, with a <a href="https://example.com/a?b=%d&c=d">link</a>.</p><ul><li>one</li><li>two</li></ul>`, k, k)
	}
	b.WriteString(`</td></tr></table><p style="font-size:9px">Unsubscribe <a href="https://example.com/u">here</a></p></body></html>`)
	return b.String()
}

// TestFastMarkdownAccepts keeps the fast path from becoming a no-op: the
// benchmark's mail and simple shapes must be accepted, and equal the
// library.
func TestFastMarkdownAccepts(t *testing.T) {
	for i, s := range []string{
		benchHTML(4),
		"<p>plain text</p>",
		`<div>Hi <b>there</b>, see <a href="https://example.com/x y" title="T">the (1.) [link]</a><br>- item</div>`,
		`<p><i><a href="/a">both</a></i> <img src="cid:x" alt="a [b]"></p><hr><p>1. done</p>`,
		`<b> <a href="/x">swapped</a> </b>`,
		`<ol start="9"><li>a</li><li>b<ul><li>c</li></ul></li></ol><p>after</p>`,
		`<h2>Title #</h2><h3> </h3>`,
		`<p>a<br><br><br>b</p><p>1. not a list</p><p>- dash</p><p># hash</p><p>***</p>`,
		`<center><table><tr><td><p>cell</p></td> <td>two</td></tr></table></center><u>u</u><x-y>custom</x-y>`,
	} {
		if !checkFast(t, fmt.Sprint(i), s) {
			t.Errorf("%d: the fast path declined %q", i, s)
		}
	}
	// What the library rewrites before rendering is declined.
	for _, s := range []string{
		newsletterHTML(),
		`<b>a</b><b>b</b>`,                        // MergeAdjacent
		`<b>a</b><span></span><i>b</i>`,           // MergeAdjacent through spans
		`<b>a<strong>b</strong></b>`,              // RemoveRedundant
		`<span><p>x</p></span>`,                   // RenameFakeSpans
		`<h1>a<ul><li>b</li></ul></h1>`,           // LeafBlockAlternatives
		`<ul><li>a</li></ul> <ol><li>b</li></ol>`, // AddListEndComments
		`<ul>text<li>a</li></ul>`,                 // MoveListItems
		"<p>a\ab</p>",                             // the escaping placeholder
		"<p>a\uF002b</p>",                         // the code block marker
	} {
		if _, ok := fastOnly(t, s); ok {
			t.Errorf("the fast path accepted %q", s)
		}
	}
}

// TestFastMarkdownHostile: deep nesting and huge attributes convert, by
// either path, without failing.
func TestFastMarkdownHostile(t *testing.T) {
	// html.Parse refuses more than 512 open elements; the fast path stops
	// at fastDepth.
	deep := strings.Repeat("<span>", 500) + "x" + strings.Repeat("</span>", 500)
	if _, ok := fastOnly(t, deep); ok {
		t.Error("the fast path followed 500 levels")
	}
	if md, err := toMarkdown(deep); err != nil || md != "x" {
		t.Errorf("deep nesting: %q, %v", md, err)
	}
	huge := `<p><a href="https://example.com/` + strings.Repeat("(a b)", 200000) + `" title="` + strings.Repeat(`"'`, 100000) + `">x</a></p>`
	checkFast(t, "huge attributes", huge)
	if _, err := toMarkdown(huge); err != nil {
		t.Error(err)
	}
}

// Pieces of the fuzzer's HTML.
var (
	fuzzTexts = []string{
		"word", "two words", " ", "  ", "\t", "\n", "\r\n", " \n ", "\u00a0", "\u2003", "é", "日本", "x",
		"1.", "2)", "12. ", "#", "## ", "#######", "- ", "-", "---", "+ ", "* ", "*", "**", "_", "__", "> ", ">",
		"\\", "\\*", "`", "```", "~~~", "[", "]", "[a]", "![", "(", ")", "!", "|", "$", "=", "===", "~", "\"", "'",
		"&amp;", "&lt;", "&gt;", "&nbsp;", "&#42;", "&#x5B;", "&quot;", "<", "&", ".", "a.", "3.5",
	}
	fuzzHrefs = []string{
		"", " ", "#", "https://example.com/a b", "https://example.com/(x)", `https://e.com/"q"`, "javascript:alert(1)",
		"mailto:a@b.c?subject=Hi there&body=x+y", "/rel/path?a=1&b", "data:image/png;base64,AAA", "http://[::1", "cid:logo",
		"https://e.com/%zz", "\thttps://e.com/\n", "<x>", "a]b[c",
	}
	fuzzTags = []string{
		"p", "div", "span", "font", "b", "strong", "i", "em", "a", "br", "img", "hr",
		"head", "script", "style", "title", "blockquote", "ul", "ol", "li", "h1", "h2", "code", "table", "tr", "td", "center", "u", "section", "x-tag", "svg", "wbr", "#comment",
	}
	fuzzStarts = []string{"", "1", "0", "-3", "9", "99", "x", "+7", "007"}
)

// fuzzHTML builds HTML from data: the fast path's tags with random text
// and attributes.
func fuzzHTML(data []byte) string {
	var b strings.Builder
	pick := func(n int) int {
		if len(data) == 0 || n == 0 {
			return 0
		}
		c := int(data[0])
		data = data[1:]
		return c % n
	}
	var gen func(depth int)
	gen = func(depth int) {
		for n := pick(4) + 1; n > 0 && len(data) > 0; n-- {
			if depth > 5 || pick(3) == 0 {
				for k := pick(3) + 1; k > 0; k-- {
					b.WriteString(fuzzTexts[pick(len(fuzzTexts))])
				}
				continue
			}
			tag := fuzzTags[pick(len(fuzzTags))]
			switch tag {
			case "#comment":
				b.WriteString("<!-- c -->")
				continue
			case "a":
				fmt.Fprintf(&b, `<a href="%s"`, html.EscapeString(fuzzHrefs[pick(len(fuzzHrefs))]))
				if pick(2) == 0 {
					fmt.Fprintf(&b, ` title="%s"`, html.EscapeString(fuzzTexts[pick(len(fuzzTexts))]+fuzzTexts[pick(len(fuzzTexts))]))
				}
				b.WriteString(">")
			case "img":
				fmt.Fprintf(&b, `<img src="%s" alt="%s" title="%s">`, html.EscapeString(fuzzHrefs[pick(len(fuzzHrefs))]),
					html.EscapeString(fuzzTexts[pick(len(fuzzTexts))]), html.EscapeString(fuzzTexts[pick(len(fuzzTexts))]))
				continue
			case "ol":
				if start := fuzzStarts[pick(len(fuzzStarts))]; start != "" {
					fmt.Fprintf(&b, `<ol start="%s">`, start)
				} else {
					b.WriteString("<ol>")
				}
			case "br", "hr":
				b.WriteString("<" + tag + ">")
				continue
			default:
				b.WriteString("<" + tag + ">")
			}
			gen(depth + 1)
			if pick(5) != 0 {
				b.WriteString("</" + tag + ">")
			}
		}
	}
	if pick(2) == 0 {
		b.WriteString("<html><head><meta charset=utf-8><title>t</title></head><body>")
	}
	gen(0)
	return b.String()
}

// FuzzFastMarkdown: wherever the fast path accepts, on HTML built from
// its tags and markdown-significant text, or on the raw input, it must
// equal the library.
func FuzzFastMarkdown(f *testing.F) {
	f.Add([]byte("seed"))
	f.Add([]byte(benchHTML(2)))
	r := rand.New(rand.NewPCG(1, 2))
	for range 64 {
		seed := make([]byte, 64)
		for i := range seed {
			seed[i] = byte(r.Uint32())
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8<<10 {
			return // long lines make both converters quadratic
		}
		checkFast(t, "built", fuzzHTML(data))
		checkFast(t, "raw", string(data))
	})
}

// BenchmarkToMarkdown converts the benchmark's mail and a newsletter, by
// toMarkdown and by the library alone (its shared converter), on all
// workers at once (-cpu 1,2).
func BenchmarkToMarkdown(b *testing.B) {
	for _, c := range []struct{ name, html string }{{"mail", benchHTML(4)}, {"newsletter", newsletterHTML()}} {
		b.Run(c.name+"/toMarkdown", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := toMarkdown(c.html); err != nil {
						b.Error(err)
					}
				}
			})
		})
		b.Run(c.name+"/library", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					libraryOnly(b, c.html)
				}
			})
		})
	}
}
