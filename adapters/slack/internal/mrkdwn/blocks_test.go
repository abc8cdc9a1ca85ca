package mrkdwn_test

import (
	"strings"
	"testing"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
)

// section wraps rich text elements in a rich_text block of one section.
func section(elements string) string {
	return `[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[` + elements + `]}]}]`
}

func richText(elements string) string {
	return `[{"type":"rich_text","elements":[` + elements + `]}]`
}

// The cases follow Slack's rich text block reference (rich_text_section,
// rich_text_list with style, indent and offset, rich_text_quote,
// rich_text_preformatted; the text, link, user, channel, usergroup,
// broadcast, emoji and date elements and their style object) and the
// section, header, context, divider and table block references.
var blocksCases = []struct {
	name   string
	blocks string
	want   string
	tree   string
}{
	{name: "styles",
		blocks: section(`{"type":"text","text":"Hello "},{"type":"text","text":"bold","style":{"bold":true}},{"type":"text","text":" "},{"type":"text","text":"it","style":{"italic":true}},{"type":"text","text":" "},{"type":"text","text":"gone","style":{"strike":true}},{"type":"text","text":" "},{"type":"text","text":"x := *p","style":{"code":true}}`),
		want:   "Hello **bold** *it* ~~gone~~ `x := *p`",
		tree:   `p("Hello " strong("bold") " " em("it") " " del("gone") " " cs"x := *p")`},
	{name: "all styles at once",
		blocks: section(`{"type":"text","text":"all","style":{"bold":true,"italic":true,"strike":true,"underline":true}}`),
		want:   "~~***all***~~",
		tree:   `p(del(em(strong("all"))))`},
	{name: "spaces outside delimiters",
		blocks: section(`{"type":"text","text":" bold ","style":{"bold":true}},{"type":"text","text":"next"}`),
		want:   " **bold** next",
		tree:   `p(strong("bold") " next")`},
	{name: "one pair for a run of one style",
		blocks: section(`{"type":"text","text":"a ","style":{"bold":true}},{"type":"link","url":"https://x.com","text":"b","style":{"bold":true}}`),
		want:   "**a [b](https://x.com)**",
		tree:   `p(strong("a " a[https://x.com]("b")))`},
	{name: "styled text over lines",
		blocks: section(`{"type":"text","text":"one\n\ntwo","style":{"bold":true}}`),
		want:   "**one**\n\n**two**",
		tree:   `p(strong("one")) p(strong("two"))`},
	{name: "markup typed as text",
		blocks: section(`{"type":"text","text":"*not bold* [x](y) <b> &copy; snake_case"}`),
		want:   `\*not bold\* \[x\](y) \<b> \&copy; snake_case`,
		tree:   `p("*not bold* [x](y) <b> &copy; snake_case")`},
	{name: "link without text",
		blocks: section(`{"type":"link","url":"https://x.com/a_b"}`),
		want:   "<https://x.com/a_b>",
		tree:   `p(a[https://x.com/a_b]("https://x.com/a_b"))`},
	{name: "unsafe link is text",
		blocks: section(`{"type":"link","url":"javascript:alert(1)","text":"click"}`),
		want:   "click (javascript:alert(1))",
		tree:   `p("click (javascript:alert(1))")`},
	{name: "mentions",
		blocks: section(`{"type":"user","user_id":"U123"},{"type":"text","text":" "},{"type":"user","user_id":"U999"},{"type":"text","text":" "},{"type":"channel","channel_id":"C123"},{"type":"text","text":" "},{"type":"usergroup","usergroup_id":"S123"},{"type":"text","text":" "},{"type":"broadcast","range":"here"}`),
		want:   "@Ann Lee @U999 #general @S123 @here"},
	{name: "emoji",
		blocks: section(`{"type":"emoji","name":"thumbsup","unicode":"1f44d"},{"type":"emoji","name":"wave::skin-tone-4","unicode":"1f44b-1f3fd"},{"type":"emoji","name":"party_parrot"},{"type":"emoji","name":"x","unicode":"zz"}`),
		want:   "👍👋🏽:party_parrot::x:"},
	{name: "date",
		blocks: section(`{"type":"date","timestamp":1392734382,"format":"{date_num}","fallback":"Feb 18, 2014"},{"type":"text","text":" / "},{"type":"date","timestamp":1392734382,"format":"{date_num}"}`),
		want:   "Feb 18, 2014 / 2014-02-18 14:39 UTC"},
	{name: "nested bullets",
		blocks: richText(`{"type":"rich_text_list","style":"bullet","indent":0,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"a"}]},{"type":"rich_text_section","elements":[{"type":"text","text":"b"}]}]},
			{"type":"rich_text_list","style":"bullet","indent":1,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"c"}]}]},
			{"type":"rich_text_list","style":"bullet","indent":0,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"d"}]}]}`),
		want: "- a\n- b\n  - c\n- d",
		tree: `ul(li(p("a")) li(p("b") ul(li(p("c")))) li(p("d")))`},
	{name: "ordered with offset under nested",
		blocks: richText(`{"type":"rich_text_section","elements":[{"type":"text","text":"steps:\n"}]},
			{"type":"rich_text_list","style":"ordered","indent":0,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"x"}]}]},
			{"type":"rich_text_list","style":"bullet","indent":1,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"y"}]}]},
			{"type":"rich_text_list","style":"ordered","indent":0,"offset":1,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"z"}]}]},
			{"type":"rich_text_section","elements":[{"type":"text","text":"done"}]}`),
		want: "steps:\n\n1. x\n   - y\n2. z\n\ndone",
		tree: `p("steps:") ol1(li(p("x") ul(li(p("y")))) li(p("z"))) p("done")`},
	{name: "list starting at an offset",
		blocks: richText(`{"type":"rich_text_list","style":"ordered","offset":9,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"ten"}]},{"type":"rich_text_section","elements":[{"type":"text","text":"eleven"}]}]}`),
		want:   "10. ten\n11. eleven",
		tree:   `ol10(li(p("ten")) li(p("eleven")))`},
	{name: "indent deeper than any item is clamped",
		blocks: richText(`{"type":"rich_text_list","style":"bullet","indent":3,"elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"deep"}]}]}`),
		want:   "- deep",
		tree:   `ul(li(p("deep")))`},
	{name: "quote",
		blocks: richText(`{"type":"rich_text_quote","elements":[{"type":"text","text":"a\n"},{"type":"text","text":"b","style":{"bold":true}}]},{"type":"rich_text_section","elements":[{"type":"text","text":"after"}]}`),
		want:   "> a\n> **b**\n\nafter",
		tree:   `quote(p("a\n" strong("b"))) p("after")`},
	{name: "preformatted",
		blocks: richText(`{"type":"rich_text_preformatted","elements":[{"type":"text","text":"x < y && *z*\n"},{"type":"link","url":"https://x.com"}]}`),
		want:   "```\nx < y && *z*\nhttps://x.com\n```",
		tree:   `code"x < y && *z*\nhttps://x.com\n"`},
	{name: "preformatted holding a fence",
		blocks: richText(`{"type":"rich_text_preformatted","elements":[{"type":"text","text":"a\n` + "```" + `\nb"}]}`),
		want:   "````\na\n```\nb\n````",
		tree:   "code\"a\\n```\\nb\\n\""},
	{name: "section block",
		blocks: `[{"type":"section","text":{"type":"mrkdwn","text":"*hi* <@U123>"},"fields":[{"type":"plain_text","text":"a*b"},{"type":"mrkdwn","text":"_c_"}]}]`,
		want:   "**hi** @Ann Lee\n\na\\*b\n\n*c*",
		tree:   `p(strong("hi") " @Ann Lee") p("a*b") p(em("c"))`},
	{name: "header divider context",
		blocks: `[{"type":"header","text":{"type":"plain_text","text":"Release [v2]"}},{"type":"divider"},{"type":"context","elements":[{"type":"image","image_url":"https://x.com/i.png","alt_text":"logo"},{"type":"mrkdwn","text":"_by_ me"}]}]`,
		want:   "## Release \\[v2\\]\n\n---\n\n*by* me",
		tree:   `h2("Release [v2]") hr p(em("by") " me")`},
	{name: "table",
		blocks: `[{"type":"table","rows":[[{"type":"raw_text","text":"Name"},{"type":"raw_text","text":"a|b"}],[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"Al","style":{"bold":true}}]}]},{"type":"raw_number","value":42}],[{"type":"raw_text","text":"Bo"},null]]}]`,
		want:   "| Name | a\\|b |\n| --- | --- |\n| **Al** | 42 |\n| Bo |  |",
		tree:   `table(tr(td("Name") td("a|b")) tr(td(strong("Al")) td("42")) tr(td("Bo") td()))`},
	{name: "image block",
		blocks: `[{"type":"image","image_url":"https://x.com/i.png","alt_text":"chart"}]`,
		want:   "[chart](https://x.com/i.png)"},
	{name: "markdown block",
		blocks: `[{"type":"markdown","text":"**Deploy** [log](https://x.com/l) [bad](javascript:alert(1)) <script>x</script>\n\n- a\n- b"}]`,
		want:   "**Deploy** [log](https://x.com/l) bad (javascript:alert(1)) \\<script>x\\</script>\n\n- a\n- b",
		tree:   `p(strong("Deploy") " " a[https://x.com/l]("log") " bad (javascript:alert(1)) <script>x</script>") ul(li(p("a")) li(p("b")))`},
	{name: "single block object",
		blocks: `{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"one"}]}]}`,
		want:   "one"},
}

