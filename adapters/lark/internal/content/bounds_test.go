package content_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/monoco/courier/adapters/lark/internal/content"
)

// What an outsider sends costs at most a small multiple of its size: each
// test feeds megabytes of one hostile shape and checks the output's size
// and the memory allocated, not the time taken.

const mb = 1 << 20

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHugeMentions(t *testing.T) {
	// 10,000s of placeholders for a mention whose name is long: the names
	// stop at the budget and the placeholders are written as they came.
	long := strings.Repeat("N", 10_000)
	in := `{"text":"` + strings.Repeat("@_user_1 ", mb/9) + `"}`
	names := content.Names{User: func(string) string { return long }}
	var r content.Result
	alloc := allocated(func() { r, _ = content.Parse("text", in, []content.Mention{{Key: "@_user_1", ID: "ou_x"}}, names) })
	if len(r.Mentions) != 1 || len(r.Mentions[0].Name) != 256 {
		t.Errorf("mention %d bytes, want cut to 256", len(r.Mentions[0].Name))
	}
	// the content, names for as many bytes again (and 64 KiB), each
	// "_" escaped
	if limit := 3*len(in) + 64<<10; len(r.Text) > limit || len(r.Markdown) > limit {
		t.Errorf("%d / %d bytes from %d", len(r.Text), len(r.Markdown), len(in))
	}
	if alloc > 40*uint64(len(in)) {
		t.Errorf("allocated %d bytes for %d", alloc, len(in))
	}
}

func TestHugePost(t *testing.T) {
	// A post of 100,000 images, distinct @s and styled one-letter texts.
	var b strings.Builder
	b.WriteString(`{"content":[[`)
	for i := 0; i < 100_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		switch i % 3 {
		case 0:
			b.WriteString(`{"tag":"img","image_key":"img_1"}`)
		case 1:
			b.WriteString(`{"tag":"at","user_id":"ou_` + strings.Repeat("x", i%50) + `"}`)
		default:
			b.WriteString(`{"tag":"text","text":"*","style":["bold","italic","lineThrough","underline"]}`)
		}
	}
	b.WriteString(`]]}`)
	in := b.String()
	var r content.Result
	var err error
	alloc := allocated(func() { r, err = content.Parse("post", in, nil, content.Names{}) })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Resources) != 100 || len(r.Mentions) > 200 {
		t.Errorf("%d resources, %d mentions: want them bounded", len(r.Resources), len(r.Mentions))
	}
	if strings.Count(r.Text, "[image]") != 33_334 {
		t.Errorf("%d image placeholders, want every image still written", strings.Count(r.Text, "[image]"))
	}
	if len(r.Markdown) > 2*len(in) || !utf8.ValidString(r.Markdown) {
		t.Errorf("%d bytes from %d", len(r.Markdown), len(in))
	}
	if alloc > 40*uint64(len(in)) {
		t.Errorf("allocated %d bytes for %d", alloc, len(in))
	}
}

func TestHugeCard(t *testing.T) {
	// Nested past any card: the walk stops at depth 32 and keeps the
	// words below as text, without recursion.
	for _, depth := range []int{100, 200_000} {
		in := strings.Repeat(`{"elements":[`, depth) + `{"tag":"markdown","content":"deep words"}` + strings.Repeat(`]}`, depth)
		var r content.Result
		var err error
		alloc := allocated(func() { r, err = content.Parse("interactive", in, nil, content.Names{}) })
		if err != nil || r.Text != "deep words" {
			t.Errorf("depth %d: %q, %v", depth, r.Text, err)
		}
		if alloc > 100*uint64(len(in)) {
			t.Errorf("depth %d: allocated %d bytes for %d", depth, alloc, len(in))
		}
	}
	// Markdown elements of the shapes goldmark is slow on, a megabyte
	// of them: read as text, bounded.
	el := `{"tag":"markdown","content":"` + strings.Repeat(strings.Repeat("[a](", 1000)+`\n`, 40) + strings.Repeat(">", 5000) + `"}`
	in := `{"elements":[` + strings.Repeat(el+",", 6) + el + `]}`
	r, err := content.Parse("interactive", in, nil, content.Names{})
	if err != nil || len(r.Markdown) > 3*len(in) || !strings.Contains(r.Text, "[a]([a](") {
		t.Errorf("markdown elements: %v, %d bytes from %d", err, len(r.Markdown), len(in))
	}
	// A deep post is no post (encoding/json refuses past 10,000): kept.
	in = `{"content":` + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + `}`
	r, err = content.Parse("post", in, nil, content.Names{})
	if !errors.Is(err, content.ErrMalformed) || !strings.Contains(r.Markdown, in) {
		t.Errorf("deep post: %v, %d bytes", err, len(r.Markdown))
	}
}

func TestHugeDraft(t *testing.T) {
	// The shapes a Markdown parser nests on, just under the draft bound.
	for name, md := range map[string]string{
		"quotes":               strings.Repeat(">", 140<<10),
		"lists":                strings.Repeat("- ", 70<<10),
		"emphasis":             strings.Repeat("*a", 70<<10),
		"brackets":             strings.Repeat("[", 140<<10),
		"backticks":            strings.Repeat("`a", 70<<10),
		"links":                strings.Repeat("[a](", 35<<10),
		"short lines of links": strings.Repeat(strings.Repeat("[a](", 1000)+"\n", 35),
	} {
		typ, c, err := content.FromMarkdown(md)
		if err != nil && !errors.Is(err, content.ErrTooLarge) {
			t.Errorf("%s: %v", name, err)
		}
		if err == nil && (typ == content.TypePost && len(c) > 30<<10 || !utf8.Valid(c)) {
			t.Errorf("%s: %s of %d bytes", name, typ, len(c))
		}
	}
}
