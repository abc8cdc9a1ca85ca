package schema_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

var update = flag.Bool("update", false, "rewrite golden files")

func ts(s string) schema.Time {
	t, err := schema.ParseTime(s)
	if err != nil {
		panic(err)
	}
	return t
}

func intp(i int) *int    { return &i }
func boolp(b bool) *bool { return &b }

// samples are messages as Courier's adapters build them; each becomes a
// golden file.
func samples() map[string]*schema.Message {
	meta := schema.Metadata{SchemaVersion: schema.SchemaVersion, ProtocolVersion: schema.ProtocolVersion}
	larkMeta := meta
	larkMeta.ProviderRaw = map[string]any{"chat_type": "group", "msg_type": "text", "create_time": "1707249900000"}
	emailMeta := meta
	emailMeta.ProviderRaw = map[string]any{
		"message_id":  "<msg123@example.com>",
		"in_reply_to": "<msg456@monoco.dev>",
		"references":  []any{"<root@monoco.dev>", "<msg456@monoco.dev>"},
		"subject":     "Re: [Design Review] API Schema",
	}
	emailMeta.Extra = schema.Extra{
		Account:              "work",
		Folder:               "INBOX",
		UIDValidity:          1700000000,
		UID:                  42,
		ExternalParticipants: []string{"user@example.com", "manager@example.com"},
		PersonalEligible:     boolp(false),
		Raw:                  &schema.Artifact{ID: "sha256:" + strings.Repeat("ab", 32), Name: "message.eml", Type: schema.ArtifactDocument, MimeType: "message/rfc822", Size: 4242, Path: "sha256/ab/" + strings.Repeat("ab", 32)},
		Other:                map[string]any{"x_custom": "kept", "a_number": 3},
	}
	slackMeta := meta
	slackMeta.Extra = schema.Extra{MergedIDs: []string{"slack_C024BE91L_1355517523_000005", "slack_C024BE91L_1355517524_000100"}, EventID: "Ev123ABC"}
	return map[string]*schema.Message{
		"lark-group": {
			ID: "lark_om_abc123", Provider: schema.Lark, Direction: schema.Inbound,
			Session: schema.Session{ID: "oc_123456", Type: schema.Group, Name: "Monoco Dev Group"},
			Participants: schema.Participants{
				From:     schema.Participant{ID: "ou_user123", Name: "IndenScale", PlatformID: "ou_user123", Role: "owner"},
				Mentions: []schema.Mention{{Type: schema.MentionUser, Target: "ou_prime456", Name: "Prime", Offset: intp(0)}},
			},
			Timestamp: ts("2026-02-06T20:45:00Z"), ReceivedAt: ts("2026-02-06T20:45:02.125Z"),
			Type:     schema.TypeText,
			Content:  schema.Content{Text: "@Prime 帮我分析一下这个 Bug"},
			Metadata: larkMeta,
			Body:     "@Prime 帮我分析一下这个 Bug\n",
		},
		"email-reply-attachment": {
			ID: "email_3f2a9c0d1e2f3a4b5c6d", Provider: schema.Email, Direction: schema.Inbound,
			Session: schema.Session{ID: "email-thread:root@monoco.dev", Type: schema.Thread, Name: "Re: [Design Review] API Schema", ThreadKey: "email-thread:root@monoco.dev"},
			Participants: schema.Participants{
				From: schema.Participant{ID: "user@example.com", Name: "John Doe", Email: "user@example.com", PlatformID: "user@example.com"},
				To:   []schema.Participant{{ID: "team@monoco.dev", Name: "Monoco Team", Email: "team@monoco.dev"}},
				Cc:   []schema.Participant{{ID: "manager@example.com", Name: "manager@example.com", Email: "manager@example.com"}},
			},
			Timestamp: ts("2026-02-06T18:30:00Z"), ReceivedAt: ts("2026-02-06T18:31:15Z"),
			Type: schema.TypeMixed,
			Content: schema.Content{
				Text:     "请查看附件中的 API 设计文档，有问题请反馈。\n\n-- \nJohn\n",
				HTML:     "<p>请查看附件中的 API 设计文档，有问题请反馈。</p>\n<p>-- <br>John</p>",
				Markdown: "请查看附件中的 API 设计文档，有问题请反馈。\n\n\\-- \nJohn",
			},
			Artifacts: []schema.Artifact{{
				ID: "sha256:" + strings.Repeat("0f", 32), Name: "api-design-v2.pdf", Type: schema.ArtifactDocument,
				MimeType: "application/pdf", Size: 2048576, Path: "sha256/0f/" + strings.Repeat("0f", 32),
			}},
			CorrelationID: "epic_api_design",
			ReplyTo:       "email_9a8b7c6d5e4f3a2b1c0d",
			ThreadRoot:    "email_0123456789abcdef0123",
			Metadata:      emailMeta,
			Body:          "请查看附件中的 API 设计文档，有问题请反馈。\n\n\\-- \nJohn\n",
		},
		"slack-merged-done": {
			ID: "slack_C024BE91L_1355517523_000005", Provider: schema.Slack, Direction: schema.Inbound,
			Session: schema.Session{ID: "C024BE91L", Type: schema.Group, ThreadKey: "1355517500.000001"},
			Participants: schema.Participants{
				From: schema.Participant{ID: "U2147483697", Name: "Spengler", Avatar: "https://avatars.example.com/u.png"},
			},
			Timestamp: ts("2012-12-14T20:38:43.000005Z"), ReceivedAt: ts("2012-12-14T20:38:50Z"),
			ProcessedAt: schema.TimePtr(time.Date(2012, 12, 14, 21, 0, 0, 0, time.UTC)),
			Type:        schema.TypeText,
			Content:     schema.Content{Text: "Live long and prospect.\nAnd: \"quotes\", 'ticks', #hash, key: value", Markdown: "Live long and prospect.\nAnd: \"quotes\", 'ticks', #hash, key: value"},
			ReplyTo:     "slack_C024BE91L_1355517500_000001",
			ThreadRoot:  "slack_C024BE91L_1355517500_000001",
			Metadata:    slackMeta,
			Body:        "Live long and prospect.\nAnd: \"quotes\", 'ticks', #hash, key: value\n",
		},
	}
}

