package email

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/*.eml")

// TestGolden normalises each testdata/X.eml and compares the encoded result
// with testdata/X.golden.md, as cmd/gofmt's tests pair .input and .golden.
// Run with -update to rewrite the golden files after a deliberate change.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no testdata/*.eml")
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".eml")
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			m := normalizeBytes(t, raw)
			got := testutil.CheckMessage(t, name, m)
			golden := strings.TrimSuffix(in, ".eml") + ".golden.md"
			if *updateGolden {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run go test -update if the change is deliberate):\n%s", in, golden, testutil.LineDiff(string(want), string(got)))
			}
		})
	}
}

// TestGoldenFilesValidate checks every golden file on its own: it must
// validate against the protocol's JSON Schema and decode with schema.Decode,
// and encoding the decoded message must give the same bytes.
func TestGoldenFilesValidate(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.golden.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(goldens) == 0 {
		t.Fatal("no testdata/*.golden.md")
	}
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		testutil.ValidateInbound(t, g, data)
		m, err := schema.Decode(data)
		if err != nil {
			t.Errorf("%s: Decode: %v", g, err)
			continue
		}
		again, err := schema.Encode(m)
		if err != nil {
			t.Fatalf("%s: Encode: %v", g, err)
		}
		if !bytes.Equal(again, data) {
			t.Errorf("%s: encoding the decoded file changes it:\n%s", g, testutil.LineDiff(string(data), string(again)))
		}
	}
}
