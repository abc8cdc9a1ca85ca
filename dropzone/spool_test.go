package dropzone_test

import (
	"io"
	"strings"
	"testing"
)

// A spool is scratch space that can never be left behind: no name is left
// in the dropzone from the moment Spool returns, yet the file reads back
// what was written, and a batch commits without it.
func TestSpoolLeavesNothing(t *testing.T) {
	s, dir := open(t, nil)
	b := s.NewBatch()
	f, err := b.Spool()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("files after Spool: %v, want none (the spool is unlinked)", got)
	}
	want := strings.Repeat("spooled text\n", 10000)
	if _, err := io.WriteString(f, want); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(f, 0, int64(len(want))))
	if err != nil || string(got) != want {
		t.Fatalf("read back %d bytes (err %v), want %d", len(got), err, len(want))
	}
	if _, err := b.Put(strings.NewReader("object")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); len(got) != 1 || !strings.HasPrefix(got[0], "sha256/") {
		t.Fatalf("files after Commit: %v, want the one object", got)
	}
}
