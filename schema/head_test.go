package schema_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/schema"
)

// Every golden file, and every sample message, reads back head and body
// exactly as written: for what Courier writes within the text bound,
// ReadHead is the identity.
func TestReadHeadWhole(t *testing.T) {
	files, _ := filepath.Glob("testdata/golden/*.golden.md")
	for name, m := range samples() {
		b, err := schema.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
		t.Run(name, func(t *testing.T) { checkWhole(t, b) })
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a sample's name
		}
		t.Run(filepath.Base(f), func(t *testing.T) { checkWhole(t, b) })
	}
}

func checkWhole(t *testing.T, file []byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(file))
	head, cut, err := schema.ReadHead(br, 0)
	if err != nil || cut != 0 {
		t.Fatalf("ReadHead: cut %d, err %v", cut, err)
	}
	body, _ := io.ReadAll(br)
	if !bytes.Equal(append(head, body...), file) {
		t.Fatalf("head+body differs from the file:\n%s", head)
	}
	if _, err := schema.Decode(file); err != nil {
		t.Fatal(err)
	}
}

// bigMessage is a file as Courier wrote them before max_text_bytes: each
// content field and the body n bytes long, in the three forms the emitter
// has for long text (a literal block, a double-quoted line full of
// escapes, one long line in a block).
func bigMessage(n int) *schema.Message {
	m := samples()["email-reply-attachment"]
	line := "Line of text with ünïcödé 和中文 and a 'quote'.\n"
	m.Content.Text = schema.NullString(strings.Repeat(line, n/len(line)))
	// A tab at a line start, a CR, control characters: only quotes carry
	// these, with escapes of every length across the whole value.
	esc := "\t<td>\"x\"</td>\r\n\x01é\U0001F600\\ "
	m.Content.HTML = schema.NullString(strings.Repeat(esc, n/len(esc)))
	m.Content.Markdown = schema.NullString("# Title\n" + strings.Repeat("word ", n/5)) // one long line
	m.Body = string(m.Content.Text)
	return m
}

// A file whose text is far over the budget (an old 363 MB file, in small)
// reads back with each long value cut where it may be, saying so inside
// it, and decodes; what is kept of each value is its start; the body is
// left in the reader, whole.
func TestReadHeadCutsOldFile(t *testing.T) {
	const n = 600 << 10
	m := bigMessage(n)
	file, err := schema.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	budget := 200 << 10
	br := bufio.NewReader(bytes.NewReader(file))
	head, cut, err := schema.ReadHead(br, budget)
	if err != nil {
		t.Fatal(err)
	}
	if cut != 3 {
		t.Errorf("cut %d values, want 3 (text, html, markdown)", cut)
	}
	if len(head) > budget+3*(64<<10)+8<<10 {
		t.Errorf("head of %d bytes for a budget of %d", len(head), budget)
	}
	body, _ := io.ReadAll(br)
	if string(body) != m.Body {
		t.Errorf("body after the head: %d bytes, want %d", len(body), len(m.Body))
	}
	got, err := schema.Decode(head)
	if err != nil {
		t.Fatalf("the cut head does not decode: %v", err)
	}
	for _, f := range []struct {
		name      string
		got, full string
	}{
		{"text", string(got.Content.Text), string(m.Content.Text)},
		{"html", string(got.Content.HTML), string(m.Content.HTML)},
		{"markdown", string(got.Content.Markdown), string(m.Content.Markdown)},
	} {
		i := strings.LastIndex(f.got, "[… ")
		if i < 0 || strings.Count(f.got, "[… ") != 1 || !strings.HasSuffix(strings.TrimRight(f.got, "\n"), "bytes more in the file, not read]") {
			t.Errorf("%s: no marker at the end: …%q", f.name, tail(f.got))
			continue
		}
		kept := strings.TrimRight(f.got[:i], " \n")
		if !strings.HasPrefix(f.full, kept) || len(kept) < 1000 {
			t.Errorf("%s: kept %d bytes that are not the value's start: …%q", f.name, len(kept), tail(kept))
		}
	}
}

func tail(s string) string { return s[max(0, len(s)-60):] }

// A cut never falls inside an escape or a character, whatever the budget
// and wherever the reader's buffer ends: every head decodes, and what it
// keeps is the start of the value.
func TestReadHeadCutsAtEveryOffset(t *testing.T) {
	if testing.Short() {
		t.Skip("many cuts")
	}
	m := bigMessage(200 << 10)
	m.Content.Text, m.Content.Markdown, m.Body = "", "", "x\n"
	file, err := schema.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	for budget := 70 << 10; budget < 70<<10+24; budget++ {
		for _, size := range []int{4096, 4099, 4101, 4111} {
			br := bufio.NewReaderSize(bytes.NewReader(file), size)
			head, cut, err := schema.ReadHead(br, budget)
			if err != nil || cut != 1 {
				t.Fatalf("budget %d, buffer %d: cut %d, err %v", budget, size, cut, err)
			}
			got, err := schema.Decode(head)
			if err != nil {
				t.Fatalf("budget %d, buffer %d: %v", budget, size, err)
			}
			h := string(got.Content.HTML)
			kept := h[:strings.LastIndex(h, " [… ")]
			// The budget counts the bytes of the file: escapes ("\t",
			// "\U0001F600") are longer than what they stand for.
			if !strings.HasPrefix(string(m.Content.HTML), kept) || len(kept) < budget/2 {
				t.Fatalf("budget %d, buffer %d: kept %d bytes, not the start of the value", budget, size, len(kept))
			}
		}
	}
}

// A front matter far beyond anything Courier writes (a million keys) is
// refused with an error that says so, not read into memory.
func TestReadHeadTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	r := io.MultiReader(strings.NewReader("---\n"), &repeatReader{s: "k: v\n", n: 3 << 20})
	_, _, err := schema.ReadHead(bufio.NewReader(r), 1<<20)
	if !errors.Is(err, schema.ErrHeadTooLarge) {
		t.Fatalf("err = %v, want ErrHeadTooLarge", err)
	}
}

type repeatReader struct {
	s string
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := 0
	for r.n > 0 && len(p)-k >= len(r.s) {
		k += copy(p[k:], r.s)
		r.n--
	}
	return k, nil
}

// What is not a front matter is returned as read, for Decode to say what
// is wrong with it.
func TestReadHeadNotFrontMatter(t *testing.T) {
	for _, in := range []string{"", "no front matter\nat all\n", "---\nid: x\n", "---\nid: \"unclosed\n"} {
		br := bufio.NewReader(strings.NewReader(in))
		head, _, err := schema.ReadHead(br, 0)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if _, err := schema.Decode(head); err == nil {
			t.Errorf("%q: Decode of the head succeeded", in)
		}
	}
}
