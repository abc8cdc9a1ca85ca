package email

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestCorpusValid normalises every message of the shared corpus (set
// COURIER_CORPUS to its directory): none may fail, and every result must
// validate. What the reader decodes (subjects against reference parses,
// texts and parts against go-message) is checked by the corpus tests of
// internal/mime.
func TestCorpusValid(t *testing.T) {
	dir, files := corpusEMLs(t)
	s := newTestStore(t, nil)
	noted := 0
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		t.Run(rel, func(t *testing.T) {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			m := normalizeTest(t, s, f, normOptions())
			checkValid(t, rel, m)
			if m.Metadata.Extra.ParseError != "" {
				noted++
			}
		})
	}
	t.Logf("corpus: %d files; with parse_error %d", len(files), noted)
}

// corpusEMLs returns the corpus directory (COURIER_CORPUS; the test is
// skipped without it) and every .eml file under it, sorted.
func corpusEMLs(t *testing.T) (string, []string) {
	t.Helper()
	dir := os.Getenv("COURIER_CORPUS")
	if dir == "" {
		t.Skip("COURIER_CORPUS not set")
	}
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
