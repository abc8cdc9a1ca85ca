package mailbox_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
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

// A change of the state database's files wakes a Waker twice: at once,
// and again a moment later, since SQLite marks a commit visible (in the
// -shm mapping, which inotify does not see) after its last write to the
// -wal file: a reader woken by that write may look too early, and
// waited for the next poll (new-mail notifications over stdio took up to
// 700 ms). One change (a folder made) stands for that last write.
func TestWakerAgainAfterAChange(t *testing.T) {
	mb, _ := newMailbox(t, nil)
	wake, stop := mb.Waker(context.Background())
	defer stop()
	if err := os.Mkdir(filepath.Join(mb.State(), "probe"), 0o700); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up for a change")
	}
	start := time.Now()
	select {
	case <-wake:
		if d := time.Since(start); d > mailbox.WakerPoll/2 {
			t.Errorf("the second wake-up after %v, the poll's", d)
		}
	case <-time.After(mailbox.WakerPoll / 2):
		t.Errorf("no second wake-up within %v of a change", mailbox.WakerPoll/2)
	}
}

// WakerEvery polls at the pace it is asked, asked again after each
// wake-up.
func TestWakerEvery(t *testing.T) {
	mb, _ := newMailbox(t, nil)
	var mu sync.Mutex
	every := 20 * time.Millisecond
	wake, stop := mb.WakerEvery(context.Background(), func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return every
	})
	defer stop()
	n := 0
	end := time.After(400 * time.Millisecond)
count:
	for {
		select {
		case <-wake:
			n++
		case <-end:
			break count
		}
	}
	if n < 4 {
		t.Errorf("%d wake-ups in 400 ms polling every 20 ms", n)
	}
	mu.Lock()
	every = time.Hour
	mu.Unlock()
	// The poll set before the change fires once more, then the next is
	// an hour away.
	time.Sleep(100 * time.Millisecond)
	for len(wake) > 0 {
		<-wake
	}
	select {
	case <-wake:
		t.Errorf("a wake-up after the pace went to an hour")
	case <-time.After(200 * time.Millisecond):
	}
}
