package main

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

// courier prune: --dry-run lists, a run removes the archived message a
// year old, and leaves the inbox (however old) alone.
func TestPruneCommand(t *testing.T) {
	ws := newWorkspace(t)
	old := time.Now().Add(-365 * 24 * time.Hour).UTC().Truncate(time.Second)
	done, inbox := testutil.Message(schema.Lark, "p1", old, "done a year ago"), testutil.Message(schema.Lark, "p2", old, "still in the inbox")
	seed(t, ws, done, inbox)
	for _, args := range [][]string{{"claim", done.ID}, {"done", done.ID}} {
		if _, e, code := cli(t, ws, "", args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, e)
		}
	}
	rel := filepath.Join(ws, ".monoco/mailbox/archive/lark", mailbox.FileName(old, done.ID))
	if err := os.Chtimes(rel, old, old); err != nil {
		t.Fatal(err)
	}
	out, e, code := cli(t, ws, "", "prune", "--older-than", "30d", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove 1 archived message(s) and 0 delivered draft(s)") || !strings.Contains(out, mailbox.FileName(old, done.ID)) {
		t.Fatalf("dry run: %d %q %s", code, out, e)
	}
	if _, err := os.Stat(rel); err != nil {
		t.Fatalf("the dry run removed the file: %v", err)
	}
	out, e, code = cli(t, ws, "", "prune", "--older-than", "30d")
	if code != 0 || !strings.HasPrefix(out, "removed 1 archived message(s)") {
		t.Fatalf("prune: %d %q %s", code, out, e)
	}
	if _, err := os.Stat(rel); !os.IsNotExist(err) {
		t.Errorf("archived file still there: %v", err)
	}
	out, _, _ = cli(t, ws, "", "list", "--all", "--format", "id")
	if strings.TrimSpace(out) != inbox.ID {
		t.Errorf("list after prune: %q, want only %s", out, inbox.ID)
	}
	for _, bad := range [][]string{{"prune"}, {"prune", "--older-than", "3x"}, {"prune", "--older-than", "-5d"}} {
		if _, e, code := cli(t, ws, "", bad...); code != 64 || !strings.Contains(e, "--older-than") {
			t.Errorf("%v: exit %d %q, want 64 naming --older-than", bad, code, e)
		}
	}
}
