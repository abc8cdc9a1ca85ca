package schema_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/monoco/courier/schema"
)

// FuzzDecode: no input makes the parser panic, and whatever it accepts
// encodes to a fixed point (decode(encode(m)) encodes to the same bytes).
func FuzzDecode(f *testing.F) {
	for _, dir := range []string{"testdata/golden", "testdata/protocol"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.md"))
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(goodMessage))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\na: [\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if schema.DetectKind(data) == schema.KindDraft {
			d, _, err := schema.DecodeDraft(data)
			if err != nil {
				return
			}
			b1, err := schema.EncodeDraft(d)
			if err != nil {
				t.Fatalf("encode accepted draft: %v", err)
			}
			d2, _, err := schema.DecodeDraft(b1)
			if err != nil {
				t.Fatalf("re-decode of encoded draft failed: %v\n%s", err, b1)
			}
			b2, _ := schema.EncodeDraft(d2)
			if !bytes.Equal(b1, b2) {
				t.Fatalf("draft encoding not stable:\n%s\n---\n%s", b1, b2)
			}
			return
		}
		m, err := schema.Decode(data)
		if err != nil {
			return
		}
		b1, err := schema.Encode(m)
		if err != nil {
			t.Fatalf("encode accepted message: %v", err)
		}
		m2, err := schema.Decode(b1)
		if err != nil {
			t.Fatalf("re-decode of encoded message failed: %v\n%s", err, b1)
		}
		b2, _ := schema.Encode(m2)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("encoding not stable:\n%s\n---\n%s", b1, b2)
		}
	})
}
