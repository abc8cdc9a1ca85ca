package testutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/schema"
)

var (
	inboundOnce   sync.Once
	inboundSchema *jsonschema.Schema
	inboundErr    error
)

// InboundSchema returns the protocol's JSON Schema (§7.2) compiled by an
// independent validator, with format assertions on (date-time, email, uri).
func InboundSchema() (*jsonschema.Schema, error) {
	inboundOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.InboundJSONSchema))
		if err != nil {
			inboundErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		const url = "https://monoco.dev/schemas/mailbox/inbound-v1.json"
		if err := c.AddResource(url, doc); err != nil {
			inboundErr = err
			return
		}
		inboundSchema, inboundErr = c.Compile(url)
	})
	return inboundSchema, inboundErr
}

// FrontMatterJSON extracts the YAML front matter of a mailbox file and
// returns it as a JSON value, without using Courier's own parser.
func FrontMatterJSON(data []byte) (any, error) {
	s := string(data)
	if !strings.HasPrefix(s, "---\n") {
		return nil, fmt.Errorf("no front matter")
	}
	end := strings.Index(s[4:], "\n---\n")
	if end < 0 {
		return nil, fmt.Errorf("front matter not closed")
	}
	var v any
	if err := yaml.Unmarshal([]byte(s[4:4+end+1]), &v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// ValidateInbound fails t unless data, a mailbox file, validates against
// the protocol's JSON Schema.
func ValidateInbound(t testing.TB, name string, data []byte) {
	t.Helper()
	sch, err := InboundSchema()
	if err != nil {
		t.Fatalf("compile inbound JSON Schema: %v", err)
	}
	v, err := FrontMatterJSON(data)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s does not validate against the protocol JSON Schema:\n%v", name, err)
	}
}

// CheckMessage checks a message as every file Courier writes must be:
// Validate, the protocol's JSON Schema (an independent validator), and a
// decode of the encoded file. It returns the encoded file.
func CheckMessage(t testing.TB, name string, m *schema.Message) []byte {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Errorf("%s: Validate: %v", name, err)
	}
	data, err := schema.Encode(m)
	if err != nil {
		t.Fatalf("%s: Encode: %v", name, err)
	}
	ValidateInbound(t, name, data)
	if _, err := schema.Decode(data); err != nil {
		t.Errorf("%s: Decode of the encoded message: %v", name, err)
	}
	return data
}

// LineDiff shows the first lines (ten at most) where want and got differ,
// for golden-file tests.
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}