func TestBlocksToMarkdown(t *testing.T) {
	for _, c := range blocksCases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := mrkdwn.BlocksToMarkdown([]byte(c.blocks), names)
			if !ok || got != c.want {
				t.Errorf("BlocksToMarkdown(%s)\n got %q, %v\nwant %q", c.blocks, got, ok, c.want)
			}
			if c.tree != "" {
				if tree := outline(got); tree != c.tree {
					t.Errorf("%q reads as\n %s\nwant %s", got, tree, c.tree)
				}
			}
		})
	}
}

func TestBlocksToMarkdownNothingToConvert(t *testing.T) {
	// Then the caller uses the text: ok must be false, not an empty success.
	for _, blocks := range []string{
		``, `null`, `[]`, `not json`, `[1,2]`, `{}`,
		`[{"type":"actions","elements":[{"type":"button","text":{"type":"plain_text","text":"Go"}}]}]`,
		`[{"type":"rich_text","elements":[]}]`,
		`[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[{"type":"text","text":"  \n"}]}]}]`,
	} {
		if md, ok := mrkdwn.BlocksToMarkdown([]byte(blocks), mrkdwn.Names{}); ok || md != "" {
			t.Errorf("BlocksToMarkdown(%s) = %q, %v; want nothing", blocks, md, ok)
		}
	}
}

