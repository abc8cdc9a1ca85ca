package email

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// TestTruncated cuts every fixture at many points: each prefix must still
// give a valid message.
func TestTruncated(t *testing.T) {
	inputs, _ := filepath.Glob(filepath.Join("testdata", "*.eml"))
	s := testutil.NewDropzone(t, nil)
	for _, in := range inputs {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		step := max(1, len(raw)/40)
		for cut := 0; cut < len(raw); cut += step {
			name := fmt.Sprintf("%s[:%d]", filepath.Base(in), cut)
			m := normalizeTest(t, s, bytes.NewReader(raw[:cut]), normOptions())
			testutil.CheckMessage(t, name, m)
		}
	}
}

func TestTruncatedKeepsWhatParses(t *testing.T) {
	raw := "Message-ID: <cut@x>\nFrom: Ann <ann@x.org>\nSubject: Cut short\nContent-Type: multipart/mixed; boundary=b\n\n--b\n\nfirst part\n--b\nContent-Type: text/plain; name=a.txt\n\npartial attach"
	m := normalizeBytes(t, []byte(raw))
	if m.Session.Name != "Cut short" || m.Participants.From.ID != "ann@x.org" || m.Content.Text != "first part" || len(m.Artifacts) != 1 {
		t.Errorf("got %q %q %q %d artifacts", m.Session.Name, m.Participants.From.ID, m.Content.Text, len(m.Artifacts))
	}
	if !strings.Contains(string(m.Metadata.Extra.ParseError), "without its final boundary") {
		t.Errorf("parse_error = %q", m.Metadata.Extra.ParseError)
	}
}

func TestNestedPrefixBoundaries(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "nested-prefix-boundary.eml"))
	if err != nil {
		t.Fatal(err)
	}
	m := normalizeBytes(t, raw)
	if m.Content.Text != "plain part" || m.Content.HTML != "<p>html part</p>" || len(m.Artifacts) != 1 || m.Artifacts[0].Name != "notes.txt" {
		t.Errorf("text %q html %q artifacts %+v", m.Content.Text, m.Content.HTML, m.Artifacts)
	}
	if m.Metadata.Extra.ParseError != "" {
		t.Errorf("parse_error = %q", m.Metadata.Extra.ParseError)
	}
}

func TestHugeHeader(t *testing.T) {
	var b strings.Builder
	b.WriteString("Message-ID: <huge@x>\nFrom: a@x.org\nSubject: ")
	for b.Len() < 200<<10 {
		b.WriteString("=?utf-8?q?Gr=C3=BC=C3=9Fe?=\n ")
	}
	b.WriteString("end\nTo: b@x.org\n\nbody\n")
	m := normalizeBytes(t, []byte(b.String()))
	testutil.CheckMessage(t, "200 KB header", m)
	if !strings.HasPrefix(m.Session.Name, "GrüßeGrüße") || !strings.HasSuffix(m.Session.Name, "end") || len(m.Participants.To) != 1 || m.Body != "body\n" {
		t.Errorf("subject %d bytes, to %v, body %q", len(m.Session.Name), m.Participants.To, m.Body)
	}
	// Over the limit: later fields are dropped, noted, and the body is
	// still found.
	var big strings.Builder
	big.WriteString("Message-ID: <bigger@x>\nFrom: a@x.org\n")
	for big.Len() < mime.MaxHeaderBytes+100<<10 {
		big.WriteString("Received: from somewhere by somewhere else with a long line of text\n")
	}
	big.WriteString("Subject: late\n\nthe body\n")
	m = normalizeBytes(t, []byte(big.String()))
	testutil.CheckMessage(t, "over 1 MiB header", m)
	if m.Body != "the body\n" || !strings.Contains(string(m.Metadata.Extra.ParseError), "fields dropped") {
		t.Errorf("body %q, parse_error %q", m.Body, m.Metadata.Extra.ParseError)
	}
}

func TestNULAndInvalidUTF8Everywhere(t *testing.T) {
	raw := "Message-ID: <n\x00ul@x>\nFrom: A\x00nn <a\x00@x.org>\nTo: \xff\xfe <b@x.org>\nSubject: \x00\xff\xfe\x01\x7f\nDate: \x00\n" +
		"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/html; charset=utf-16\n\n<p>\x00\x00</p>\n" +
		"--b\nContent-Type: text/plain; charset=utf-8\n\n\xff\x00\xc3\n--b\nContent-Disposition: attachment; filename=\"a\x00\xff.txt\"\n\nx\n" +
		"--b\nContent-Type: image/\xff\x00; name=\xfe\nContent-ID: <\x01\xff>\n\ny\n--b--\n"
	m := normalizeBytes(t, []byte(raw))
	data := testutil.CheckMessage(t, "NUL", m)
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		t.Errorf("output holds NUL or invalid UTF-8")
	}
	if !strings.Contains(string(m.Metadata.Extra.ParseError), "NUL") {
		t.Errorf("parse_error = %q", m.Metadata.Extra.ParseError)
	}
}

