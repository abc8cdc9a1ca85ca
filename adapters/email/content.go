package email

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
)

// DefaultMaxText is how much decoded text a message file keeps when
// Bounds.MaxText is 0 (courier.limits.max_text_bytes).
const DefaultMaxText = 4 << 20

// Bounds bound what normalising messages costs. One is shared by every
// source of a provider (its receivers and IMAP accounts), so that the
// bounds hold for the process, not per connection.
type Bounds struct {
	// MaxText is how much decoded text one message file keeps, in bytes:
	// content.text, content.html, content.markdown and the body together
	// (0: DefaultMaxText). The rest of each goes on in text artifacts.
	MaxText int64
	slots   chan struct{}
}

// NewBounds returns Bounds that keep maxText bytes of text a file (0:
// DefaultMaxText) and let concurrency messages normalise at once (0: one
// a CPU, at most 4). Parsing and rendering a message takes memory in proportion to
// the text it keeps (a few times MaxText at most, whatever its size), so
// bounding how many run at once bounds the total: sixty SMTP sessions
// handing over 4 MB HTML mails at once wait their turn instead of taking
// gigabytes.
func NewBounds(maxText int64, concurrency int) *Bounds {
	if concurrency <= 0 {
		concurrency = min(runtime.GOMAXPROCS(0), 4)
	}
	return &Bounds{MaxText: maxText, slots: make(chan struct{}, concurrency)}
}

// maxText is the text a file keeps under b.
func (b *Bounds) maxText() int64 {
	if b == nil || b.MaxText <= 0 {
		return DefaultMaxText
	}
	return b.MaxText
}

// enter waits for a turn to normalise; leave ends it.
func (b *Bounds) enter() {
	if b != nil && b.slots != nil {
		b.slots <- struct{}{}
	}
}

func (b *Bounds) leave() {
	if b != nil && b.slots != nil {
		<-b.slots
	}
}

// textField collects one text field of a message as the renderer streams
// it: cleaned (valid UTF-8, NUL bytes removed and counted), its first max
// bytes in memory and the rest in a spool file, so a field of any size
// costs at most max bytes of memory.
type textField struct {
	name string // content.text, content.html, content.markdown
	max  int
	// The field's first max bytes: one, the first string written, kept as
	// it is while nothing else is written (most fields are written whole,
	// once: the renderer's string becomes the message's value, not copied);
	// buf from the second write on.
	one string
	buf strings.Builder
	// line is the value kept with a line end after it, when endLine
	// added one: the body, the value a slice of it.
	line     string
	endsLine bool
	spool    func() (*os.File, error)
	f        *os.File
	size     int64 // bytes written, mem and spool
	nonSpace bool
	nuls     int
}

func newTextField(name string, max int64, spool func() (*os.File, error)) *textField {
	return &textField{name: name, max: int(max), spool: spool}
}

