package mailbox_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// A file written before max_text_bytes (content and body 18 MiB each, a
// 75 MB file) is still a message of the mailbox: reindex indexes it with
// its preview, Message decodes it with its long values cut and saying so,
// and OpenFile streams all of it, byte for byte.
func TestOldHugeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("a 75 MB file")
	}
	mb, root := newMailbox(t, nil)
	m := testutil.HugeMessage("huge", 18<<20)
	_, want := fileOld(t, mb, m)
	e, err := mb.Get(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Preview, "A paragraph of **Markdown**") {
		t.Errorf("preview %q", e.Preview)
	}

	got, _, err := mb.Message(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != m.ID || got.Participants.From.Email != "ann@example.com" {
		t.Errorf("decoded %s from %+v", got.ID, got.Participants.From)
	}
	total := len(got.Content.Text) + len(got.Content.HTML) + len(got.Content.Markdown)
	if total > schema.MaxReadText+4<<20 {
		t.Errorf("content decoded: %d bytes, over the bound", total)
	}
	for name, v := range map[string]string{"text": string(got.Content.Text), "html": string(got.Content.HTML), "markdown": string(got.Content.Markdown), "body": got.Body} {
		if !strings.Contains(v, "bytes more in the file, not read]") {
			t.Errorf("%s (%d bytes) does not say it was cut", name, len(v))
		}
	}
	if !strings.HasPrefix(got.Body, "A paragraph of **Markdown**") || len(got.Body) > schema.MaxReadText+100 {
		t.Errorf("body: %d bytes, %q…", len(got.Body), got.Body[:min(40, len(got.Body))])
	}

	f, _, err := mb.OpenFile(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	onDisk, err := io.ReadAll(f)
	if err != nil || string(onDisk) != string(want) {
		t.Fatalf("OpenFile streams %d bytes (err %v), the file has %d", len(onDisk), err, len(want))
	}
	if fi, err := os.Stat(filepath.Join(root, e.Path)); err != nil || fi.Size() <= mailbox.WholeFile {
		t.Fatalf("the file is not large: %v %v", fi, err)
	}
}

// A file written before the email adapter bounded the lists a sender
// writes (57,000 Cc participants, provider_raw.cc and
// external_participants alike: a 9.7 MB file, which read took 274 MB and
// reindex 400 MB to decode) is indexed, and Message decodes it with each
// list cut at schema.MaxReadItems; the file itself is left whole.
func TestOldFileOfManyAddresses(t *testing.T) {
	mb, _ := newMailbox(t, nil)
	m := testutil.HugeMessage("ccflood", 100)
	var rawCc []any
	for i := range 57000 {
		a := fmt.Sprintf("c%05d@cc.test", i)
		m.Participants.Cc = append(m.Participants.Cc, schema.Participant{ID: a, Name: a, Email: a, PlatformID: a})
		m.Metadata.Extra.ExternalParticipants = append(m.Metadata.Extra.ExternalParticipants, a)
		rawCc = append(rawCc, a)
	}
	m.Metadata.ProviderRaw = map[string]any{"cc": rawCc}
	name, want := fileOld(t, mb, m)
	got, _, err := mb.Message(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	gotCc, _ := got.Metadata.ProviderRaw["cc"].([]any)
	if len(got.Participants.Cc) != schema.MaxReadItems || len(got.Metadata.Extra.ExternalParticipants) != schema.MaxReadItems || len(gotCc) != schema.MaxReadItems {
		t.Errorf("decoded %d cc, %d external, %d provider_raw.cc: want each cut at %d", len(got.Participants.Cc), len(got.Metadata.Extra.ExternalParticipants), len(gotCc), schema.MaxReadItems)
	}
	if got.Participants.Cc[0].ID != "c00000@cc.test" || got.Body != m.Body {
		t.Errorf("decoded cc %+v, body %q", got.Participants.Cc[0], got.Body)
	}
	// courier read, as text and as JSON, shows what Message decodes.
	for _, form := range []mailview.Form{{}, {JSON: true}} {
		var out bytes.Buffer
		if err := mailview.Read(ctx, mb, &out, m.ID, form); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); len(s) > 1<<20 || !strings.Contains(s, "c01999@cc.test") || strings.Contains(s, "c02000@cc.test") {
			t.Errorf("read %+v: %d bytes, not the first %d Cc", form, len(s), schema.MaxReadItems)
		}
	}
	if onDisk, err := os.ReadFile(name); err != nil || string(onDisk) != string(want) {
		t.Fatalf("the file changed (%v)", err)
	}
}

// fileOld writes m to the inbox as an older Courier wrote it, not through
// today's writer, and reindexes: the mailbox must index it. It returns
// the file's path and bytes.
func fileOld(t *testing.T, mb *mailbox.Mailbox, m *schema.Message) (string, []byte) {
	t.Helper()
	data, err := schema.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(mb.Dir(mailbox.BoxInbound, schema.Email), mailbox.FileName(m.Timestamp.Time, m.ID))
	if err := os.WriteFile(name, data, 0o440); err != nil {
		t.Fatal(err)
	}
	if st, err := mb.Reindex(ctx); err != nil || st.Indexed != 1 || len(st.Invalid) != 0 {
		t.Fatalf("reindex: %+v %v", st, err)
	}
	return name, data
}
