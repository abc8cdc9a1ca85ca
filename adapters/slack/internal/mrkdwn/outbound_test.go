package mrkdwn_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
)

// The cases follow Slack's mrkdwn reference (what *bold*, _italic_,
// ~strike~, `code`, ``` blocks, "> " quotes and <url|text> mean, and that
// &, < and > are escaped in text) against CommonMark's meaning of the
// draft; written and checked by hand.
var fromMarkdownCases = []struct {
	name, in, want string
}{
	{"bold", "**bold** __also__", "*bold* *also*"},
	{"emphasis", "*em* and _em_", "_em_ and _em_"},
	{"strike", "~~gone~~", "~gone~"},
	{"strong in emphasis", "***both***", "_*both*_"},
	{"link", "[text](http://x.com)", "<http://x.com|text>"},
	{"link titled", `[label](https://x.com/a "title")`, "<https://x.com/a|label>"},
	{"link to itself", "[http://x.com](http://x.com)", "<http://x.com>"},
	{"link label of markup", "[**bold** `c`](http://x.com)", "<http://x.com|bold c>"},
	{"bold link", "[**bold**](http://x.com) x[~_s_~](http://y.com)", "*<http://x.com|bold>* x\u200b~_<http://y.com|s>_~"},
	{"link chars that would end the sequence", "[a|b>](http://x.com/?q=a|b)", "<http://x.com/?q=a%7Cb|a|b&gt;>"},
	{"link with a space", "[x](<http://x.com/a b>)", "<http://x.com/a%20b|x>"},
	{"bare url kept", "see http://x.com/a?b=1&c=2", "see http://x.com/a?b=1&amp;c=2"},
	{"autolink", "<https://x.com>", "<https://x.com>"},
	{"email autolink", "<a@b.com>", "<mailto:a@b.com|a@b.com>"},
	{"mailto link", "[us](mailto:a@b.com)", "<mailto:a@b.com|us>"},
	{"javascript is text", "[x](javascript:alert(1))", "x (javascript:alert(1))"},
	{"data image is text", "![i](data:image/png;base64,AA==)", "i (data:image/png;base64,AA==)"},
	{"image", "![logo](https://x.com/l.png)", "<https://x.com/l.png|logo>"},
	{"escapes", "a & b < c > d", "a &amp; b &lt; c &gt; d"},
	{"markdown escapes resolved", `AT&amp;T \* \[x\] &#60;`, "AT&amp;T * [x] &lt;"},
	{"code span", "`a < b && c`", "`a &lt; b &amp;&amp; c`"},
	{"code block drops language", "```go\nif a < b {\n}\n```", "```\nif a &lt; b {\n}\n```"},
	{"indented code", "    x := 1", "```\nx := 1\n```"},
	{"quote", "> one\n> two\n\n> > nested", "> one\n> two\n\n> > nested"},
	{"bullets nested", "- a\n- b\n  - c\n    - d", "• a\n• b\n    ◦ c\n        ▪ d"},
	{"ordered nested", "1. x\n2. y\n   1. z", "1. x\n2. y\n    1. z"},
	{"ordered start", "3. x\n4. y", "3. x\n4. y"},
	{"item of two paragraphs", "- a\n\n  more\n- b", "• a\n\n    more\n• b"},
	{"heading", "# Title\n\ntext", "*Title*\n\ntext"},
	{"heading with bold", "## A **b** c", "*A b c*"},
	{"hard breaks", "a  \nb\\\nc", "a\nb\nc"},
	{"soft break kept", "a\nb", "a\nb"},
	{"thematic break", "a\n\n---\n\nb", "a\n\n───\n\nb"},
	{"html is text", "<b>hi</b>", "&lt;b&gt;hi&lt;/b&gt;"},
	{"intraword bold", "foo**bar**baz", "foo\u200b*bar*\u200bbaz"},
	{"table", "| a | b |\n|---|---|\n| 1 | 2 |", "```\na | b\n1 | 2\n```"},
	{"invalid utf-8", "a\xffb", "a\uFFFDb"},
	{"empty", "", ""},
}

func TestFromMarkdown(t *testing.T) {
	for _, c := range fromMarkdownCases {
		t.Run(c.name, func(t *testing.T) {
			if got := mrkdwn.FromMarkdown(c.in); got != c.want {
				t.Errorf("FromMarkdown(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

// Drafts for the round trip, each of the structures FromMarkdown supports.
var roundTrips = []string{
	"plain words, with punctuation: a * b _ c ~ d [e] < f > & g",
	"**bold**, *em*, _em_, ~~struck~~ and ***both*** in a line",
	"foo**bar**baz and snake_case_names",
	// (an e-mail autolink comes back as the address, as ToMarkdown writes
	// <mailto:a@b|a@b>: not a round trip by design)
	"a [link](https://example.com/a_(b)?c=1&d=2) and <https://example.com>",
	"`code with *stars* and <tags>` then text",
	"a [**bold link**](https://example.com/) and a ~~[struck](https://example.com/s)~~ one",
	"```\nfunc main() {\n\tif a < b && c > d {}\n}\n```",
	"> quoted **bold**\n> second line\n\nafter",
	"- one\n- two\n  - two.one\n    - two.one.one\n- three",
	"1. first\n2. second\n   1. second.first\n3. third",
	"7. seven\n8. eight",
	"intro\n\n- a\n- b\n\noutro",
	"line one  \nline two\nline three",
	"# Heading\n\nbody",
}

// normalise makes the outline of a draft comparable with that of its
// round trip: Slack has no headings (they become bold lines), nor
// formatting inside a link's label (it goes around the link), and the
// zero-width spaces FromMarkdown adds for Slack's word boundaries are not
// text a reader sees.
var heading = regexp.MustCompile(`h[1-6]\(((?:[^()"]|"(?:[^"\\]|\\.)*")*)\)`)

// A link whose whole label is bold is a bold link; Slack writes the
// emphasis outside (*<url|label>*), so the round trip does too.
var styledLabel = regexp.MustCompile(`a\[([^\]]*)\]\((strong|em|del)\(("(?:[^"\\]|\\.)*")\)\)`)

func normalise(outline string) string {
	outline = heading.ReplaceAllString(outline, "p(strong($1))")
	outline = styledLabel.ReplaceAllString(outline, "$2(a[$1]($3))")
	return strings.ReplaceAll(outline, `\u200b`, "")
}

func TestFromMarkdownRoundTrip(t *testing.T) {
	// FromMarkdown then ToMarkdown gives back the draft's tree: what the
	// agent wrote is what the mailbox shows of our own message.
	for _, md := range roundTrips {
		slack := mrkdwn.FromMarkdown(md)
		back := mrkdwn.ToMarkdown(slack, mrkdwn.Names{})
		if got, want := normalise(outline(back)), normalise(outline(md)); got != want {
			t.Errorf("round trip of %q\nvia %q\n→  %q\n got %s\nwant %s", md, slack, back, got, want)
		}
	}
}
