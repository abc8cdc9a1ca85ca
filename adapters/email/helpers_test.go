package email

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// receivedAt is the fixed time of receipt of every test message.
var receivedAt = time.Date(2026, 2, 6, 18, 31, 15, 0, time.UTC)

// testOptions are the options of the golden tests.
func normOptions() NormalizeOptions {
	return NormalizeOptions{
		Account:     "work",
		Folder:      "INBOX",
		Own:         []string{"agent@monoco.dev"},
		ReceivedAt:  receivedAt,
		UID:         42,
		UIDValidity: 1700000000,
	}
}

// normalize runs the caller's pattern on raw: put the raw message into a
// batch, open it back, normalise it from the file, commit.
func normalizeTest(t testing.TB, s *dropzone.Store, raw io.Reader, opts NormalizeOptions) *schema.Message {
	t.Helper()
	b := s.NewBatch()
	obj, err := b.Put(raw)
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Normalize(f, b, obj, opts)
	f.Close()
	if err != nil {
		b.Abort()
		t.Fatalf("Normalize: %v", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	return m
}

func normalizeBytes(t testing.TB, raw []byte) *schema.Message {
	t.Helper()
	return normalizeTest(t, testutil.NewDropzone(t, nil), bytes.NewReader(raw), normOptions())
}
