package content_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/monoco/courier/adapters/lark/internal/content"
)

// The shapes below are those of Lark's documentation of received message
// content (im/v1 "消息内容介绍" / "Receive message content"): one case or
// more per message_type, and one per rule (escaping, links, mentions).

var bob = []content.Mention{{Key: "@_user_1", ID: "ou_bob", Name: "Bob"}}

var directory = content.Names{User: func(id string) string {
	return map[string]string{"ou_ann": "Ann Lee", "ou_bob": "Bob (directory)"}[id]
}}

type parseCase struct {
	name, typ, content string
	mentions           []content.Mention
	text               string // Result.Text
	outline            string // the Markdown as goldmark reads it
	resources          []content.Resource
	mentioned          []content.Mention // nil: not checked
}

var parseCases = []parseCase{
	{name: "text", typ: "text", content: `{"text":"hello"}`, text: "hello", outline: `p("hello")`},
	{name: "text placeholders", typ: "text", content: `{"text":"@_user_1 please, and @_user_9"}`, mentions: bob,
		text: "@Bob please, and @_user_9", outline: `p("@Bob please, and @_user_9")`, mentioned: bob},
	{name: "text @all", typ: "text", content: `{"text":"@_all listen up"}`,
		text: "@all listen up", outline: `p("@all listen up")`,
		mentioned: []content.Mention{{Key: "@_all", ID: content.AllID, Name: "all"}}},
	{name: "text @_allies is no @all", typ: "text", content: `{"text":"@_allies are with us"}`,
		text: "@_allies are with us", outline: `p("@_allies are with us")`, mentioned: []content.Mention{}},
	{name: "text names from the directory", typ: "text", content: `{"text":"@_user_1 hi"}`,
		mentions: []content.Mention{{Key: "@_user_1", ID: "ou_ann"}},
		text:     "@Ann Lee hi", outline: `p("@Ann Lee hi")`,
		mentioned: []content.Mention{{Key: "@_user_1", ID: "ou_ann", Name: "Ann Lee"}}},
	{name: "text markup renders as typed", typ: "text",
		content: `{"text":"# not a heading\n1. not a list\n> no quote\n*no em* _x_ snake_case [a](http://b) <b>hi</b> &amp; \\"}`,
		text:    "# not a heading\n1. not a list\n> no quote\n*no em* _x_ snake_case [a](http://b) <b>hi</b> &amp; \\",
		outline: `p("# not a heading\n1. not a list\n> no quote\n*no em* _x_ snake_case [a](http://b) <b>hi</b> &amp; \\")`},
	{name: "text code fence renders as typed", typ: "text", content: `{"text":"` + "```" + `\ncode\n` + "```" + `"}`,
		text: "```\ncode\n```", outline: `p("` + "```" + `\ncode\n` + "```" + `")`},

	{name: "post as received", typ: "post",
		content: `{"title":"Weekly","content":[` +
			`[{"tag":"text","text":"first line: ","style":["bold","underline"]},{"tag":"a","href":"http://www.feishu.cn","text":"link","style":["bold","italic"]},{"tag":"text","text":" "},{"tag":"at","user_id":"@_user_1","user_name":"","style":["lineThrough"]}],` +
			`[{"tag":"text","text":"second line"},{"tag":"emotion","emoji_type":"SMILE"}],` +
			`[{"tag":"img","image_key":"img_v2_1","width":1920,"height":1080}],` +
			`[{"tag":"media","file_key":"file_v2_2","image_key":"img_v2_3"}],` +
			`[{"tag":"code_block","language":"GO","text":"func main() int64 {\n    return 0\n}\n"}],` +
			`[{"tag":"hr"}],` +
			`[{"tag":"text","text":"after"}]]}`,
		mentions: bob,
		text:     "Weekly\n\nfirst line: link (http://www.feishu.cn) @Bob\nsecond line:SMILE:\n[image]\n[video]\n\nfunc main() int64 {\n    return 0\n}\n\n---\n\nafter",
		outline: `p(strong("Weekly")) p(html"<u>" strong("first line:") html"</u>" " " em(strong(a[http://www.feishu.cn]("link"))) " " del("@Bob") "\nsecond line:SMILE:\n[image]\n[video]") ` +
			`codeGO"func main() int64 {\n    return 0\n}\n" hr p("after")`,
		resources: []content.Resource{{Type: "image", Kind: "image", Key: "img_v2_1"}, {Type: "file", Kind: "media", Key: "file_v2_2"}},
		mentioned: bob},
	{name: "post in a locale", typ: "post",
		content: `{"en_us":{"title":"","content":[[{"tag":"text","text":"hi "},{"tag":"at","user_id":"ou_ann"}],[],[{"tag":"text","text":"next paragraph"}]]}}`,
		text:    "hi @Ann Lee\n\nnext paragraph", outline: `p("hi @Ann Lee") p("next paragraph")`,
		mentioned: []content.Mention{{ID: "ou_ann", Name: "Ann Lee"}}},
	{name: "post zh_cn before en_us", typ: "post",
		content: `{"en_us":{"content":[[{"tag":"text","text":"english"}]]},"zh_cn":{"content":[[{"tag":"text","text":"中文"}]]}}`,
		text:    "中文", outline: `p("中文")`},
	{name: "post @all", typ: "post", content: `{"content":[[{"tag":"at","user_id":"all","user_name":"所有人"},{"tag":"text","text":" meeting"}]]}`,
		text: "@所有人 meeting", outline: `p("@所有人 meeting")`,
		mentioned: []content.Mention{{Key: "@_all", ID: content.AllID, Name: "所有人"}}},
	{name: "post line starts escaped", typ: "post",
		content: `{"content":[[{"tag":"text","text":"# one"}],[{"tag":"text","text":"- two"}],[{"tag":"text","text":"3) three"}]]}`,
		text:    "# one\n- two\n3) three", outline: `p("# one\n- two\n3) three")`},
	{name: "post unsafe link stays text", typ: "post",
		content: `{"content":[[{"tag":"a","text":"click","href":"javascript:alert(1)"},{"tag":"text","text":" "},{"tag":"a","text":"","href":"file:///etc/passwd"}]]}`,
		text:    "click (javascript:alert(1)) file:///etc/passwd", outline: `p("click (javascript:alert(1)) file:///etc/passwd")`},
	{name: "post link label kept beside address", typ: "post",
		content: `{"content":[[{"tag":"a","text":"bank.example","href":"https://evil.example/a b(c)"},{"tag":"text","text":" "},{"tag":"a","text":"mail","href":"mailto:a@b.c"}]]}`,
		text:    "bank.example (https://evil.example/a b(c)) mail (mailto:a@b.c)",
		outline: `p(a[https://evil.example/a%20b(c)]("bank.example") " " a[mailto:a@b.c]("mail"))`},
	{name: "post code block with fences inside", typ: "post",
		content: "{\"content\":[[{\"tag\":\"code_block\",\"language\":\"md\\n# x\",\"text\":\"```\\nnot the end\\n```\"}]]}",
		text:    "```\nnot the end\n```", outline: "codemd#x\"```\\nnot the end\\n```\\n\""},
	{name: "post content_v2 md tag", typ: "post",
		content: `{"title":"","content":[[{"tag":"text","text":"plain"}]],"content_v2":[[{"tag":"md","text":"**bold** [x](https://x.example) [bad](javascript:1)\n\n` + "```sh\\nls\\n```" + `\n\n> quoted"}]]}`,
		text:    "bold x (https://x.example) bad (javascript:1)\n\nls\n\n> quoted",
		outline: `p(strong("bold") " " a[https://x.example]("x") " bad (javascript:1)") codesh"ls\n" p("> quoted")`},
	{name: "post unknown tag keeps its text", typ: "post", content: `{"content":[[{"tag":"newthing","text":"words"}]]}`,
		text: "words", outline: `p("words")`},
	{name: "post content_v2 preferred", typ: "post",
		content: `{"content":[[{"tag":"text","text":"V1"}]],"content_v2":[[{"tag":"text","text":"V2"}]]}`,
		text:    "V2", outline: `p("V2")`},

	{name: "image", typ: "image", content: `{"image_key":"img_v2_041b28e3"}`, text: "[image]", outline: `p("[image]")`,
		resources: []content.Resource{{Type: "image", Kind: "image", Key: "img_v2_041b28e3"}}},
	{name: "file", typ: "file", content: `{"file_key":"file_v2_1","file_name":"report [final].pdf"}`,
		text: "[file: report [final].pdf]", outline: `p("[file: report [final].pdf]")`,
		resources: []content.Resource{{Type: "file", Kind: "file", Key: "file_v2_1", Name: "report [final].pdf"}}},
	{name: "audio", typ: "audio", content: `{"file_key":"file_v2_a","duration":1500}`,
		text: "[audio: 1.5s]", outline: `p("[audio: 1.5s]")`,
		resources: []content.Resource{{Type: "file", Kind: "audio", Key: "file_v2_a"}}},
	{name: "media", typ: "media", content: `{"file_key":"file_v2_v","image_key":"img_v2_c","file_name":"clip.mp4","duration":30000}`,
		text: "[video: clip.mp4, 30s]", outline: `p("[video: clip.mp4, 30s]")`,
		resources: []content.Resource{{Type: "file", Kind: "media", Key: "file_v2_v", Name: "clip.mp4"}}},
	{name: "sticker", typ: "sticker", content: `{"file_key":"file_v2_s"}`, text: "[sticker]", outline: `p("[sticker]")`,
		resources: []content.Resource{{Type: "file", Kind: "sticker", Key: "file_v2_s"}}},
	{name: "share_chat", typ: "share_chat", content: `{"chat_id":"oc_0dd2"}`, text: "[shared chat: oc_0dd2]", outline: `p("[shared chat: oc_0dd2]")`},
	{name: "share_user named", typ: "share_user", content: `{"user_id":"ou_ann"}`, text: "[shared contact: Ann Lee (ou_ann)]", outline: `p("[shared contact: Ann Lee (ou_ann)]")`},
	{name: "share_user unknown", typ: "share_user", content: `{"user_id":"ou_zed"}`, text: "[shared contact: ou_zed]", outline: `p("[shared contact: ou_zed]")`},
	{name: "merge_forward", typ: "merge_forward", content: `Merged and Forwarded Message`, text: "[merged and forwarded messages]", outline: `p("[merged and forwarded messages]")`},
	{name: "location", typ: "location", content: `{"name":"Cafe","longitude":"116.4","latitude":"39.9"}`,
		text: "[location: Cafe (39.9, 116.4)]", outline: `p("[location: Cafe (39.9, 116.4)]")`},
	{name: "system", typ: "system",
		content: `{"template":"{from_user} invited {to_chatters} to this chat. {divider_text}","from_user":["Alice"],"to_chatters":["Bob","Carol"],"divider_text":{"text":"","i18n_text":{"en_us":"New messages below","zh_cn":"以下为新消息"}}}`,
		text:    "Alice invited Bob, Carol to this chat. 以下为新消息", outline: `p("Alice invited Bob, Carol to this chat. 以下为新消息")`},
	{name: "system unknown variable", typ: "system", content: `{"template":"{who} left {"}`, text: "left {", outline: `p("left {")`},
	{name: "hongbao", typ: "hongbao", content: `{"text":"[Red packet]"}`, text: "[red packet]", outline: `p("[red packet]")`},
	{name: "share_calendar_event", typ: "share_calendar_event", content: `{"summary":"Standup","start_time":"1700000000000","end_time":"1700001800000"}`,
		text: "[calendar event: Standup, 2023-11-14T22:13:20Z – 2023-11-14T22:43:20Z]", outline: `p("[calendar event: Standup, 2023-11-14T22:13:20Z – 2023-11-14T22:43:20Z]")`},
	{name: "vote", typ: "vote", content: `{"topic":"Lunch?","options":["*pizza*","sushi"]}`,
		text: "[vote: Lunch?]\n- *pizza*\n- sushi", outline: `p("[vote: Lunch?]") ul(li(p("*pizza*")) li(p("sushi")))`},
	{name: "todo", typ: "todo", content: `{"task_id":"t1","summary":{"title":"","content":[[{"tag":"text","text":"write tests"}]]}}`,
		text: "[task]\n\nwrite tests", outline: `p("[task]") p("write tests")`},
	{name: "video_chat", typ: "video_chat", content: `{"topic":"Sync","start_time":"1700000000000"}`,
		text: "[video call: Sync, 2023-11-14T22:13:20Z]", outline: `p("[video call: Sync, 2023-11-14T22:13:20Z]")`},

	{name: "card v1", typ: "interactive",
		content: `{"config":{"wide_screen_mode":true},"header":{"title":{"tag":"plain_text","content":"Approve leave?"},"template":"blue"},"elements":[` +
			`{"tag":"div","text":{"content":"Bob asks for *2 days* [why](https://w.example)","tag":"lark_md"},"fields":[{"is_short":true,"text":{"tag":"lark_md","content":"From: Mon"}}]},` +
			`{"tag":"action","actions":[{"tag":"button","text":{"tag":"plain_text","content":"Approve *now*"},"value":{"token":"do-not-show"},"url":"https://x.example"}]},` +
			`{"tag":"note","elements":[{"tag":"plain_text","content":"sent by HR"}]}]}`,
		text:    "Approve leave?\nBob asks for 2 days why (https://w.example)\nFrom: Mon\nApprove *now*\nsent by HR",
		outline: `p(strong("Approve leave?")) p("Bob asks for " em("2 days") " " a[https://w.example]("why")) p("From: Mon") p("Approve *now*") p("sent by HR")`},
	{name: "card 2.0", typ: "interactive",
		content: `{"schema":"2.0","header":{"title":{"tag":"plain_text","content":"Deploy"},"subtitle":{"tag":"plain_text","content":"prod"}},"body":{"elements":[{"tag":"markdown","content":"visible body"},{"tag":"column_set","columns":[{"elements":[{"tag":"button","text":{"content":"Go"},"behaviors":[{"type":"callback","value":{"k":"v"}}]}]}]}]}}`,
		text:    "Deploy\nprod\nvisible body\nGo",
		outline: `p(strong("Deploy")) p(strong("prod")) p("visible body") p("Go")`},
	{name: "card as received", typ: "interactive",
		content: `{"title":"Notice","elements":[[{"tag":"text","text":"line one"},{"tag":"button","text":"OK"}]]}`,
		text:    "Notice\nline one\nOK", outline: `p(strong("Notice")) p("line one") p("OK")`},

	{name: "unknown type kept", typ: "something_new", content: `{"text":"sort of"}`,
		text:    "[message of type something_new]\n{\"text\":\"sort of\"}",
		outline: `p("[message of type something_new]") codejson"{\"text\":\"sort of\"}\n"`},
	{name: "unknown type name sanitised", typ: "x\n# y`", content: `{}`,
		text: "[message of type xy]\n{}", outline: `p("[message of type xy]") codejson"{}\n"`},
}

