package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// courierBin is the binary built once for tests that need real processes.
var courierBin string

func TestMain(m *testing.M) {
	if spec := os.Getenv(attackEnv); spec != "" {
		os.Exit(attackMain(spec)) // TestTwoUsers runs this binary as an agent (agents_test.go)
	}
	dir, err := os.MkdirTemp("", "courier-test-bin")
	if err != nil {
		panic(err)
	}
	courierBin = filepath.Join(dir, "courier")
	out, err := exec.Command("go", "build", "-o", courierBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs the command line in-process in workspace ws.
func cli(t *testing.T, ws string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if viaService {
		serveAgents(t, ws) // agents_test.go
	}
	var o, e bytes.Buffer
	full := append([]string{"courier", "--root", ws}, args...)
	code = run(full, strings.NewReader(stdin), &o, &e)
	return o.String(), e.String(), code
}

func newWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if _, e, code := cli(t, ws, "", "init"); code != 0 {
		t.Fatalf("init: %d %s", code, e)
	}
	return ws
}

func seed(t *testing.T, ws string, msgs ...*schema.Message) {
	t.Helper()
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	in := make([]mailbox.Inbound, len(msgs))
	for i, m := range msgs {
		in[i] = mailbox.Inbound{Message: m}
	}
	if _, err := mb.WriteInbound(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
}

// dirState hashes every file under dir, so a test can tell nothing changed.
// The database's -shm file is left out: it is SQLite's shared memory,
// which every reader updates, and writers keep it (mailbox.persistWAL); so
// is the service's socket, which is not content.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasSuffix(p, ".db-shm") {
			return nil
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %x", rel, sha256.Sum256(b)))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestInit(t *testing.T) {
	ws := t.TempDir()
	out, _, code := cli(t, ws, "", "init")
	if code != 0 || !strings.Contains(out, "mailbox ready") {
		t.Fatalf("init: %d %q", code, out)
	}
	for _, p := range []string{".monoco/mailbox/inbound/email", ".monoco/mailbox/.deadletter/slack", ".monoco/mailbox/.state/courier.db", ".monoco/dropzone", ".monoco/config/courier.yaml"} {
		if _, err := os.Stat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// The example config it writes is itself a valid config.
	_, e, code := cli(t, ws, "", "list")
	if code != 0 {
		t.Errorf("list after init: %d %s", code, e)
	}
	// A command in a folder with no mailbox says so.
	_, e, code = cli(t, t.TempDir(), "", "list")
	if code != exitNoInput || !strings.Contains(e, "courier init") {
		t.Errorf("list without a mailbox: %d %q", code, e)
	}
}

func TestValidate(t *testing.T) {
	ws := newWorkspace(t)
	dir := t.TempDir()
	good := testutil.Message(schema.Lark, "om_good", testutil.Time("2026-01-01T00:00:00Z"), "hi")
	goodBytes, _ := schema.Encode(good)
	msg := string(goodBytes)
	files := map[string]string{
		"good.md":         msg,
		"nofm.md":         "just text\n",
		"unclosed.md":     strings.TrimSuffix(msg, "---\nhi\n"),
		"syntax.md":       strings.Replace(msg, "type: group", "type: [group", 1),
		"provider.md":     strings.Replace(msg, "provider: lark", "provider: myspace", 1),
		"missing.md":      strings.Replace(msg, "    name: Ann\n", "", 1),
		"nul.md":          strings.Replace(msg, "text: hi", "text: h\x00i", 1),
		"time.md":         strings.Replace(msg, `timestamp: "2026-01-01T00:00:00Z"`, `timestamp: "next tuesday"`, 1),
		"artifact.md":     strings.Replace(msg, "artifacts: []", "artifacts:\n  - {id: x, name: ../../x.pdf, type: document, size: 1}", 1),
		"draft-ok.md":     "---\nprovider: email\nto: a@example.com\nsubject: Hi\n---\nHello\n",
		"draft-norcpt.md": "---\nprovider: email\nsubject: Hi\n---\nHello\n",
		"draft-sched.md":  "---\nprovider: slack\nto: C0123456\noptions:\n  schedule_at: \"after lunch\"\n---\nHello\n",
		"courier.yaml":    "# the config\ncourier:\n  adapters:\n    email: {enabled: true}\n",
	}
	for n, c := range files {
		os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644)
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	tests := []struct {
		file string
		code int
		want string
	}{
		{"good.md", 0, "ok (message)"},
		{"draft-ok.md", 0, "ok (draft)"},
		{"nofm.md", exitDataErr, p("nofm.md") + ":1: front matter missing"},
		{"unclosed.md", exitDataErr, p("unclosed.md") + ":1: front matter not closed"},
		{"syntax.md", exitDataErr, p("syntax.md") + ":7: YAML syntax error"},
		{"provider.md", exitDataErr, p("provider.md") + `:3: provider: unknown provider "myspace"`},
		{"missing.md", exitDataErr, p("missing.md") + ":11: participants.from.name: required field is missing"},
		{"nul.md", exitDataErr, "NUL byte"},
		{"time.md", exitDataErr, p("time.md") + `:18: timestamp: not a time: "next tuesday"`},
		{"artifact.md", exitDataErr, `artifacts[0].name: name "../../x.pdf" contains a path separator`},
		{"draft-norcpt.md", exitDataErr, p("draft-norcpt.md") + ":1: to: draft has no recipient"},
		{"draft-sched.md", exitDataErr, p("draft-sched.md") + `:5: options.schedule_at: not a time: "after lunch"`},
		{"absent.md", exitNoInput, "no such file"},
		// The config is no message: validate says what it looks like and
		// what checks it, where it said "front matter missing".
		{"courier.yaml", exitDataErr, p("courier.yaml") + ":1: this looks like a Courier config (a courier: key, no front matter), not a message or a draft: check a config with `courier doctor --config " + p("courier.yaml") + "`"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			out, e, code := cli(t, ws, "", "validate", p(tc.file))
			if code != tc.code || !strings.Contains(out+e, tc.want) {
				t.Errorf("exit %d (want %d)\nstdout %s\nstderr %s\nwant %q", code, tc.code, out, e, tc.want)
			}
		})
	}
	// Several files: the worst exit code wins, every error is reported.
	_, e, code := cli(t, ws, "", "validate", p("good.md"), p("nofm.md"), p("absent.md"))
	if code != exitNoInput || !strings.Contains(e, "front matter missing") {
		t.Errorf("several files: %d %s", code, e)
	}
}

// emailThread seeds an email thread: a question from Ann (with a Reply-To)
// carrying a correlation id.
func emailThread(t *testing.T, ws string) *schema.Message {
	m := testutil.Message(schema.Email, "0123456789abcdef0123", testutil.Time("2026-02-06T10:00:00Z"), "Can you look at the logs?")
	m.Session = schema.Session{ID: "email-thread:root@example.com", Type: schema.Thread, Name: "Re: Logs", ThreadKey: "email-thread:root@example.com"}
	m.CorrelationID = "incident_7"
	m.ThreadRoot = "email_aaaaaaaaaaaaaaaaaaaa"
	m.Metadata.Extra.Account = "work"
	m.Metadata.ProviderRaw = map[string]any{
		"message_id":  "<Q1@Example.com>",
		"in_reply_to": "<root@example.com>",
		"references":  []any{"<root@example.com>"},
		"subject":     "Re: Logs",
		"reply_to":    []any{"Ann Lists <ann-list@example.com>"},
	}
	seed(t, ws, m)
	return m
}

const workConfig = `courier:
  adapters:
    email:
      enabled: true
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: smtp.corp.example, port: 587}
`

func TestSendEmailReply(t *testing.T) {
	ws := newWorkspace(t)
	os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(workConfig), 0o644)
	parent := emailThread(t, ws)
	draft := filepath.Join(t.TempDir(), "reply.md")
	os.WriteFile(draft, []byte("---\nreply_to: "+parent.ID+"\n---\nOn it.\n"), 0o644)
	before, _ := os.ReadFile(draft)
	out, e, code := cli(t, ws, "", "send", draft, "--format", "json")
	if code != 0 {
		t.Fatalf("send: %d %s", code, e)
	}
	var res struct {
		ID, Path string
	}
	json.Unmarshal([]byte(out), &res)
	after, _ := os.ReadFile(draft)
	if !bytes.Equal(before, after) {
		t.Error("send changed the original draft")
	}
	data, err := os.ReadFile(filepath.Join(ws, res.Path))
	if err != nil {
		t.Fatalf("queued file: %v (%s)", err, out)
	}
	d, _, err := schema.DecodeDraft(data)
	if err != nil {
		t.Fatal(err)
	}
	if d.Provider != schema.Email || strings.Join(d.To, ",") != "ann-list@example.com" {
		t.Errorf("provider %s to %v: want email to the Reply-To address", d.Provider, d.To)
	}
	if d.Subject != "Re: Logs" {
		t.Errorf("subject %q, want the parent's without a second Re:", d.Subject)
	}
	if d.CorrelationID != "incident_7" || d.ThreadKey != "email-thread:root@example.com" {
		t.Errorf("correlation %q thread %q", d.CorrelationID, d.ThreadKey)
	}
	if d.Email == nil || d.Email.InReplyTo != "<Q1@Example.com>" || strings.Join(d.Email.References, " ") != "<root@example.com> <Q1@Example.com>" {
		t.Errorf("reply headers = %+v", d.Email)
	}
	if d.Email.From != "agent@corp.example" || !strings.HasSuffix(d.IdempotencyKey, "@corp.example>") {
		t.Errorf("from %q message-id %q", d.Email.From, d.IdempotencyKey)
	}
	if !strings.HasPrefix(d.ID, "email_out_") || !schema.ValidID(d.ID) {
		t.Errorf("id %q", d.ID)
	}
	// context shows the question and the reply, in time order.
	out, _, code = cli(t, ws, "", "context", "incident_7", "--format", "id")
	if code != 0 || out != parent.ID+"\n"+d.ID+"\n" {
		t.Errorf("context = %q", out)
	}
}

