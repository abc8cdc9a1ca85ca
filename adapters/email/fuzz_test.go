package email

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// FuzzNormalize feeds arbitrary bytes to Normalize: it must not panic nor
// fail (the reader cannot fail), and what it returns must validate, encode
// to valid UTF-8 without NUL, pass the protocol's JSON Schema and decode.
// The seeds are the golden inputs; inputs that once failed are kept in
// testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	inputs, _ := filepath.Glob(filepath.Join("testdata", "*.eml"))
	for _, in := range inputs {
		raw, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte("Content-Type: multipart/mixed; boundary=abc\n\n--abc\nContent-Type: multipart/alternative; boundary=abcd\n\n--abcd\n\nx\n--abcd--\n--abc--\n"))
	f.Add([]byte("Subject: =?gb2312?B?1tA=?= =?utf-8?q?=E4=B8?=\nFrom: \"=?utf-8?b?5Lit?=\" <a@b>\n\n"))
	s, err := dropzone.Open(filepath.Join(f.TempDir(), "dropzone"), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, raw []byte) {
		b := s.NewBatch()
		defer b.Abort()
		m, err := Normalize(bytes.NewReader(raw), b, dropzone.Object{}, normOptions())
		if err != nil {
			t.Fatalf("Normalize: %v", err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		data, err := schema.Encode(m)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
			t.Fatalf("output is not valid UTF-8 without NUL")
		}
		testutil.ValidateInbound(t, "fuzz", data)
		if _, err := schema.Decode(data); err != nil {
			t.Fatalf("Decode: %v\n%s", err, data)
		}
	})
}
