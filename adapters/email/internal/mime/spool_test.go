package mime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"

	"github.com/monoco/courier/internal/testutil"
)

// rendered is what a Renderer makes of a message: its text, HTML and
// Markdown, and the notes.
type rendered struct{ text, html, md, notes string }

func render(t testing.TB, raw []byte, opts Options) rendered {
	t.Helper()
	b := testutil.NewDropzone(t, nil).NewBatch()
	defer b.Abort()
	m, err := Read(bytes.NewReader(raw), b, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := NewRenderer(m.Decoder, nil)
	var text, html, md strings.Builder
	if err := r.WriteText(&text, m.Body); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&html, m.Body); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteMarkdown(&md, m.Body, -1); err != nil {
		t.Fatal(err)
	}
	return rendered{text.String(), html.String(), md.String(), m.Notes.String()}
}

// Text that waits in the spool renders exactly as text held in memory:
// every message of the corpus (and a few here, when there is no corpus),
// read once holding everything and once holding nothing, renders the same.
func TestSpooledRendersAsHeld(t *testing.T) {
	raws := map[string][]byte{
		"alternative": []byte("Content-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain\n\nplain é\n\n\n--b\nContent-Type: text/html\n\n<p>html <b>é</b></p>\n--b--\n"),
		"forward":     []byte("Subject: fwd\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nsee below\n--b\nContent-Type: message/rfc822\n\nFrom: x@y\nSubject: inner\nContent-Type: text/html\n\n<p>inner</p>\n--b--\n"),
		"latin1":      []byte("Content-Type: text/plain; charset=iso-8859-1\n\ncaf\xe9\n"),
	}
	if dir := os.Getenv("COURIER_CORPUS"); dir != "" {
		_, files := testutil.CorpusEMLs(t)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(dir, p)
			raws[rel] = b
		}
	}
	for name, raw := range raws {
		held := render(t, raw, Options{})
		spooled := render(t, raw, Options{MaxHeld: 1})
		if held != spooled {
			t.Errorf("%s: spooled text renders differently:\nheld    %+v\nspooled %+v", name, held, spooled)
		}
	}
}

// A text part far over MaxText, in a one-byte charset, quoted-printable,
// decodes a piece at a time exactly as it would whole: no character split,
// no CRLF turned into two line ends, nothing dropped.
func TestLongPartDecodedInPieces(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10 MB part")
	}
	var want strings.Builder
	var qp bytes.Buffer
	for i := 0; want.Len() < 2*MaxText+MaxText/2; i++ {
		line := fmt.Sprintf("Ligne %d : déjà vu, ça coûte 5 €.", i)
		want.WriteString(line + "\n")
		enc, _ := charmap.Windows1252.NewEncoder().String(line)
		for _, c := range []byte(enc) {
			if c >= 0x80 || c == '=' {
				fmt.Fprintf(&qp, "=%02X", c)
			} else {
				qp.WriteByte(c)
			}
		}
		qp.WriteString("\r\n")
	}
	raw := append([]byte("Content-Type: text/plain; charset=windows-1252\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"), qp.Bytes()...)
	got := render(t, raw, Options{MaxHeld: 1 << 20})
	if got.text != want.String() {
		t.Fatalf("decoded %d bytes, want %d; first difference at %d", len(got.text), want.Len(), firstDiff(got.text, want.String()))
	}
	if got.notes != "" {
		t.Errorf("notes %q", got.notes)
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// htmlOf returns an HTML part of about size bytes whose paragraphs are
// numbered: the Markdown must hold each once, in order.
func htmlOf(size int) (string, int) {
	var b strings.Builder
	b.WriteString("<html><head><style>p { color: red }</style></head><body>\n")
	n := 0
	for ; b.Len() < size; n++ {
		fmt.Fprintf(&b, "<p>Paragraph %d has <b>bold</b> text and a <a href=\"https://example.com/%d\">link</a>.</p>\n", n, n)
		if n%50 == 0 {
			fmt.Fprintf(&b, "<table><tr><td>cell %d</td><td>x</td></tr></table>\n", n)
		}
	}
	b.WriteString("</body></html>")
	return b.String(), n
}

// A large HTML part is converted a piece at a time, and no paragraph is
// lost or repeated across the cuts; the style sheet does not leak into the
// Markdown.
func TestLargeHTMLConvertedInPieces(t *testing.T) {
	if testing.Short() {
		t.Skip("a 3 MB part")
	}
	html, n := htmlOf(3 << 20)
	raw := "Content-Type: text/html; charset=utf-8\n\n" + html
	got := render(t, []byte(raw), Options{})
	found := regexp.MustCompile(`Paragraph (\d+) has \*\*bold\*\*`).FindAllStringSubmatch(got.md, -1)
	if len(found) != n {
		t.Fatalf("%d paragraphs in the Markdown, want %d", len(found), n)
	}
	for i, f := range found {
		if f[1] != strconv.Itoa(i) {
			t.Fatalf("paragraph %s where %d was expected", f[1], i)
		}
	}
	if strings.Contains(got.md, "color: red") {
		t.Error("the style sheet leaked into the Markdown")
	}
}

// WriteMarkdown converts the HTML only up to its bound, counted as
// WriteHTML writes it, and says it stopped: the Markdown of a file that
// keeps the start of a long HTML is that start's.
func TestMarkdownStopsAtHTMLBound(t *testing.T) {
	parts := []string{"<p>first part</p>", "<p>second part</p>", "<p>third part</p>"}
	raw := "Content-Type: multipart/mixed; boundary=b\n\n"
	for _, p := range parts {
		raw += "--b\nContent-Type: text/html\n\n" + p + "\n"
	}
	raw += "--b\nContent-Type: text/plain\n\nfooter\n--b--\n"
	b := testutil.NewDropzone(t, nil).NewBatch()
	defer b.Abort()
	m, err := Read(strings.NewReader(raw), b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := NewRenderer(m.Decoder, nil)
	var html strings.Builder
	r.WriteHTML(&html, m.Body)
	for _, c := range []struct {
		bound   int64
		want    string
		stopped bool
	}{
		{-1, "first part\n\nsecond part\n\nthird part\n\nfooter", false},
		{int64(html.Len()), "first part\n\nsecond part\n\nthird part\n\nfooter", false},
		{int64(len(parts[0]) + 1 + len(parts[1])), "first part\n\nsecond part", true},
		{int64(len(parts[0]) + 1 + 5), "first part", true},
		{0, "", true},
	} {
		var md strings.Builder
		stopped, err := r.WriteMarkdown(&md, m.Body, c.bound)
		if err != nil || md.String() != c.want || stopped != c.stopped {
			t.Errorf("bound %d: %q, stopped %v (err %v); want %q, %v", c.bound, md.String(), stopped, err, c.want, c.stopped)
		}
	}
}
