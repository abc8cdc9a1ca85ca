package mrkdwn_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
)

// names is a directory of two users and one channel; any other id is
// unknown ("").
var names = mrkdwn.Names{
	User: func(id string) string {
		return map[string]string{"U123": "Ann Lee", "W456": "Bo_Chen"}[id]
	},
	Channel: func(id string) string {
		return map[string]string{"C123": "general"}[id]
	},
}

// The cases follow Slack's "Formatting text for app surfaces" (mrkdwn):
// what each control sequence means, what must be escaped, and the
// formatting marks; the expected Markdown was written and checked by hand.
// tree is what a CommonMark reader must see (outline), when it says more
// than the bytes.
var toMarkdownCases = []struct {
	name  string
	in    string
	names mrkdwn.Names
	want  string
	tree  string
}{
	// Mentions: <@U…>, <@U…|label>, names from the directory, else the
	// label, else the id.
	{name: "user resolved", in: "hi <@U123>", names: names, want: "hi @Ann Lee"},
	{name: "user label when unresolved", in: "<@U999|bob>", names: names, want: "@bob"},
	{name: "user resolver wins over label", in: "<@U123|ann>", names: names, want: "@Ann Lee"},
	{name: "user id when nothing else", in: "<@W999>", want: "@W999"},
	{name: "user name with markup chars", in: "<@W456> <@U9|*x*>", names: names, want: `@Bo_Chen @\*x\*`, tree: `p("@Bo_Chen @*x*")`},
	{name: "channel with label", in: "<#C999|random>", want: "#random"},
	{name: "channel resolved", in: "<#C123>", names: names, want: "#general"},
	{name: "channel id", in: "<#C999>", want: "#C999"},
	{name: "here", in: "<!here> look", want: "@here look"},
	{name: "here with label", in: "<!here|here>", want: "@here"},
	{name: "channel broadcast", in: "<!channel>", want: "@channel"},
	{name: "everyone", in: "<!everyone>", want: "@everyone"},
	{name: "subteam with label", in: "<!subteam^S123|@team>", want: "@team"},
	{name: "subteam without label", in: "<!subteam^S123>", want: "@S123"},
	{name: "date fallback", in: "<!date^1392734382^Posted {date_num} {time_secs}|Posted 2014-02-18 6:39:42 AM PST>", want: "Posted 2014-02-18 6:39:42 AM PST"},
	{name: "date link fallback", in: "<!date^1392734382^{date_short}^https://example.com/|Feb 18, 2014>", want: "Feb 18, 2014"},
	{name: "date without fallback", in: "<!date^1392734382^{date_num}>", want: "2014-02-18 14:39 UTC"},

	// Links: only http, https and mailto are links; a label never hides
	// its address.
	{name: "link with label", in: "<http://example.com|Example>", want: "[Example](http://example.com)", tree: `p(a[http://example.com]("Example"))`},
	{name: "bare link", in: "<https://example.com/a_b_c>", want: "<https://example.com/a_b_c>", tree: `p(a[https://example.com/a_b_c]("https://example.com/a_b_c"))`},
	{name: "link label equal to url", in: "<https://example.com|https://example.com>", want: "<https://example.com>"},
	{name: "mailto is the address", in: "<mailto:a@b.com|a@b.com>", want: "a@b.com", tree: `p("a@b.com")`},
	{name: "mailto with another label", in: "<mailto:a@b.com|write us>", want: "[write us](mailto:a@b.com)", tree: `p(a[mailto:a@b.com]("write us"))`},
	{name: "label that looks like another url", in: "<https://evil.example/|https://bank.example/>", want: "[https://bank.example/](https://evil.example/)", tree: `p(a[https://evil.example/]("https://bank.example/"))`},
	{name: "javascript is text", in: "<javascript:alert(1)|click me>", want: "click me (javascript:alert(1))", tree: `p("click me (javascript:alert(1))")`},
	{name: "data url is text", in: "<data:text/html;base64,PHNjcmlwdD4=>", want: "data:text/html;base64,PHNjcmlwdD4=", tree: `p("data:text/html;base64,PHNjcmlwdD4=")`},
	{name: "slack scheme is text", in: "<slack://open?team=T1|open>", want: "open (slack://open?team=T1)", tree: `p("open (slack://open?team=T1)")`},
	{name: "file scheme is text", in: "<file:///etc/passwd>", want: "file:///etc/passwd"},
	{name: "scheme case", in: "<HTTPS://EXAMPLE.COM|x>", want: "[x](HTTPS://EXAMPLE.COM)"},
	{name: "ampersand in url", in: "<https://x.com/?a=1&amp;b=2|q>", want: `[q](https://x.com/?a=1\&b=2)`, tree: `p(a[https://x.com/?a=1&b=2]("q"))`},
	{name: "parens in url", in: "<https://en.wikipedia.org/wiki/Go_(language)|Go>", want: `[Go](https://en.wikipedia.org/wiki/Go_\(language\))`, tree: `p(a[https://en.wikipedia.org/wiki/Go_(language)]("Go"))`},
	{name: "markup in label", in: "<http://x.com|a*b_c [d]>", want: `[a\*b_c \[d\]](http://x.com)`, tree: `p(a[http://x.com]("a*b_c [d]"))`},
	{name: "formatted link", in: "*<https://x.com|X>*", want: "**[X](https://x.com)**", tree: `p(strong(a[https://x.com]("X")))`},
	{name: "unclosed angle", in: "a <b", want: `a \<b`, tree: `p("a <b")`},

	// Escaping: Slack sends &, <, > as entities, and only those.
	{name: "entities", in: "a &amp; b &lt;tag&gt;", want: `a & b \<tag>`, tree: `p("a & b <tag>")`},
	{name: "entity of an entity", in: "&amp;lt; &amp;copy;", want: `\&lt; \&copy;`, tree: `p("&lt; &copy;")`},
	{name: "brackets are text", in: "[not a link](http://x)", want: `\[not a link\](http://x)`, tree: `p("[not a link](http://x)")`},
	{name: "backslash", in: `C:\temp\*`, want: `C:\\temp\\\*`, tree: `p("C:\\temp\\*")`},
	{name: "heading-like line kept", in: "# not a heading in Slack", want: "# not a heading in Slack"},
	{name: "greater than mid line", in: "a &gt; b", want: "a > b", tree: `p("a > b")`},
	{name: "indented line is not code", in: "    four spaces", want: "\u00a0\u00a0\u00a0\u00a0four spaces", tree: `p("\u00a0\u00a0\u00a0\u00a0four spaces")`},

	// Formatting: *bold*, _italic_, ~strike~ at word boundaries only.
	{name: "bold", in: "a *bold* b", want: "a **bold** b", tree: `p("a " strong("bold") " b")`},
	{name: "italic", in: "_italic_", want: "*italic*", tree: `p(em("italic"))`},
	{name: "strike", in: "~gone~", want: "~~gone~~", tree: `p(del("gone"))`},
	{name: "nested", in: "_*both*_", want: "***both***", tree: `p(em(strong("both")))`},
	{name: "punctuation around", in: "(*yes*), _ok_.", want: "(**yes**), *ok*.", tree: `p("(" strong("yes") "), " em("ok") ".")`},
	{name: "snake case", in: "snake_case_names", want: "snake_case_names", tree: `p("snake_case_names")`},
	{name: "intraword star", in: "2*3*4", want: `2\*3\*4`, tree: `p("2*3*4")`},
	{name: "spaced stars", in: "a * b * c", want: `a \* b \* c`, tree: `p("a * b * c")`},
	{name: "unclosed", in: "*not closed", want: `\*not closed`, tree: `p("*not closed")`},
	{name: "space before closer", in: "*a *", want: `\*a \*`, tree: `p("*a *")`},
	{name: "not across lines", in: "*a\nb*", want: "\\*a\nb\\*", tree: `p("*a\nb*")`},
	{name: "double stars", in: "**x**", want: `\***x**\*`, tree: `p("*" strong("x") "*")`},
	{name: "marker inside url", in: "_<https://x.com/_a_|b>_", want: "*[b](https://x.com/_a_)*", tree: `p(em(a[https://x.com/_a_]("b")))`},
	{name: "label is text", in: "<https://x.com|_b_>", want: `[\_b\_](https://x.com)`, tree: `p(a[https://x.com]("_b_"))`},
	{name: "tilde in text", in: "~5 min", want: `\~5 min`, tree: `p("~5 min")`},

	// Code: no formatting, mentions or entities inside but the unescaping.
	{name: "code span", in: "run `rm *.tmp &amp;&amp; ls &lt;dir&gt;` now", want: "run `rm *.tmp && ls <dir>` now", tree: `p("run " cs"rm *.tmp && ls <dir>" " now")`},
	{name: "code span with mention syntax", in: "`<@U123>`", names: names, want: "`<@U123>`", tree: `p(cs"<@U123>")`},
	{name: "pre", in: "```x = *y* &amp; _z_```", want: "```\nx = *y* & _z_\n```", tree: `code"x = *y* & _z_\n"`},
	{name: "pre multi-line", in: "```\nfunc f() {\n    return\n}\n```", want: "```\nfunc f() {\n    return\n}\n```", tree: `code"func f() {\n    return\n}\n"`},
	{name: "pre mid line", in: "see ```a``` and", want: "see\n```\na\n```\nand", tree: `p("see") code"a\n" p("and")`},
	{name: "pre with fence inside", in: "```a ```` b```", want: "```\na \n```\n` b`\\`\\`", tree: "code\"a \\n\" p(cs\" b\" \"``\")"},
	{name: "lone backtick", in: "it`s", want: "it\\`s", tree: `p("it` + "`" + `s")`},
	{name: "lone backtick then markup", in: "it`s <@U123> *b* <http://x.com>", names: names, want: "it\\`s @Ann Lee **b** <http://x.com>", tree: `p("it` + "`" + `s @Ann Lee " strong("b") " " a[http://x.com]("http://x.com"))`},

	// Quotes: "&gt; " a line, "&gt;&gt;&gt;" the rest.
	{name: "quote then text", in: "&gt; quoted\nnot quoted", want: "> quoted\n\nnot quoted", tree: `quote(p("quoted")) p("not quoted")`},
	{name: "quote lines", in: "&gt; one\n&gt; two", want: "> one\n> two", tree: `quote(p("one\ntwo"))`},
	{name: "quote rest", in: "&gt;&gt;&gt; all\nof this", want: "> all\n> of this", tree: `quote(p("all\nof this"))`},
	{name: "quoted code", in: "&gt; ```a\n&gt; b```", want: "> ```\n> a\n> b\n> ```", tree: `quote(code"a\nb\n")`},
	{name: "raw quote mark", in: "> posted raw", want: "> posted raw", tree: `quote(p("posted raw"))`},

	// Lists as Slack's clients write them into the text.
	{name: "bullets nested", in: "• one\n• two\n    ◦ nested", want: "- one\n- two\n  - nested", tree: `ul(li(p("one")) li(p("two") ul(li(p("nested")))))`},
	{name: "blank line before a list", in: "a\n\n• b\n\nc", want: "a\n\n- b\n\nc", tree: `p("a") ul(li(p("b"))) p("c")`},
	{name: "ordered", in: "intro:\n1. a\n2. b\nafter", want: "intro:\n\n1. a\n2. b\n\nafter", tree: `p("intro:") ol1(li(p("a")) li(p("b"))) p("after")`},

	// Whatever arrives, the output is UTF-8.
	{name: "invalid utf-8", in: "a\xffb", want: "a\uFFFDb"},
	{name: "empty", in: "", want: ""},
}

