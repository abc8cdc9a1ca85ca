package dropzone_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// watch starts an inotify watch of path for mask; the function returned
// reports whether any such event happened since.
func watch(t *testing.T, path string, mask uint32) func() bool {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, path, mask); err != nil {
		t.Fatal(err)
	}
	return func() bool {
		buf := make([]byte, 4096)
		n, _ := unix.Read(fd, buf)
		return n > 0
	}
}

// Issue 21: a put of content already stored read the stored object back
// and hashed it every time (each of ~1,500 repeated attachments per 5,000
// mails), and streamed the content into a temp file first, only to remove
// it. Now content that fits in memory is hashed before any file is made,
// and an object this Store verified is not read again while its inode,
// size and change time stay the same.
func TestPutOfVerifiedObjectReadsNothing(t *testing.T) {
	s, dir := open(t, nil)
	content := bytes.Repeat([]byte("an attachment sent again and again\n"), 100)
	o, err := s.Put(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bytes.NewReader(content)); err != nil { // verifies it
		t.Fatal(err)
	}
	read := watch(t, filepath.Join(dir, filepath.FromSlash(o.Path)), unix.IN_ACCESS)
	created := watch(t, filepath.Join(dir, ".tmp"), unix.IN_CREATE)
	for range 3 {
		b := s.NewBatch()
		if _, err := b.Put(bytes.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if read() {
		t.Error("an object already verified was read and hashed again")
	}
	if created() {
		t.Error("a put of content already stored created a temp file")
	}
	checkNoTemp(t, dir)
}

// The memory of verified objects must not let a damaged object through:
// a write in place after it was verified changes its change time, so the
// next put hashes it again and repairs it.
func TestVerifiedObjectDamagedLaterIsRepaired(t *testing.T) {
	s, dir := open(t, nil)
	content := bytes.Repeat([]byte("the invoice, page after page\n"), 50)
	o, err := s.Put(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bytes.NewReader(content)); err != nil { // verified, remembered
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(o.Path))
	damaged := bytes.Clone(content)
	damaged[len(damaged)/2] ^= 0x20
	os.Chmod(p, 0o640)
	f, err := os.OpenFile(p, os.O_WRONLY, 0) // in place: the same inode and size
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(damaged); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Chmod(p, 0o440)
	if _, err := s.Put(bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if got := readObject(t, s, o.ID); !bytes.Equal(got, content) {
		t.Error("the damaged object was deduped against, not repaired")
	}
	checkNoTemp(t, dir)
}

// A link swapped in for a verified object is refused (O_NOFOLLOW on the
// open that is checked) and replaced by the bytes.
func TestVerifiedObjectSwappedForLinkIsReplaced(t *testing.T) {
	s, dir := open(t, nil)
	content := []byte("sixteen bytes!!\n")
	o, err := s.Put(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(o.Path))
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, content, 0o600)
	os.Remove(p)
	if err := os.Symlink(outside, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("object is %v, %v; want a regular file again", fi, err)
	}
	if _, err := s.Open(o.ID); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkBatchPutDuplicate puts content already stored into one batch,
// as a fetch does with a repeated attachment: the cost of the dedupe
// check alone (no commit per put).
func BenchmarkBatchPutDuplicate(b *testing.B) {
	for _, size := range []int{4 << 10, 60 << 10} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			s, _ := open(b, nil)
			data := bytes.Repeat([]byte{'x'}, size)
			if _, err := s.Put(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			batch := s.NewBatch()
			defer batch.Abort()
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := batch.Put(bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// PutFresh (a raw message just fetched) stages its content without
// opening what is at its final path: a copy already stored is not
// opened (a Put opens it to verify it), and Commit renames the new file
// over it, so that the object is whole afterwards, also where the stored
// copy was damaged; a new content is stored as by Put.
func TestPutFreshDoesNotLook(t *testing.T) {
	s, dir := open(t, nil)
	content := bytes.Repeat([]byte("Subject: a message fetched again\r\n\r\nbody\r\n"), 50)
	o, err := s.Put(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.FromSlash(o.Path))
	opened := watch(t, p, unix.IN_OPEN)
	b := s.NewBatch()
	if got, err := b.PutFresh(bytes.NewReader(content)); err != nil || got != o {
		t.Fatalf("PutFresh = %+v, %v; want %+v", got, err, o)
	}
	if opened() {
		t.Error("PutFresh opened the stored copy")
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("object after Commit: %q, %v", got, err)
		}
	}
	check()

	// A damaged copy is replaced.
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	if _, err := b.PutFresh(bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	check()

	// New content, read back before Commit, then stored.
	fresh := []byte("Subject: new\r\n\r\nnew body\r\n")
	b = s.NewBatch()
	n, err := b.PutFresh(bytes.NewReader(fresh))
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Open(n)
	if err != nil {
		t.Fatal(err)
	}
	staged, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(staged, fresh) {
		t.Errorf("staged content read back: %q", staged)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(n.Path))); err != nil || !bytes.Equal(got, fresh) {
		t.Errorf("new object: %q, %v", got, err)
	}
}
