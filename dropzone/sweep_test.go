package dropzone_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/dropzone"
)

// Sweep removes an object unused since the time it is given, and spares
// one Keep or a deduped Put marked in use since.
func TestSweepSparesObjectsInUse(t *testing.T) {
	dir := t.TempDir()
	s, err := dropzone.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := time.Now().Add(-48 * time.Hour)
	ids := map[string]string{}
	for _, name := range []string{"unused", "kept", "put"} {
		o, err := s.Put(strings.NewReader("content " + name))
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = o.ID
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(o.Path)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Keep(ids["kept"]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(strings.NewReader("content put")); err != nil {
		t.Fatal(err)
	}
	var listed int
	s.Objects(func(dropzone.StoredObject) error { listed++; return nil })
	if listed != 3 {
		t.Errorf("Objects listed %d, want 3", listed)
	}
	var removed []string
	err = s.Sweep([]string{ids["unused"], ids["kept"], ids["put"], ids["unused"]}, time.Now().Add(-time.Hour), func(o dropzone.Object) { removed = append(removed, o.ID) })
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != ids["unused"] || s.Has(ids["unused"]) || !s.Has(ids["kept"]) || !s.Has(ids["put"]) {
		t.Errorf("removed %v", removed)
	}
}