// An attachment of the message answered, sent back by id, keeps its name
// and type (the dropzone knows neither).
func TestSendAttachFromParent(t *testing.T) {
	ws := newWorkspace(t)
	os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(workConfig), 0o644)
	dz, err := dropzone.Open(filepath.Join(ws, ".monoco/dropzone"), nil)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := dz.Put(strings.NewReader("col1,col2\n"))
	dz.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := testutil.Message(schema.Email, "fedcba9876543210fedc", testutil.Time("2026-02-06T10:00:00Z"), "Numbers attached.")
	m.Artifacts = []schema.Artifact{{ID: obj.ID, Name: "numbers.csv", Type: schema.ArtifactDocument, MimeType: "text/csv", Size: obj.Size, Path: obj.Path}}
	seed(t, ws, m)
	out, e, code := cli(t, ws, "", "send", "--reply-to", m.ID, "--text", "Corrected.", "--attach", obj.ID, "--format", "json")
	if code != 0 {
		t.Fatalf("send: %d %s", code, e)
	}
	var res struct{ Path string }
	json.Unmarshal([]byte(out), &res)
	data, _ := os.ReadFile(filepath.Join(ws, res.Path))
	d, _, err := schema.DecodeDraft(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Artifacts) != 1 || d.Artifacts[0].Name != "numbers.csv" || d.Artifacts[0].MimeType != "text/csv" || d.Artifacts[0].Size != obj.Size {
		t.Errorf("artifacts %+v, want the parent's numbers.csv", d.Artifacts)
	}
}

