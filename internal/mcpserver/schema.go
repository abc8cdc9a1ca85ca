package mcpserver

import (
	"encoding/json"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaOf infers T's JSON Schema, the entries' schema for any
// []json.RawMessage being list's.
func schemaOf[T any]() *jsonschema.Schema {
	sc, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): entrySchema(),
	}})
	if err != nil {
		panic(err)
	}
	return sc
}

// The schemas of outputs the CLI prints, which Go types do not describe:
// the entry of list (mailbox.Entry marshals itself), read's document and
// send's summary. They name what agents rely on and allow the rest.

func object(desc string, required []string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Description: desc, Required: required, Properties: props}
}

func typed(t, desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: t, Description: desc}
}

func nullable(t, desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{t, "null"}, Description: desc}
}

func entrySchema() *jsonschema.Schema {
	return object("a message or draft as the index knows it", []string{"id", "provider", "direction", "path", "timestamp", "status"},
		map[string]*jsonschema.Schema{
			"id":             typed("string", "the message's id"),
			"provider":       typed("string", "email, lark, slack"),
			"direction":      typed("string", "inbound or outbound"),
			"path":           typed("string", "its file, relative to the workspace"),
			"timestamp":      typed("string", "the message's own time (RFC 3339)"),
			"status":         typed("string", "new, claimed, failed, done, dead; queued, sent (drafts)"),
			"preview":        typed("string", "the start of its text"),
			"correlation_id": typed("string", "the correlation id, or empty"),
			"reply_to":       typed("string", "the id of the message it answers, or empty"),
			"claimed_by":     typed("string", "the agent holding its claim"),
		})
}

func readSchema() *jsonschema.Schema {
	sc := entrySchema()
	sc.Description = "the entry, with the message (inbound) or the draft (outbound) as its file holds it"
	sc.Properties["message"] = typed("object", "the message: front matter fields and body")
	sc.Properties["draft"] = typed("object", "the draft: front matter fields, body and delivery")
	return sc
}

func sendSchema() *jsonschema.Schema {
	return object("what `courier send --format json` prints: the queued draft's summary, or for a dry run the draft", nil,
		map[string]*jsonschema.Schema{
			"success":        typed("boolean", "queued"),
			"id":             typed("string", "the draft's id (<provider>_out_<uuid>)"),
			"provider":       typed("string", "email, lark or slack"),
			"path":           typed("string", "the queued file, relative to the workspace"),
			"to":             {Types: []string{"array", "null"}, Items: typed("string", ""), Description: "the recipients"},
			"correlation_id": nullable("string", "the correlation id it carries"),
			"schedule_at":    nullable("string", "when it is to go, if held"),
			"dry_run":        typed("boolean", "nothing was queued"),
			"draft":          typed("object", "the draft as it would be queued (dry run)"),
		})
}
