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
