package mrkdwn_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
)

// fixture is testdata/message.json: one message as text, as blocks, and a
// draft of the same.
func fixture(tb testing.TB) (text string, blocks json.RawMessage, draft string) {
	tb.Helper()
	data, err := os.ReadFile("testdata/message.json")
	if err != nil {
		tb.Fatal(err)
	}
	var m struct {
		Text   string          `json:"text"`
		Blocks json.RawMessage `json:"blocks"`
		Draft  string          `json:"draft"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatal(err)
	}
	return m.Text, m.Blocks, m.Draft
}

func TestFixture(t *testing.T) {
	// The benchmarks' message says the same in its text and its blocks,
	// and its draft comes back from Slack as the draft's tree.
	text, blocks, draft := fixture(t)
	fromText := mrkdwn.ToMarkdown(text, names)
	fromBlocks, ok := mrkdwn.BlocksToMarkdown(blocks, names)
	if !ok {
		t.Fatal("blocks converted to nothing")
	}
	if a, b := words(fromText), words(fromBlocks); len(a) != len(b) || outline(fromText) != outline(fromBlocks) {
		t.Errorf("text and blocks differ:\n%s\n%s\n%s\n%s", fromText, outline(fromText), fromBlocks, outline(fromBlocks))
	}
	back := mrkdwn.ToMarkdown(mrkdwn.FromMarkdown(draft), mrkdwn.Names{})
	if normalise(outline(back)) != normalise(outline(draft)) {
		t.Errorf("draft round trip:\n%s\n%s", outline(draft), outline(back))
	}
}

func BenchmarkToMarkdown(b *testing.B) {
	text, _, _ := fixture(b)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		mrkdwn.ToMarkdown(text, names)
	}
}

func BenchmarkBlocksToMarkdown(b *testing.B) {
	_, blocks, _ := fixture(b)
	b.SetBytes(int64(len(blocks)))
	for b.Loop() {
		mrkdwn.BlocksToMarkdown(blocks, names)
	}
}

func BenchmarkFromMarkdown(b *testing.B) {
	_, _, draft := fixture(b)
	b.SetBytes(int64(len(draft)))
	for b.Loop() {
		mrkdwn.FromMarkdown(draft)
	}
}

func BenchmarkRefs(b *testing.B) {
	text, blocks, _ := fixture(b)
	b.SetBytes(int64(len(text) + len(blocks)))
	for b.Loop() {
		mrkdwn.Refs(text, blocks)
	}
}
