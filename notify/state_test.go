package notify_test

import (
	"context"
	"testing"

	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/notify"
)

// States counts each hook's queue and dead letters: every hook named,
// at zero when it has nothing, and a hook no longer configured whose
// calls are still there.
func TestStates(t *testing.T) {
	ctx := context.Background()
	w := wstest.Mailbox(t)
	db := w.MB.DB()
	if st, err := notify.States(ctx, db, []string{"a"}); err != nil || len(st) != 1 || st["a"] != (notify.State{}) {
		t.Fatalf("before any hook ran: %+v %v", st, err)
	}
	notify.Retry(ctx, db, nil) // makes the tables
	for _, q := range []string{
		`INSERT INTO notify_queue (hook, seq, kind, id, lane, attempts, next_at, last_error, queued_at) VALUES ('a', 1, 'inbound', 'x', 'l', 0, 0, '', 1)`,
		`INSERT INTO notify_queue (hook, seq, kind, id, lane, attempts, next_at, last_error, queued_at) VALUES ('a', 2, 'inbound', 'y', 'l', 2, 5000000000, 'older', 1)`,
		`INSERT INTO notify_queue (hook, seq, kind, id, lane, attempts, next_at, last_error, queued_at) VALUES ('a', 3, 'inbound', 'z', 'm', 3, 9000000000, 'exit status 3', 1)`,
		`INSERT INTO notify_dead (hook, seq, kind, id, lane, attempts, last_error, queued_at, dead_at) VALUES ('a', 0, 'inbound', 'w', 'l', 8, 'dead one', 1, 2)`,
		`INSERT INTO notify_dead (hook, seq, kind, id, lane, attempts, last_error, queued_at, dead_at) VALUES ('gone', 4, 'inbound', 'v', 'l', 8, 'first', 1, 2)`,
		`INSERT INTO notify_dead (hook, seq, kind, id, lane, attempts, last_error, queued_at, dead_at) VALUES ('gone', 5, 'inbound', 'u', 'l', 8, 'newest', 1, 3)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	st, err := notify.States(ctx, db, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	a := st["a"]
	if a.Backlog != 3 || a.Failing != 2 || a.Dead != 1 || a.LastError != "exit status 3" || a.RetryAt == nil || a.RetryAt.UnixNano() != 5000000000 {
		t.Errorf("a = %+v", a)
	}
	if b, ok := st["b"]; !ok || b != (notify.State{}) {
		t.Errorf("b = %+v %v", b, ok)
	}
	if g := st["gone"]; g.Dead != 2 || g.LastError != "newest" || g.Backlog != 0 {
		t.Errorf("gone = %+v", g)
	}
}
