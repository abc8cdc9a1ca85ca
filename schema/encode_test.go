package schema_test

import (
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
