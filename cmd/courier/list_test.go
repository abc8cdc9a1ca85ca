package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// TestTableAlignsWideCharacters: the table's columns line up on a terminal
// when names and previews hold CJK characters (two cells each), and cut
// cells stay within their width.
func TestTableAlignsWideCharacters(t *testing.T) {
	now := time.Now()
	var out bytes.Buffer
	ew := newEntryWriter(&out, "table")
	for _, e := range []mailbox.Entry{
		{ID: "lark_om_1", Provider: schema.Lark, From: mailbox.EntryParty{Name: "张三"}, Status: mailbox.StatusNew, Timestamp: now, Preview: "部署完成了吗？"},
		{ID: "email_0123456789abcdef0123", Provider: schema.Email, From: mailbox.EntryParty{Name: "Ann Example"}, Status: mailbox.StatusClaimed, Timestamp: now, Preview: "ascii"},
		{ID: "slack_C1_1", Provider: schema.Slack, From: mailbox.EntryParty{Name: strings.Repeat("长", 30)}, Status: mailbox.StatusNew, Timestamp: now, Preview: strings.Repeat("字", 80)},
	} {
		if err := ew.write(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := ew.close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	// The STATUS column starts at the same cell on every line.
	col := func(line, word string) int {
		i := strings.Index(line, word)
		if i < 0 {
			t.Fatalf("%q not in %q", word, line)
		}
		return displayWidth(line[:i])
	}
	want := col(lines[0], "STATUS")
	for i, w := range []string{"new", "claimed", "new"} {
		if got := col(lines[i+1], " "+w+" ") + 1; got != want {
			t.Errorf("line %d: status at cell %d, header at %d:\n%s", i+1, got, want, out.String())
		}
	}
	if w := displayWidth(cell(strings.Repeat("长", 30), 24)); w > 24 {
		t.Errorf("a cut cell takes %d cells, over 24", w)
	}
}
