package email

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/schema"
)

// controlMail carries ESC sequences (a window title, a colour, a screen
// clear), BEL, CR, the C1 CSI and the right-to-left override, raw and in
// encoded-words, in the From name, the Subject, the text and the HTML.
const controlMail = "From: =?utf-8?q?=1B[8mAnn=07=E2=80=AE?= <ann@example.com>\n" +
	"To: agent@example.com\n" +
	"Subject: =?utf-8?q?Invoice_=E2=80=AEfdp.exe_=1B[2J?=\x07done\n" +
	"Date: Fri, 06 Feb 2026 18:31:15 +0100\n" +
	"Message-ID: <controls@example.com>\n" +
	"MIME-Version: 1.0\n" +
	"Content-Type: multipart/alternative; boundary=b\n" +
	"\n" +
	"--b\n" +
	"Content-Type: text/plain; charset=utf-8\n" +
	"Content-Transfer-Encoding: quoted-printable\n" +
	"\n" +
	"Pay =1B[31mnow=1B[0m,=C2=9B2J please.\n" +
	"\tIndented\ttext stays.\n" +
	"--b\n" +
	"Content-Type: text/html; charset=utf-8\n" +
	"\n" +
	"<p>Pay \x1b[31mnow\u202e</p>\n" +
	"--b--\n"

// Attack: control characters and bidi overrides from a mail reach the
// file and, through `list` and `read`, a terminal. Sent through the real
// receiver, they are gone from every text field of the file (tabs and
// newlines stay), the notes say so, and the raw message in the dropzone
// keeps them byte for byte.
func TestReceiverStripsControls(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{Own: []string{"agent@example.com"}})
	if err := sendSMTP(t, r.Addr(), controlMail); err != nil {
		t.Fatal(err)
	}
	files := ws.files(t)
	if len(files) != 1 {
		t.Fatalf("files = %v", files)
	}
	data, err := os.ReadFile(filepath.Join(ws.dir(), files[0]))
	if err != nil {
		t.Fatal(err)
	}
	m, err := schema.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{
		"session.name": m.Session.Name, "from.name": m.Participants.From.Name,
		"content.text": string(m.Content.Text), "content.html": string(m.Content.HTML),
		"content.markdown": string(m.Content.Markdown), "body": m.Body,
		"provider_raw.subject": m.Metadata.ProviderRaw["subject"].(string),
	}
	if from, ok := m.Metadata.ProviderRaw["from"].([]any); ok && len(from) > 0 {
		fields["provider_raw.from"], _ = from[0].(string)
	}
	for name, v := range fields {
		if i := strings.IndexFunc(v, schema.IsStrippedControl); i >= 0 {
			t.Errorf("%s keeps %q: %q", name, v[i:i+1], v)
		}
	}
	if s := m.Session.Name; !strings.HasPrefix(s, "Invoice fdp.exe ") || !strings.HasSuffix(s, "done") {
		t.Errorf("subject %q, want the text around the controls kept", s)
	}
	if want := "[8mAnn"; m.Participants.From.Name != want {
		t.Errorf("from name %q, want %q", m.Participants.From.Name, want)
	}
	if want := "Pay [31mnow[0m,2J please.\n\tIndented\ttext stays."; string(m.Content.Text) != want {
		t.Errorf("text %q, want %q", m.Content.Text, want)
	}
	if !strings.Contains(string(m.Metadata.Extra.ParseError), "control or bidirectional-override characters removed") {
		t.Errorf("parse_error = %q, want the removal noted", m.Metadata.Extra.ParseError)
	}
	// The file has no escapes of them either (YAML would write \e, \a).
	for _, esc := range []string{`\e`, `\a`, `\x1B`, `\u202E`, `\x9B`} {
		if bytes.Contains(data, []byte(esc)) {
			t.Errorf("the file holds %s", esc)
		}
	}
	if raw := ws.read(t, m.Metadata.Extra.Raw.ID); !bytes.Equal(raw, crlf(controlMail)) {
		t.Error("the raw message in the dropzone is not the message as received")
	}
}

// Attack (issue 18, item 9): a References id holding control characters
// becomes the thread key, shown by `list` and handed to hooks. They are
// stripped from session.id and thread_key, and a reply naming the same id
// still shares the thread.
func TestThreadKeyStripsControls(t *testing.T) {
	mail := func(id string) []byte {
		return []byte("From: ann@example.com\nTo: agent@example.com\nSubject: hi\n" +
			"Date: Fri, 06 Feb 2026 18:31:15 +0100\nMessage-ID: <" + id + "@example.com>\n" +
			"References: <a\x01\x1b[31mb\u202e@evil>\n\nhello\n")
	}
	m1, m2 := normalizeBytes(t, mail("one")), normalizeBytes(t, mail("two"))
	for _, v := range []string{m1.Session.ID, string(m1.Session.ThreadKey)} {
		if i := strings.IndexFunc(v, schema.IsStrippedControl); i >= 0 {
			t.Errorf("thread key keeps %q: %q", v[i:i+1], v)
		}
	}
	if want := "email-thread:a[31mb@evil"; string(m1.Session.ThreadKey) != want || m1.Session.ID != want {
		t.Errorf("thread key %q, session.id %q, want %q", m1.Session.ThreadKey, m1.Session.ID, want)
	}
	if m2.Session.ThreadKey != m1.Session.ThreadKey {
		t.Errorf("the second mail's thread %q, want the first's %q", m2.Session.ThreadKey, m1.Session.ThreadKey)
	}
}