func TestParse(t *testing.T) {
	for _, c := range parseCases {
		t.Run(c.name, func(t *testing.T) {
			r, err := content.Parse(c.typ, c.content, c.mentions, directory)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if r.Text != c.text {
				t.Errorf("text\n got %q\nwant %q", r.Text, c.text)
			}
			if got := outline(r.Markdown); got != c.outline {
				t.Errorf("markdown %q\n reads as %s\n     want %s", r.Markdown, got, c.outline)
			}
			if !reflect.DeepEqual(r.Resources, c.resources) {
				t.Errorf("resources\n got %+v\nwant %+v", r.Resources, c.resources)
			}
			if c.mentioned != nil && !(len(r.Mentions) == 0 && len(c.mentioned) == 0) && !reflect.DeepEqual(r.Mentions, c.mentioned) {
				t.Errorf("mentions\n got %+v\nwant %+v", r.Mentions, c.mentioned)
			}
			if string(r.Raw) != c.content && c.typ != "merge_forward" {
				t.Errorf("raw %s, want the content as received", r.Raw)
			}
		})
	}
}

func TestParseMentionsAll(t *testing.T) {
	for _, c := range []struct {
		typ, content string
		mentions     []content.Mention
		want         bool
	}{
		{"text", `{"text":"@_all  hello everyone"}`, nil, true},
		{"text", `{"text":"@_allies are with us"}`, nil, false},
		{"text", `{"text":"listen"}`, []content.Mention{{Key: "@_all", Name: "所有人"}}, true},
		{"post", `{"zh_cn":{"title":"","content":[[{"tag":"text","text":"@_all meeting now"}]]}}`, nil, true},
		{"text", `{"text":"@_user_1 hi"}`, bob, false},
	} {
		r, err := content.Parse(c.typ, c.content, c.mentions, content.Names{})
		if err != nil || r.MentionsAll() != c.want {
			t.Errorf("%s %s: MentionsAll %v (%v), want %v", c.typ, c.content, r.MentionsAll(), err, c.want)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	// Content that is not what its type says is an error, and still a
	// usable result: nothing is dropped.
	for _, c := range []struct{ typ, content, inErr string }{
		{"text", `not json`, "not a JSON object"},
		{"text", `{"txt":"typo"}`, `no "text"`},
		{"post", `not valid json`, "not a JSON object"},
		{"post", `{"zh_cn":"x"}`, "no content in any locale"},
		{"post", `{"content":"flat"}`, "not a list of lines"},
		{"image", `{}`, `no "image_key"`},
		{"file", `{"file_name":"a.pdf"}`, `no "file_key"`},
		{"interactive", `{"elements":[`, "not JSON"},
		{"interactive", `{} {}`, "not one JSON value"},
		{"system", `{"from_user":["a"]}`, `no "template"`},
		{"share_chat", `{}`, `no "chat_id"`},
	} {
		r, err := content.Parse(c.typ, c.content, nil, content.Names{})
		if !errors.Is(err, content.ErrMalformed) || !strings.Contains(err.Error(), c.inErr) || !strings.Contains(err.Error(), `"`+c.typ+`"`) {
			t.Errorf("%s %q: error %v, want ErrMalformed naming the type and %q", c.typ, c.content, err, c.inErr)
		}
		if !strings.HasPrefix(err.Error(), "content: ") {
			t.Errorf("error %q does not start with the package name", err)
		}
		codes := 0
		find(r.Markdown, kindFenced, func(n astNode, src []byte) {
			codes++
			if got := lines(n, src); got != c.content+"\n" {
				t.Errorf("%s %q: code block %q, want the content", c.typ, c.content, got)
			}
		})
		if codes != 1 || !strings.Contains(r.Text, c.content) {
			t.Errorf("%s %q: %q / %q does not keep the content", c.typ, c.content, r.Markdown, r.Text)
		}
	}
}

func TestParseUTF8(t *testing.T) {
	r, err := content.Parse("text", "{\"text\":\"a\xffb\\u0000c\"}", nil, content.Names{})
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(r.Text) || !utf8.ValidString(r.Markdown) || r.Text != "a\uFFFDbc" {
		t.Errorf("got %q / %q", r.Text, r.Markdown)
	}
}
