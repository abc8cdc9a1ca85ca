package outbound_test

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
)

// The operator's verbs (mailbox/outqueue.go) against a running engine.

func (e *env) outStatus(t *testing.T, id string) mailbox.OutboundDraft {
	t.Helper()
	ds, err := e.mb.OutboundDrafts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	return mailbox.OutboundDraft{}
}

// A cancel while the engine is sending the draft loses: the send goes on
// and files it in archive/, once.
func TestCancelWhileSending(t *testing.T) {
	e := setup(t)
	in, release := make(chan struct{}), make(chan struct{})
	rec := newRecorder(func(d *schema.Draft, n int) (adapters.Receipt, error) {
		close(in)
		<-release
		return adapters.Receipt{ProviderMessageID: "ok"}, nil
	})
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}})
	d := e.queue(t, schema.Lark)
	<-in
	if got := e.outStatus(t, d.ID).Status; got != mailbox.OutSending {
		t.Errorf("list says %q while it is being sent", got)
	}
	_, err := e.mb.CancelQueued(ctx, d.ID, "ops")
	if !errors.Is(err, mailbox.ErrConflict) || !strings.Contains(err.Error(), "being sent") {
		t.Errorf("cancel during the send: %v", err)
	}
	close(release)
	testutil.WaitFor(t, 10*time.Second, "archived", func() bool { return e.status(t, d.ID) == mailbox.StatusSent })
	if n := len(rec.callsFor(d.ID)); n != 1 {
		t.Errorf("%d sends", n)
	}
}

// Cancels racing the engine over many drafts: each draft is sent once
// or cancelled (never sent), never both, never neither.
func TestCancelRacesEngine(t *testing.T) {
	e := setup(t)
	rec := newRecorder(func(d *schema.Draft, n int) (adapters.Receipt, error) {
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		return adapters.Receipt{ProviderMessageID: "ok"}, nil
	})
	const n = 120
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, e.queue(t, schema.Lark).ID)
	}
	e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}, Concurrency: 4})
	// Two operators cancel every other draft each, in a random order, while
	// the engine sends: some cancels come first, some find the draft being
	// sent, some find it sent.
	cancelled := make([]bool, n)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for _, i := range rand.Perm(n) {
				if i%2 != w {
					continue
				}
				time.Sleep(time.Duration(rand.IntN(400)) * time.Microsecond)
				_, err := e.mb.CancelQueued(ctx, ids[i], "ops")
				switch {
				case err == nil:
					cancelled[i] = true
				case errors.Is(err, mailbox.ErrConflict) || errors.Is(err, mailbox.ErrBusy):
				default:
					t.Errorf("cancel %s: %v", ids[i], err)
				}
			}
		}(w)
	}
	wg.Wait()
	testutil.WaitFor(t, 20*time.Second, "the queue empty", func() bool {
		return len(files(filepath.Join(e.root, ".monoco/mailbox/outbound"))) == 0
	})
	won := 0
	for i, id := range ids {
		sends := len(rec.callsFor(id))
		st := e.status(t, id)
		switch {
		case cancelled[i] && (sends != 0 || st != mailbox.StatusDead):
			t.Errorf("%s cancelled, yet sent %d times (status %s)", id, sends, st)
		case !cancelled[i] && (sends != 1 || st != mailbox.StatusSent):
			t.Errorf("%s not cancelled: sent %d times, status %s", id, sends, st)
		case cancelled[i]:
			won++
			d, _, err := e.mb.Draft(ctx, id)
			if err != nil || d.Delivery == nil || d.Delivery.Reason != "cancelled by ops" {
				t.Errorf("%s cancelled: %v %+v", id, err, d)
			}
		}
	}
	t.Logf("%d of %d cancels won the race", won, n)
}

// retry skips the backoff of a waiting draft.
func TestRetryNowSkipsBackoff(t *testing.T) {
	e := setup(t)
	rec := newRecorder(func(d *schema.Draft, n int) (adapters.Receipt, error) {
		if n == 1 {
			return adapters.Receipt{}, errors.New("421 try later")
		}
		return adapters.Receipt{ProviderMessageID: "ok"}, nil
	})
	eng := e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}, BackoffBase: time.Hour, BackoffMax: time.Hour})
	d := e.queue(t, schema.Lark)
	testutil.WaitFor(t, 10*time.Second, "waiting", func() bool { return e.outStatus(t, d.ID).Status == mailbox.OutWaiting })
	o := e.outStatus(t, d.ID)
	if o.Reason != "421 try later" || o.NextAt == nil || time.Until(*o.NextAt) < 20*time.Minute || o.Attempts != 1 {
		t.Errorf("waiting draft listed as %+v", o)
	}
	if changed, err := e.mb.RetryNow(ctx, d.ID); err != nil || !changed {
		t.Fatalf("retry: %v %v", changed, err)
	}
	eng.Wake()
	testutil.WaitFor(t, 10*time.Second, "sent after retry", func() bool { return e.status(t, d.ID) == mailbox.StatusSent })
	if changed, err := e.mb.RetryNow(ctx, d.ID); !errors.Is(err, mailbox.ErrConflict) || changed {
		t.Errorf("retry of a sent draft: %v", err)
	}
}