func TestPathTricks(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "path-tricks.eml"))
	if err != nil {
		t.Fatal(err)
	}
	m := normalizeBytes(t, raw)
	var names []string
	for _, a := range m.Artifacts {
		names = append(names, a.Name)
		if msg := schema.BadName(a.Name); msg != "" {
			t.Errorf("unsafe name: %s", msg)
		}
	}
	if got := fmt.Sprint(names); got != "[passwd evil.exe invoicefdp.exe attachment]" {
		t.Errorf("names = %s", got)
	}
}

func TestUnknownCharsets(t *testing.T) {
	raw := "Message-ID: <u@x>\nFrom: a@x.org\nSubject: =?x-none?B?w6k=?= =?x-none?Q?=E9?=\nContent-Type: text/plain; charset=\"x-none\"\n\n\xe9t\xe9\n"
	m := normalizeBytes(t, []byte(raw))
	testutil.CheckMessage(t, "unknown charsets", m)
	if m.Session.Name != "éé" || m.Content.Text != "été\n" {
		t.Errorf("subject %q text %q", m.Session.Name, m.Content.Text)
	}
	if !strings.Contains(string(m.Metadata.Extra.ParseError), `unknown charset "x-none"`) {
		t.Errorf("parse_error = %q", m.Metadata.Extra.ParseError)
	}
}

func TestManyParts(t *testing.T) {
	var b strings.Builder
	b.WriteString("Message-ID: <many@x>\nFrom: a@x.org\nContent-Type: multipart/mixed; boundary=b\n\n")
	for i := range mime.MaxParts + 50 {
		fmt.Fprintf(&b, "--b\nContent-Type: application/octet-stream; name=p%d.bin\n\n%d\n", i, i)
	}
	b.WriteString("--b--\n")
	m := normalizeBytes(t, []byte(b.String()))
	testutil.CheckMessage(t, "many parts", m)
	if len(m.Artifacts) != mime.MaxParts || !strings.Contains(string(m.Metadata.Extra.ParseError), "more than") {
		t.Errorf("%d artifacts, parse_error %q", len(m.Artifacts), m.Metadata.Extra.ParseError)
	}
}

func TestDeepNesting(t *testing.T) {
	var b strings.Builder
	b.WriteString("Message-ID: <deep@x>\nFrom: a@x.org\n")
	for i := range mime.MaxDepth + 5 {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\n\ndeep text\n")
	m := normalizeBytes(t, []byte(b.String()))
	testutil.CheckMessage(t, "deep nesting", m)
	if !strings.Contains(string(m.Metadata.Extra.ParseError), "nested deeper") || len(m.Artifacts) != 1 {
		t.Errorf("artifacts %d, parse_error %q", len(m.Artifacts), m.Metadata.Extra.ParseError)
	}
}

// bigMessage streams a message with one base64 attachment of size bytes.
func bigMessage(size int64, messageID bool) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		if messageID {
			io.WriteString(pw, "Message-ID: <big@x>\r\n")
		}
		io.WriteString(pw, "From: a@x.org\r\nSubject: big\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"+
			"--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n--b\r\nContent-Type: application/octet-stream; name=big.bin\r\n"+
			"Content-Transfer-Encoding: base64\r\n\r\n")
		enc := base64.NewEncoder(base64.StdEncoding, &lineWriter{w: pw})
		buf := make([]byte, 57*1024)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		for left := size; left > 0; {
			k := min(int64(len(buf)), left)
			enc.Write(buf[:k])
			left -= k
		}
		enc.Close()
		io.WriteString(pw, "\r\n--b--\r\n")
		pw.Close()
	}()
	return pr
}

// lineWriter breaks base64 into 76-character lines.
type lineWriter struct {
	w   io.Writer
	col int
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(76-l.col, len(p))
		l.w.Write(p[:k])
		p, l.col = p[k:], l.col+k
		if l.col == 76 {
			l.w.Write([]byte("\r\n"))
			l.col = 0
		}
	}
	return n, nil
}

func TestLargeAttachmentMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB attachment")
	}
	const size = 100 << 20
	s := testutil.NewDropzone(t, nil)
	b := s.NewBatch()
	defer b.Abort()
	obj, err := b.Put(bigMessage(size, true))
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := Normalize(f, b, obj, normOptions())
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckMessage(t, "100 MB", m)
	if len(m.Artifacts) != 1 || m.Artifacts[0].Size != size {
		t.Fatalf("artifacts = %+v", m.Artifacts)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("100 MB attachment: %d KB allocated in all, heap grew by %d KB", allocated>>10, grown>>10)
	if allocated > 16<<20 || grown > 16<<20 {
		t.Errorf("memory not flat: %d bytes allocated, heap grew by %d bytes", allocated, grown)
	}
}

