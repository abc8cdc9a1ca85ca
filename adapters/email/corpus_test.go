package email

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/monoco/courier/internal/testutil"
)

// TestCorpusValid normalises every message of the shared corpus (set
// COURIER_CORPUS to its directory): none may fail, and every result must
// validate. What the reader decodes (subjects against reference parses,
// texts and parts against go-message) is checked by the corpus tests of
// internal/mime.
func TestCorpusValid(t *testing.T) {
	dir, files := testutil.CorpusEMLs(t)
	s := testutil.NewDropzone(t, nil)
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
			testutil.CheckMessage(t, rel, m)
			if m.Metadata.Extra.ParseError != "" {
				noted++
			}
		})
	}
	t.Logf("corpus: %d files; with parse_error %d", len(files), noted)
}
