package schema

import (
	_ "embed"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Kind of a mailbox file.
type Kind int

// Kinds of files.
const (
	KindUnknown Kind = iota
	KindMessage      // an inbound message: has direction
	KindDraft        // an outbound draft
)

// DetectKind tells a message from a draft: messages carry "direction:
// inbound". A file that cannot be parsed is KindUnknown.
func DetectKind(data []byte) Kind {
	doc, errs := parseDocument(data)
	if errs != nil {
		return KindUnknown
	}
	if doc.isMessage() {
		return KindMessage
	}
	return KindDraft
}

// DecodeFile parses a mailbox file once and decodes it as what it is: a
// message (it says direction: inbound) or a draft. Exactly one of the
// results is non-nil when err is nil.
func DecodeFile(data []byte) (*Message, *Draft, error) {
	doc, errs := parseDocument(data)
	if errs != nil {
		return nil, nil, errs
	}
	if doc.isMessage() {
		m, err := decodeMessage(doc)
		return m, nil, err
	}
	var d Draft
	errs = doc.decodeInto(&d)
	d.Body = doc.body
	if len(errs) > 0 {
		return nil, nil, dedupe(errs).sorted()
	}
	if err := d.Validate(&Source{lines: doc.lines}); err != nil {
		return nil, nil, err
	}
	return nil, &d, nil
}

func (d *document) isMessage() bool {
	for i := 0; i+1 < len(d.root.Content); i += 2 {
		if d.root.Content[i].Value == "direction" && d.root.Content[i+1].Value == string(Inbound) {
			return true
		}
	}
	return false
}

// Decode parses and validates an inbound message file. The error, if any,
// is Errors.
func Decode(data []byte) (*Message, error) {
	doc, errs := parseDocument(data)
	if errs != nil {
		return nil, errs
	}
	return decodeMessage(doc)
}

func decodeMessage(doc *document) (*Message, error) {
	var m Message
	errs := doc.decodeInto(&m)
	m.Body = doc.body
	errs = append(errs, m.validate(doc.lines)...)
	if len(errs) > 0 {
		return nil, dedupe(errs).sorted()
	}
	return &m, nil
}

// DecodeDraft parses and validates a draft file on its own terms (what the
// file alone can tell; `courier send` checks the rest once it has resolved
// the provider and recipients). The returned draft is non-nil whenever the
// file parsed, so that callers can report on it.
func DecodeDraft(data []byte) (*Draft, *Source, error) {
	d, src, err := ParseDraft(data)
	if err != nil {
		return d, src, err
	}
	if err := d.Validate(src); err != nil {
		return d, src, err
	}
	return d, src, nil
}

// ParseDraft parses a draft file without validating its values: syntax,
// types and unknown fields only. Callers that merge more into the draft
// (command line flags) validate once they have.
func ParseDraft(data []byte) (*Draft, *Source, error) {
	doc, errs := parseDocument(data)
	if errs != nil {
		return nil, nil, errs
	}
	var d Draft
	errs = doc.decodeInto(&d)
	d.Body = doc.body
	src := &Source{lines: doc.lines}
	if len(errs) > 0 {
		return &d, src, dedupe(errs).sorted()
	}
	return &d, src, nil
}

// Source remembers where the fields of a decoded file were, so that errors
// found later name the line.
type Source struct{ lines *lineMap }

// Line returns the line of the field at path, or of its nearest ancestor; 0
// when unknown.
func (s *Source) Line(path string) int {
	if s == nil {
		return 0
	}
	return s.lines.line(path)
}

// Errorf returns an Errors holding one FieldError at path.
func (s *Source) Errorf(path, format string, args ...any) Errors {
	return Errors{{Line: s.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)}}
}

// Encode writes m as a front matter file. It does not validate: call
// Validate first when m comes from outside.
func Encode(m *Message) ([]byte, error) { return encodeMessage(m) }

// EncodeDraft writes d as a front matter file.
func EncodeDraft(d *Draft) ([]byte, error) { return encodeDocument(d, d.Body) }

// dedupe drops errors reported twice for the same place (a type error and
// a validation error on one value).
func dedupe(es Errors) Errors {
	seen := map[string]bool{}
	out := es[:0]
	for _, e := range es {
		k := fmt.Sprint(e.Line, "\x00", e.Path)
		if seen[k] && e.Path != "" {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	return out
}

// InboundJSONSchema is the protocol's JSON Schema of an inbound message
// (seed 004 §7.2), verbatim.
//
//go:embed inbound-v1.json
var InboundJSONSchema []byte

// DecodeYAML decodes a YAML document (a config file, say) into v strictly:
// keys that name no field of v are errors, and every error names its line
// and field path. The error is Errors.
func DecodeYAML(data []byte, v any) error {
	root, err := YAMLNode(data)
	if err != nil {
		return err
	}
	return DecodeNode(root, v)
}

// YAMLNode parses data and returns its root node, for callers that rewrite
// values (environment expansion) before DecodeNode.
func YAMLNode(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		n, msg := syntaxError(data, err, 0)
		return nil, Errors{{Line: n, Msg: msg}}
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.MappingNode}, nil
	}
	if doc.Content[0].Kind != yaml.MappingNode {
		return nil, Errors{{Line: doc.Content[0].Line, Msg: "want a mapping of keys"}}
	}
	return doc.Content[0], nil
}

// DecodeNode decodes a mapping node into v as DecodeYAML does.
func DecodeNode(root *yaml.Node, v any) error { return DecodeNodeAt(root, "", v) }

// DecodeNodeAt decodes n, the value at path in a larger document (a
// provider's section of a config file: "courier.adapters.email"), into v as
// DecodeYAML does; its errors name their fields by their whole path.
func DecodeNodeAt(n *yaml.Node, path string, v any) error {
	d := &document{root: n, path: path, lines: newLineMapAt(n, path)}
	if errs := d.decodeInto(v); len(errs) > 0 {
		return dedupe(errs).sorted()
	}
	return nil
}