func TestLargeMessageWithoutMessageID(t *testing.T) {
	if testing.Short() {
		t.Skip("large message")
	}
	// The synthetic id hashes the body as it streams: memory stays flat
	// here too.
	const size = 20 << 20
	raw := bigMessage(size, false)
	s := testutil.NewDropzone(t, nil)
	b := s.NewBatch()
	defer b.Abort()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := Normalize(raw, b, dropzone.Object{}, normOptions())
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Metadata.Extra.SyntheticID || len(m.Artifacts) != 1 {
		t.Fatalf("synthetic_id %v, artifacts %+v", m.Metadata.Extra.SyntheticID, m.Artifacts)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 16<<20 {
		t.Errorf("%d bytes allocated", allocated)
	}
}

// TestOddRunes checks runes that YAML treats specially (line and paragraph
// separators, NEL, BOM, non-characters) in the subject and the text.
func TestOddRunes(t *testing.T) {
	for _, s := range []string{"a=E2=80=A8b", "a=C2=85b", "a=EF=BB=BFb", "=E2=80=A9", "_x_", "-_", "=EF=BF=BE", "=F4=8F=BF=BF", "---", "=3A_a", "'=22"} {
		raw := "Message-ID: <y@x>\nFrom: a@x.org\nSubject: =?utf-8?q?" + s + "?=\nContent-Type: text/plain; charset=utf-8\n" +
			"Content-Transfer-Encoding: quoted-printable\n\n" + s + "\n---\n"
		testutil.CheckMessage(t, s, normalizeBytes(t, []byte(raw)))
	}
}

// TestNoQuadraticHeaders feeds header values built to make a naive scanner
// quadratic; each must be decoded in well under a second.
func TestNoQuadraticHeaders(t *testing.T) {
	// The cost of a header must grow with its size, not its square: a
	// 200 KB header of a pathological shape must not stall the adapter.
	// It compares the thread CPU time (not wall time, which a loaded
	// machine stretches at random) of the best of three runs at size n
	// and at 4n: linear work takes about 4 times as long, quadratic 16.
	run := func(unit string, size int) time.Duration {
		v := strings.Repeat(unit, size/len(unit))
		raw := "Message-ID: <q@x>\nFrom: " + v + "\nTo: " + v + "\nSubject: " + v + "\nContent-Type: text/plain" + v + "\nReferences: " + v + "\n\nbody\n"
		best := time.Duration(1 << 62)
		for i := 0; i < 3; i++ {
			s := testutil.NewDropzone(t, nil)
			b := s.NewBatch()
			var m *schema.Message
			var err error
			best = min(best, testutil.ThreadCPU(func() {
				m, err = Normalize(strings.NewReader(raw), b, dropzone.Object{}, normOptions())
			}))
			b.Abort()
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(); err != nil {
				t.Errorf("%q: %v", unit, err)
			}
		}
		return best
	}
	for name, unit := range map[string]string{
		"open encoded words": "=?utf-8?q?",
		"question marks":     "=?",
		"angle brackets":     "<",
		"quotes and commas":  `",`,
		"comments":           "(",
		"percent params":     "; a*0*=%",
	} {
		// A load spike can slow one measurement; quadratic work is slow
		// every time, so it fails only when three tries in a row do.
		var small, large time.Duration
		for try := 0; try < 3; try++ {
			if small, large = run(unit, 50<<10), run(unit, 200<<10); large <= 10*small+20*time.Millisecond {
				break
			}
		}
		if large > 10*small+20*time.Millisecond {
			t.Errorf("%s: 50 KB in %v, 200 KB in %v: the work grows faster than the size", name, small, large)
		}
	}
}

// TestLeadingTab covers texts that gopkg.in/yaml.v3 cannot round-trip as
// literal blocks (found by FuzzNormalize).
func TestLeadingTab(t *testing.T) {
	for _, body := range []string{"\t}\n", "\n\n\tindented\nnext\n", "\t\tdeep\n\tless\n", " \tspace first\nx\n"} {
		for _, ct := range []string{"text/plain", "text/html"} {
			raw := "Message-ID: <tab@x>\nFrom: a@x.org\nContent-Type: " + ct + "\n\n" + body
			m := normalizeBytes(t, []byte(raw))
			testutil.CheckMessage(t, fmt.Sprintf("%s %q", ct, body), m)
		}
	}
}