func TestGolden(t *testing.T) {
	for name, m := range samples() {
		t.Run(name, func(t *testing.T) {
			if err := m.Validate(); err != nil {
				t.Fatalf("sample does not validate: %v", err)
			}
			got, err := schema.Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", name+".golden.md")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encoding differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
			// Decoding the golden file gives the message back, and encoding
			// that gives the same bytes.
			back, err := schema.Decode(want)
			if err != nil {
				t.Fatalf("decode golden: %v", err)
			}
			if diff := cmp.Diff(normalize(m), normalize(back), cmpopts.EquateEmpty(), cmp.AllowUnexported(schema.Time{})); diff != "" {
				t.Errorf("decode(encode(m)) != m (-want +got):\n%s", diff)
			}
			again, err := schema.Encode(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, want) {
				t.Errorf("re-encoding is not stable:\n%s", again)
			}
		})
	}
}

// normalize makes values that encode identically compare equal (YAML
// decodes ints as int whatever they were built as).
func normalize(m *schema.Message) *schema.Message {
	c := *m
	if c.Metadata.Extra.Other != nil {
		o := map[string]any{}
		for k, v := range c.Metadata.Extra.Other {
			o[k] = v
		}
		c.Metadata.Extra.Other = o
	}
	return &c
}

// TestGoldenJSONSchema runs an independent JSON Schema validator over every
// golden file in the repository: every file Courier writes must validate
// against the protocol (§7.2).
func TestGoldenJSONSchema(t *testing.T) {
	var files []string
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".golden.md") && strings.Contains(filepath.ToSlash(path), "/testdata/") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < len(samples()) {
		t.Fatalf("found %d golden files, want at least %d", len(files), len(samples()))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if schema.DetectKind(data) != schema.KindMessage {
			continue // outbound drafts have no JSON Schema in the protocol
		}
		testutil.ValidateInbound(t, f, data)
		if _, err := schema.Decode(data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	t.Logf("validated %d golden files", len(files))
}

// TestJSONSchemaCatchesBadFiles makes sure the validator used above is
// really checking (a test that cannot fail proves nothing).
func TestJSONSchemaCatchesBadFiles(t *testing.T) {
	sch, err := testutil.InboundSchema()
	if err != nil {
		t.Fatal(err)
	}
	good, err := schema.Encode(samples()["lark-group"])
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(string) string{
		"bad id": func(s string) string { return strings.Replace(s, "id: lark_om_abc123", "id: Lark om", 1) },
		"bad timestamp": func(s string) string {
			return strings.Replace(s, "timestamp: \"2026-02-06T20:45:00Z\"", "timestamp: yesterday", 1)
		},
		"bad type": func(s string) string { return strings.Replace(s, "type: text", "type: sticker", 1) },
	} {
		bad := mutate(string(good))
		if bad == string(good) {
			t.Fatalf("%s: mutation did not apply to:\n%s", name, good)
		}
		v, err := testutil.FrontMatterJSON([]byte(bad))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(v) == nil {
			t.Errorf("%s: validator accepted an invalid file", name)
		}
	}
}

func TestProtocolExamples(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "protocol", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Run("4.1 lark group", func(t *testing.T) {
		m, err := schema.Decode(read("4.1-lark-group.md"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Participants.Mentions[0].Target != "ou_prime456" || *m.Participants.Mentions[0].Offset != 12 {
			t.Errorf("mention = %+v", m.Participants.Mentions[0])
		}
		if m.Session.ThreadKey != "" || m.ProcessedAt != nil {
			t.Errorf("null fields decoded as %q %v", m.Session.ThreadKey, m.ProcessedAt)
		}
		if m.Metadata.ProviderRaw["create_time"] != "1707249900000" {
			t.Errorf("provider_raw.create_time = %#v", m.Metadata.ProviderRaw["create_time"])
		}
		if m.Body != "@Prime 帮我分析一下这个 Bug\n" {
			t.Errorf("body = %q", m.Body)
		}
	})
	t.Run("4.2 lark thread reply", func(t *testing.T) {
		m, err := schema.Decode(read("4.2-lark-thread-reply.md"))
		if err != nil {
			t.Fatal(err)
		}
		if m.ReplyTo != "lark_om_abc123" || m.ThreadRoot != "lark_om_abc123" || m.CorrelationID != "task_bug_789" || m.Session.ThreadKey != "om_abc123" {
			t.Errorf("threading fields: %+v %q %q %q", m.Session, m.ReplyTo, m.ThreadRoot, m.CorrelationID)
		}
	})
	t.Run("4.3 email with attachment", func(t *testing.T) {
		m, err := schema.Decode(read("4.3-email-attachment.md"))
		if err != nil {
			t.Fatal(err)
		}
		a := m.Artifacts[0]
		if a.Size != 2048576 || a.Type != schema.ArtifactDocument || a.Name != "api-design-v2.pdf" {
			t.Errorf("artifact = %+v", a)
		}
		if m.Participants.Cc[0].Email != "manager@example.com" || m.Content.HTML == "" {
			t.Errorf("cc/html: %+v %q", m.Participants.Cc, m.Content.HTML)
		}
		if refs, _ := m.Metadata.ProviderRaw["references"].([]any); len(refs) != 2 {
			t.Errorf("references = %#v", m.Metadata.ProviderRaw["references"])
		}
	})
	t.Run("4.4 email new topic", func(t *testing.T) {
		m, err := schema.Decode(read("4.4-email-new-topic.md"))
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != "email_new_xyz789" || m.ReplyTo != "" || m.Type != schema.TypeText {
			t.Errorf("got %q %q %q", m.ID, m.ReplyTo, m.Type)
		}
	})
	t.Run("5.2 lark card draft", func(t *testing.T) {
		d, _, err := schema.DecodeDraft(read("5.2-draft-lark-card.md"))
		if err != nil {
			t.Fatal(err)
		}
		if d.EffectiveType() != schema.DraftCard || d.Content.Card["header"] == nil || d.To[0] != "oc_123456" {
			t.Errorf("draft = %+v", d)
		}
	})
	t.Run("5.3 email reply draft names a placeholder artifact", func(t *testing.T) {
		// The example's artifact id "sha256:def789..." is a placeholder, not
		// a dropzone id: the draft must be refused on that line.
		_, _, err := schema.DecodeDraft(read("5.3-draft-email-reply.md"))
		var errs schema.Errors
		if err == nil || !asErrors(err, &errs) {
			t.Fatalf("err = %v, want schema.Errors", err)
		}
		if len(errs) != 1 || errs[0].Path != "artifacts[0].id" || errs[0].Line != 17 {
			t.Errorf("errors = %v", err)
		}
	})
	// The examples are also valid JSON Schema instances.
	for _, n := range []string{"4.1-lark-group.md", "4.2-lark-thread-reply.md", "4.3-email-attachment.md", "4.4-email-new-topic.md"} {
		testutil.ValidateInbound(t, n, read(n))
	}
}

func asErrors(err error, out *schema.Errors) bool {
	e, ok := err.(schema.Errors)
	if ok {
		*out = e
	}
	return ok
}

const goodMessage = `---
id: lark_om_1
provider: lark
direction: inbound
session:
  id: oc_1
  type: group
  thread_key: null
participants:
  from:
    id: ou_1
    name: Ann
timestamp: "2026-02-06T20:45:00Z"
received_at: "2026-02-06T20:45:01Z"
type: text
content:
  text: hi
artifacts: []
metadata:
  schema_version: 1.0.0
---
hi
`

func TestDecodeErrors(t *testing.T) {
	if _, err := schema.Decode([]byte(goodMessage)); err != nil {
		t.Fatalf("base message must decode: %v", err)
	}
	rep := func(old, new string) string {
		if !strings.Contains(goodMessage, old) {
			t.Fatalf("%q not in base message", old)
		}
		return strings.Replace(goodMessage, old, new, 1)
	}
	tests := []struct {
		name, input string
		line        int
		path, msg   string
	}{
		{"no front matter", "hello\n", 1, "", "front matter missing"},
		{"empty file", "", 1, "", "front matter missing"},
		{"unclosed front matter", strings.TrimSuffix(goodMessage, "---\nhi\n"), 1, "", "not closed"},
		{"yaml syntax error", rep("type: group\n", "type: [group\n"), 7, "", "YAML syntax error"},
		{"tab indentation", rep("  type: group\n", "\ttype: group\n"), 7, "", "YAML syntax error"},
		{"unknown provider", rep("provider: lark", "provider: telegram"), 3, "provider", `unknown provider "telegram"`},
		{"missing required field", rep("    name: Ann\n", ""), 10, "participants.from.name", "required"},
		{"missing session id", rep("  id: oc_1\n", ""), 5, "session.id", "required"},
		{"NUL byte", rep("content:\n  text: hi", "content:\n  text: h\x00i"), 17, "", "NUL byte"},
		{"invalid UTF-8", rep("text: hi", "text: h\xffi"), 17, "", "not valid UTF-8"},
		{"malformed timestamp", rep(`timestamp: "2026-02-06T20:45:00Z"`, `timestamp: "06/02/2026 20:45"`), 13, "timestamp", "not a time"},
		{"timestamp without zone", rep(`timestamp: "2026-02-06T20:45:00Z"`, `timestamp: "2026-02-06T20:45:00"`), 13, "timestamp", "not a time"},
		{"bad enum", rep("type: text", "type: sticker"), 15, "type", `"sticker" is not one of`},
		{"unknown field", rep("artifacts: []", "artifacts: []\nattachments: []"), 19, "attachments", `did you mean "artifacts"`},
		{"wrong kind", rep("content:\n  text: hi", "content:\n  text: [hi]"), 17, "content.text", "want a string"},
		{"bad id", rep("id: lark_om_1", "id: lark om 1"), 2, "id", "does not match"},
		{"id of other provider", rep("id: lark_om_1", "id: slack_om_1"), 2, "id", `does not start with the provider "lark_"`},
		{"bad email", rep("    name: Ann\n", "    name: Ann\n    email: not-an-address\n"), 13, "participants.from.email", "not an email address"},
		{"artifact name with ..", rep("artifacts: []", "artifacts:\n  - {id: x1, name: ../../etc/passwd, type: document, size: 1}"), 19, "artifacts[0].name", "path separator"},
		{"artifact name with dotdot only", rep("artifacts: []", "artifacts:\n  - {id: x1, name: a..b, type: document, size: 1}"), 19, "artifacts[0].name", `".."`},
		{"artifact path escapes", rep("artifacts: []", "artifacts:\n  - {id: x1, name: a, type: document, size: 1, path: ../x}"), 19, "artifacts[0].path", "inside the dropzone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schema.Decode([]byte(tc.input))
			var errs schema.Errors
			if !asErrors(err, &errs) {
				t.Fatalf("err = %v (%T), want schema.Errors", err, err)
			}
			for _, e := range errs {
				if e.Line == tc.line && e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want line %d path %q msg ~%q; got:\n%v", tc.line, tc.path, tc.msg, err)
		})
	}
}

func TestDraftErrors(t *testing.T) {
	const base = `---
provider: email
to: ann@example.com
subject: Hello
options:
  urgent: true
---
Hi Ann.
`
	if _, _, err := schema.DecodeDraft([]byte(base)); err != nil {
		t.Fatalf("base draft must decode: %v", err)
	}
	rep := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("%q not in base draft", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	tests := []struct {
		name, input string
		line        int
		path, msg   string
	}{
		{"no recipient", rep("to: ann@example.com\n", ""), 1, "to", "no recipient"},
		{"unknown provider", rep("provider: email", "provider: pigeon"), 2, "provider", `unknown provider "pigeon"`},
		{"schedule_at not a time", rep("urgent: true", "schedule_at: tomorrow"), 6, "options.schedule_at", "not a time"},
		{"bad address", rep("to: ann@example.com", "to: [ann@example.com, not an address]"), 3, "to[1]", "not an email address"},
		{"header injection in subject", rep("subject: Hello", "subject: \"Hello\\r\\nBcc: evil@example.com\""), 4, "subject", "line break"},
		{"cc on slack", rep("provider: email\nto: ann@example.com", "provider: slack\nto: C123\ncc: C456"), 4, "cc", "email only"},
		{"card on email", rep("subject: Hello", "subject: Hello\ncontent:\n  card: {header: {title: x}}"), 6, "content.card", "not email"},
		{"no content", strings.Replace(base, "Hi Ann.\n", "\n", 1), 1, "content", "no content"},
		{"typo near a field", rep("subject: Hello", "subjects: Hello"), 4, "subjects", `did you mean "subject"`},
		{"artifact with path trick", rep("subject: Hello", "subject: Hello\nartifacts:\n  - {path: ./a.pdf, name: ../a.pdf}"), 6, "artifacts[0].name", "path separator"},
		{"artifact with both", rep("subject: Hello", "subject: Hello\nartifacts:\n  - {path: ./a.pdf, id: \"sha256:"+strings.Repeat("a", 64)+"\"}"), 6, "artifacts[0]", "both"},
		{"artifact with neither", rep("subject: Hello", "subject: Hello\nartifacts:\n  - {name: a.pdf}"), 6, "artifacts[0]", "needs an id"},
		{"typo in field", rep("subject: Hello", "subjet: Hello"), 4, "subjet", `did you mean "subject"`},
		{"bad type", rep("subject: Hello", "subject: Hello\ntype: pdf"), 5, "type", "not one of"},
		{"reply_to not an id", rep("subject: Hello", "subject: Hello\nreply_to: <abc@example.com>"), 5, "reply_to", "not a message id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := schema.DecodeDraft([]byte(tc.input))
			var errs schema.Errors
			if !asErrors(err, &errs) {
				t.Fatalf("err = %v (%T), want schema.Errors", err, err)
			}
			for _, e := range errs {
				if e.Line == tc.line && e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want line %d path %q msg ~%q; got:\n%v", tc.line, tc.path, tc.msg, err)
		})
	}
}

func TestDraftRoundTrip(t *testing.T) {
	d := &schema.Draft{
		ID: "email_out_0f3c9a8b7c6d5e4f3a2b1c0d9e8f7a6b", Provider: schema.Email,
		To: schema.Recipients{"ann@example.com"}, Cc: schema.Recipients{"bob@example.com", "cy@example.com"},
		Subject: "Re: Plans", ReplyTo: "email_0123456789abcdef0123", CorrelationID: "task_1",
		Type:      schema.DraftMarkdown,
		Artifacts: []schema.DraftArtifact{{ID: "sha256:" + strings.Repeat("c", 64), Name: "r.pdf", MimeType: "application/pdf", Size: 10, Type: schema.ArtifactDocument}},
		Options:   schema.Options{Urgent: true, ScheduleAt: schema.TimePtr(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))},
		CreatedAt: schema.TimePtr(time.Date(2026, 2, 28, 9, 0, 0, 0, time.UTC)), Agent: "agent-1",
		IdempotencyKey: "<0f3c9a8b@courier.example.com>",
		Email:          &schema.EmailHeaders{InReplyTo: "<p@x>", References: []string{"<r@x>", "<p@x>"}},
		Delivery:       &schema.Delivery{Status: schema.DeliverySent, Attempts: 2, SentAt: schema.TimePtr(time.Date(2026, 3, 1, 9, 0, 1, 0, time.UTC)), ProviderMessageID: "<0f3c9a8b@courier.example.com>"},
		Body:           "## Plans\n\n- one\n- two\n",
	}
	b, err := schema.EncodeDraft(d)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := schema.DecodeDraft(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip differs:\n got %#v\nwant %#v", back, d)
	}
	again, _ := schema.EncodeDraft(back)
	if !bytes.Equal(again, b) {
		t.Errorf("not stable:\n%s\n%s", b, again)
	}
	if schema.DetectKind(b) != schema.KindDraft {
		t.Error("draft detected as message")
	}
}

func TestArtifactTypeOf(t *testing.T) {
	for _, tc := range []struct {
		mime, name string
		want       schema.ArtifactType
	}{
		{"image/png", "", schema.ArtifactImage},
		{"IMAGE/JPEG; name=x.jpg", "", schema.ArtifactImage},
		{"application/pdf", "a.pdf", schema.ArtifactDocument},
		{"application/zip", "", schema.ArtifactArchive},
		{"application/octet-stream", "backup.tar.gz", schema.ArtifactArchive},
		{"application/octet-stream", "voice.amr", schema.ArtifactAudio},
		{"", "clip.MP4", schema.ArtifactVideo},
		{"", "noext", schema.ArtifactDocument},
	} {
		if got := schema.ArtifactTypeOf(tc.mime, tc.name); got != tc.want {
			t.Errorf("ArtifactTypeOf(%q, %q) = %q, want %q", tc.mime, tc.name, got, tc.want)
		}
	}
}

func TestValidEmail(t *testing.T) {
	for s, want := range map[string]bool{
		"a@b.co": true, "first.last+tag@example.com": true, "a@localhost": true,
		"": false, "a": false, "@b.c": false, "a@": false, "a b@c.d": false, "<a@b.c>": false,
		"a..b@c.d": false, ".a@c.d": false, "a@-c.d": false, "a@c_d.e": false, "名@例え.jp": false,
		"Ann <a@b.c>": false,
	} {
		if got := schema.ValidEmail(s); got != want {
			t.Errorf("ValidEmail(%q) = %v, want %v", s, got, want)
		}
	}
}

// BenchmarkEncode writes a typical email message (text, HTML and Markdown,
// an attachment, provider_raw and extra).
func BenchmarkEncode(b *testing.B) {
	m := samples()["email-reply-attachment"]
	for i := 0; i < b.N; i++ {
		if _, err := schema.Encode(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeYAMLv3 is the same message through yaml.v3's emitter,
// which Encode used before: the baseline.
func BenchmarkEncodeYAMLv3(b *testing.B) {
	m := samples()["email-reply-attachment"]
	for i := 0; i < b.N; i++ {
		if _, err := yaml.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

// The event key is one format for every provider and the index: the
// mailbox's rebuild from files and a provider's Event.Keys must agree to
// the byte, or a redelivery is written twice.
func TestEventKey(t *testing.T) {
	for _, c := range []struct {
		p    schema.Provider
		id   string
		want string
	}{
		{schema.Slack, "Ev0123ABC", "event:slack:Ev0123ABC"},
		{schema.Lark, "5e3702a84e847582be8db7fb73283c02", "event:lark:5e3702a84e847582be8db7fb73283c02"},
	} {
		if got := schema.EventKey(c.p, c.id); got != c.want {
			t.Errorf("EventKey(%s, %s) = %q, want %q", c.p, c.id, got, c.want)
		}
	}
}
