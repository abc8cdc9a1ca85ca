package mrkdwn_test

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
)

const tenMB = 10 << 20

// huge repeats unit to about 10 MB.
func huge(unit string) string { return strings.Repeat(unit, tenMB/len(unit)) }

// allocated returns the bytes f allocates in all (a bound on its peak too).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeText feeds ToMarkdown 10 MB messages of the shapes that make a
// converter quadratic or hungry: markers that never close, "<" and "`"
// without their end, a fence never closed, a million lines, a million
// quotes, a million list levels. Each must finish (a quadratic one would
// not within the test's time), stay UTF-8 and allocate at most 40 times
// its input. Not timed: the benchmarks measure speed.
func TestHugeText(t *testing.T) {
	if testing.Short() {
		t.Skip("10 MB inputs")
	}
	for name, in := range map[string]string{
		"openers":      huge("*a _b ~c "),
		"one line":     huge("*x* _y_ ~z~ `c` <@U1> <http://x.com|x> &amp; "),
		"long formats": "*" + huge("a ") + "*",
		"angles":       huge("< "),
		"backticks":    huge("` a"),
		"fence":        "```" + huge("x\n"),
		"fences":       huge("```a\n"),
		"lines":        huge("\n"),
		"quotes":       huge("&gt; q\n"),
		"quote rest":   "&gt;&gt;&gt;" + huge("q\n"),
		"lists":        huge("• a\n    ◦ b\n        ▪ c\n"),
		"deep list": func() string {
			var b strings.Builder
			for i := 0; b.Len() < tenMB; i++ {
				b.WriteString(strings.Repeat(" ", 4*(i%3000)) + "• x\n")
			}
			return b.String()
		}(),
		"mentions":      huge("<@U1>"),
		"invalid utf-8": huge("\xff\xfe"),
	} {
		t.Run(name, func(t *testing.T) {
			var out string
			n := allocated(func() { out = mrkdwn.ToMarkdown(in, names) })
			if !utf8.ValidString(out) {
				t.Error("invalid UTF-8")
			}
			if len(out) > 4*len(in)+64<<10 {
				t.Errorf("%d bytes out of %d", len(out), len(in))
			}
			if n > 40*uint64(len(in)) {
				t.Errorf("allocated %d MB for %d MB", n>>20, len(in)>>20)
			}
			t.Logf("%d MB in, %d MB out, %d MB allocated", len(in)>>20, len(out)>>20, n>>20)
		})
	}
}

// TestHugeBlocks does the same for BlocksToMarkdown: many elements, many
// rows, deep nesting; past 1 MiB blocks are written as their words.
func TestHugeBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("10 MB inputs")
	}
	el := `{"type":"text","text":"word ","style":{"bold":true}},{"type":"user","user_id":"U1"},`
	var deep strings.Builder
	for deep.Len() < tenMB/2 {
		deep.WriteString(`{"type":"rich_text_list","style":"bullet","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"x"}]},`)
	}
	depth := deep.Len() / 110
	deepJSON := richText(deep.String() + `{"type":"rich_text_section","elements":[]}` + strings.Repeat("]}", depth))
	for name, in := range map[string]string{
		"elements":                           section(strings.TrimSuffix(huge(el), ",")),
		"rows":                               `[{"type":"table","rows":[[{"type":"raw_text","text":"h"},` + strings.Repeat(`null,`, 50000) + `null]` + strings.Repeat(`,[]`, 200000) + `]}]`,
		"elements under the structure bound": section(strings.TrimSuffix(strings.Repeat(el, (1<<20)/len(el)-1), ",")),
		"deep":                               deepJSON,
		"lists":                              richText(strings.TrimSuffix(huge(`{"type":"rich_text_list","style":"ordered","indent":3,"offset":99999,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"x"}]}]},`), ",")),
	} {
		t.Run(name, func(t *testing.T) {
			var out string
			var ok bool
			n := allocated(func() { out, ok = mrkdwn.BlocksToMarkdown([]byte(in), names) })
			if !ok || !utf8.ValidString(out) {
				t.Errorf("ok %v, valid %v", ok, utf8.ValidString(out))
			}
			if len(out) > 4*len(in)+64<<10 {
				t.Errorf("%d bytes out of %d", len(out), len(in))
			}
			// 64, not 40: a row of "[]" is 3 bytes of JSON but a slice
			// header and a line of Markdown.
			if n > 64*uint64(len(in)) {
				t.Errorf("allocated %d MB for %d MB", n>>20, len(in)>>20)
			}
			t.Logf("%d MB in, %d MB out, %d MB allocated", len(in)>>20, len(out)>>20, n>>20)
		})
	}
}

// TestHugeDraft does the same for FromMarkdown: past 320 KiB a draft is
// escaped, not parsed; under it, the shapes goldmark is slow on are
// guarded (long lines escaped, quotes capped).
func TestHugeDraft(t *testing.T) {
	if testing.Short() {
		t.Skip("10 MB inputs")
	}
	for name, in := range map[string]string{
		"paragraphs": huge("**bold** *em* [l](http://x.com) `c` a < b & c\n\n"),
		"brackets":   huge("[a]("),
		"stars":      huge("*a "),
		"quotes":     strings.Repeat(">", 100000) + " deep",
		"lists":      huge("- a\n  - b\n    - c\n"),
		"deep list": func() string {
			var b strings.Builder
			for i := 0; b.Len() < tenMB/4; i++ {
				b.WriteString(strings.Repeat("  ", i%2000) + "- x\n")
			}
			return b.String()
		}(),
		"escapes": huge("<&>"),
		// just under the bound of drafts parsed as Markdown, in the shapes
		// that are slow for goldmark
		"parsed brackets": strings.Repeat(strings.Repeat("[a](", 1000)+"\n", 300<<10/4001),
		"parsed quotes":   strings.Repeat(">", 300<<10) + " deep",
		"parsed list": func() string {
			var b strings.Builder
			for i := 0; b.Len() < 300<<10; i++ {
				b.WriteString(strings.Repeat("  ", i%2000) + "- x\n")
			}
			return b.String()
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			var out string
			n := allocated(func() { out = mrkdwn.FromMarkdown(in) })
			if !utf8.ValidString(out) {
				t.Error("invalid UTF-8")
			}
			if len(out) > 5*len(in)+64<<10 {
				t.Errorf("%d bytes out of %d", len(out), len(in))
			}
			// goldmark's tree costs some 100 bytes a node: a parsed draft
			// (at most 320 KiB) is bounded by 64 MB in all, a larger one
			// (escaped) by its size.
			limit := 60 * uint64(len(in))
			if len(in) <= 320<<10 {
				limit = 64 << 20
			}
			if n > limit {
				t.Errorf("allocated %d MB for %d MB", n>>20, len(in)>>20)
			}
			t.Logf("%d MB in, %d MB out, %d MB allocated", len(in)>>20, len(out)>>20, n>>20)
		})
	}
}
