package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/notify"
)

// A call set aside in a hook's dead letters shows in `courier status`,
// and `courier hooks retry` puts it back in the hook's queue (issue 18,
// item 3); a hook not configured is refused, exit 64.
func TestHooksRetryCommand(t *testing.T) {
	ws := newWorkspace(t)
	cfg := "courier:\n  notify:\n    - name: wake\n      exec: [/bin/true]\n"
	if err := os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := notify.Retry(ctx, mb.DB(), nil); err != nil { // makes the tables
		t.Fatal(err)
	}
	if _, err := mb.DB().ExecContext(ctx, `INSERT INTO notify_dead (hook, seq, kind, id, lane, attempts, last_error, queued_at, dead_at)
		VALUES ('wake', 7, 'inbound', 'slack_C1_1', 'T', 20, 'exit status 3', 1, 2)`); err != nil {
		t.Fatal(err)
	}
	mb.Close()
	out, _, _ := cli(t, ws, "", "status")
	if !strings.Contains(out, "Hooks:     wake: 1 call(s) set aside in its dead letters") {
		t.Errorf("status:\n%s", out)
	}
	if _, e, code := cli(t, ws, "", "hooks", "retry", "nope"); code != 64 || !strings.Contains(e, `no hook "nope"`) {
		t.Errorf("retry of an unknown hook: exit %d, %s", code, e)
	}
	if o, e, code := cli(t, ws, "", "hooks", "retry", "wake"); code != 0 || !strings.HasPrefix(o, "1 call(s) put back") {
		t.Errorf("retry: exit %d, %s%s", code, o, e)
	}
	// The call is back in the hook's queue: status shows it there, and no
	// dead letter (issue 19, item 5: every hook's backlog shows).
	if out, _, _ := cli(t, ws, "", "status"); strings.Contains(out, "set aside") || !strings.Contains(out, "Hooks:     wake: backlog 1, failing 0\n") {
		t.Errorf("status after the retry:\n%s", out)
	}
	mb, err = mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	var n int
	if err := mb.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM notify_queue WHERE hook = 'wake' AND seq = 7 AND attempts = 0`).Scan(&n); err != nil || n != 1 {
		t.Errorf("queued again: %d %v", n, err)
	}
}
