package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// An inbound file as Courier wrote them before max_text_bytes (content and
// body 18 MiB each, 75 MB; the was 363 MB) is read, reindexed and
// listed: read streams its body whole in every form (text, --content,
// JSON) under its head's fields, --raw gives the file byte for byte, and
// the long values of its head are cut, saying so, not read into memory.
func TestReadOldHugeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("a 75 MB file")
	}
	ws := newWorkspace(t)
	m := testutil.HugeMessage("huge", 18<<20)
	m.Participants.From.Name = "Ann \x1b]0;pwned\x07Example" // an old file may hold controls
	data, err := schema.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := mailbox.Layout{Root: ws}.Dir(mailbox.BoxInbound, schema.Email)
	if err := os.WriteFile(filepath.Join(dir, mailbox.FileName(m.Timestamp.Time, m.ID)), data, 0o440); err != nil {
		t.Fatal(err)
	}
	if out, e, code := cli(t, ws, "", "reindex"); code != 0 {
		t.Fatalf("reindex: %d %s %s", code, out, e)
	}
	if out, e, code := cli(t, ws, "", "list", "--format", "compact"); code != 0 || !strings.Contains(out, m.ID+" | Ann ]0;pwnedExample | A paragraph of **Markdown**") {
		t.Fatalf("list: %d %q %s", code, out, e)
	}

	out, e, code := cli(t, ws, "", "read", m.ID)
	if code != 0 {
		t.Fatalf("read: %d %s", code, e)
	}
	head, body, ok := strings.Cut(out, mailview.Rule+"\n")
	if !ok || !strings.Contains(head, "From:         Ann ]0;pwnedExample <ann@example.com>") || !strings.Contains(head, "Subject:      Subject huge") {
		t.Errorf("read's header:\n%s", head)
	}
	if body != m.Body {
		t.Errorf("read's body: %d bytes, want the file's %d", len(body), len(m.Body))
	}

	if out, _, code = cli(t, ws, "", "read", "--content", m.ID); code != 0 || out != m.Body {
		t.Errorf("read --content: %d, %d bytes, want %d", code, len(out), len(m.Body))
	}
	if out, _, code = cli(t, ws, "", "read", "--raw", m.ID); code != 0 || out != string(data) {
		t.Errorf("read --raw: %d, %d bytes, want the file's %d", code, len(out), len(data))
	}

	out, e, code = cli(t, ws, "", "read", "--format", "json", m.ID)
	if code != 0 {
		t.Fatalf("read --format json: %d %s", code, e)
	}
	var got struct {
		ID      string          `json:"id"`
		Message *schema.Message `json:"message"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("read --format json is not JSON: %v", err)
	}
	if got.ID != m.ID || got.Message == nil || got.Message.Body != m.Body {
		t.Fatalf("JSON: id %q, body of %d bytes; want %d", got.ID, len(got.Message.Body), len(m.Body))
	}
	for name, v := range map[string]string{"text": string(got.Message.Content.Text), "html": string(got.Message.Content.HTML), "markdown": string(got.Message.Content.Markdown)} {
		if !strings.HasSuffix(strings.TrimRight(v, "\n"), "bytes more in the file, not read]") || len(v) > schema.MaxReadText+1<<20 {
			t.Errorf("JSON content.%s: %d bytes, not cut or not saying so", name, len(v))
		}
	}
}
