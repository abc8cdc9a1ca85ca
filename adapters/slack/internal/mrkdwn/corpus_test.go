package mrkdwn_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
	"github.com/monoco/courier/internal/testutil"
)

// corpusNames names every id after itself, so a mention reads the same
// whether the text carried a label (<#C1|general>) or the blocks only the
// id: the comparison is of the conversions, not of Slack's labels.
var corpusNames = mrkdwn.Names{
	User:    func(id string) string { return "user-" + id },
	Channel: func(id string) string { return "chan-" + id },
}

type corpusMessage struct {
	where  string
	text   string
	blocks json.RawMessage
}

// corpusMessages returns every message (an object with a "text" string and
// a "ts", "blocks" or the type message or app_mention) in the corpus files
// of dirs, however deeply an envelope nests it.
func corpusMessages(t *testing.T, dirs ...string) []corpusMessage {
	t.Helper()
	root := testutil.CorpusDir(t)
	var out []corpusMessage
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(root, "chat", "slack", d, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no corpus files in %s: %v", d, err)
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			walkMessages(filepath.Join(d, filepath.Base(f)), v, &out)
		}
	}
	return out
}

func walkMessages(where string, v any, out *[]corpusMessage) {
	switch v := v.(type) {
	case map[string]any:
		text, isText := v["text"].(string)
		_, hasTS := v["ts"]
		typ, _ := v["type"].(string)
		blocks, hasBlocks := v["blocks"]
		if isText && (hasTS || hasBlocks || typ == "message" || typ == "app_mention") {
			m := corpusMessage{where: where, text: text}
			if hasBlocks {
				m.blocks, _ = json.Marshal(blocks)
			}
			*out = append(*out, m)
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkMessages(where+"."+k, v[k], out)
		}
	case []any:
		for _, e := range v {
			walkMessages(where, e, out)
		}
	}
}

// textDiffers lists the corpus messages whose text is not their blocks in
// the payload itself, so their words cannot agree, and why.
var textDiffers = map[string]string{
	// A bot's notification: the text is a fallback ("ERROR"), the blocks
	// the review.
	"events/message_with_blocks.slack-go.json": "fallback text",
	// Redacted by hand, differently: the blocks' user is "redacted" and
	// their text "test39", the text's "<@U01JKSB8T7Y> test".
	"socket-mode/app_mention_payload_redacted.slack-go.json": "redacted apart",
}

var corpusDirs = []string{"blocks", "events", "events-api", "messages", "export-messages", "schema-superset", "socket-mode"}

