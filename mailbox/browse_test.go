package mailbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// The search index fills lazily, and a full reindex drops it to be filled
// again from the files.
func TestSearchIndexReindex(t *testing.T) {
	mb, _ := newMailbox(t, nil)
	ctx := context.Background()
	var msgs []*schema.Message
	for i := range 5 {
		msgs = append(msgs, testutil.Message(schema.Lark, fmt.Sprintf("om_s%d", i), testutil.Time("2026-03-01T10:00:00Z").Add(time.Duration(i)*time.Minute), fmt.Sprintf("word%d shared", i)))
	}
	write(t, mb, msgs...)
	text := func(e *mailbox.Entry) (mailbox.SearchText, error) {
		m, _, err := mb.Message(ctx, e.ID)
		if err != nil {
			return mailbox.SearchText{}, err
		}
		return mailbox.SearchText{Subject: m.Session.Name, Body: m.Body}, nil
	}
	search := func(q string) []string {
		var ids []string
		if _, err := mb.Newest(ctx, mailbox.Browse{Filter: mailbox.Filter{All: true}, Search: q, Limit: 10}, func(e *mailbox.Entry) error {
			ids = append(ids, e.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if n, _ := mb.SearchBacklog(ctx); n != 5 {
		t.Fatalf("backlog before indexing: %d", n)
	}
	n, next, err := mb.IndexSearch(ctx, nil, nil, 3, text)
	if err != nil || n != 3 || next == nil || next.ID != msgs[2].ID {
		t.Fatalf("IndexSearch = %d, %v, %v", n, next, err)
	}
	if got := search("shared"); len(got) != 3 || got[0] != msgs[4].ID {
		t.Fatalf("newest first, the indexed ones: %v", got)
	}
	if n, next, err = mb.IndexSearch(ctx, nil, next, 3, text); err != nil || n != 2 || next != nil {
		t.Fatalf("the scan's second batch = %d, %v, %v", n, next, err)
	}
	if got := search("word1"); len(got) != 1 || got[0] != msgs[1].ID {
		t.Fatalf("word1: %v", got)
	}
	if _, err := mb.Reindex(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := mb.SearchBacklog(ctx); n != 5 {
		t.Fatalf("backlog after a reindex: %d", n)
	}
	if got := search("word1"); len(got) != 0 {
		t.Fatalf("after a reindex, before refilling: %v", got)
	}
	mb.IndexSearch(ctx, nil, nil, 10, text)
	if got := search("word1"); len(got) != 1 {
		t.Fatalf("refilled: %v", got)
	}
}