func TestSendRefusals(t *testing.T) {
	ws := newWorkspace(t)
	os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte("courier:\n  limits: {max_draft_bytes: 2000}\n"), 0o644)
	outbound := filepath.Join(ws, ".monoco/mailbox/outbound")
	tmp := filepath.Join(ws, ".monoco/mailbox/.tmp")
	// Drafts in the workspace, so that their artifact paths may be read
	// (the attach policy's own refusals are TestAttachAttacks').
	dir := filepath.Join(ws, "drafts")
	os.Mkdir(dir, 0o755)
	tests := []struct {
		name, draft string
		args        []string
		want        string
	}{
		{"no recipient", "---\nprovider: lark\n---\nhi\n", nil, ":1: to: draft has no recipient"},
		{"unknown provider", "---\nprovider: fax\nto: x\n---\nhi\n", nil, `:2: provider: unknown provider "fax"`},
		// Whether Courier has an adapter is the provider table's to say
		// (the draft format allows every provider of the protocol).
		{"provider without adapter", "---\nprovider: discord\nto: x\n---\nhi\n", nil, `:2: provider: provider "discord" has no adapter in Courier (implemented: email, lark, slack)`},
		{"cannot tell provider", "---\nto: someone\n---\nhi\n", nil, "cannot tell the provider"},
		{"new email without subject", "---\nto: a@example.com\n---\nhi\n", nil, ":1: subject: a new email needs a subject"},
		{"bad schedule", "---\nprovider: lark\nto: oc_1\noptions: {schedule_at: soon}\n---\nhi\n", nil, `:4: options.schedule_at: not a time: "soon"`},
		{"reply to unknown", "---\nreply_to: lark_om_nope\n---\nhi\n", nil, `:2: reply_to: message "lark_om_nope" is not in the mailbox`},
		{"artifact missing", "---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: ./absent.pdf\n---\nhi\n", nil, ":5: artifacts[0].path: cannot read ./absent.pdf"},
		{"artifact name trick", "---\nprovider: lark\nto: oc_1\nartifacts:\n  - {path: ./a.pdf, name: ../../etc/passwd}\n---\nhi\n", nil, "path separator"},
		{"too large", "---\nprovider: lark\nto: oc_1\n---\n" + strings.Repeat("x", 3000) + "\n", nil, "over the size limit of 2000 bytes"},
		{"header injection", "---\nprovider: email\nto: a@example.com\nsubject: \"a\\nBcc: x@evil.example\"\n---\nhi\n", nil, "subject: subject contains a line break"},
		{"empty", "---\nprovider: lark\nto: oc_1\n---\n\n", nil, "draft has no content"},
		{"yaml error", "---\nprovider: lark\nto: [oc_1\n---\nhi\n", nil, ":3: YAML syntax error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".md")
			os.WriteFile(f, []byte(tc.draft), 0o644)
			before := dirState(t, outbound) + dirState(t, tmp)
			_, e, code := cli(t, ws, "", append([]string{"send", f}, tc.args...)...)
			if code < 64 || !strings.Contains(e, tc.want) {
				t.Errorf("exit %d, stderr %q; want >= 64 and %q", code, e, tc.want)
			}
			if after := dirState(t, outbound) + dirState(t, tmp); after != before {
				t.Errorf("a refused draft changed outbound/ or .tmp/:\n%s", after)
			}
			if got, _ := os.ReadFile(f); string(got) != tc.draft {
				t.Error("the draft file was changed")
			}
		})
	}
}

