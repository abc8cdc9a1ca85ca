package email

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

func TestSyntheticID(t *testing.T) {
	const head = "From: Cron <root@example.com>\r\nDate: Wed, 18 Feb 2026 09:00:00 +0000\r\nSubject: backup\r\n\r\n"
	const body = "line one\r\nline two\r\n"
	m := normalizeBytes(t, []byte(head+body))
	want := "email_" + threading.SyntheticUID("Cron <root@example.com>", "Wed, 18 Feb 2026 09:00:00 +0000", "backup", []byte("line one\nline two\n"))
	if m.ID != want {
		t.Errorf("id = %s, want %s (SyntheticUID of the raw fields and the body with LF line ends)", m.ID, want)
	}
	if !m.Metadata.Extra.SyntheticID {
		t.Error("synthetic_id not set")
	}
	if m.Session.ThreadKey.String() != threading.KeyPrefix+strings.TrimPrefix(want, "email_") {
		t.Errorf("thread key = %s", m.Session.ThreadKey)
	}
	// The same message with LF line ends has the same id; another body
	// does not.
	lf := normalizeBytes(t, []byte(strings.ReplaceAll(head+body, "\r\n", "\n")))
	if lf.ID != m.ID {
		t.Errorf("LF copy: id %s, CRLF copy: %s", lf.ID, m.ID)
	}
	other := normalizeBytes(t, []byte(head+"line one\r\n"))
	if other.ID == m.ID {
		t.Error("a different body gave the same synthetic id")
	}
}

func TestBodyHash(t *testing.T) {
	for _, body := range []string{"", "a", "a\r\nb", "a\rb", "\r", "\r\r\n", "x\r\n\r\n", strings.Repeat("ab\r\n", 5000)} {
		want := threading.SyntheticUID("f", "d", "s", []byte(strings.ReplaceAll(body, "\r\n", "\n")))
		for _, chunk := range []int{1, 2, 3, 7, 1 << 20} {
			h := newBodyHash("f", "d", "s")
			for b := []byte(body); len(b) > 0; {
				k := min(chunk, len(b))
				h.Write(b[:k])
				b = b[k:]
			}
			if got := h.uid(); got != want {
				t.Errorf("body %q in chunks of %d: %s, want %s", body, chunk, got, want)
			}
		}
	}
}

// FuzzBodyHash holds the hash, written in pieces of any size, to its
// definition: the body with each CRLF as LF (a lone CR kept).
func FuzzBodyHash(f *testing.F) {
	for _, s := range []string{"a\r\nb", "\r\r\n\r", "x\ry\r\n\n\r"} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, body []byte, chunk uint8) {
		want := threading.SyntheticUID("f", "d", "s", []byte(strings.ReplaceAll(string(body), "\r\n", "\n")))
		h := newBodyHash("f", "d", "s")
		for b := body; len(b) > 0; {
			k := min(int(chunk)+1, len(b))
			h.Write(b[:k])
			b = b[k:]
		}
		if got := h.uid(); got != want {
			t.Errorf("body %q in chunks of %d: %s, want %s", body, int(chunk)+1, got, want)
		}
	})
}

func TestThreadIDs(t *testing.T) {
	m := normalizeBytes(t, []byte("Message-ID: <C@x>\nIn-Reply-To: <B@x>\nReferences: <A@x> <B@x>\nFrom: a@x\n\nhi\n"))
	if m.ID != threading.EmailID("<c@x>") {
		t.Errorf("id = %s", m.ID)
	}
	if m.ReplyTo.String() != threading.EmailID("b@x") || m.ThreadRoot.String() != threading.EmailID("a@x") {
		t.Errorf("reply_to %s thread_root %s", m.ReplyTo, m.ThreadRoot)
	}
	if m.Session.ID != "email-thread:a@x" || m.Session.ThreadKey != "email-thread:a@x" || m.Session.Type != schema.Thread {
		t.Errorf("session = %+v", m.Session)
	}
	root := normalizeBytes(t, []byte("Message-ID: <A@x>\nFrom: a@x\n\nhi\n"))
	if root.ThreadRoot != "" || root.ReplyTo != "" || root.Session.ThreadKey != "email-thread:a@x" {
		t.Errorf("root message: %+v reply_to %q thread_root %q", root.Session, root.ReplyTo, root.ThreadRoot)
	}
}