// Write implements io.Writer; the renderer writes whole characters.
func (f *textField) Write(p []byte) (int, error) {
	if _, err := f.WriteString(string(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString adds s, cleaned, to the field.
func (f *textField) WriteString(s string) (int, error) {
	n := len(s)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if k := strings.Count(s, "\x00"); k > 0 {
		f.nuls += k
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if !f.nonSpace && strings.TrimSpace(s) != "" {
		f.nonSpace = true
	}
	if room := f.max - f.memLen(); room > 0 {
		k := min(room, len(s))
		f.hold(s[:k])
		f.size += int64(k)
		s = s[k:]
	}
	if s == "" {
		return n, nil
	}
	if f.f == nil {
		sf, err := f.spool()
		if err != nil {
			return 0, err
		}
		f.f = sf
	}
	if _, err := io.WriteString(f.f, s); err != nil {
		return 0, fmt.Errorf("email: spool %s: %w", f.name, err)
	}
	f.size += int64(len(s))
	return n, nil
}

// hold adds s to the text held in memory.
func (f *textField) hold(s string) {
	switch {
	case s == "":
	case f.one == "" && f.buf.Len() == 0:
		f.one = s
	default:
		if f.one != "" {
			f.buf.Grow(len(f.one) + len(s))
			f.buf.WriteString(f.one)
			f.one = ""
		}
		f.buf.WriteString(s)
	}
}

// mem is the text held in memory, the field's first bytes.
func (f *textField) mem() string {
	if f.one != "" {
		return f.one
	}
	return f.buf.String()
}

func (f *textField) memLen() int { return len(f.one) + f.buf.Len() }

// keep returns the first k bytes of the text held, as the message's value:
// the text itself, unless it is less than half of what holds it (a field
// cut short, or a string cut from a longer one), which a copy lets go.
func (f *textField) keep(k int) string {
	n := k
	if f.endsLine {
		n++
	}
	s := f.mem()[:n]
	if f.size > int64(2*k) || f.buf.Cap() > 2*n {
		s = strings.Clone(s)
	}
	if f.endsLine {
		f.line = s
	}
	f.one, f.buf = "", strings.Builder{}
	return s[:k]
}

// endLine prepares the body made of the field kept whole, k bytes: when
// they do not end a line and were written in pieces, a line end is held
// after them, so that keep returns the body (line) and the value as one
// string, not a second copy of the text with "\n" added. The field's
// size and value are unchanged.
func (f *textField) endLine(k int) {
	if f.length() == 0 || f.one != "" || k == 0 || k != f.buf.Len() || int64(k) != f.size || f.buf.String()[k-1] == '\n' {
		return
	}
	f.buf.WriteByte('\n')
	f.endsLine = true
}

// done notes the NUL bytes removed, as CleanText does for a whole value.
func (f *textField) done(n *mime.Notes) {
	if f.nuls > 0 {
		n.Addf("%s: NUL bytes removed (%d)", f.name, f.nuls)
	}
}

// length is the field's length as written to the file: 0 when it holds
// nothing but white space (the field is then null).
func (f *textField) length() int64 {
	if f == nil || !f.nonSpace {
		return 0
	}
	return f.size
}

// rest returns a reader of the field's text from byte k on.
func (f *textField) rest(k int) io.Reader {
	mem := f.mem()
	r := io.Reader(strings.NewReader(mem[k:]))
	if f.f != nil {
		r = io.MultiReader(r, io.NewSectionReader(f.f, 0, f.size-int64(len(mem))))
	}
	return r
}

func (f *textField) close() {
	if f != nil && f.f != nil {
		f.f.Close()
		f.f = nil
	}
}

// content sets content.text, content.html and, when there is HTML,
// content.markdown (inline images linked by paths); the body under the
// front matter (the Markdown, else the text, ending in a newline); and the
// message's type. It runs after artifacts, whose paths it links.
//
// The text a file keeps is bounded (limit bytes, Bounds.MaxText). The text
// and the HTML, the message's own forms, share it with what is made from
// them, the Markdown and the body, counted as long as the HTML they come
// from (without HTML, the body repeats the text): a short field keeps all
// of its text and the long ones the same share of the rest. What the text
// or the HTML does not keep goes on, in order, in text artifacts in the
// dropzone, streamed there from the spool; the Markdown is made from the
// HTML kept only, which bounds the conversion's cost as well as the file.
// metadata.extra.overflow says which artifacts hold what, parse_error says
// so in words, and the body ends with a line naming them. Nothing is
// dropped, and no field is ever whole in memory.
func (b *builder) content(body *mime.Body, paths map[string]string, batch *dropzone.Batch, limit, maxArtifact int64) error {
	m := b.m
	r := mime.NewRenderer(b.d, paths)
	text := newTextField("content.text", limit, batch.Spool)
	defer text.close()
	if err := r.WriteText(text, body); err != nil {
		return err
	}
	text.done(b.n)
	html := newTextField("content.html", limit, batch.Spool)
	defer html.close()
	if err := r.WriteHTML(html, body); err != nil {
		return err
	}
	html.done(b.n)
	m.Type = schema.TypeOf(text.length() > 0 || html.length() > 0, m.Artifacts)
	md, kt, kh, err := b.markdown(r, body, text, html, limit, batch.Spool)
	if err != nil {
		return err
	}
	defer md.close()
	src, ks := text, kt
	km := 0
	if md.length() > 0 {
		km = cutAt(md, max(0, limit-int64(kt)-int64(kh))/2)
		src, ks = md, km
	}
	// The body is the text or the Markdown as kept; cut, it says where it
	// goes on.
	cut := int64(ks) < src.length() || (src == md && int64(kh) < html.length())
	if !cut {
		src.endLine(ks)
	}
	values, rests, notes, err := b.keepFields([3]*textField{text, html, md}, [3]int{kt, kh, km}, batch, maxArtifact)
	if err != nil {
		return err
	}
	m.Content = schema.Content{Text: schema.NullString(values[0]), HTML: schema.NullString(values[1]), Markdown: schema.NullString(values[2])}
	switch src {
	case md:
		m.Body = values[2]
	default:
		m.Body = values[0]
	}
	if len(notes) > 0 {
		if md.length() > 0 && int64(kh) < html.length() {
			notes = append(notes, "content.markdown and the body are made from the HTML kept")
		}
		b.n.Addf("text over the %d bytes a message file keeps (courier.limits.max_text_bytes): %s", limit, strings.Join(notes, "; "))
	}
	// The body says where it goes on when it is cut: the body is the
	// text cut, or the Markdown cut or made from a cut HTML.
	switch {
	case cut:
		m.Body = strings.TrimRight(m.Body, "\n") + restLine(rests)
	case src.line != "":
		m.Body = src.line
	case m.Body != "" && !strings.HasSuffix(m.Body, "\n"):
		m.Body += "\n"
	}
	return nil
}

// markdown makes content.markdown of the HTML, when there is HTML, and
// says how many bytes of the text (kt) and of the HTML (kh) the file
// keeps: their shares of limit, the Markdown counted as long as the HTML
// it is made from, which is the HTML kept only. md is nil without HTML.
func (b *builder) markdown(r *mime.Renderer, body *mime.Body, text, html *textField, limit int64, spool func() (*os.File, error)) (md *textField, kt, kh int, err error) {
	keep := func(weights ...int64) (kt, kh int) {
		k := share([]int64{text.length(), html.length()}, weights, limit)
		return cutAt(text, k[0]), cutAt(html, k[1])
	}
	kt, kh = keep(2, 0)
	if html.length() == 0 {
		return nil, kt, kh, nil
	}
	kt, kh = keep(1, 3)
	md = newTextField("content.markdown", limit, spool)
	bound := int64(-1)
	if int64(kh) < html.length() {
		bound = int64(kh)
	}
	if _, err := r.WriteMarkdown(md, body, bound); err != nil {
		md.close()
		return nil, 0, 0, err
	}
	md.done(b.n)
	if md.length() == 0 {
		kt, kh = keep(2, 1) // the body is the text after all
	}
	return md, kt, kh, nil
}

// keepFields returns the value the file keeps of each field (text, HTML,
// Markdown), its first k[i] bytes, and stores the rest of a field cut in
// text artifacts (overflow); it returns those and a note on each field
// cut.
func (b *builder) keepFields(fields [3]*textField, k [3]int, batch *dropzone.Batch, maxArtifact int64) (values [3]string, rests []schema.Artifact, notes []string, err error) {
	for i, f := range fields {
		if f.length() == 0 {
			continue
		}
		if int64(k[i]) < f.size {
			arts, err := b.overflow(f, k[i], batch, maxArtifact)
			if err != nil {
				return values, nil, nil, err
			}
			rests = append(rests, arts...)
			notes = append(notes, fmt.Sprintf("%s keeps its first %d of %d bytes, the rest is in %s", f.name, k[i], f.size, names(arts)))
		}
		values[i] = f.keep(k[i]) // the value holds what is kept
	}
	return values, rests, notes, nil
}

// overflow stores field f from byte k on as text artifacts, each at most
// maxArtifact bytes (0: one), appends them to the message's artifacts and
// records them in metadata.extra.overflow. It returns the artifacts.
func (b *builder) overflow(f *textField, k int, batch *dropzone.Batch, maxArtifact int64) ([]schema.Artifact, error) {
	return b.storeRest(f, k, schema.Overflow{Field: f.name, Size: f.size, Kept: int64(k)}, batch, maxArtifact)
}

// storeRest is overflow with the record ov made by the caller (a list
// cut counts items, not bytes): it stores f from byte k on and records ov
// with the artifacts' ids.
func (b *builder) storeRest(f *textField, k int, ov schema.Overflow, batch *dropzone.Batch, maxArtifact int64) ([]schema.Artifact, error) {
	name, media := restNames[f.name][0], restNames[f.name][1]
	br := bufio.NewReaderSize(f.rest(k), 64<<10)
	left := f.size - int64(k)
	var arts []schema.Artifact
	for left > 0 {
		n := left
		if maxArtifact > 0 && n > maxArtifact {
			n = maxArtifact
		}
		lr := &runeLimit{br: br, n: n, whole: n == left}
		obj, err := batch.Put(lr)
		if err != nil {
			return nil, fmt.Errorf("email: store the rest of %s: %w", f.name, err)
		}
		if obj.Size == 0 {
			break // a limit below one character: nothing more can be stored
		}
		left -= obj.Size
		an := name
		if len(arts) > 0 {
			an = strings.TrimSuffix(name, restExt(name)) + fmt.Sprintf("-%d", len(arts)+1) + restExt(name)
		}
		arts = append(arts, schema.Artifact{ID: obj.ID, Name: an, Type: schema.ArtifactDocument, MimeType: media, Size: obj.Size, Path: obj.Path})
	}
	for _, a := range arts {
		ov.Artifacts = append(ov.Artifacts, a.ID)
	}
	b.m.Artifacts = append(b.m.Artifacts, arts...)
	b.m.Metadata.Extra.Overflow = append(b.m.Metadata.Extra.Overflow, ov)
	return arts, nil
}

// restNames are the file name and media type of the artifacts that hold
// the rest of each field.
var restNames = map[string][2]string{
	"content.text":     {"text-rest.txt", "text/plain"},
	"content.html":     {"html-rest.html", "text/html"},
	"content.markdown": {"markdown-rest.md", "text/markdown"},
	// The lists a file keeps MaxListItems of (lists.go), one item a line.
	"participants.to":                      {"to-rest.txt", "text/plain"},
	"participants.cc":                      {"cc-rest.txt", "text/plain"},
	"participants.bcc":                     {"bcc-rest.txt", "text/plain"},
	"provider_raw.from":                    {"from-rest.txt", "text/plain"},
	"provider_raw.reply_to":                {"reply-to-rest.txt", "text/plain"},
	"provider_raw.references":              {"references-rest.txt", "text/plain"},
	"metadata.extra.external_participants": {"external-participants-rest.txt", "text/plain"},
}

func restExt(name string) string { return name[strings.LastIndexByte(name, '.'):] }

// restLine is the line the body ends with when it was cut: where the
// message goes on, for an agent that reads only the body.
func restLine(arts []schema.Artifact) string {
	var where []string
	for _, a := range arts {
		where = append(where, fmt.Sprintf("%s (%d bytes, %s%s)", a.Name, a.Size, DropzonePrefix, a.Path))
	}
	return "\n\n[… this message goes on beyond what its file keeps, in " + strings.Join(where, ", ") + "]\n"
}

// names lists the names of artifacts.
func names(arts []schema.Artifact) string {
	var ns []string
	for _, a := range arts {
		ns = append(ns, a.Name)
	}
	return strings.Join(ns, ", then ")
}

// share returns how many bytes each field keeps so that the kept bytes,
// weighted, sum to at most limit: the largest level c such that
// Σ weight·min(size, c) ≤ limit. A field shorter than c keeps all its
// text; the longer ones keep c bytes each.
func share(sizes, weights []int64, limit int64) []int64 {
	keep := make([]int64, len(sizes))
	order := make([]int, len(sizes))
	var wsum int64
	for i := range order {
		order[i] = i
		if sizes[i] > 0 {
			wsum += weights[i]
		}
	}
	// A field of weight 0 costs nothing and keeps all; the loop below
	// never divides by a sum it leaves at 0.
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(sizes[a], sizes[b]) })
	left := limit
	for j, i := range order {
		if sizes[i] == 0 || weights[i] == 0 {
			keep[i] = sizes[i] // costs nothing against the limit
			continue
		}
		c := left / wsum
		if sizes[i] > c {
			for _, i := range order[j:] {
				keep[i] = c
				if weights[i] == 0 {
					keep[i] = sizes[i]
				}
			}
			break
		}
		keep[i] = sizes[i]
		left -= weights[i] * sizes[i]
		wsum -= weights[i]
	}
	return keep
}

// cutAt returns where to cut field f to keep at most k bytes of it: all
// of it when it is that short; else at a character boundary, and after a
// line end when there is one in the last 4 KiB, so that the kept text
// ends where a reader expects a break.
func cutAt(f *textField, k int64) int {
	if f == nil || f.length() == 0 {
		return 0
	}
	if k >= f.size {
		return int(f.size)
	}
	text, n := f.mem(), int(k)
	for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
		n--
	}
	if i := strings.LastIndexByte(text[max(0, n-4096):n], '\n'); i >= 0 {
		return max(0, n-4096) + i + 1
	}
	return n
}

// runeLimit reads at most n bytes of br, ending on a character boundary
// unless whole (the rest of the text fits): so that each artifact of a
// long rest is valid UTF-8 on its own.
type runeLimit struct {
	br    *bufio.Reader
	n     int64
	whole bool
}

func (l *runeLimit) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if l.whole || l.n > utf8.UTFMax {
		if !l.whole && int64(len(p)) > l.n-utf8.UTFMax {
			p = p[:l.n-utf8.UTFMax]
		}
		if int64(len(p)) > l.n {
			p = p[:l.n]
		}
		k, err := l.br.Read(p)
		l.n -= int64(k)
		return k, err
	}
	// The last bytes: take no character that does not fit whole.
	b, _ := l.br.Peek(int(l.n) + utf8.UTFMax)
	end := min(int(l.n), len(b))
	if end < len(b) {
		for end > 0 && !utf8.RuneStart(b[end]) {
			end--
		}
	}
	k := copy(p, b[:end])
	l.br.Discard(k)
	if k == end {
		l.n = 0
	} else {
		l.n -= int64(k)
	}
	if k == 0 {
		return 0, io.EOF
	}
	return k, nil
}