func TestSendQuickAndArtifacts(t *testing.T) {
	ws := newWorkspace(t)
	dir := filepath.Join(ws, "work") // attachments come from the workspace
	os.Mkdir(dir, 0o755)
	pdf := filepath.Join(dir, "report.pdf")
	os.WriteFile(pdf, []byte("%PDF-1.4 pretend"), 0o644)
	// Quick mode, dry run first: nothing written anywhere.
	before := dirState(t, filepath.Join(ws, ".monoco"))
	out, e, code := cli(t, ws, "", "send", "--provider", "slack", "--to", "C0123456", "--text", "Deployed.", "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run") || !strings.Contains(out, "Deployed.") {
		t.Fatalf("dry run: %d %s %s", code, out, e)
	}
	if dirState(t, filepath.Join(ws, ".monoco")) != before {
		t.Error("--dry-run wrote something")
	}
	out, e, code = cli(t, ws, "", "send", "--to", "C0123456", "--text", "Deployed.")
	if code != 0 || !strings.Contains(out, "queued slack_out_") {
		t.Fatalf("quick send (provider guessed from the channel id): %d %s %s", code, out, e)
	}
	// A draft with a local attachment: copied into the dropzone, named by id.
	draft := filepath.Join(dir, "d.md")
	os.WriteFile(draft, []byte("---\nprovider: lark\nto: oc_9\nartifacts:\n  - path: report.pdf\n---\nSee attached.\n"), 0o644)
	out, e, code = cli(t, ws, "", "send", draft, "--format", "json")
	if code != 0 {
		t.Fatalf("send with artifact: %d %s", code, e)
	}
	var res struct{ Path string }
	json.Unmarshal([]byte(out), &res)
	data, _ := os.ReadFile(filepath.Join(ws, res.Path))
	d, _, err := schema.DecodeDraft(data)
	if err != nil {
		t.Fatal(err)
	}
	a := d.Artifacts[0]
	want := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("%PDF-1.4 pretend")))
	if a.ID != want || a.Name != "report.pdf" || a.Path != "" || a.MimeType != "application/pdf" || a.Type != schema.ArtifactDocument || a.Size != 16 {
		t.Errorf("artifact = %+v", a)
	}
	stored, err := os.ReadFile(filepath.Join(ws, ".monoco/dropzone/sha256", want[7:9], want[7:]))
	if err != nil || string(stored) != "%PDF-1.4 pretend" {
		t.Errorf("dropzone copy: %q %v", stored, err)
	}

	// Quick mode with --attach: a local file (relative to the current
	// folder) and a dropzone object by id; a missing file is refused
	// with nothing queued.
	csv := filepath.Join(dir, "data.csv")
	os.WriteFile(csv, []byte("a,b\n"), 0o644)
	before = dirState(t, filepath.Join(ws, ".monoco/mailbox/outbound"))
	_, e, code = cli(t, ws, "", "send", "--to", "oc_9", "--text", "x", "--attach", csv, "--attach", filepath.Join(dir, "missing.pdf"))
	if code != exitNoInput || !strings.Contains(e, "missing.pdf") {
		t.Errorf("--attach of a missing file: %d %s", code, e)
	}
	if dirState(t, filepath.Join(ws, ".monoco/mailbox/outbound")) != before {
		t.Error("a refused --attach queued something")
	}
	out, e, code = cli(t, ws, "", "send", "--to", "oc_9", "--text", "Both.", "--attach", csv, "--attach", want, "--format", "json")
	if code != 0 {
		t.Fatalf("send --attach: %d %s", code, e)
	}
	json.Unmarshal([]byte(out), &res)
	data, _ = os.ReadFile(filepath.Join(ws, res.Path))
	if d, _, err = schema.DecodeDraft(data); err != nil {
		t.Fatal(err)
	}
	csvID := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("a,b\n")))
	if len(d.Artifacts) != 2 || d.Artifacts[0].ID != csvID || d.Artifacts[0].Name != "data.csv" || d.Artifacts[1].ID != want || d.Artifacts[1].Size != 16 {
		t.Errorf("--attach artifacts = %+v", d.Artifacts)
	}
}