func TestBlocksToMarkdownDeep(t *testing.T) {
	// 1,000 levels of lists in lists, and of elements in elements: no stack
	// blown, and the words at the bottom still written.
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString(`{"type":"rich_text_list","style":"bullet","elements":[`)
	}
	b.WriteString(`{"type":"rich_text_section","elements":[{"type":"text","text":"bottom"}]}`)
	b.WriteString(strings.Repeat("]}", 1000))
	md, ok := mrkdwn.BlocksToMarkdown([]byte(richText(b.String())), mrkdwn.Names{})
	if !ok || !strings.Contains(md, "bottom") {
		t.Fatalf("deep lists: %v %.200q", ok, md)
	}
	if len(md) > 64<<10 {
		t.Fatalf("deep lists: %d bytes of Markdown for one word", len(md))
	}

	b.Reset()
	for i := 0; i < 1000; i++ {
		b.WriteString(`{"type":"rich_text_section","elements":[`)
	}
	b.WriteString(`{"type":"text","text":"bottom"}`)
	b.WriteString(strings.Repeat("]}", 1000))
	md, ok = mrkdwn.BlocksToMarkdown([]byte(richText(b.String())), mrkdwn.Names{})
	if !ok || !strings.Contains(md, "bottom") {
		t.Fatalf("deep sections: %v %.200q", ok, md)
	}
}
