package email

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

func TestShare(t *testing.T) {
	for _, c := range []struct {
		sizes, weights []int64
		limit          int64
		want           []int64
	}{
		{[]int64{10, 20}, []int64{2, 0}, 100, []int64{10, 20}},       // all fits
		{[]int64{0, 1000}, []int64{1, 3}, 300, []int64{0, 100}},      // HTML only: it and its Markdown and body
		{[]int64{10, 1000}, []int64{1, 3}, 310, []int64{10, 100}},    // a short text keeps all
		{[]int64{1000, 1000}, []int64{1, 3}, 400, []int64{100, 100}}, // both long: the same share
		{[]int64{1000, 0}, []int64{2, 1}, 400, []int64{200, 0}},      // text only, the body repeating it
		{[]int64{0, 0}, []int64{1, 3}, 400, []int64{0, 0}},
	} {
		got := share(c.sizes, c.weights, c.limit)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("share(%v, %v, %d) = %v, want %v", c.sizes, c.weights, c.limit, got, c.want)
		}
		var sum int64
		for i := range got {
			sum += got[i] * c.weights[i]
		}
		if sum > c.limit {
			t.Errorf("share(%v, %v, %d) = %v: %d over the limit", c.sizes, c.weights, c.limit, got, sum)
		}
	}
}

// htmlPartsMail is the input: n HTML parts of about size bytes
// each (30 of 4 MB made a 123 MB mail, a 363 MB file and a 2.1 GB peak).
// Each part's first and last paragraphs name it. parts are the parts as
// decoded.
func htmlPartsMail(n, size int) (raw string, parts []string) {
	var b strings.Builder
	b.Grow(n * (size + 256))
	b.WriteString("From: Ann <ann@example.com>\nTo: agent@example.com\nSubject: thirty reports\nMessage-ID: <html-parts@example.com>\nDate: Fri, 06 Feb 2026 18:31:15 +0100\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=part\n\n")
	for i := range n {
		var p strings.Builder
		p.Grow(size + 256)
		fmt.Fprintf(&p, "<html><body>\n<p>Report %d begins.</p>\n", i)
		for j := 0; p.Len() < size; j++ {
			fmt.Fprintf(&p, "<p>Line %d of report %d: <b>value</b> %d, see <a href=\"https://example.com/%d/%d\">details</a>.</p>\n", j, i, j*7, i, j)
		}
		fmt.Fprintf(&p, "<p>Report %d ends.</p>\n</body></html>", i)
		parts = append(parts, p.String())
		b.WriteString("--part\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n")
		b.WriteString(p.String())
		b.WriteString("\n")
	}
	b.WriteString("--part--\n")
	return b.String(), parts
}

// readRest reads back the artifacts of an overflow entry, in order.
func readRest(t *testing.T, dz *dropzone.Store, ov schema.Overflow) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ov.Artifacts {
		f, err := dz.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(&b, f)
		f.Close()
	}
	return b.String()
}

func overflowOf(m *schema.Message, field string) (schema.Overflow, bool) {
	for _, ov := range m.Metadata.Extra.Overflow {
		if ov.Field == field {
			return ov, true
		}
	}
	return schema.Overflow{}, false
}

// The 123 MB mail of 30 HTML parts, handed to the receiver over
// SMTP: the file it writes keeps the text bound (4 MiB) and a little
// overhead, not 363 MB; the HTML it does not keep is in a text artifact
// whose bytes are exactly what was cut, so content.html followed by the
// artifact is the whole decoded HTML; the file says so (overflow,
// parse_error, the body's last line) and validates against the protocol's
// JSON Schema; the Markdown is that of the HTML kept.
func TestHugeHTMLMailKeepsBound(t *testing.T) {
	if testing.Short() {
		t.Skip("a 123 MB mail")
	}
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{Bounds: NewBounds(0, 0)})
	raw, parts := htmlPartsMail(30, 4<<20)
	name, data := ws.receiveOne(t, r.Addr(), raw)
	if len(data) > DefaultMaxText+DefaultMaxText/8 {
		t.Errorf("the file is %d bytes, over the %d bytes of text kept and their overhead", len(data), DefaultMaxText)
	}
	testutil.ValidateInbound(t, name, data)
	m, err := schema.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	full := strings.Join(parts, "\n")
	ov, ok := overflowOf(m, "content.html")
	if !ok || ov.Size != int64(len(full)) || ov.Kept != int64(len(m.Content.HTML)) {
		t.Fatalf("overflow %+v: want content.html of %d bytes keeping %d", m.Metadata.Extra.Overflow, len(full), len(m.Content.HTML))
	}
	if got := string(m.Content.HTML) + readRest(t, ws.dz, ov); got != full {
		t.Fatalf("content.html + its rest: %d bytes, not the %d of the decoded HTML (first difference at %d)", len(got), len(full), firstDifference(got, full))
	}
	var rest *schema.Artifact
	for i, a := range m.Artifacts {
		if a.ID == ov.Artifacts[0] {
			rest = &m.Artifacts[i]
		}
	}
	if rest == nil || rest.Name != "html-rest.html" || rest.MimeType != "text/html" || rest.Type != schema.ArtifactDocument {
		t.Errorf("the rest's artifact: %+v", rest)
	}
	if m.Type != schema.TypeText {
		t.Errorf("type %s: the rest of a text is not an attachment", m.Type)
	}
	if !strings.Contains(string(m.Metadata.Extra.ParseError), "courier.limits.max_text_bytes") {
		t.Errorf("parse_error %q does not say the text was cut", m.Metadata.Extra.ParseError)
	}
	if !strings.HasPrefix(string(m.Content.Markdown), "Report 0 begins.") || strings.Contains(string(m.Content.Markdown), "Report 29 ends.") {
		t.Errorf("Markdown: not that of the HTML kept (%d bytes)", len(m.Content.Markdown))
	}
	if !strings.HasPrefix(m.Body, string(m.Content.Markdown)) || !strings.Contains(m.Body, "html-rest.html") || !strings.Contains(m.Body, DropzonePrefix+rest.Path) {
		t.Errorf("the body does not say where the message goes on: …%q", m.Body[max(0, len(m.Body)-300):])
	}
}

