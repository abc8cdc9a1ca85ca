package mailbox_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

func ids(t *testing.T, mb *mailbox.Mailbox) map[string]mailbox.Status {
	t.Helper()
	out := map[string]mailbox.Status{}
	if err := mb.List(ctx, mailbox.Filter{All: true}, func(e *mailbox.Entry) error {
		out[e.ID] = e.Status
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// snapshot hashes every file under dir, with its mode, so that a test can
// tell nothing changed (the -shm file aside).
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		// The WAL index is shared memory, which a reader with write
		// access to it (root, here) updates: not data.
		if err != nil || strings.HasSuffix(p, "-shm") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		sum := ""
		if !d.IsDir() {
			b, _ := os.ReadFile(p)
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %v %s", rel, fi.Mode(), sum))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// An agent that may read the mailbox but not write it opens it read-only:
// it lists and reads what the writer wrote, including after the writer
// closed the database (the -wal and -shm files a read-only open needs are
// kept), and anything it tries to write fails without changing a thing.
func TestReadOnlyOpen(t *testing.T) {
	mb, root := newMailbox(t, nil)
	a := testutil.Message(schema.Lark, "om_ro1", testutil.Time("2026-05-01T10:00:00Z"), "one")
	b := testutil.Message(schema.Lark, "om_ro2", testutil.Time("2026-05-01T10:01:00Z"), "two")
	write(t, mb, a, b)
	if _, err := mb.Claim(ctx, a.ID, "alice", 0); err != nil {
		t.Fatal(err)
	}
	mb.Close()
	state := filepath.Join(root, ".monoco/mailbox/.state")
	for _, f := range []string{"courier.db-wal", "courier.db-shm"} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Errorf("%s after the writer closed: %v (a reader without write access to .state/ cannot open the database without it)", f, err)
		}
	}
	before := snapshot(t, filepath.Join(root, ".monoco"))

	ro, err := mailbox.Open(root, &mailbox.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := ids(t, ro); len(got) != 2 || got[a.ID] != mailbox.StatusClaimed || got[b.ID] != mailbox.StatusNew {
		t.Errorf("read-only list = %v", got)
	}
	if m, _, err := ro.Message(ctx, b.ID); err != nil || m.Content.Text != "two" {
		t.Errorf("read-only read: %v %v", m, err)
	}
	if _, err := ro.Claim(ctx, b.ID, "mallory", 0); err == nil {
		t.Error("a claim through a read-only mailbox succeeded")
	}
	if _, err := ro.Done(ctx, a.ID, "alice"); err == nil {
		t.Error("done through a read-only mailbox succeeded")
	}
	if _, err := ro.Fail(ctx, a.ID, "alice", "x", false); err == nil {
		t.Error("fail through a read-only mailbox succeeded")
	}
	if after := snapshot(t, filepath.Join(root, ".monoco")); after != before {
		t.Errorf("the read-only mailbox changed files:\n%s\n---\n%s", before, after)
	}

	// A writer that opens again and writes is seen by the open reader.
	mb2, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb2.Close()
	write(t, mb2, testutil.Message(schema.Lark, "om_ro3", testutil.Time("2026-05-01T10:02:00Z"), "three"))
	if got := ids(t, ro); len(got) != 3 {
		t.Errorf("the reader sees %d messages after the writer added one, want 3", len(got))
	}
}

// A read-only open never creates or rebuilds the database: a workspace
// without one, or with one of another version, is ErrReadOnlyRebuild, and
// no file appears.
func TestReadOnlyNeedsRebuild(t *testing.T) {
	root := t.TempDir()
	if err := mailbox.Init(root); err != nil {
		t.Fatal(err)
	}
	_, err := mailbox.Open(root, &mailbox.Options{ReadOnly: true})
	if !errors.Is(err, mailbox.ErrReadOnlyRebuild) {
		t.Errorf("read-only open without a database: %v, want ErrReadOnlyRebuild", err)
	}
	if _, err := os.Stat(filepath.Join(root, ".monoco/mailbox/.state/courier.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read-only open created the database (%v)", err)
	}

	mb, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mb.DB().Exec(`UPDATE meta SET value = '1' WHERE key = 'version'`); err != nil {
		t.Fatal(err)
	}
	mb.Close()
	_, err = mailbox.Open(root, &mailbox.Options{ReadOnly: true})
	if !errors.Is(err, mailbox.ErrReadOnlyRebuild) {
		t.Errorf("read-only open of an old database: %v, want ErrReadOnlyRebuild", err)
	}
}

// SQLite opens the database by path: a link put in its place (or in place
// of its WAL) is refused, not followed.
func TestReadOnlyRefusesLinks(t *testing.T) {
	for _, name := range []string{"courier.db", "courier.db-wal"} {
		t.Run(name, func(t *testing.T) {
			mb, root := newMailbox(t, nil)
			write(t, mb, testutil.Message(schema.Lark, "om_link", testutil.Time("2026-05-01T10:00:00Z"), "x"))
			mb.Close()
			p := filepath.Join(root, ".monoco/mailbox/.state", name)
			elsewhere := filepath.Join(t.TempDir(), name)
			if err := os.Rename(p, elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, p); err != nil {
				t.Fatal(err)
			}
			_, err := mailbox.Open(root, &mailbox.Options{ReadOnly: true})
			if !errors.Is(err, mailbox.ErrUnsafePath) {
				t.Errorf("read-only open with %s a link: %v, want ErrUnsafePath", name, err)
			}
		})
	}
}