func TestListReadAndReindex(t *testing.T) {
	ws := newWorkspace(t)
	at := testutil.Time("2026-02-06T20:00:00Z")
	var msgs []*schema.Message
	for i := 0; i < 12; i++ {
		p := []schema.Provider{schema.Lark, schema.Slack, schema.Email}[i%3]
		m := testutil.Message(p, fmt.Sprintf("%sx%02d", map[schema.Provider]string{schema.Lark: "om_", schema.Slack: "C1_", schema.Email: "e"}[p], i), at.Add(time.Duration(i)*time.Hour), fmt.Sprintf("text %d", i))
		if i%5 == 0 {
			m.CorrelationID = "bug_1"
		}
		msgs = append(msgs, m)
	}
	seed(t, ws, msgs...)
	agent := []string{"--agent", "tester"}
	cli(t, ws, "", append([]string{"claim", msgs[0].ID, msgs[1].ID}, agent...)...)
	cli(t, ws, "", append([]string{"done", msgs[0].ID}, agent...)...)
	cli(t, ws, "", append([]string{"fail", msgs[1].ID, "--permanent", "--reason", "unreadable"}, agent...)...)

	out, _, _ := cli(t, ws, "", "list", "--format", "id")
	if n := strings.Count(out, "\n"); n != 10 {
		t.Errorf("list shows %d, want the 10 still in the inbox:\n%s", n, out)
	}
	out, _, _ = cli(t, ws, "", "list", "--provider", "lark", "--status", "done", "--format", "id")
	if out != msgs[0].ID+"\n" {
		t.Errorf("--provider lark --status done = %q", out)
	}
	out, _, _ = cli(t, ws, "", "list", "--all", "--since", "2026-02-07T03:00:00Z", "--format", "compact")
	if n := strings.Count(out, "\n"); n != 5 || !strings.HasPrefix(out, msgs[7].ID+" | Ann | text 7") {
		t.Errorf("--since: %q", out)
	}
	out, _, _ = cli(t, ws, "", "list", "--correlation", "bug_1", "--all", "--format", "id")
	if out != msgs[0].ID+"\n"+msgs[5].ID+"\n"+msgs[10].ID+"\n" {
		t.Errorf("--correlation = %q", out)
	}
	out, _, _ = cli(t, ws, "", "list", "--all", "--format", "table")
	if !strings.Contains(out, "STATUS") || !strings.Contains(out, "done") || !strings.Contains(out, "dead") {
		t.Errorf("table:\n%s", out)
	}
	if _, e, code := cli(t, ws, "", "list", "--format", "xml"); code != exitUsage {
		t.Errorf("--format xml: %d %s", code, e)
	}
	if _, e, code := cli(t, ws, "", "list", "--bogus"); code != exitUsage {
		t.Errorf("unknown flag: %d %s", code, e)
	}

	// read: raw, content, stdin, not found.
	out, _, code := cli(t, ws, "", "read", msgs[3].ID, "--content")
	if code != 0 || out != "text 3\n" {
		t.Errorf("--content = %q", out)
	}
	out, _, _ = cli(t, ws, "", "read", msgs[3].ID, "--raw")
	if !strings.HasPrefix(out, "---\nid: "+msgs[3].ID) {
		t.Errorf("--raw = %q", out)
	}
	out, _, code = cli(t, ws, msgs[2].ID+"\n"+msgs[4].ID+"\n", "read", "-", "--format", "json")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"body":"text 4\n"`) {
		t.Errorf("read - --format json: %d %s", code, out)
	}
	if _, e, code := cli(t, ws, "", "read", "lark_om_nothere"); code != exitNotFound || !strings.Contains(e, "not found") {
		t.Errorf("read missing: %d %s", code, e)
	}

	// Delete the database; reindex; the listing is the same.
	before, _, _ := cli(t, ws, "", "list", "--all", "--format", "json")
	for _, f := range []string{"courier.db", "courier.db-wal", "courier.db-shm"} {
		os.Remove(filepath.Join(ws, ".monoco/mailbox/.state", f))
	}
	if _, e, code := cli(t, ws, "", "reindex"); code != 0 {
		t.Fatalf("reindex: %s", e)
	}
	after, _, _ := cli(t, ws, "", "list", "--all", "--format", "json")
	if before != after {
		t.Errorf("list --all --format json differs after reindex:\n%s\n---\n%s", before, after)
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(after), &entries); err != nil || len(entries) != 12 {
		t.Errorf("list json does not parse as 12 entries: %v", err)
	}
}

func TestClaimDoneFailExitCodes(t *testing.T) {
	ws := newWorkspace(t)
	m := testutil.Message(schema.Lark, "om_x", testutil.Time("2026-01-01T00:00:00Z"), "x")
	seed(t, ws, m)
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"done", m.ID, "--agent", "a"}, exitConflict, "not claimed"},
		{[]string{"claim", m.ID, "--agent", "a"}, 0, "claimed lark_om_x as a"},
		{[]string{"claim", m.ID, "--agent", "b"}, exitConflict, "already claimed by a"},
		{[]string{"claim", "lark_om_nope", "--agent", "b"}, exitNotFound, "not found"},
		{[]string{"fail", m.ID, "--agent", "b", "--reason", "x"}, exitConflict, "claimed by a, not by b"},
		{[]string{"fail", m.ID, "--agent", "a", "--reason", "flaky"}, 0, "can be claimed again"},
		{[]string{"claim", m.ID, "--agent", "b", "--format", "json"}, exitConflict, `"error":"conflict"`},
	}
	for _, s := range steps {
		out, e, code := cli(t, ws, "", s.args...)
		if code != s.code || !strings.Contains(out+e, s.want) {
			t.Errorf("%v: exit %d (want %d), %q", s.args, code, s.code, out+e)
		}
	}
	// COURIER_AGENT names the agent when --agent is absent. Shown on a
	// message of its own: m is in its retry backoff now, whose end the
	// mailbox's tests pass on a fake clock.
	m2 := testutil.Message(schema.Lark, "om_y", testutil.Time("2026-01-01T00:01:00Z"), "y")
	seed(t, ws, m2)
	t.Setenv("COURIER_AGENT", "env-agent")
	out, e, code := cli(t, ws, "", "claim", m2.ID)
	if code != 0 || !strings.Contains(out, "as env-agent") {
		t.Errorf("claim as COURIER_AGENT: %d %s %s", code, out, e)
	}
}

// Eight processes claim one message at the same instant: one wins, seven
// exit with 2.
func TestClaimRaceProcesses(t *testing.T) {
	ws := newWorkspace(t)
	m := testutil.Message(schema.Lark, "om_race", testutil.Time("2026-01-01T00:00:00Z"), "race")
	seed(t, ws, m)
	if viaService {
		serveAgents(t, ws) // the processes claim through it (TestCLIViaService)
	}
	const n = 8
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		outs[i] = &bytes.Buffer{}
		cmds[i] = exec.Command(courierBin, "--root", ws, "claim", m.ID, "--agent", fmt.Sprintf("agent-%d", i))
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	codes := make([]int, n)
	for i, c := range cmds {
		wg.Add(1)
		go func(i int, c *exec.Cmd) {
			defer wg.Done()
			<-start
			c.Run()
			codes[i] = c.ProcessState.ExitCode()
		}(i, c)
	}
	runtime.Gosched()
	close(start)
	wg.Wait()
	wins, conflicts := 0, 0
	for i, c := range codes {
		switch c {
		case 0:
			wins++
		case exitConflict:
			conflicts++
		default:
			t.Errorf("process %d exited %d: %s", i, c, outs[i])
		}
	}
	if wins != 1 || conflicts != n-1 {
		t.Errorf("%d winners and %d conflicts, want 1 and %d", wins, conflicts, n-1)
	}
}

// Invoked as monoco, the binary answers `monoco mailbox ...` and `monoco
// courier ...`.
func TestMonocoName(t *testing.T) {
	ws := newWorkspace(t)
	seed(t, ws, testutil.Message(schema.Slack, "C1_1_000001", testutil.Time("2026-01-01T00:00:00Z"), "hello"))
	link := filepath.Join(t.TempDir(), "monoco")
	if err := os.Symlink(courierBin, link); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"mailbox", "courier"} {
		out, err := exec.Command(link, group, "list", "--root", ws, "--format", "id").CombinedOutput()
		if err != nil || string(out) != "slack_C1_1_000001\n" {
			t.Errorf("monoco %s list: %v %q", group, err, out)
		}
	}
	out, err := exec.Command(link, "list").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "monoco courier") {
		t.Errorf("monoco list (no group): %v %q", err, out)
	}
}
