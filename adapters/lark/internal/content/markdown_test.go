package content_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters/lark/internal/content"
)

// fromMarkdownCases are drafts and the message Lark's send API documents
// for them (im/v1/messages, msg_type post: tags text, a, at, code_block,
// hr; styles bold, italic, underline, lineThrough).
var fromMarkdownCases = []struct {
	name, in, typ, want string
}{
	{"plain words go as text", "hello  world\nsecond line", "text", `{"text":"hello  world\nsecond line"}`},
	{"escapes read as text", `a \*b\* 1\. c`, "text", `{"text":"a *b* 1. c"}`},
	{"a < forces post", "a <b> c", "post", `{"zh_cn":{"content":[[{"tag":"text","text":"a <b> c"}]]}}`},
	{"styles", "**b** *i* ~~s~~ <u>u</u> ***bi***", "post",
		`{"zh_cn":{"content":[[{"tag":"text","text":"b","style":["bold"]},{"tag":"text","text":" "},{"tag":"text","text":"i","style":["italic"]},{"tag":"text","text":" "},{"tag":"text","text":"s","style":["lineThrough"]},{"tag":"text","text":" "},{"tag":"text","text":"u","style":["underline"]},{"tag":"text","text":" "},{"tag":"text","text":"bi","style":["italic","bold"]}]]}}`},
	{"links", "[docs](https://example.com/a?b=1) <https://x.example> <a@b.example> **[bold](http://y.example)**", "post",
		`{"zh_cn":{"content":[[{"tag":"a","text":"docs","href":"https://example.com/a?b=1"},{"tag":"text","text":" "},{"tag":"a","text":"https://x.example","href":"https://x.example"},{"tag":"text","text":" "},{"tag":"a","text":"a@b.example","href":"mailto:a@b.example"},{"tag":"text","text":" "},{"tag":"a","text":"bold","href":"http://y.example","style":["bold"]}]]}}`},
	{"unsafe links stay text", "[x](javascript:alert(1)) ![pic](data:image/png;base64,AA)", "text",
		`{"text":"x (javascript:alert(1)) pic (data:image/png;base64,AA)"}`},
	{"mentions", "ping @ou_abc_1 and @ou_x, not `@ou_code` or a@ou_b", "post",
		`{"zh_cn":{"content":[[{"tag":"text","text":"ping "},{"tag":"at","user_id":"ou_abc_1"},{"tag":"text","text":" and "},{"tag":"at","user_id":"ou_x"},{"tag":"text","text":", not @ou_code or a@ou_b"}]]}}`},
	{"paragraphs and breaks", "one\ntwo  \nthree\n\nfour", "text", `{"text":"one\ntwo\nthree\n\nfour"}`},
	{"code block and hr", "intro\n\n```go\nfunc main() {}\n```\n\n---\n\n    indented", "post",
		`{"zh_cn":{"content":[[{"tag":"text","text":"intro"}],[],[{"tag":"code_block","text":"func main() {}","language":"go"}],[],[{"tag":"hr"}],[],[{"tag":"code_block","text":"indented"}]]}}`},
	{"heading is a bold line", "# Title\n\nbody", "post",
		`{"zh_cn":{"content":[[{"tag":"text","text":"Title","style":["bold"]}],[],[{"tag":"text","text":"body"}]]}}`},
	{"lists and quotes as text lines", "- a\n- b\n  1. c\n  2. d\n\n> q1\n> q2", "text",
		`{"text":"- a\n- b\n  1. c\n  2. d\n\n> q1\n> q2"}`},
}

func TestFromMarkdown(t *testing.T) {
	for _, c := range fromMarkdownCases {
		t.Run(c.name, func(t *testing.T) {
			typ, got, err := content.FromMarkdown(c.in)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("not JSON: %s", got)
			}
			json.Unmarshal([]byte(c.want), &w)
			if typ != c.typ || !reflect.DeepEqual(g, w) {
				t.Errorf("got %s %s\nwant %s %s", typ, got, c.typ, c.want)
			}
		})
	}
}

func TestFromMarkdownErrors(t *testing.T) {
	for _, c := range []struct {
		in   string
		is   error
		says string
	}{
		{"", nil, "empty draft"},
		{" \n\t\n", nil, "empty draft"},
		{strings.Repeat("a", 150<<10+1), content.ErrTooLarge, "153601 bytes"},
		// within the draft bound, but a post of more than 30 KB
		{strings.Repeat("**b**\n", 8<<10), content.ErrTooLarge, "the post is"},
	} {
		_, _, err := content.FromMarkdown(c.in)
		if err == nil || c.is != nil && !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "content: ") {
			t.Errorf("%.20q…: error %v, want one saying %q", c.in, err, c.says)
		}
	}
	// Long plain text is no post: it goes as text, which Lark takes to
	// 150 KB.
	if typ, _, err := content.FromMarkdown(strings.Repeat("words ", 20<<10)); err != nil || typ != content.TypeText {
		t.Errorf("100 KiB of words: %s, %v", typ, err)
	}
}

// roundTrips are drafts made only of what a post carries: what Parse makes
// of FromMarkdown's post reads, to goldmark, as the draft does.
var roundTrips = []string{
	"hello **bold** and *italic* and ~~struck~~ text",
	"see [the docs](https://example.com/docs?a=1&b=2) and <https://x.example/path>",
	"mail [me](mailto:a@b.example)",
	"**[bold link](https://example.com)** then *more*",
	"line one\nline two\nline three\n\nnext paragraph",
	"ping @ou_abc123 please",
	"intro\n\n```python\nprint('hi')\n```\n\noutro",
	"above\n\n---\n\nbelow",
	"```\n`backticks` and ``` inside\n```",
	"snake_case and a*b and 2 < 3 & 4 > 1",
	"中文 **粗体** 和 *斜体*",
}

func TestRoundTrip(t *testing.T) {
	for _, md := range roundTrips {
		typ, c, err := content.FromMarkdown(md)
		if err != nil {
			t.Fatalf("%q: %v", md, err)
		}
		r, err := content.Parse(typ, string(c), nil, content.Names{})
		if err != nil {
			t.Fatalf("%q → %s: %v", md, c, err)
		}
		if got, want := outline(r.Markdown), outline(md); got != want {
			t.Errorf("%q\n → %s %s\n → %q\n reads as %s\n     want %s", md, typ, c, r.Markdown, got, want)
		}
	}
}

func TestRoundTripUnsupported(t *testing.T) {
	// A post has no lists, quotes, headings or inline code: they go as
	// text lines and come back as the same words, as text.
	for md, want := range map[string]string{
		"- a\n- b":       `p("- a\n- b")`,
		"1. one\n2. two": `p("1. one\n2. two")`,
		"> quoted":       `p("> quoted")`,
		"## Head":        `p(strong("Head"))`,
		"use `go vet`":   `p("use go vet")`,
	} {
		typ, c, err := content.FromMarkdown(md)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := content.Parse(typ, string(c), nil, content.Names{})
		if got := outline(r.Markdown); got != want {
			t.Errorf("%q → %s → %q reads as %s, want %s", md, c, r.Markdown, got, want)
		}
	}
}