func firstDifference(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// A single text part longer than an artifact may be (a 20 MB log pasted
// in, with 8 MiB artifacts): the file keeps the text bound, and the rest
// is in consecutive artifacts, each within the artifact limit and valid
// UTF-8 on its own, which follow the kept text to the byte.
func TestLongTextSplitsItsRest(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 MB part")
	}
	var text strings.Builder
	for i := 0; text.Len() < 20<<20; i++ {
		fmt.Fprintf(&text, "%06d ünïcödé 日本語 log line with some words in it\n", i)
	}
	raw := "From: a@example.com\nMessage-ID: <long-text@x>\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n" + text.String()
	dz := testutil.NewDropzone(t, nil)
	opts := normOptions()
	opts.MaxArtifact = 8 << 20
	m := normalizeTest(t, dz, strings.NewReader(raw), opts)
	data := testutil.CheckMessage(t, "long text", m)
	if len(data) > DefaultMaxText+DefaultMaxText/8 {
		t.Errorf("file of %d bytes", len(data))
	}
	ov, ok := overflowOf(m, "content.text")
	if !ok || len(ov.Artifacts) != 3 {
		t.Fatalf("overflow %+v, want content.text in 3 artifacts", m.Metadata.Extra.Overflow)
	}
	for i, id := range ov.Artifacts {
		st, err := dz.Stat(id)
		if err != nil || st.Size > opts.MaxArtifact {
			t.Errorf("artifact %d: %+v, %v", i, st, err)
		}
		f, _ := dz.Open(id)
		b, _ := io.ReadAll(f)
		f.Close()
		if !utf8.Valid(b) {
			t.Errorf("artifact %d is not valid UTF-8 on its own", i)
		}
	}
	if got := string(m.Content.Text) + readRest(t, dz, ov); got != text.String() {
		t.Fatalf("text + rest: %d bytes, want %d", len(got), text.Len())
	}
	var names []string
	for _, a := range m.Artifacts {
		names = append(names, a.Name)
	}
	if fmt.Sprint(names) != "[text-rest.txt text-rest-2.txt text-rest-3.txt]" {
		t.Errorf("artifacts %v", names)
	}
	if !strings.HasPrefix(m.Body, string(m.Content.Text)) || !strings.Contains(m.Body, "text-rest-3.txt") {
		t.Errorf("body …%q", m.Body[max(0, len(m.Body)-400):])
	}
}

// gateReader blocks its first Read until released, counting the readers
// in flight and the most there ever were.
type gateReader struct {
	r        io.Reader
	once     sync.Once
	release  chan struct{}
	inFlight *atomic.Int32
	most     *atomic.Int32
	entered  *atomic.Int32
}

func (g *gateReader) Read(p []byte) (int, error) {
	g.once.Do(func() {
		n := g.inFlight.Add(1)
		g.entered.Add(1)
		for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
		}
		<-g.release
		g.inFlight.Add(-1)
	})
	return g.r.Read(p)
}

// Bounds let no more messages normalise at once than they allow: with a
// concurrency of 2, five messages handed over together are read two at a
// time; the other three wait their turn, and all five are written.
func TestBoundsGateNormalising(t *testing.T) {
	bounds := NewBounds(0, 2)
	dz := testutil.NewDropzone(t, nil)
	var inFlight, most, entered atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw := fmt.Sprintf("From: a@example.com\nMessage-ID: <gate-%d@x>\n\nbody %d\n", i, i)
			g := &gateReader{r: strings.NewReader(raw), release: release, inFlight: &inFlight, most: &most, entered: &entered}
			opts := normOptions()
			opts.Bounds = bounds
			b := dz.NewBatch()
			defer b.Abort()
			_, err := Normalize(g, b, dropzone.Object{}, opts)
			errs <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, "two messages normalising", func() bool { return entered.Load() == 2 })
	// The other three are queued at the gate, not reading.
	testutil.WaitFor(t, 10*time.Second, "three messages waiting their turn", func() bool { return waitingAtGate() == 3 })
	if n := entered.Load(); n != 2 {
		t.Fatalf("%d messages normalising at once, want 2", n)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if entered.Load() != 5 || most.Load() != 2 {
		t.Errorf("%d normalised, %d at most at once; want 5, 2", entered.Load(), most.Load())
	}
}

// waitingAtGate counts the goroutines blocked in Bounds.enter.
func waitingAtGate() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("email.(*Bounds).enter"))
}
