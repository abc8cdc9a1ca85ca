package schema_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// Multi-line strings yaml.v3's literal style cannot carry are written so
// that they read back unchanged.
func TestEncodeAwkwardStrings(t *testing.T) {
	for _, s := range []string{
		"\tindented first line\nsecond",
		"\n\n\tafter blank lines",
		"  two spaces\n    four\n",
		"line\n\ttabbed\n",
		"trailing spaces   \nnext",
		"ends with newlines\n\n\n",
		"\r\nwindows\r\n",
		"plain\nmulti\nline",
	} {
		m := testutil.Message(schema.Slack, "C1_1_000001", testutil.Time("2026-01-01T00:00:00Z"), s)
		m.Content.Markdown = schema.NullString(s)
		m.Metadata.Extra.ParseError = schema.Text(s)
		b, err := schema.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("%q: %v\n%s", s, err, b)
		}
		if string(back.Content.Text) != s || string(back.Content.Markdown) != s || string(back.Metadata.Extra.ParseError) != s {
			t.Errorf("%q read back as %q / %q / %q", s, back.Content.Text, back.Content.Markdown, back.Metadata.Extra.ParseError)
		}
	}
}

// Encoders are pooled: a message's bytes never depend on the messages
// encoded before it, or beside it. Messages of very different shapes
// (one with more nodes and map fields than a slab holds, one with a
// buffer past what the pool keeps) are encoded at once in random order,
// each compared with its encoding alone and read back.
func TestEncodePooledConcurrent(t *testing.T) {
	var msgs []*schema.Message
	for _, m := range samples() {
		msgs = append(msgs, m)
	}
	wide := testutil.Message(schema.Email, "email_wide", testutil.Time("2026-01-01T00:00:00Z"), "wide")
	wide.Metadata.ProviderRaw = map[string]any{}
	for i := range 300 {
		wide.Metadata.ProviderRaw[fmt.Sprintf("h%03d", i)] = []any{fmt.Sprint("v", i), map[string]any{"k": i}}
	}
	big := testutil.Message(schema.Email, "email_big", testutil.Time("2026-01-01T00:00:00Z"), strings.Repeat("big text line\n", 80_000))
	msgs = append(msgs, wide, big)
	want := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := schema.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = b
		back, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", m.ID, err)
		}
		if back.ID != m.ID || back.Content.Text != m.Content.Text {
			t.Fatalf("%s read back as %s", m.ID, back.ID)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 100 {
				i := r.IntN(len(msgs))
				b, err := schema.Encode(msgs[i])
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(b, want[i]) {
					t.Errorf("%s encoded differently beside other messages", msgs[i].ID)
					return
				}
			}
		})
	}
	wg.Wait()
}