// TestCorpusMessages is the package's contract with real payloads: every
// message converts, to UTF-8 Markdown, and where a message has blocks the
// blocks and the text say the same words (a conversion that drops or
// invents one fails).
func TestCorpusMessages(t *testing.T) {
	msgs := corpusMessages(t, corpusDirs...)
	if len(msgs) < 40 {
		t.Fatalf("only %d messages found in the corpus", len(msgs))
	}
	compared := 0
	for _, m := range msgs {
		fromText := mrkdwn.ToMarkdown(m.text, corpusNames)
		if !utf8.ValidString(fromText) {
			t.Errorf("%s: text gives invalid UTF-8", m.where)
		}
		if len(m.blocks) == 0 || string(m.blocks) == "null" {
			continue
		}
		fromBlocks, ok := mrkdwn.BlocksToMarkdown(m.blocks, corpusNames)
		if !utf8.ValidString(fromBlocks) {
			t.Errorf("%s: blocks give invalid UTF-8", m.where)
		}
		if !ok || strings.TrimSpace(m.text) == "" || textDiffers[m.where] != "" {
			continue
		}
		compared++
		if a, b := words(fromText), words(fromBlocks); !slices.Equal(a, b) {
			t.Errorf("%s: text and blocks disagree\ntext:   %q\n  → %q\n  words %q\nblocks: %q\n  words %q", m.where, m.text, fromText, a, fromBlocks, b)
		}
	}
	// The blocks files are blocks, not messages: each converts on its own.
	files, _ := filepath.Glob(filepath.Join(testutil.CorpusDir(t), "chat", "slack", "blocks", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if md, ok := mrkdwn.BlocksToMarkdown(data, corpusNames); !utf8.ValidString(md) || (!ok && !strings.Contains(f, "rich_text_list")) {
			t.Errorf("%s: %q, %v", f, md, ok)
		}
	}
	if compared < 10 {
		t.Errorf("compared text and blocks of only %d messages", compared)
	}
	t.Logf("%d messages, %d with blocks compared to their text", len(msgs), compared)
}

// corpusFile reads one corpus file.
func corpusFile(t *testing.T, rel string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testutil.CorpusDir(t), "chat", "slack", rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// exportMessage returns an export message's text and blocks converted.
func exportMessage(t *testing.T, name string) (fromText, fromBlocks string) {
	t.Helper()
	var m struct {
		Text   string          `json:"text"`
		Blocks json.RawMessage `json:"blocks"`
	}
	if err := json.Unmarshal(corpusFile(t, "export-messages/"+name), &m); err != nil {
		t.Fatal(err)
	}
	fromBlocks, ok := mrkdwn.BlocksToMarkdown(m.Blocks, corpusNames)
	if !ok {
		t.Fatalf("%s: blocks converted to nothing", name)
	}
	return mrkdwn.ToMarkdown(m.Text, corpusNames), fromBlocks
}

// nodes returns the nodes of a kind in md, in document order.
func nodes(md string, kind ast.NodeKind) ([]ast.Node, []byte) {
	var out []ast.Node
	var src []byte
	find(md, kind, func(n ast.Node, s []byte) { out = append(out, n); src = s })
	return out, src
}

func TestCorpusStructures(t *testing.T) {
	t.Run("rich_text_list", func(t *testing.T) {
		// slack-go's fixture is a rich_text_list without its "type" (the
		// value a RichTextList unmarshals from); it goes in as that.
		var l map[string]any
		if err := json.Unmarshal(corpusFile(t, "blocks/rich_text_list.slack-go.json"), &l); err != nil {
			t.Fatal(err)
		}
		l["type"] = "rich_text_list"
		raw, _ := json.Marshal(map[string]any{"type": "rich_text", "elements": []any{l}})
		md, ok := mrkdwn.BlocksToMarkdown(raw, corpusNames)
		if want := `ol1(li(ul(li(p("hi")))))`; !ok || outline(md) != want {
			t.Errorf("got %q reading as %s, want %s", md, outline(md), want)
		}
	})
	t.Run("rich_text_quote", func(t *testing.T) {
		md, ok := mrkdwn.BlocksToMarkdown(corpusFile(t, "blocks/rich_text_quote.slack-go.json"), corpusNames)
		want := `p("Holy moly") code"Preformatted\n" quote(p("Quote")) quote(p("Another quote")) code"Another preformatted\n"`
		if !ok || outline(md) != want {
			t.Errorf("got %q reading as\n %s\nwant %s", md, outline(md), want)
		}
	})
	t.Run("table_block", func(t *testing.T) {
		md, ok := mrkdwn.BlocksToMarkdown(corpusFile(t, "blocks/table_block.slack-go.json"), corpusNames)
		tables, _ := nodes(md, east.KindTable)
		if !ok || len(tables) != 1 {
			t.Fatalf("got %q: %d tables", md, len(tables))
		}
		want := `table(tr(td(strong("Name")) td(strong("Score"))) tr(td("Alice") td("42")) tr(td("Bob") td()))`
		if got := outline(md); got != want {
			t.Errorf("got %q reading as\n %s\nwant %s", md, got, want)
		}
	})
	t.Run("channel mentions", func(t *testing.T) {
		fromText, fromBlocks := exportMessage(t, "message_with_channel_mentions.zulip.json")
		want := `p("#chan-C079A3FA12P #chan-C0AHX20ADQQ #chan-C06P6T3QGD7")`
		for _, md := range []string{fromText, fromBlocks} {
			if got := outline(md); got != want {
				t.Errorf("%q reads as %s, want %s", md, got, want)
			}
		}
		// Without a directory the text's labels are what is known.
		var m struct{ Text string }
		json.Unmarshal(corpusFile(t, "export-messages/message_with_channel_mentions.zulip.json"), &m)
		if got := mrkdwn.ToMarkdown(m.Text, mrkdwn.Names{}); got != "#C079A3FA12P #rich-text-blocks #general" {
			t.Errorf("without names: %q", got)
		}
	})
	t.Run("code block", func(t *testing.T) {
		fromText, fromBlocks := exportMessage(t, "message_with_code_block.zulip.json")
		want := "# I'm a code block!\n\ndef convert_slack_formatting(text: str) -> str:\n    return text\n"
		for _, md := range []string{fromText, fromBlocks} {
			blocks, src := nodes(md, ast.KindFencedCodeBlock)
			if len(blocks) != 1 || lines(blocks[0], src) != want {
				t.Errorf("%q: want one code block of %q", md, want)
			}
		}
	})
	t.Run("links", func(t *testing.T) {
		fromText, fromBlocks := exportMessage(t, "message_with_links.zulip.json")
		for _, md := range []string{fromText, fromBlocks} {
			links, _ := nodes(md, ast.KindLink)
			if len(links) != 5 {
				t.Fatalf("%q: %d links, want 5", md, len(links))
			}
			for _, l := range links {
				if d := string(l.(*ast.Link).Destination); d != "https://chat.zulip.org/" {
					t.Errorf("%q: link to %q", md, d)
				}
			}
			// the second is bold, the third italic, the fifth struck
			for i, kind := range map[int]ast.NodeKind{1: ast.KindEmphasis, 2: ast.KindEmphasis, 4: east.KindStrikethrough} {
				if p := links[i].Parent(); p.Kind() != kind {
					t.Errorf("%q: link %d is in a %s, want %s", md, i+1, p.Kind(), kind)
				}
			}
			if links[1].Parent().(*ast.Emphasis).Level != 2 || links[2].Parent().(*ast.Emphasis).Level != 1 {
				t.Errorf("%q: link 2 must be strong, link 3 emphasis", md)
			}
		}
	})
	t.Run("nested ordered list", func(t *testing.T) {
		fromText, fromBlocks := exportMessage(t, "message_with_nested_ordered_list.zulip.json")
		want := `p("ordered list with subitems:") ol1(li(p("main item 1") ul(li(p("nested item 1")) li(p("nested item 2")) li(p("nested item 3")))) li(p("main item 2") ol1(li(p("nested item 1")))))`
		if got := outline(fromBlocks); got != want {
			t.Errorf("blocks: %q reads as\n %s\nwant %s", fromBlocks, got, want)
		}
		// The text writes the nested ordered item as "a.", which is no
		// Markdown list: it stays a line of the second item.
		want = `p("ordered list with subitems:") ol1(li(p("main item 1") ul(li(p("nested item 1")) li(p("nested item 2")) li(p("nested item 3")))) li(p("main item 2\na. nested item 1")))`
		if got := outline(fromText); got != want {
			t.Errorf("text: %q reads as\n %s\nwant %s", fromText, got, want)
		}
	})
	t.Run("workspace mentions", func(t *testing.T) {
		fromText, fromBlocks := exportMessage(t, "message_with_workspace_mentions.zulip.json")
		want := `p("@channel " em(strong("@here")) " test mention")`
		for _, md := range []string{fromText, fromBlocks} {
			if got := outline(md); got != want {
				t.Errorf("%q reads as %s, want %s", md, got, want)
			}
		}
	})
}
