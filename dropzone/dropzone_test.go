package dropzone_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/dropzone"
)

// open opens a Store in a fresh temporary directory and closes it at the end
// of the test.
func open(t testing.TB, opts *dropzone.Options) (*dropzone.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".monoco", "dropzone")
	s, err := dropzone.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// files lists the non-directory entries under dir (symbolic links
// included, not followed), slash-separated and relative to dir.
func files(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNoTemp fails the test if anything is left in the dropzone's .tmp/.
func checkNoTemp(t testing.TB, dir string) {
	t.Helper()
	if left := files(t, filepath.Join(dir, ".tmp")); len(left) > 0 {
		t.Errorf(".tmp not empty: %v", left)
	}
}

func idOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func pathOf(id string) string {
	h := strings.TrimPrefix(id, "sha256:")
	return "sha256/" + h[:2] + "/" + h
}

func readObject(t testing.TB, s *dropzone.Store, id string) []byte {
	t.Helper()
	f, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenCreatesLayout(t *testing.T) {
	s, dir := open(t, nil)
	for _, d := range []string{"sha256", ".tmp"} {
		fi, err := os.Lstat(filepath.Join(dir, d))
		if err != nil || !fi.IsDir() {
			t.Errorf("%s: not a directory (%v)", d, err)
		}
	}
	// Reopening an existing dropzone is fine.
	s.Close()
	s2, err := dropzone.Open(dir, &dropzone.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

func TestOpenErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	blocked := filepath.Join(tmp, "blocked")
	if err := os.MkdirAll(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blocked, "sha256"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dir  string
		opts *dropzone.Options
	}{
		{"dir is a file", file, nil},
		{"below a file", filepath.Join(file, "dropzone"), nil},
		{"sha256 is a file", blocked, nil},
		{"negative MaxSize", filepath.Join(tmp, "neg"), &dropzone.Options{MaxSize: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := dropzone.Open(tc.dir, tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.HasPrefix(err.Error(), "dropzone: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestPut(t *testing.T) {
	s, dir := open(t, nil)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"one byte", []byte{0}},
		{"text", []byte("hello, courier\n")},
		{"several buffers", bytes.Repeat([]byte("0123456789abcdef"), 20000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := s.Put(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			want := dropzone.Object{ID: idOf(tc.data), Path: pathOf(idOf(tc.data)), Size: int64(len(tc.data))}
			if o != want {
				t.Fatalf("Put = %+v, want %+v", o, want)
			}
			if got := readObject(t, s, o.ID); !bytes.Equal(got, tc.data) {
				t.Errorf("content differs: %d bytes, want %d", len(got), len(tc.data))
			}
			st, err := s.Stat(o.ID)
			if err != nil || st != want {
				t.Errorf("Stat = %+v, %v; want %+v", st, err, want)
			}
			if !s.Has(o.ID) {
				t.Error("Has = false")
			}
			fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(o.Path)))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != 0o440 {
				t.Errorf("mode = %v, want -r--r-----", fi.Mode())
			}
			abs, err := s.Abs(o.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !filepath.IsAbs(abs) || abs != filepath.Join(dir, filepath.FromSlash(o.Path)) {
				t.Errorf("Abs = %q", abs)
			}
			if b, err := os.ReadFile(abs); err != nil || !bytes.Equal(b, tc.data) {
				t.Errorf("reading Abs: %v", err)
			}
		})
	}
	checkNoTemp(t, dir)
}

func TestOpenIsReadOnly(t *testing.T) {
	s, _ := open(t, nil)
	o, err := s.Put(strings.NewReader("read only"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Open(o.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x")); err == nil {
		t.Error("writing through Open succeeded")
	}
}

func TestDedupe(t *testing.T) {
	s, dir := open(t, nil)
	data := []byte("same bytes, twice")
	o1, err := s.Put(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fi1, err := os.Stat(filepath.Join(dir, filepath.FromSlash(o1.Path)))
	if err != nil {
		t.Fatal(err)
	}
	o2, err := s.Put(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if o1 != o2 {
		t.Errorf("second Put = %+v, want %+v", o2, o1)
	}
	fi2, err := os.Stat(filepath.Join(dir, filepath.FromSlash(o2.Path)))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi1, fi2) {
		t.Error("the stored file was replaced")
	}

	// Twice in one batch, and once more already stored.
	b := s.NewBatch()
	for range 3 {
		if o, err := b.Put(bytes.NewReader(data)); err != nil || o != o1 {
			t.Fatalf("batch Put = %+v, %v", o, err)
		}
	}
	o3, err := b.Put(strings.NewReader("other"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	got := files(t, dir)
	want := []string{o1.Path, o3.Path}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
}

func TestBatchInvisibleUntilCommit(t *testing.T) {
	s, dir := open(t, nil)
	b := s.NewBatch()
	var objs []dropzone.Object
	for i := range 5 {
		o, err := b.Put(strings.NewReader(fmt.Sprint("object ", i)))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	for _, o := range objs {
		if s.Has(o.ID) {
			t.Errorf("%s visible before Commit", o.ID)
		}
		if _, err := s.Stat(o.ID); !errors.Is(err, dropzone.ErrNotFound) {
			t.Errorf("Stat before Commit: %v, want ErrNotFound", err)
		}
	}
	if n := len(files(t, filepath.Join(dir, "sha256"))); n != 0 {
		t.Errorf("%d files under sha256/ before Commit", n)
	}
	if n := len(files(t, filepath.Join(dir, ".tmp"))); n != len(objs) {
		t.Errorf("%d temp files, want %d", n, len(objs))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if !s.Has(o.ID) {
			t.Errorf("%s missing after Commit", o.ID)
		}
	}
	checkNoTemp(t, dir)
}

func TestAbort(t *testing.T) {
	s, dir := open(t, nil)
	kept, err := s.Put(strings.NewReader("stored before"))
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	var objs []dropzone.Object
	for _, c := range []string{"a", "b", "stored before", "c"} {
		o, err := b.Put(strings.NewReader(c))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	b.Abort()
	b.Abort() // idempotent
	checkNoTemp(t, dir)
	if got := files(t, filepath.Join(dir, "sha256")); len(got) != 1 {
		t.Errorf("files after Abort = %v, want only %s", got, kept.Path)
	}
	for _, o := range objs {
		if o.ID != kept.ID && s.Has(o.ID) {
			t.Errorf("%s stored despite Abort", o.ID)
		}
	}
	if !s.Has(kept.ID) {
		t.Error("Abort removed an object stored before the batch")
	}
	if err := b.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if _, err := b.Put(strings.NewReader("late")); err == nil {
		t.Error("Put after Abort succeeded")
	}
	checkNoTemp(t, dir)
}

func TestCommitTwice(t *testing.T) {
	s, dir := open(t, nil)
	b := s.NewBatch()
	o, err := b.Put(strings.NewReader("once"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err == nil {
		t.Error("second Commit succeeded")
	}
	b.Abort() // a no-op after Commit
	if !s.Has(o.ID) {
		t.Error("Abort after Commit removed the object")
	}
	if _, err := b.Put(strings.NewReader("late")); err == nil {
		t.Error("Put after Commit succeeded")
	}
	checkNoTemp(t, dir)
}

func TestEmptyBatch(t *testing.T) {
	s, _ := open(t, nil)
	if err := s.NewBatch().Commit(); err != nil {
		t.Error(err)
	}
	s.NewBatch().Abort()
}

// countingReader yields an endless stream of 'x' and counts what it gave.
type countingReader struct{ n int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	r.n += int64(len(p))
	return len(p), nil
}

func TestMaxSize(t *testing.T) {
	const limit = 100 << 10 // more than one copy buffer
	for _, tc := range []struct {
		name    string
		size    int64
		tooBig  bool
		maxSize int64
	}{
		{"empty", 0, false, limit},
		{"below", limit - 1, false, limit},
		{"at the limit", limit, false, limit},
		{"one over", limit + 1, true, limit},
		{"far over", 10 * limit, true, limit},
		{"limit of one byte, one byte", 1, false, 1},
		{"limit of one byte, two bytes", 2, true, 1},
		{"no limit", 10 * limit, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := open(t, &dropzone.Options{MaxSize: tc.maxSize})
			data := bytes.Repeat([]byte{'y'}, int(tc.size))
			o, err := s.Put(bytes.NewReader(data))
			if tc.tooBig {
				if !errors.Is(err, dropzone.ErrTooLarge) {
					t.Fatalf("Put = %+v, %v; want ErrTooLarge", o, err)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(tc.maxSize)) {
					t.Errorf("error %q does not name the limit", err)
				}
				if got := files(t, dir); len(got) != 0 {
					t.Errorf("files left: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Size != tc.size || o.ID != idOf(data) {
				t.Errorf("Put = %+v", o)
			}
			checkNoTemp(t, dir)
		})
	}
}

func TestMaxSizeStopsReading(t *testing.T) {
	const limit = 1000
	s, dir := open(t, &dropzone.Options{MaxSize: limit})
	r := new(countingReader) // endless: Put must stop on its own
	b := s.NewBatch()
	if _, err := b.Put(r); !errors.Is(err, dropzone.ErrTooLarge) {
		t.Fatalf("Put: %v, want ErrTooLarge", err)
	}
	if r.n != limit+1 {
		t.Errorf("read %d bytes, want %d", r.n, limit+1)
	}
	// The batch stays usable for other objects.
	o, err := b.Put(strings.NewReader("small"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir); !slices.Equal(got, []string{o.Path}) {
		t.Errorf("files = %v, want [%s]", got, o.Path)
	}
}

func TestPutFile(t *testing.T) {
	s, dir := open(t, &dropzone.Options{MaxSize: 10})
	src := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(src, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.txt", "0123456789")
	big := write("report.pdf", "0123456789A")

	o, err := s.PutFile(ok)
	if err != nil {
		t.Fatal(err)
	}
	if o.ID != idOf([]byte("0123456789")) || o.Size != 10 {
		t.Errorf("PutFile = %+v", o)
	}

	_, err = s.PutFile(big)
	if !errors.Is(err, dropzone.ErrTooLarge) {
		t.Fatalf("PutFile(too large) = %v, want ErrTooLarge", err)
	}
	for _, want := range []string{"report.pdf", "10"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := s.PutFile(filepath.Join(src, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PutFile(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := s.PutFile(src); err == nil {
		t.Error("PutFile(directory) succeeded")
	}
	if got := files(t, dir); !slices.Equal(got, []string{o.Path}) {
		t.Errorf("files = %v, want [%s]", got, o.Path)
	}
}

// failingReader gives n bytes, then err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'z'
	}
	r.n -= k
	return k, nil
}

func TestReadError(t *testing.T) {
	s, dir := open(t, nil)
	boom := errors.New("connection reset")
	_, err := s.Put(&failingReader{n: 200 << 10, err: boom})
	if !errors.Is(err, boom) {
		t.Fatalf("Put = %v, want it to wrap %v", err, boom)
	}
	if got := files(t, dir); len(got) != 0 {
		t.Errorf("files left: %v", got)
	}
}

func TestMalformedIDs(t *testing.T) {
	s, dir := open(t, nil)
	valid, err := s.Put(strings.NewReader("valid"))
	if err != nil {
		t.Fatal(err)
	}
	h := strings.TrimPrefix(valid.ID, "sha256:")
	for _, tc := range []struct{ name, id string }{
		{"empty", ""},
		{"no prefix", h},
		{"traversal", "sha256:../../etc/passwd"},
		{"traversal of hex length", "sha256:" + "../../../../etc/passwd" + strings.Repeat("a", 64-22)},
		{"uppercase hex", "sha256:" + strings.ToUpper(h)},
		{"uppercase prefix", "SHA256:" + h},
		{"short", "sha256:" + h[:63]},
		{"long", "sha256:" + h + "0"},
		{"md5", "md5:d41d8cd98f00b204e9800998ecf8427e"},
		{"other algorithm, same length", "sha512:" + h},
		{"non-hex", "sha256:" + h[:63] + "g"},
		{"slash", "sha256:" + h[:63] + "/"},
		{"NUL", "sha256:" + h[:63] + "\x00"},
		{"space", " " + valid.ID},
		{"newline", valid.ID + "\n"},
		{"path form", valid.Path},
		{"huge", "sha256:" + strings.Repeat("../", 10000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, dropzone.ErrInvalidID) {
					t.Errorf("%s: %v, want ErrInvalidID", op, err)
					return
				}
				want := tc.id
				if len(want) > 40 {
					want = want[:40]
				}
				if !strings.Contains(err.Error(), strings.Trim(fmt.Sprintf("%q", want), `"`)) {
					t.Errorf("%s: error %q does not name the id", op, err)
				}
				if len(err.Error()) > 200 {
					t.Errorf("%s: error is %d bytes long", op, len(err.Error()))
				}
			}
			_, err := dropzone.ParseID(tc.id)
			check("ParseID", err)
			_, err = s.Stat(tc.id)
			check("Stat", err)
			f, err := s.Open(tc.id)
			if f != nil {
				f.Close()
			}
			check("Open", err)
			_, err = s.Abs(tc.id)
			check("Abs", err)
			if s.Has(tc.id) {
				t.Error("Has = true")
			}
		})
	}
	if got, err := dropzone.ParseID(valid.ID); err != nil || got != h {
		t.Errorf("ParseID(%q) = %q, %v", valid.ID, got, err)
	}
	checkNoTemp(t, dir)
}

func TestNotFound(t *testing.T) {
	s, _ := open(t, nil)
	id := idOf([]byte("never stored"))
	if _, err := s.Stat(id); !errors.Is(err, dropzone.ErrNotFound) {
		t.Errorf("Stat = %v, want ErrNotFound", err)
	}
	if _, err := s.Open(id); !errors.Is(err, dropzone.ErrNotFound) {
		t.Errorf("Open = %v, want ErrNotFound", err)
	}
	if _, err := s.Abs(id); !errors.Is(err, dropzone.ErrNotFound) {
		t.Errorf("Abs = %v, want ErrNotFound", err)
	}
	if s.Has(id) {
		t.Error("Has = true")
	}
	if _, err := s.Stat(id); err == nil || !strings.Contains(err.Error(), id) {
		t.Errorf("error %v does not name the id", err)
	}
}

// TestSymlinkEscape plants links inside the dropzone that lead out of it and
// checks that no operation follows them.
func TestSymlinkEscape(t *testing.T) {
	secret := []byte("outside secret")
	data := []byte("attachment content")
	id := idOf(data)
	h := strings.TrimPrefix(id, "sha256:")

	type setup func(t *testing.T, dir, outside string)
	link := func(target, name string) setup {
		return func(t *testing.T, dir, outside string) {
			t.Helper()
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			target = strings.ReplaceAll(target, "OUT", outside)
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name  string
		setup setup
		// putOK says whether Put may succeed: only when it can do so inside
		// the dropzone (replacing the planted link by a real file).
		putOK bool
	}{
		{"fan-out dir absolute", link("OUT", "sha256/"+h[:2]), false},
		{"fan-out dir relative", link("../../../../../../../../../../../../OUT", "sha256/"+h[:2]), false},
		{"sha256 dir absolute", link("OUT", "sha256"), false},
		{"tmp dir absolute", link("OUT", ".tmp"), false},
		{"final path absolute", link("OUT/secret", "sha256/"+h[:2]+"/"+h), true},
		{"final path relative", link("../../../../../../../../../../../../OUT/secret", "sha256/"+h[:2]+"/"+h), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "secret"), secret, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "dropzone")
			s, err := dropzone.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tc.setup(t, dir, outside)

			// Lookups never reach the outside file, although a link to it
			// sits where the object would be.
			if s.Has(id) {
				t.Error("Has followed the link")
			}
			if f, err := s.Open(id); err == nil {
				b, _ := io.ReadAll(f)
				f.Close()
				t.Errorf("Open followed the link and read %q", b)
			}
			if p, err := s.Abs(id); err == nil {
				t.Errorf("Abs = %q, want an error", p)
			}

			o, err := s.Put(bytes.NewReader(data))
			if err == nil {
				if !tc.putOK {
					t.Errorf("Put succeeded through a link out of the dropzone")
				}
				// It must have replaced the link with a real file inside.
				fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(o.Path)))
				if err != nil || !fi.Mode().IsRegular() {
					t.Errorf("after Put, %s is not a regular file (%v)", o.Path, err)
				}
				if got := readObject(t, s, id); !bytes.Equal(got, data) {
					t.Errorf("Open read %q", got)
				}
			} else if tc.putOK {
				t.Logf("Put: %v (refusing is acceptable too)", err)
			}

			// Nothing outside changed.
			if got := files(t, outside); !slices.Equal(got, []string{"secret"}) {
				t.Errorf("outside dir now holds %v", got)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "secret")); !bytes.Equal(b, secret) {
				t.Errorf("outside file now holds %q", b)
			}
			// No temp file left behind (when .tmp is usable at all).
			if fi, err := os.Lstat(filepath.Join(dir, ".tmp")); err == nil && fi.IsDir() {
				checkNoTemp(t, dir)
			}
		})
	}
}

func TestConcurrentCommitSameContent(t *testing.T) {
	s, dir := open(t, nil)
	shared := bytes.Repeat([]byte("shared attachment "), 50000) // ~900 KB
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			b := s.NewBatch()
			if _, err := b.Put(bytes.NewReader(shared)); err != nil {
				errs <- err
				b.Abort()
				return
			}
			if _, err := b.Put(strings.NewReader(fmt.Sprint("unique ", i))); err != nil {
				errs <- err
				b.Abort()
				return
			}
			errs <- b.Commit()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := readObject(t, s, idOf(shared)); !bytes.Equal(got, shared) {
		t.Error("shared object corrupt")
	}
	if got := len(files(t, filepath.Join(dir, "sha256"))); got != n+1 {
		t.Errorf("%d objects, want %d", got, n+1)
	}
	checkNoTemp(t, dir)
}

func TestConcurrentPutOneBatch(t *testing.T) {
	s, dir := open(t, nil)
	b := s.NewBatch()
	const n = 50
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			o, err := b.Put(strings.NewReader(fmt.Sprint("item ", i%10)))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = o.ID
		})
	}
	wg.Wait()
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !s.Has(id) {
			t.Errorf("%s missing", id)
		}
	}
	if got := len(files(t, filepath.Join(dir, "sha256"))); got != 10 {
		t.Errorf("%d objects, want 10", got)
	}
	checkNoTemp(t, dir)
}

// TestNoPartialReads has readers look for an object while writers commit
// it: whatever a reader manages to open must be complete.
func TestNoPartialReads(t *testing.T) {
	s, dir := open(t, nil)
	data := bytes.Repeat([]byte("0123456789"), 100000) // 1 MB
	id := idOf(data)
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				f, err := s.Open(id)
				if errors.Is(err, dropzone.ErrNotFound) {
					runtime.Gosched()
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(f)
				f.Close()
				if err != nil || !bytes.Equal(b, data) {
					t.Errorf("read %d bytes (%v), want the %d committed", len(b), err, len(data))
					return
				}
			}
		})
	}
	for range 8 {
		writers.Go(func() {
			if _, err := s.Put(bytes.NewReader(data)); err != nil {
				t.Error(err)
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	checkNoTemp(t, dir)
}

func TestRecoverTemp(t *testing.T) {
	s, dir := open(t, nil)
	tmp := filepath.Join(dir, ".tmp")
	old := time.Now().Add(-2 * time.Hour)
	plant := func(name string, mtime time.Time) {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte("left over"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	plant("put-crashed1", old)
	plant("put-crashed2", old)
	plant("put-fresh", time.Now())

	// A batch of this Store, open and staged: its temp file is spared even
	// when it looks old.
	b := s.NewBatch()
	o, err := b.Put(strings.NewReader("in flight"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files(t, tmp) {
		if !strings.Contains(name, "crashed") && name != "put-fresh" {
			p := filepath.Join(tmp, name)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}

	removed, err := s.RecoverTemp(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 2 {
		t.Errorf("removed %d, want 2", removed)
	}
	left := files(t, tmp)
	if len(left) != 2 || !slices.Contains(left, "put-fresh") {
		t.Errorf("left in .tmp: %v, want put-fresh and the live batch's file", left)
	}
	if err := b.Commit(); err != nil {
		t.Fatalf("Commit after RecoverTemp: %v", err)
	}
	if !s.Has(o.ID) {
		t.Error("committed object missing")
	}

	removed, err = s.RecoverTemp(0)
	if err != nil || removed != 1 {
		t.Errorf("RecoverTemp(0) = %d, %v; want 1, nil", removed, err)
	}
	checkNoTemp(t, dir)
	if removed, err := s.RecoverTemp(0); err != nil || removed != 0 {
		t.Errorf("RecoverTemp on empty .tmp = %d, %v", removed, err)
	}
}

func TestClosedStore(t *testing.T) {
	s, _ := open(t, nil)
	b := s.NewBatch()
	if _, err := b.Put(strings.NewReader("staged")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(strings.NewReader("after close")); err == nil {
		t.Error("Put after Close succeeded")
	}
	if err := b.Commit(); err == nil {
		t.Error("Commit after Close succeeded")
	}
}

// genReader yields n pseudo-random bytes without holding them: memory use
// is independent of n.
type genReader struct {
	n     int64
	state uint64
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.n {
		p = p[:g.n]
	}
	for i := range p {
		if i%8 == 0 { // xorshift64
			g.state ^= g.state << 13
			g.state ^= g.state >> 7
			g.state ^= g.state << 17
		}
		p[i] = byte(g.state >> (8 * (i % 8)))
	}
	g.n -= int64(len(p))
	return len(p), nil
}

func TestStreamingMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MB")
	}
	const size = 200 << 20
	const budget = 8 << 20
	s, dir := open(t, nil)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	o, err := s.Put(&genReader{n: size, state: 1})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	inuse := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("Put of %d MB: %d KB allocated, heap in use %+d KB", size>>20, alloc>>10, inuse>>10)
	if alloc > budget {
		t.Errorf("Put allocated %d bytes for a %d-byte artifact", alloc, size)
	}
	if inuse > budget {
		t.Errorf("heap in use grew by %d bytes", inuse)
	}

	h := sha256.New()
	if _, err := io.Copy(h, &genReader{n: size, state: 1}); err != nil {
		t.Fatal(err)
	}
	want := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if o.ID != want || o.Size != size {
		t.Errorf("Put = %+v, want %s of %d bytes", o, want, size)
	}
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(o.Path)))
	if err != nil || fi.Size() != size {
		t.Errorf("stored file: %v, %v", fi, err)
	}
	checkNoTemp(t, dir)
}

// BenchmarkPut stores batches of 100 distinct small objects.
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			s, _ := open(b, nil)
			const perBatch = 100
			data := make([]byte, size)
			seq := uint64(0)
			b.SetBytes(int64(size * perBatch))
			b.ReportAllocs()
			for b.Loop() {
				batch := s.NewBatch()
				for range perBatch {
					seq++
					for i := range 8 { // distinct content, no dedupe
						data[i] = byte(seq >> (8 * i))
					}
					if _, err := batch.Put(bytes.NewReader(data)); err != nil {
						b.Fatal(err)
					}
				}
				if err := batch.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}

func TestBatchOpen(t *testing.T) {
	s, dir := open(t, nil)
	stored, err := s.Put(strings.NewReader("stored before"))
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	staged, err := b.Put(strings.NewReader("staged, not committed"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Put(strings.NewReader("stored before")) // already stored: no temp file
	if err != nil {
		t.Fatal(err)
	}
	read := func(o dropzone.Object) string {
		t.Helper()
		f, err := b.Open(o)
		if err != nil {
			t.Fatalf("Batch.Open(%s): %v", o.ID, err)
		}
		defer f.Close()
		if _, err := f.Write([]byte("x")); err == nil {
			t.Error("writing through Batch.Open succeeded")
		}
		data, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if got := read(staged); got != "staged, not committed" {
		t.Errorf("staged object reads %q", got)
	}
	if got := read(again); got != "stored before" {
		t.Errorf("already stored object reads %q", got)
	}
	if got := read(stored); got != "stored before" {
		t.Errorf("object stored by another batch reads %q", got)
	}
	if s.Has(staged.ID) {
		t.Error("Batch.Open made the staged object visible")
	}

	// A handle opened before Commit still reads after it.
	f, err := b.Open(staged)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if data, err := io.ReadAll(f); err != nil || string(data) != "staged, not committed" {
		t.Errorf("handle opened before Commit reads %q, %v", data, err)
	}
	f.Close()
	if got := read(staged); got != "staged, not committed" {
		t.Errorf("after Commit the object reads %q", got)
	}
	checkNoTemp(t, dir)

	if _, err := b.Open(dropzone.Object{ID: idOf([]byte("never put"))}); !errors.Is(err, dropzone.ErrNotFound) {
		t.Errorf("Open of an unknown object: %v, want ErrNotFound", err)
	}
	if _, err := b.Open(dropzone.Object{ID: "sha256:../../etc/passwd"}); !errors.Is(err, dropzone.ErrInvalidID) {
		t.Errorf("Open of a malformed id: %v, want ErrInvalidID", err)
	}
}

func TestBatchOpenAfterAbort(t *testing.T) {
	s, _ := open(t, nil)
	b := s.NewBatch()
	o, err := b.Put(strings.NewReader("discarded"))
	if err != nil {
		t.Fatal(err)
	}
	b.Abort()
	if _, err := b.Open(o); !errors.Is(err, dropzone.ErrNotFound) {
		t.Errorf("Open after Abort: %v, want ErrNotFound", err)
	}
}

func TestBatchOpenSymlinkTemp(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	s, dir := open(t, nil)
	b := s.NewBatch()
	defer b.Abort()
	o, err := b.Put(strings.NewReader("staged"))
	if err != nil {
		t.Fatal(err)
	}
	// Replace the temp file by a link to a file outside the dropzone.
	tmps := files(t, filepath.Join(dir, ".tmp"))
	if len(tmps) != 1 {
		t.Fatalf("temp files: %v", tmps)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".tmp", tmps[0])
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, tmp); err != nil {
		t.Fatal(err)
	}
	if f, err := b.Open(o); err == nil {
		f.Close()
		t.Error("Batch.Open followed a link out of the dropzone")
	}
}

// TestObjectTreeRemovedWhileOpen removes sha256/ and .tmp/ under a Store
// that has already placed objects (and so keeps their directories open),
// then stores the same content again, in a small batch and in one large
// enough for the bulk path: the directories must be made again, not
// assumed, and the objects must land in them, not in the removed ones.
func TestObjectTreeRemovedWhileOpen(t *testing.T) {
	s, dir := open(t, nil)
	var data [][]byte
	for i := range 40 {
		data = append(data, fmt.Appendf(nil, "object %d", i))
	}
	put := func(items [][]byte) {
		t.Helper()
		b := s.NewBatch()
		for _, d := range items {
			if _, err := b.Put(bytes.NewReader(d)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for _, items := range [][][]byte{data[:2], data} {
		put(items)
		for _, d := range []string{"sha256", ".tmp"} {
			if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
				t.Fatal(err)
			}
		}
		put(items)
		for _, d := range items {
			if got := readObject(t, s, idOf(d)); !bytes.Equal(got, d) {
				t.Fatalf("%s: content %q, want %q", idOf(d), got, d)
			}
			h := strings.TrimPrefix(idOf(d), "sha256:")
			if got, err := os.ReadFile(filepath.Join(dir, "sha256", h[:2], h)); !bytes.Equal(got, d) {
				t.Fatalf("%s at its path: %q (%v), want %q", idOf(d), got, err, d)
			}
		}
		checkNoTemp(t, dir)
	}
}
