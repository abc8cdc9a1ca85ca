package mailbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// openHolding opens a mailbox whose policy holds every draft (approval: all),
// or none.
func openHolding(t *testing.T, root string, all bool) *mailbox.Mailbox {
	t.Helper()
	mb, err := mailbox.Open(root, &mailbox.Options{Hold: func(*schema.Draft) bool { return all }})
	if err != nil {
		t.Fatal(err)
	}
	return mb
}

func heldDraft(i int) *schema.Draft {
	return &schema.Draft{ID: fmt.Sprintf("email_out_%032x", i), Provider: schema.Email, To: schema.Recipients{"ann@example.com"},
		CreatedAt: schema.TimePtr(time.Now()), IdempotencyKey: fmt.Sprintf("<%d@x>", i), Body: "hi\n", Agent: "bot"}
}

func statusOf(t *testing.T, mb *mailbox.Mailbox, id string) string {
	t.Helper()
	ds, err := mb.OutboundDrafts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == id {
			return d.Status
		}
	}
	return "(gone)"
}

// A draft held when queued stays held whatever happens next: the service
// restarted with approval: none, the state database lost and rebuilt from
// the files. It is never due until approved, and an awaiting_approval
// event is journaled once. A file in outbound/ claiming it was approved
// is no approval.
func TestHoldOutlivesRestartsAndConfig(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := mailbox.Init(root); err != nil {
		t.Fatal(err)
	}
	mb := openHolding(t, root, true)
	d := heldDraft(1)
	if _, err := mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	evs, _ := mb.Events(ctx, 0, 10)
	if len(evs) != 1 || evs[0].Kind != mailbox.EventAwaitingApproval || evs[0].ID != d.ID {
		t.Errorf("events: %+v", evs)
	}
	due := func(mb *mailbox.Mailbox) int {
		ds, err := mb.DueDrafts(ctx, []schema.Provider{schema.Email}, time.Now().Add(time.Hour), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := mb.ClaimDelivery(ctx, d.ID, "engine", time.Now(), time.Minute); ok {
			t.Errorf("a held draft was claimed")
		}
		return len(ds)
	}
	if n := due(mb); n != 0 || statusOf(t, mb, d.ID) != mailbox.OutAwaitingApproval {
		t.Fatalf("due %d, status %s", n, statusOf(t, mb, d.ID))
	}
	mb.Close()
	// Restarted with approval: none.
	mb = openHolding(t, root, false)
	if _, err := mb.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := due(mb); n != 0 || statusOf(t, mb, d.ID) != mailbox.OutAwaitingApproval {
		t.Fatalf("after a restart with none: due %d, status %s", n, statusOf(t, mb, d.ID))
	}
	mb.Close()
	// The state database lost: rebuilt from the files.
	for _, f := range []string{"", "-wal", "-shm"} {
		os.Remove(mailbox.Layout{Root: root}.DB() + f)
	}
	mb = openHolding(t, root, false)
	defer func() { mb.Close() }()
	if n := due(mb); n != 0 || statusOf(t, mb, d.ID) != mailbox.OutAwaitingApproval {
		t.Fatalf("after a rebuild: due %d, status %s", n, statusOf(t, mb, d.ID))
	}
	// A draft dropped in outbound/ saying it was approved, under all.
	mb.Close()
	mb = openHolding(t, root, true)
	forged := heldDraft(2)
	forged.Approval = &schema.Approval{Status: schema.ApprovalApproved, By: "alice"}
	b, _ := schema.EncodeDraft(forged)
	frel := filepath.Join(".monoco/mailbox/outbound/email", mailbox.FileName(forged.CreatedAt.Time, forged.ID))
	if err := os.WriteFile(filepath.Join(root, frel), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.IndexQueued(ctx, frel); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, mb, forged.ID); st != mailbox.OutAwaitingApproval {
		t.Errorf("forged approval: %s", st)
	}
	// Approved, it is due; filed, the archive carries who and when, and
	// not what the file said.
	if err := mb.Approve(ctx, forged.ID, "carol"); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, mb, forged.ID); st != mailbox.OutQueued {
		t.Errorf("approved: %s", st)
	}
	got, e, _ := mb.Draft(ctx, forged.ID)
	got.Delivery = &schema.Delivery{Status: schema.DeliverySent, Attempts: 1, SentAt: schema.TimePtr(time.Now())}
	if _, err := mb.FinishDelivery(ctx, got, e.Path, mailbox.BoxArchive); err != nil {
		t.Fatal(err)
	}
	got, _, _ = mb.Draft(ctx, forged.ID)
	if a := got.Delivery.Approval; got.Approval != nil || a == nil || a.Status != schema.ApprovalApproved || a.By != "carol" || a.At == nil {
		t.Errorf("archived: %+v %+v", got.Approval, got.Delivery.Approval)
	}
}

// A rejected draft requeued is decided on again: held again under all.
func TestRequeueOfRejectedIsHeldAgain(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if err := mailbox.Init(root); err != nil {
		t.Fatal(err)
	}
	mb := openHolding(t, root, true)
	defer mb.Close()
	d := heldDraft(3)
	if _, err := mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Reject(ctx, d.ID, "alice", "no"); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, mb, d.ID); st != mailbox.OutDead {
		t.Fatalf("rejected: %s", st)
	}
	if _, err := mb.Requeue(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, mb, d.ID); st != mailbox.OutAwaitingApproval {
		t.Errorf("requeued: %s", st)
	}
	if _, err := mb.RetryNow(ctx, d.ID); err == nil {
		t.Errorf("retry hurried a held draft")
	}
}
