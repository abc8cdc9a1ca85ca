package chatmsg

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/monoco/courier/schema"
)

// A reader within the bound reads whole; one past it fails, says so, and
// keeps failing.
func TestLimitReader(t *testing.T) {
	l := &LimitReader{R: strings.NewReader("12345"), N: 5}
	if b, err := io.ReadAll(l); err != nil || string(b) != "12345" || l.Over() {
		t.Errorf("at the bound: %q, %v, over %v", b, err, l.Over())
	}
	l = &LimitReader{R: strings.NewReader("123456"), N: 5}
	if _, err := io.ReadAll(l); !errors.Is(err, ErrOverLimit) || !l.Over() {
		t.Errorf("past the bound: %v, over %v", err, l.Over())
	}
	if n, err := l.Read(make([]byte, 4)); n != 0 || !errors.Is(err, ErrOverLimit) {
		t.Errorf("read again past the bound: %d, %v", n, err)
	}
}

// The words of each kind of draft.
func TestDraftWords(t *testing.T) {
	for _, c := range []struct {
		name  string
		d     schema.Draft
		words string
		plain bool
	}{
		{"markdown", schema.Draft{Content: schema.DraftContent{Markdown: "**hi**"}}, "**hi**", false},
		{"body", schema.Draft{Body: "hi *there*"}, "hi *there*", false},
		{"text", schema.Draft{Type: schema.DraftText, Content: schema.DraftContent{Text: "a * b"}}, "a * b", true},
		{"html with text", schema.Draft{Content: schema.DraftContent{HTML: "<b>x</b>", Text: "x"}, Type: schema.DraftHTML}, "x", true},
		{"html", schema.Draft{Content: schema.DraftContent{HTML: "<p><b>bold</b> move</p>"}}, "**bold** move", false},
	} {
		words, plain, err := DraftWords(&c.d)
		if err != nil || words != c.words || plain != c.plain {
			t.Errorf("%s: %q %v %v, want %q %v", c.name, words, plain, err, c.words, c.plain)
		}
	}
}

// Text and Markdown over the limit: each keeps its share (the Markdown
// counts twice), cut at a line end; with no dropzone, text_cut says so.
func TestFitWithoutDropzone(t *testing.T) {
	msg := &schema.Message{}
	extra := map[string]any{}
	text := strings.Repeat("t\n", 40)
	md := strings.Repeat("m\n", 40)
	gotText, gotMD, rests, err := Fit(msg, nil, extra, "test", 90, text, md)
	if err != nil || len(rests) != 0 {
		t.Fatal(rests, err)
	}
	if len(gotText)+2*len(gotMD) > 90 || !strings.HasSuffix(gotText, "\n") || !strings.HasSuffix(gotMD, "\n") {
		t.Errorf("kept %d + 2×%d bytes, over 90 or not at a line end", len(gotText), len(gotMD))
	}
	if !strings.HasPrefix(extra["text_cut"].(string), "content.markdown cut at") {
		t.Errorf("text_cut %v", extra["text_cut"])
	}
	if a, b, _, _ := Fit(msg, nil, map[string]any{}, "test", 0, "short", "short"); a != "short" || b != "short" {
		t.Errorf("within the default limit: %q %q", a, b)
	}
}
