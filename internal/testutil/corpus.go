package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/monoco/courier/dropzone"
)

// CorpusDir returns the shared corpus (COURIER_CORPUS), skipping the test
// when it is not set.
func CorpusDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("COURIER_CORPUS")
	if dir == "" {
		t.Skip("COURIER_CORPUS not set")
	}
	return dir
}

// CorpusEMLs returns the corpus directory and every .eml file under it,
// sorted; it skips the test without a corpus and fails it when the corpus
// holds no mail.
func CorpusEMLs(t testing.TB) (string, []string) {
	t.Helper()
	dir := CorpusDir(t)
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".eml") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no .eml files under %s", dir)
	}
	return dir, files
}

// NewDropzone opens a dropzone in a fresh temporary directory, closed when
// the test ends.
func NewDropzone(t testing.TB, opts *dropzone.Options) *dropzone.Store {
	t.Helper()
	s, err := dropzone.Open(filepath.Join(t.TempDir(), ".monoco", "dropzone"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
