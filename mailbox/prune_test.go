package mailbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// EachFile sees a message that moves, while it runs, into a box it has
// already walked (a dead letter requeued): it looks for it again.
func TestEachFileFollowsMoves(t *testing.T) {
	mb, root := newMailbox(t, nil)
	at := time.Now().Add(-time.Hour)
	done, dead := testutil.Message(schema.Lark, "done", at, "done"), testutil.Message(schema.Lark, "dead", at, "dead")
	write(t, mb, done, dead)
	mb.Claim(ctx, done.ID, "ann", 0)
	if _, err := mb.Done(ctx, done.ID, "ann"); err != nil {
		t.Fatal(err)
	}
	mb.Claim(ctx, dead.ID, "ann", 0)
	if _, err := mb.Fail(ctx, dead.ID, "ann", "no", false); err != nil {
		t.Fatal(err)
	}
	name := mailbox.FileName(at, dead.ID)
	from := filepath.Join(root, ".monoco/mailbox/.deadletter/lark", name)
	if _, err := os.Stat(from); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	moved := false
	err := mb.EachFile(ctx, false, func(f mailbox.MailboxFile, data []byte) error {
		seen[f.Rel] = true
		if strings.Contains(f.Rel, "/archive/") && !moved {
			// The dead letter goes back to inbound/ (new copy first).
			moved = true
			b, err := os.ReadFile(from)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(root, ".monoco/mailbox/inbound/lark", name), b, 0o440); err != nil {
				return err
			}
			return os.Remove(from)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !moved || !seen[".monoco/mailbox/inbound/lark/"+name] {
		t.Errorf("the moved message was not seen: %v", seen)
	}
}