func TestContentType(t *testing.T) {
	single := func(media, name string) string {
		return "Message-ID: <t@x>\nFrom: a@x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: " + media +
			"\nContent-Disposition: attachment; filename=" + name + "\n\nDATA\n--b--\n"
	}
	for _, tc := range []struct {
		name, raw string
		want      schema.ContentType
	}{
		{"text", "Message-ID: <t@x>\nFrom: a@x\n\nhello\n", schema.TypeText},
		{"empty", "Message-ID: <t@x>\nFrom: a@x\n\n", schema.TypeText},
		{"audio", single("audio/mpeg", "a.mp3"), schema.TypeAudio},
		{"video", single("video/mp4", "a.mp4"), schema.TypeVideo},
		{"image", single("image/png", "a.png"), schema.TypeImage},
		{"document", single("application/pdf", "a.pdf"), schema.TypeFile},
		{"two images", "Message-ID: <t@x>\nFrom: a@x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: image/png\n\nA\n--b\nContent-Type: image/gif\n\nB\n--b--\n", schema.TypeFile},
		{"text and file", "Message-ID: <t@x>\nFrom: a@x\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nbody\n--b\nContent-Type: image/png\n\nA\n--b--\n", schema.TypeMixed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := normalizeBytes(t, []byte(tc.raw))
			testutil.CheckMessage(t, tc.name, m)
			if m.Type != tc.want {
				t.Errorf("type = %s, want %s", m.Type, tc.want)
			}
		})
	}
}

func TestMaxArtifact(t *testing.T) {
	raw := "Message-ID: <big@x>\nFrom: a@x\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nbody\n--b\nContent-Type: application/octet-stream; name=big.bin\n\n" +
		strings.Repeat("x", 5000) + "\n--b\nContent-Type: application/octet-stream; name=small.bin\n\nsmall\n--b--\n"
	opts := normOptions()
	opts.MaxArtifact = 1000
	m := normalizeTest(t, testutil.NewDropzone(t, nil), strings.NewReader(raw), opts)
	testutil.CheckMessage(t, "max artifact", m)
	if len(m.Artifacts) != 1 || m.Artifacts[0].Name != "small.bin" {
		t.Errorf("artifacts = %+v, want small.bin only", m.Artifacts)
	}
	if !strings.Contains(string(m.Metadata.Extra.ParseError), "over the artifact size limit") {
		t.Errorf("parse_error = %q", m.Metadata.Extra.ParseError)
	}
	// The store's own limit is treated the same way.
	b := testutil.NewDropzone(t, &dropzone.Options{MaxSize: 4000}).NewBatch()
	defer b.Abort()
	m, err := Normalize(strings.NewReader(raw), b, dropzone.Object{}, normOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Artifacts) != 1 || !strings.Contains(string(m.Metadata.Extra.ParseError), "over the artifact size limit") {
		t.Errorf("store limit: artifacts %+v, parse_error %q", m.Artifacts, m.Metadata.Extra.ParseError)
	}
}

