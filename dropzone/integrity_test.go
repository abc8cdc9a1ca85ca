package dropzone_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Attack (or a bit flip): an object is damaged in place, keeping its size.
// Before, a new put of that content saw a file of the right size and
// deduped against it: the bad bytes stayed, and every message naming the
// id pointed at them. Now the put hashes the stored object, finds it
// damaged, and commits its own copy over it.
func TestDamagedObjectRepairedByPut(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "Put", true: "Batch"}[batch], func(t *testing.T) {
			s, dir := open(t, nil)
			content := bytes.Repeat([]byte("the invoice, page after page\n"), 5000)
			o, err := s.Put(bytes.NewReader(content))
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, filepath.FromSlash(o.Path))
			damaged := bytes.Clone(content)
			damaged[len(damaged)/2] ^= 0x20
			os.Chmod(p, 0o640)
			if err := os.WriteFile(p, damaged, 0o640); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, 0o440)
			if batch {
				b := s.NewBatch()
				if _, err := b.Put(bytes.NewReader(content)); err != nil {
					t.Fatal(err)
				}
				if err := b.Commit(); err != nil {
					t.Fatal(err)
				}
			} else if _, err := s.Put(bytes.NewReader(content)); err != nil {
				t.Fatal(err)
			}
			if got := readObject(t, s, o.ID); !bytes.Equal(got, content) {
				t.Error("the damaged object was deduped against, not repaired")
			}
			if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o440 {
				t.Errorf("repaired object mode %v, want 0440", fi.Mode().Perm())
			}
			checkNoTemp(t, dir)
		})
	}
}

// An intact object is still deduped: no second write, the same file.
func TestIntactObjectDeduped(t *testing.T) {
	s, dir := open(t, nil)
	o, err := s.Put(bytes.NewReader([]byte("same bytes")))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(o.Path))
	before, _ := os.Stat(p)
	if _, err := s.Put(bytes.NewReader([]byte("same bytes"))); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(p)
	if !os.SameFile(before, after) {
		t.Error("an intact object was written again")
	}
}

// Attack: the object is replaced by a link of the right size to a file
// outside. A put of the content replaces the link by the real bytes and
// leaves the outside file alone.
func TestLinkedObjectReplacedByPut(t *testing.T) {
	s, dir := open(t, nil)
	content := []byte("sixteen bytes!!\n")
	o, err := s.Put(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(o.Path))
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("SIXTEEN BYTES!!\n"), 0o600)
	os.Remove(p)
	os.Symlink(outside, p)
	if _, err := s.Put(bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("object is %v, %v; want a regular file again", fi, err)
	}
	if got := readObject(t, s, o.ID); !bytes.Equal(got, content) {
		t.Errorf("object = %q", got)
	}
	if b, _ := os.ReadFile(outside); string(b) != "SIXTEEN BYTES!!\n" {
		t.Errorf("the outside file changed: %q", b)
	}
}

// BenchmarkPutDuplicate puts content already stored: the cost of the
// dedupe check (a stat before, a stat and a hash of the stored object now).
func BenchmarkPutDuplicate(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			s, _ := open(b, nil)
			data := bytes.Repeat([]byte{'x'}, size)
			if _, err := s.Put(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.Put(bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
