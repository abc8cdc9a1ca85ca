package mailbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

func ntEvents(t *testing.T, mb *mailbox.Mailbox, after int64) []string {
	t.Helper()
	evs, err := mb.Events(ctx, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Kind)+" "+e.ID)
	}
	return out
}

// Every message written and every draft filed is journaled with its index
// row, and the journal wakes subscribers; a duplicate is not journaled.
func TestJournal(t *testing.T) {
	mb, _ := newMailbox(t, nil)
	wake, cancel := mb.Subscribe()
	defer cancel()
	a := testutil.Message(schema.Lark, "om_j1", testutil.Time("2026-03-01T10:00:00Z"), "one")
	b := testutil.Message(schema.Lark, "om_j2", testutil.Time("2026-03-01T09:00:00Z"), "two")
	write(t, mb, a, b)
	select {
	case <-wake:
	default:
		t.Error("no wake-up after a write")
	}
	write(t, mb, a) // a redelivery
	for i, box := range []mailbox.Box{mailbox.BoxArchive, mailbox.BoxDeadletter} {
		d := &schema.Draft{ID: fmt.Sprintf("lark_out_%032x", i), Provider: schema.Lark, To: schema.Recipients{"oc_1"}, CreatedAt: schema.TimePtr(time.Now()), Body: "x\n"}
		rel, err := mb.Queue(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mb.FinishDelivery(ctx, d, rel, box); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"inbound lark_om_j1", "inbound lark_om_j2", "delivered lark_out_" + fmt.Sprintf("%032x", 0), "dead lark_out_" + fmt.Sprintf("%032x", 1)}
	if got := ntEvents(t, mb, 0); !slices.Equal(got, want) {
		t.Errorf("journal %v, want %v", got, want)
	}
	last, first, err := mb.LastEvent(ctx)
	if err != nil || last != 4 || first != 1 {
		t.Errorf("LastEvent = %d, %d, %v", last, first, err)
	}
	if n, err := mb.PruneEvents(ctx, 2, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Errorf("pruned %d, %v", n, err)
	}
	if _, first, _ := mb.LastEvent(ctx); first != 3 {
		t.Errorf("oldest kept %d, want 3", first)
	}
}

// A crash between a file's rename and its commit leaves the file without
// its index row or event: Reconcile journals it, so the hooks run. A
// rebuild of a new database journals nothing (history is not news).
func TestJournalAfterCrashBeforeCommit(t *testing.T) {
	mb, root := newMailbox(t, nil)
	m := testutil.Message(schema.Lark, "om_lost", testutil.Time("2026-03-01T10:00:00Z"), "survived")
	data, _ := schema.Encode(m)
	if err := os.WriteFile(filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(m.Timestamp.Time, m.ID)), data, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ntEvents(t, mb, 0); !slices.Equal(got, []string{"inbound lark_om_lost"}) {
		t.Errorf("journal after Reconcile: %v", got)
	}
	if _, err := mb.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ntEvents(t, mb, 0); len(got) != 1 {
		t.Errorf("a second Reconcile journaled again: %v", got)
	}
	// The database lost: rebuilt from the files, nothing is news.
	mb.Close()
	for _, f := range []string{"courier.db", "courier.db-wal", "courier.db-shm"} {
		os.Remove(filepath.Join(root, ".monoco/mailbox/.state", f))
	}
	mb2, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb2.Close()
	if got := ntEvents(t, mb2, 0); len(got) != 0 {
		t.Errorf("a rebuilt database journaled %v", got)
	}
}

// A draft filed in archive/ whose index commit a crash lost: Reconcile
// sees it moved from outbound/ and journals its delivery.
func TestJournalDeliveryAfterCrash(t *testing.T) {
	mb, root := newMailbox(t, nil)
	d := &schema.Draft{ID: "lark_out_" + fmt.Sprintf("%032x", 9), Provider: schema.Lark, To: schema.Recipients{"oc_1"}, CreatedAt: schema.TimePtr(time.Now()), Body: "x\n"}
	rel, err := mb.Queue(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	d.Delivery = &schema.Delivery{Status: schema.DeliverySent, Attempts: 1}
	data, _ := schema.EncodeDraft(d)
	if err := os.WriteFile(filepath.Join(root, ".monoco/mailbox/archive/lark", filepath.Base(rel)), data, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ntEvents(t, mb, 0); !slices.Equal(got, []string{"delivered " + d.ID}) {
		t.Errorf("journal: %v", got)
	}
}

// `courier reindex` of a mailbox whose index exists journals only the
// file a crash left unindexed, not the messages it already knew.
func TestJournalReindexAfterCrash(t *testing.T) {
	mb, root := newMailbox(t, nil)
	known := testutil.Message(schema.Lark, "om_known", testutil.Time("2026-03-01T09:00:00Z"), "known")
	write(t, mb, known)
	last, _, _ := mb.LastEvent(ctx)
	m := testutil.Message(schema.Lark, "om_unindexed", testutil.Time("2026-03-01T10:00:00Z"), "survived")
	data, _ := schema.Encode(m)
	if err := os.WriteFile(filepath.Join(root, ".monoco/mailbox/inbound/lark", mailbox.FileName(m.Timestamp.Time, m.ID)), data, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Reindex(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ntEvents(t, mb, last); !slices.Equal(got, []string{"inbound lark_om_unindexed"}) {
		t.Errorf("journal after reindex: %v", got)
	}
}
