package mailbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// A Waker fires for a commit of this process and for one of another
// (another Mailbox on the same workspace stands for it), and a reader
// woken finds the event in the journal.
func TestWaker(t *testing.T) {
	mb, root := newMailbox(t, nil)
	other, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wake, stop := mb.Waker(context.Background())
	defer stop()
	next := func(what string) {
		t.Helper()
		select {
		case <-wake:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake-up for %s", what)
		}
	}
	drain := func() {
		for {
			select {
			case <-wake:
			default:
				return
			}
		}
	}
	write(t, mb, testutil.Message(schema.Lark, "om_w1", testutil.Time("2026-03-01T10:00:00Z"), "one"))
	next("a commit of this process")
	drain()
	write(t, other, testutil.Message(schema.Lark, "om_w2", testutil.Time("2026-03-01T10:01:00Z"), "two"))
	next("a commit of another")
	if got := ntEvents(t, mb, 1); !slices.Equal(got, []string{"inbound lark_om_w2"}) {
		t.Errorf("after the wake-up the journal holds %v", got)
	}
}