func TestToMarkdown(t *testing.T) {
	for _, c := range toMarkdownCases {
		t.Run(c.name, func(t *testing.T) {
			got := mrkdwn.ToMarkdown(c.in, c.names)
			if got != c.want {
				t.Errorf("ToMarkdown(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
			if c.tree != "" {
				if tree := outline(got); tree != c.tree {
					t.Errorf("ToMarkdown(%q) = %q reads as\n %s\nwant %s", c.in, got, tree, c.tree)
				}
			}
		})
	}
}

func TestToMarkdownNoSchemeButHTTPIsALink(t *testing.T) {
	// Every link ToMarkdown writes goes to http, https or mailto, whatever
	// the scheme it was handed.
	for _, scheme := range []string{"javascript", "JavaScript", "data", "file", "slack", "vbscript", "ftp", "x-unknown", ""} {
		in := "<" + scheme + ":payload|label> <" + scheme + "://host/x>"
		md := mrkdwn.ToMarkdown(in, mrkdwn.Names{})
		if n := find(md, kindLink, nil) + find(md, kindAutoLink, nil); n != 0 {
			t.Errorf("%q gave %d links: %q", in, n, md)
		}
		if !strings.Contains(plain(md), "payload") {
			t.Errorf("%q lost its address: %q", in, md)
		}
	}
}

func TestToMarkdownNamesBounded(t *testing.T) {
	// A thousand mentions of a user whose name is 10 KB: names are cut to
	// 256 bytes and, together, to the input's size plus 64 KiB; past that
	// the ids stay.
	long := strings.Repeat("é", 5000)
	n := mrkdwn.Names{User: func(string) string { return long }}
	in := strings.Repeat("<@U1> ", 1000)
	got := mrkdwn.ToMarkdown(in, n)
	if max := len(in) + 64<<10 + 1000*8; len(got) > max {
		t.Fatalf("output %d bytes, want at most %d", len(got), max)
	}
	if !utf8.ValidString(got) {
		t.Fatal("a name cut in the middle of a rune")
	}
	if !strings.Contains(got, "@U1") || !strings.Contains(got, "@"+strings.Repeat("é", 128)+" ") {
		t.Fatalf("want names first, then ids: %.200q", got)
	}
	// A name is one line: a newline in it would end a list item or a quote.
	n = mrkdwn.Names{User: func(string) string { return "Ann\n# Lee" }}
	if got := mrkdwn.ToMarkdown("&gt; <@U1>", n); got != "> @Ann # Lee" {
		t.Fatalf("got %q", got)
	}
}

func TestRefs(t *testing.T) {
	blocks := `[{"type":"rich_text","elements":[{"type":"rich_text_section","elements":[
		{"type":"user","user_id":"U777"},{"type":"channel","channel_id":"C777"},
		{"type":"user","user_id":"U123"},{"type":"text","text":"x"}]}]},
		{"type":"section","text":{"type":"mrkdwn","text":"cc <@U888|x> <#C888>"}}]`
	users, channels := mrkdwn.Refs("hi <@U123> <@U123|ann> <#C123|general> <@W456> <!here> <@bad id> <#C1>>", []byte(blocks))
	if got, want := strings.Join(users, ","), "U123,W456,U777,U888"; got != want {
		t.Errorf("users %q, want %q", got, want)
	}
	if got, want := strings.Join(channels, ","), "C123,C1,C777,C888"; got != want {
		t.Errorf("channels %q, want %q", got, want)
	}
	// An outsider's message cannot make us look up more than 100 of each.
	users, _ = mrkdwn.Refs(strings.Repeat("<@U1> <@U2> ", 10)+func() string {
		var b strings.Builder
		for i := 0; i < 500; i++ {
			b.WriteString("<@U" + strings.Repeat("A", i%30+1) + string(rune('A'+i%26)) + ">")
		}
		return b.String()
	}(), nil)
	if len(users) != 100 || users[0] != "U1" || users[1] != "U2" {
		t.Errorf("got %d users starting %q", len(users), users[:2])
	}
}
