package mailbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// fill writes n Lark messages om_0.. to a new mailbox, each with the key
// key_<i>, and returns it.
func fill(t testing.TB, n int) *mailbox.Mailbox {
	t.Helper()
	root := t.TempDir()
	mailbox.Init(root)
	mb, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	at := testutil.Time("2026-01-01T00:00:00Z")
	var in []mailbox.Inbound
	for i := range n {
		in = append(in, mailbox.Inbound{Message: testutil.Message(schema.Lark, fmt.Sprintf("om_%d", i), at.Add(time.Duration(i)*time.Second), "text"),
			Keys: []string{fmt.Sprintf("key_%d", i)}})
	}
	if _, err := mb.WriteInbound(ctx, in, nil); err != nil {
		t.Fatal(err)
	}
	return mb
}

// Known answers as Seen does, for ids, keys and strangers, past its chunk
// of a thousand keys a query.
func TestKnownAgreesWithSeen(t *testing.T) {
	mb := fill(t, 30)
	var keys []string
	for i := range 1500 {
		keys = append(keys, fmt.Sprintf("lark_om_%d", i%40), fmt.Sprintf("key_%d", i%40), fmt.Sprintf("stranger_%d", i), "it's \"quoted\"")
	}
	known, err := mb.Known(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		seen, err := mb.Seen(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if known[k] != seen {
			t.Errorf("Known says %v for %q, Seen %v", known[k], k, seen)
		}
	}
	if len(known) != 60 {
		t.Errorf("Known found %d keys, want 60", len(known))
	}
}

// BenchmarkSeen: the dedupe lookups of 1,000 messages of three keys each,
// one Seen a key (as before, each preparing its SQL) against one Known a
// batch.
func BenchmarkSeen(b *testing.B) {
	mb := fill(b, 1000)
	var keys []string
	for i := range 1000 {
		keys = append(keys, fmt.Sprintf("lark_om_%d", i+500), fmt.Sprintf("key_%d", i+500), fmt.Sprintf("lark:event_%d", i))
	}
	b.Run("Seen", func(b *testing.B) {
		for b.Loop() {
			for _, k := range keys {
				if _, err := mb.Seen(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("Known", func(b *testing.B) {
		for b.Loop() {
			if _, err := mb.Known(ctx, keys); err != nil {
				b.Fatal(err)
			}
		}
	})
}
