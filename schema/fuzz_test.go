package schema_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// FuzzEncodeStrings puts arbitrary text in every kind of place a message
// carries text (literal-block candidates, plain-scalar candidates, map keys
// and values of provider_raw) and checks that the file reads back to the
// same values and re-encodes to the same bytes.
func FuzzEncodeStrings(f *testing.F) {
	for _, s := range []string{"", "plain", "John Doe", "a: b", "- x", "#x", "\tlead", "line\n\tnext", "x\n\n\n", "\r\n",
		"true", "1.0", "null", "~", "'q'", "\"d\"", "\u2028", "\u0085", "\ufeff", "a\x00b", "---", "...", "\n---\n", "&a *a", "!tag", "%x", "@x", "`x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // Courier writes valid UTF-8 only
		}
		m := &schema.Message{
			ID: "slack_C1_1_000001", Provider: schema.Slack, Direction: schema.Inbound,
			Session:      schema.Session{ID: "C1", Type: schema.Group, Name: s},
			Participants: schema.Participants{From: schema.Participant{ID: "U1", Name: s + "x"}},
			Timestamp:    schema.NewTime(time.Unix(1700000000, 0)), ReceivedAt: schema.NewTime(time.Unix(1700000001, 0)),
			Type:    schema.TypeText,
			Content: schema.Content{Text: schema.NullString(s), HTML: schema.NullString("<p>" + s), Markdown: schema.NullString(s + "\n")},
			Metadata: schema.Metadata{SchemaVersion: "1.0.0", ProtocolVersion: "1.0.0",
				ProviderRaw: map[string]any{"k" + s: s, "list": []any{s, 1, 2.5, true, nil}, "nested": map[string]any{s + "y": []any{s}}},
				Extra:       schema.Extra{ParseError: schema.Text(s + "."), Other: map[string]any{"z_" + s: s}}},
			Body: strings.ReplaceAll(s, "\x00", "") + "\n", // the body is written as it is: no NUL (Validate refuses one)
		}
		b, err := schema.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("%q: %v\n%s", s, err, b)
		}
		if back.Session.Name != s || back.Participants.From.Name != s+"x" || string(back.Content.Text) != s ||
			string(back.Content.HTML) != "<p>"+s || string(back.Content.Markdown) != s+"\n" || string(back.Metadata.Extra.ParseError) != s+"." {
			t.Fatalf("%q changed:\n%s", s, b)
		}
		if back.Metadata.ProviderRaw["k"+s] != s || back.Metadata.Extra.Other["z_"+s] != s && s != "" {
			t.Fatalf("%q changed in provider_raw or extra:\n%s", s, b)
		}
		again, err := schema.Encode(back)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%q: re-encoding differs:\n%s\n---\n%s", s, b, again)
		}
	})
}
