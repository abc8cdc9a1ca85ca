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

// KnownDigests answers as FindDigest does, span by span, for spans that
// hold a copy, spans that end or begin on its second, spans just past it,
// digests never filed and the widest span, past its chunk of a thousand
// spans a query.
func TestKnownDigestsAgreesWithFindDigest(t *testing.T) {
	root := t.TempDir()
	mailbox.Init(root)
	mb, err := mailbox.Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	at := testutil.Time("2026-01-01T00:00:00Z")
	var in []mailbox.Inbound
	for i := range 20 {
		m := testutil.Message(schema.Email, fmt.Sprintf("m%d", i), at, "text")
		m.Metadata.Extra.Digest = fmt.Sprintf("sha256:%02d", i)
		m.ReceivedAt = schema.NewTime(at.Add(time.Duration(i) * time.Hour))
		in = append(in, mailbox.Inbound{Message: m})
	}
	if _, err := mb.WriteInbound(ctx, in, nil); err != nil {
		t.Fatal(err)
	}
	var spans []mailbox.DigestSpan
	for i := range 1200 {
		d := fmt.Sprintf("sha256:%02d", i%25) // 20..24: never filed
		recv := at.Add(time.Duration(i%25) * time.Hour)
		off := time.Duration(i%7-3) * time.Second
		spans = append(spans,
			mailbox.DigestSpan{Digest: d, From: recv.Add(off), To: recv.Add(off + 2*time.Second)},
			mailbox.DigestSpan{Digest: d, From: time.Unix(0, 0), To: time.Unix(999999999999, 0)})
	}
	found, err := mb.KnownDigests(ctx, spans)
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	for i, sp := range spans {
		_, ok, err := mb.FindDigest(ctx, sp.Digest, sp.From, sp.To)
		if err != nil {
			t.Fatal(err)
		}
		if found[i] != ok {
			t.Errorf("span %d (%s %v..%v): KnownDigests says %v, FindDigest %v", i, sp.Digest, sp.From, sp.To, found[i], ok)
		}
		if ok {
			hits++
		}
	}
	if hits == 0 || hits == len(spans) {
		t.Errorf("%d of %d spans hold a copy: the test asks nothing", hits, len(spans))
	}
}

// BenchmarkDigests: the content lookups of a batch of 1,000 messages, one
// FindDigest a message (as before) against one KnownDigests a batch.
func BenchmarkDigests(b *testing.B) {
	mb := fill(b, 1000)
	at := testutil.Time("2026-01-01T00:00:00Z")
	var spans []mailbox.DigestSpan
	for i := range 1000 {
		spans = append(spans, mailbox.DigestSpan{Digest: fmt.Sprintf("sha256:%064d", i), From: time.Unix(0, 0), To: at})
	}
	b.Run("FindDigest", func(b *testing.B) {
		for b.Loop() {
			for _, sp := range spans {
				if _, _, err := mb.FindDigest(ctx, sp.Digest, sp.From, sp.To); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("KnownDigests", func(b *testing.B) {
		for b.Loop() {
			if _, err := mb.KnownDigests(ctx, spans); err != nil {
				b.Fatal(err)
			}
		}
	})
}