// A dead letter requeued is sent with its idempotency key, the recipients
// reached before left out.
func TestRequeueKeepsKey(t *testing.T) {
	e := setup(t)
	rec := newRecorder(func(d *schema.Draft, n int) (adapters.Receipt, error) {
		if n == 1 {
			return adapters.Receipt{}, adapters.Permanent(errors.New("550 no such user"))
		}
		return adapters.Receipt{ProviderMessageID: "ok"}, nil
	})
	eng := e.start(t, outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Lark: rec}})
	d := e.queue(t, schema.Lark)
	testutil.WaitFor(t, 10*time.Second, "dead", func() bool { return e.status(t, d.ID) == mailbox.StatusDead })
	if o := e.outStatus(t, d.ID); o.Status != mailbox.OutDead || o.Reason != "550 no such user" || o.FailedAt == nil {
		t.Errorf("dead draft listed as %+v", o)
	}
	rel, err := e.mb.Requeue(ctx, d.ID)
	if err != nil || !strings.HasPrefix(rel, ".monoco/mailbox/outbound/lark/") {
		t.Fatalf("requeue: %s %v", rel, err)
	}
	eng.Wake() // what the service does after a requeue
	testutil.WaitFor(t, 10*time.Second, "sent after requeue", func() bool { return e.status(t, d.ID) == mailbox.StatusSent })
	calls := rec.callsFor(d.ID)
	if len(calls) != 2 || calls[1].key != d.IdempotencyKey {
		t.Errorf("calls %+v, want 2 with key %s", calls, d.IdempotencyKey)
	}
	if left := files(filepath.Join(e.root, ".monoco/mailbox/.deadletter")); len(left) != 0 {
		t.Errorf(".deadletter still holds %v", left)
	}
	if _, err := e.mb.Requeue(ctx, d.ID); !errors.Is(err, mailbox.ErrConflict) {
		t.Errorf("requeue of a sent draft: %v", err)
	}
}

// A crash in the middle of a requeue loses nothing: with both copies
// left the draft stays dead (and can be requeued again), with the queued
// copy alone it is queued.
func TestRequeueCrash(t *testing.T) {
	for _, stage := range []string{"both copies", "queued copy only"} {
		t.Run(stage, func(t *testing.T) {
			e := setup(t)
			d := e.queue(t, schema.Lark)
			_, q := e.draftAt(t, d.ID)
			d.Delivery = &schema.Delivery{Status: schema.DeliveryFailed, Attempts: 1, Reason: "550 no"}
			dead, err := e.mb.FinishDelivery(ctx, d, q, mailbox.BoxDeadletter)
			if err != nil {
				t.Fatal(err)
			}
			// What Requeue writes first: the queued copy, durable.
			d.Delivery = nil
			data, _ := schema.EncodeDraft(d)
			if err := os.WriteFile(filepath.Join(e.root, q), data, 0o640); err != nil {
				t.Fatal(err)
			}
			want := mailbox.OutDead
			if stage == "queued copy only" {
				os.Remove(filepath.Join(e.root, dead))
				want = mailbox.OutQueued
			}
			if _, err := e.mb.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if got := e.outStatus(t, d.ID).Status; got != want {
				t.Fatalf("after the crash and a reconcile, %s", got)
			}
			if want == mailbox.OutDead {
				if _, err := e.mb.Requeue(ctx, d.ID); err != nil {
					t.Fatal(err)
				}
			}
			got, path := e.draftAt(t, d.ID)
			if path != q || got.IdempotencyKey != d.IdempotencyKey || got.Delivery != nil {
				t.Errorf("requeued at %s: %+v", path, got)
			}
			if left := files(filepath.Join(e.root, ".monoco/mailbox/.deadletter")); len(left) != 0 {
				t.Errorf(".deadletter still holds %v", left)
			}
		})
	}
}