type failAfter struct {
	r   io.Reader
	n   int
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

func TestIOErrors(t *testing.T) {
	raw := "Message-ID: <io@x>\nFrom: a@x\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nbody\n--b\nContent-Type: image/png\n\n" +
		strings.Repeat("A", 100000) + "\n--b--\n"
	s := testutil.NewDropzone(t, nil)
	disk := errors.New("disk on fire")
	for _, n := range []int{10, 60, 200, 5000} {
		b := s.NewBatch()
		_, err := Normalize(&failAfter{r: strings.NewReader(raw), n: n, err: disk}, b, dropzone.Object{}, normOptions())
		b.Abort()
		if !errors.Is(err, disk) {
			t.Errorf("read error after %d bytes: err = %v, want it wrapped", n, err)
		}
	}
	// A batch that can take nothing more: the dropzone error is returned.
	b := s.NewBatch()
	b.Abort()
	if _, err := Normalize(strings.NewReader(raw), b, dropzone.Object{}, normOptions()); err == nil {
		t.Error("Normalize into a finished batch succeeded")
	}
}

func TestReceivedAtDefault(t *testing.T) {
	opts := normOptions()
	opts.ReceivedAt = time.Time{}
	before := time.Now().Add(-time.Second)
	m := normalizeTest(t, testutil.NewDropzone(t, nil), strings.NewReader("Message-ID: <r@x>\nFrom: a@x\n\nhi\n"), opts)
	if m.ReceivedAt.Before(before) || m.Timestamp != m.ReceivedAt {
		t.Errorf("received_at %v timestamp %v", m.ReceivedAt, m.Timestamp)
	}
	testutil.CheckMessage(t, "no received time", m)
}

func TestRawArtifact(t *testing.T) {
	m := normalizeBytes(t, []byte("Message-ID: <raw@x>\nFrom: a@x\n\nhi\n"))
	r := m.Metadata.Extra.Raw
	if r == nil || r.Name != "message.eml" || r.Type != schema.ArtifactDocument || r.MimeType != "message/rfc822" || r.Size != 34 || !schema.ValidArtifactID(r.ID) {
		t.Errorf("raw = %+v", r)
	}
	// Without a raw object, raw is left out.
	b := testutil.NewDropzone(t, nil).NewBatch()
	defer b.Abort()
	m, err := Normalize(strings.NewReader("Message-ID: <raw@x>\nFrom: a@x\n\nhi\n"), b, dropzone.Object{}, normOptions())
	if err != nil || m.Metadata.Extra.Raw != nil {
		t.Errorf("raw = %+v, %v", m.Metadata.Extra.Raw, err)
	}
}

func TestParticipants(t *testing.T) {
	m := normalizeBytes(t, []byte("Message-ID: <p@x>\nFrom: Ann <Ann@Example.com>\nReply-To: ann@example.com\nTo: agent@monoco.dev, Bob <bob@x.org>\nCc: AGENT@monoco.dev\n\nhi\n"))
	p := m.Participants
	if p.From.ID != "ann@example.com" || p.From.Name != "Ann" || p.From.Email != "Ann@Example.com" || p.From.PlatformID != "Ann@Example.com" {
		t.Errorf("from = %+v", p.From)
	}
	if got := m.Metadata.Extra.ExternalParticipants; fmt.Sprint(got) != "[ann@example.com bob@x.org]" {
		t.Errorf("external = %v", got)
	}
	if m.Metadata.Extra.PersonalEligible == nil || *m.Metadata.Extra.PersonalEligible {
		t.Error("personal_eligible should be false with two external participants")
	}
	if len(p.Mentions) != 0 || p.Mentions == nil {
		t.Errorf("mentions = %#v, want []", p.Mentions)
	}
	// From with a name and no address.
	m = normalizeBytes(t, []byte("Message-ID: <p2@x>\nFrom: Just A Name\n\nhi\n"))
	if m.Participants.From.ID != "just a name" || m.Participants.From.Name != "Just A Name" || m.Participants.From.Email != "" {
		t.Errorf("name-only from = %+v", m.Participants.From)
	}
	testutil.CheckMessage(t, "name-only from", m)
	// A local address, as cron sends.
	m = normalizeBytes(t, []byte("Message-ID: <p3@x>\nFrom: root (Cron Daemon)\n\nhi\n"))
	if m.Participants.From.ID != "root" || m.Participants.From.Name != "Cron Daemon" || m.Participants.From.Email != "" {
		t.Errorf("local from = %+v", m.Participants.From)
	}
}

// A text part longer than a message file keeps is no longer set aside
// whole as an attachment: the file keeps its start (half the text bound,
// as the body repeats it) and the rest is a text artifact, so that the
// agent reads the start and nothing is lost.
func TestTextOverLimitKeepsItsStart(t *testing.T) {
	if testing.Short() {
		t.Skip("large body")
	}
	text := strings.Repeat("0123456789abcde\n", mime.MaxText/16+10)
	raw := "Message-ID: <long@x>\nFrom: a@x\nContent-Type: text/plain\n\n" + text
	m := normalizeBytes(t, []byte(raw))
	testutil.CheckMessage(t, "long text", m)
	if len(m.Content.Text) != DefaultMaxText/2 || !strings.HasPrefix(text, string(m.Content.Text)) {
		t.Errorf("text %d bytes, want the first %d", len(m.Content.Text), DefaultMaxText/2)
	}
	if len(m.Artifacts) != 1 || m.Artifacts[0].Name != "text-rest.txt" || m.Artifacts[0].Size != int64(len(text)-DefaultMaxText/2) {
		t.Errorf("artifacts %+v", m.Artifacts)
	}
}

// multipart/related without start takes as its root the first part of the
// type its type parameter names (RFC 2387 §3.1): MHTML puts the images first.
func TestRelatedRootByType(t *testing.T) {
	raw := "Message-ID: <mhtml@x>\r\nFrom: a@x.org\r\nContent-Type: multipart/related; boundary=b; type=\"text/html\"\r\n\r\n" +
		"--b\r\nContent-Type: image/png\r\nContent-Location: logo.png\r\nContent-Transfer-Encoding: base64\r\n\r\niVBORw0K\r\n" +
		"--b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>The <b>body</b></p>\r\n--b--\r\n"
	m := normalizeBytes(t, []byte(raw))
	if !strings.Contains(string(m.Content.HTML), "<b>body</b>") || len(m.Artifacts) != 1 || m.Artifacts[0].Type != "image" {
		t.Errorf("html %q artifacts %+v: the HTML part must be the root", m.Content.HTML, m.Artifacts)
	}
}
