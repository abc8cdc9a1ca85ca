package mime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/monoco/courier/dropzone"
)

// bufSize is the buffer of each entity's reader.
const bufSize = 32 << 10

// The reader's limits: past them a message is still read, and what is
// left out is noted.
const (
	// MaxText bounds how much of a text or HTML body part is decoded at
	// once: a longer one is decoded a piece at a time, each cut at a line
	// end, so that a part of any size costs this much memory.
	MaxText = 4 << 20
	// MaxDepth bounds the nesting of multiparts; deeper ones are stored
	// whole as artifacts.
	MaxDepth = 32
	// MaxForwards bounds attached messages shown inside one another; a
	// deeper one is stored whole, not shown.
	MaxForwards = 8
	// MaxParts bounds the parts of one message; the rest are skipped,
	// noted.
	MaxParts = 1000
)

// mediaTypeRE matches a usable type/subtype (RFC 2045 tokens).
var mediaTypeRE = regexp.MustCompile(`^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9!#$&^_.+*-]+$`)

// The pools of what a message's walk takes a piece at a time: the
// buffered readers of entities (32 KB each: most of the time spent
// allocating went to them), the decoders of base64 and quoted-printable
// bodies (14 KB and 16 KB of buffers each) and the buffer text is decoded
// in. Each is reset before it goes back, and nothing the walk returns
// points into one: the text kept is copied out of the buffer into strings.
var (
	readers   = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	b64Pool   = sync.Pool{New: func() any { return new(base64Reader) }}
	qpPool    = sync.Pool{New: func() any { return &qpReader{out: make([]byte, 0, 16<<10)} }}
	textBufs  = sync.Pool{New: func() any { return new([]byte) }}
	maxPooled = 256 << 10 // a larger buffer (a long line, a long part) is left to the collector
)

// pooled is one thing the walk took from a pool: exactly one field is set.
type pooled struct {
	br  *bufio.Reader
	b64 *base64Reader
	qp  *qpReader
}

// reader returns a pooled buffered reader of r, released when the message
// (or the part that took it) is done.
func (w *mimeWalker) reader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	w.pooled = append(w.pooled, pooled{br: br})
	return br
}

// release returns what the walk took from the pools; nothing may read it
// after.
func (w *mimeWalker) release() {
	w.releaseFrom(0)
	if w.scratch != nil {
		if cap(*w.scratch) <= maxPooled {
			*w.scratch = (*w.scratch)[:0]
			textBufs.Put(w.scratch)
		}
		w.scratch = nil
	}
}

// releaseFrom returns what was taken since mark (a length of pooled), so
// that a message of many parts holds the buffers of one branch at a time.
func (w *mimeWalker) releaseFrom(mark int) {
	for _, p := range w.pooled[mark:] {
		switch {
		case p.br != nil:
			p.br.Reset(nil)
			readers.Put(p.br)
		case p.b64 != nil:
			p.b64.reset(nil)
			b64Pool.Put(p.b64)
		case p.qp != nil && cap(p.qp.out) <= maxPooled:
			p.qp.reset(nil)
			qpPool.Put(p.qp)
		}
	}
	clear(w.pooled[mark:])
	w.pooled = w.pooled[:mark]
}

// errOverLimit is returned by limitReader past Options.MaxArtifact.
var errOverLimit = errors.New("email: artifact over the size limit")

// mimeWalker walks the MIME tree of one message, streaming attachments into the
// batch and collecting text.
type mimeWalker struct {
	b        *dropzone.Batch
	max      int64
	notes    *Notes
	src      *errReader
	drafts   []Artifact
	parts    int
	hint     string // the charset of the first labelled text part
	tooMany  bool
	forwards int     // attached messages being shown, one inside the other
	scratch  *[]byte // the buffer text parts are decoded in, one at a time
	pooled   []pooled
	texts    *textStore
}

// entityPos is where an entity sits in the tree.
type entityPos struct {
	path        string // "1.2" (1-based, as IMAP numbers parts); "" for the message
	defaultType string // text/plain, or message/rfc822 in a digest
	related     bool   // a child of multipart/related
	root        bool   // the root of its multipart/related
	charset     string // a charset named on an enclosing multipart, for text that names none
}

func (c entityPos) what() string {
	if c.path == "" {
		return "body"
	}
	return "part " + c.path
}

// walk handles one entity: a multipart is split, a body text is collected,
// anything else becomes an artifact. Only I/O errors are returned.
func (w *mimeWalker) walk(h Header, body *bufio.Reader, c entityPos, col *Body, depth int) error {
	what := c.what()
	ct := parseMediaType(h.Get("Content-Type"))
	media := ct.value
	switch {
	case media == "":
		media = c.defaultType
	case !mediaTypeRE.MatchString(media):
		// "text", "application-x-gzip", bytes that are no token: no
		// usable type.
		n := "application/octet-stream"
		if p, _ := ct.lookup("name"); strings.HasPrefix(media, "text") && p.raw == nil {
			n = "text/plain"
		}
		w.notes.Addf("%s: Content-Type %s not understood: read as %s", what, QuoteShort(media), n)
		media = n
	}
	disp := parseMediaType(h.Get("Content-Disposition"))
	cte := strings.ToLower(strings.TrimSpace(string(h.Get("Content-Transfer-Encoding"))))
	if i := strings.IndexAny(cte, " \t(;"); i >= 0 {
		cte = cte[:i]
	}
	cte = strings.Trim(cte, `"'`)

	if strings.HasPrefix(media, "multipart/") {
		if depth < MaxDepth {
			return w.multipart(ct, media, body, c, col, depth)
		}
		w.notes.Addf("%s: multipart nested deeper than %d: stored whole", what, MaxDepth)
	}
	name, hasName := disp.lookup("filename")
	if !hasName || len(name.raw) == 0 {
		name, hasName = ct.lookup("name")
		hasName = hasName && len(name.raw) > 0
	}
	if (media == "text/plain" || media == "text/html") && disp.value != "attachment" && !hasName && !(c.related && !c.root) {
		charset := ct.get("charset")
		if charset == "" {
			charset = c.charset
		}
		return w.text(media, charset, cte, body, c, col)
	}
	d := Artifact{
		name:      name,
		hasName:   hasName,
		Media:     media,
		ContentID: strings.Trim(strings.TrimSpace(string(h.Get("Content-Id"))), "<>"),
		message:   media == "message/rfc822" || media == "message/global",
		// A text attachment sent as 7bit, 8bit or quoted-printable has the
		// transfer's CRLF line breaks (IMAP and SMTP are CRLF): stored
		// with LF, as the body text is, so a patch applies and a script
		// runs on the Linux host. Base64 keeps the sender's bytes.
		lf: strings.HasPrefix(media, "text/") && cte != "base64",
	}
	if !isASCII([]byte(d.ContentID)) || strings.ContainsFunc(d.ContentID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		d.ContentID = ""
	}
	d.Inline = disp.value == "inline" || (disp.value == "" && (c.related || d.ContentID != ""))
	if d.message && w.forwards > 0 && w.forwards < MaxForwards && disp.value != "attachment" && depth < MaxDepth {
		// Inside an attached message already stored whole: shown, not
		// stored again (see forwardInline).
		w.forwards++
		defer func() { w.forwards-- }()
		return w.forwardInline(cte, body, c, col, depth)
	}
	obj, err := w.artifact(d, cte, body, what)
	if err != nil || obj.ID == "" || !d.message || disp.value == "attachment" || depth >= MaxDepth {
		return err
	}
	if w.forwards >= MaxForwards {
		w.notes.Addf("%s: attached messages nested deeper than %d: kept whole, not shown", what, MaxForwards)
		return nil
	}
	w.forwards++
	defer func() { w.forwards-- }()
	return w.forward(obj, c, col, depth)
}

// forward shows an attached message that is not an attachment (a forward
// inline, the parts of a digest) as a mail reader does: its header block
// and its body join the body, its attachments the artifacts. The message
// is read back from the dropzone, where it is also kept whole.
func (w *mimeWalker) forward(obj dropzone.Object, c entityPos, col *Body, depth int) error {
	f, err := w.b.Open(obj)
	if err != nil {
		return fmt.Errorf("email: read attached message back: %w", err)
	}
	defer f.Close()
	mark := len(w.pooled)
	defer w.releaseFrom(mark)
	br := w.reader(f)
	h, left := readHeader(br, true, c.what()+" (attached message) header", w.notes)
	sub := &Body{}
	if err := w.walk(h, bodyReader(br, left), entityPos{path: c.path, defaultType: "text/plain"}, sub, depth+1); err != nil {
		return err
	}
	col.segs = append(col.segs, segment{fwd: &forwarded{h: h, body: sub}})
	return nil
}

// forwardInline shows an attached message found inside another attached
// message, reading it from the stream instead of storing it.
//
// Storing every level of a chain of forwards stored the same bytes again
// at each level: a 21.5 MB mail of nested forwards took 206 MB of
// dropzone. The rule now: the raw message is stored, and so is each
// attached message that is not inside another one (its .eml artifact, as
// before); an attached message inside one of those is not stored on its
// own, since its bytes are inside its ancestor's .eml byte for byte. Its
// parts are still walked, so each attachment and inline image at any level
// is stored once, decoded, as an artifact of the message: every attachment
// stays retrievable, and a nested message as a whole is in the .eml that
// holds it. Past MaxForwards a nested message is stored whole again (not
// shown), and a message attached as an attachment (Content-Disposition:
// attachment) is stored and not walked, as before: neither repeats
// anything, as neither is walked into.
func (w *mimeWalker) forwardInline(cte string, body io.Reader, c entityPos, col *Body, depth int) error {
	dec := w.decoder(cte, body, c.what())
	br := w.reader(dec)
	mh, left := readHeader(br, true, c.what()+" (attached message) header", w.notes)
	sub := &Body{}
	if err := w.walk(mh, bodyReader(br, left), entityPos{path: c.path, defaultType: "text/plain"}, sub, depth+1); err != nil {
		return err
	}
	if bad := badBytes(dec); bad > 0 {
		w.notes.Addf("%s: %d characters that are not base64 skipped", c.what(), bad)
	}
	col.segs = append(col.segs, segment{fwd: &forwarded{h: mh, body: sub}})
	return nil
}

// multipart walks the parts of a multipart entity. One without a usable
// boundary, or whose boundary is nowhere in the body, is read as text.
func (w *mimeWalker) multipart(ct mediaType, media string, body *bufio.Reader, c entityPos, col *Body, depth int) error {
	what := c.what()
	boundary := ct.get("boundary")
	if boundary == "" || len(boundary) > maxBoundary {
		boundary = sniffBoundary(body)
		if boundary == "" {
			w.notes.Addf("%s: %s without a boundary: read as text", what, media)
			return w.text("text/plain", ct.get("charset"), "", body, c, col)
		}
		w.notes.Addf("%s: %s without a boundary parameter: used %s found in the body", what, media, QuoteShort(boundary))
	}
	sub := strings.TrimPrefix(media, "multipart/")
	mr := newMultipartReader(body, boundary)
	alts, err := w.walkParts(mr, ct, sub, c, col, depth)
	if err != nil {
		return err
	}
	if sub == "alternative" {
		if ch := chooseAlternatives(alts); ch.text != nil || ch.html != nil {
			col.segs = append(col.segs, segment{alt: &ch})
		}
	}
	switch {
	case mr.NoDelimiter:
		w.notes.Addf("%s: boundary %s of %s not found: body read as text", what, QuoteShort(boundary), media)
		return w.text("text/plain", "", "", bufio.NewReader(bytes.NewReader(mr.Preamble)), c, col)
	case mr.Truncated:
		w.notes.Addf("%s: %s ends without its final boundary", what, media)
	}
	return nil
}

// walkParts walks each part of mr, the parts of the multipart/sub at c, into
// col; in a multipart/alternative, each into a Body of its own, returned
// in order for chooseAlternatives.
func (w *mimeWalker) walkParts(mr *multipartReader, ct mediaType, sub string, c entityPos, col *Body, depth int) ([]*Body, error) {
	root := relatedRoot{
		start:   strings.Trim(strings.TrimSpace(ct.get("start")), "<>"),
		relType: strings.ToLower(strings.TrimSpace(ct.get("type"))),
	}
	var alts []*Body
	index := 0
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return alts, nil
		}
		if err != nil {
			return nil, w.ioError(err)
		}
		index++
		if !w.countPart() {
			continue
		}
		cc := childPos(c, ct, index)
		mark := len(w.pooled)
		pbr := w.reader(p)
		ph, left := readHeader(pbr, false, cc.what()+" header", w.notes)
		pb := bodyReader(pbr, left)
		if len(ph) == 0 {
			if _, err := pb.Peek(1); err != nil {
				w.releaseFrom(mark)
				continue // an empty part: nothing to keep
			}
		}
		switch sub {
		case "digest":
			cc.defaultType = "message/rfc822"
		case "related":
			cc.related = true
			cc.root = root.is(index, ph)
		}
		target := col
		if sub == "alternative" {
			target = &Body{}
			alts = append(alts, target)
		}
		err = w.walk(ph, pb, cc, target, depth+1)
		w.releaseFrom(mark) // the part is done with: its readers are free
		if err != nil {
			return nil, err
		}
	}
}

// countPart counts a part against MaxParts and reports whether it is
// read; past the limit the rest are skipped, noted once.
func (w *mimeWalker) countPart() bool {
	if w.parts >= MaxParts {
		if !w.tooMany {
			w.notes.Addf("message has more than %d parts: the rest skipped", MaxParts)
			w.tooMany = true
		}
		return false
	}
	w.parts++
	return true
}

// childPos is the position of part index (1-based) of the multipart ct at
// c. A charset named on the multipart, or on an enclosing one, is passed
// down for text parts that name none.
func childPos(c entityPos, ct mediaType, index int) entityPos {
	cc := entityPos{path: strconv.Itoa(index), defaultType: "text/plain", charset: c.charset}
	if cs := ct.get("charset"); cs != "" {
		cc.charset = cs // not standard on a multipart, but senders mean it
	}
	if c.path != "" {
		cc.path = c.path + "." + cc.path
	}
	return cc
}

// relatedRoot finds the root of a multipart/related: the part whose
// Content-ID is the start parameter; without start, the first part, or,
// when a type parameter names the root's type, the first part of that
// type (RFC 2387 §3.1; MHTML puts images before the HTML).
type relatedRoot struct {
	start, relType string
	found          bool // the part of relType was found
}

// is reports whether part index (1-based), of header ph, is the root.
func (r *relatedRoot) is(index int, ph Header) bool {
	switch {
	case r.start == "" && r.relType != "":
		root := !r.found && parseMediaType(ph.Get("Content-Type")).value == r.relType
		r.found = r.found || root
		return root
	case r.start == "":
		return index == 1
	}
	return strings.Trim(strings.TrimSpace(string(ph.Get("Content-Id"))), "<>") == r.start
}

// chooseAlternatives takes the text from the last alternative that has
// text and the HTML from the last one that has HTML: the last is the best
// (RFC 2046 §5.1.4).
func chooseAlternatives(alts []*Body) altChoice {
	var ch altChoice
	for i := len(alts) - 1; i >= 0 && ch.text == nil; i-- {
		if alts[i].hasText() {
			ch.text = alts[i]
		}
	}
	for i := len(alts) - 1; i >= 0 && ch.html == nil; i-- {
		if alts[i].hasHTML() {
			ch.html = alts[i]
		}
	}
	return ch
}

// sniffBoundary finds a boundary in a multipart body that names none: the
// first line, in the first buffer of the body, that starts with "--".
func sniffBoundary(br *bufio.Reader) string {
	b, _ := br.Peek(br.Size())
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, " \t\r")
		if len(line) > 2 && len(line) <= 200 && bytes.HasPrefix(line, []byte("--")) && !bytes.ContainsAny(line, " \t") {
			return string(bytes.TrimSuffix(line[2:], []byte("--")))
		}
	}
	return ""
}

// text collects a text/plain or text/html body part, decoded to UTF-8 with
// line ends normalised to LF. A part longer than MaxText is decoded a
// piece at a time, each cut at a line end, and the pieces past the
// message's bound of text held wait in the spool: memory stays flat
// whatever the part's size, and none of its text is dropped.
func (w *mimeWalker) text(media, charset, cte string, body io.Reader, c entityPos, col *Body) error {
	what := c.what()
	r := w.decoder(cte, body, what)
	label := charsetLabel(charset)
	if w.hint == "" && label != "" && !isUTF8Label(label) && lookupCharset(label) != nil {
		w.hint = label
	}
	if w.scratch == nil {
		w.scratch = textBufs.Get().(*[]byte)
	}
	var (
		pieces   []piece
		nonSpace bool
		buf      = (*w.scratch)[:0]
	)
	defer func() { *w.scratch = buf[:0] }()
	for {
		var err error
		start := len(buf)
		buf, err = readUpTo(buf, r, MaxText)
		if err != nil {
			return w.ioError(err)
		}
		last := len(buf) < MaxText || len(buf) == start
		cut := len(buf)
		if !last {
			cut = chunkCut(buf, label)
		} else if bad := badBytes(r); bad > 0 {
			// Noted before the charset's notes, as when the part is
			// decoded whole.
			w.notes.Addf("%s: %d characters that are not base64 skipped", what, bad)
		}
		if cut > 0 {
			s := decodeText(buf[:cut], label, w.hint, what, w.notes)
			if s != "" {
				nonSpace = nonSpace || strings.TrimSpace(s) != ""
				p, err := w.texts.keep(s)
				if err != nil {
					return err
				}
				pieces = append(pieces, p)
			}
		}
		buf = buf[:copy(buf, buf[cut:])]
		if last {
			break
		}
	}
	if !nonSpace {
		return nil
	}
	if media == "text/html" {
		col.segs = append(col.segs, segment{html: pieces})
	} else {
		col.segs = append(col.segs, segment{text: pieces})
	}
	return nil
}

// chunkCut returns where to end the piece of a long part decoded now,
// within b: after its last line end, so that no character (in any charset
// that keeps LF a byte of its own) and no CRLF is split. A piece without a
// line end is cut at a character boundary: of UTF-8, and at a whole unit
// of UTF-16 and UTF-32.
func chunkCut(b []byte, label string) int {
	switch {
	case strings.HasPrefix(label, "utf-16") || strings.HasPrefix(label, "ucs-2"):
		return len(b) &^ 1
	case strings.HasPrefix(label, "utf-32") || strings.HasPrefix(label, "ucs-4"):
		return len(b) &^ 3
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return i + 1
	}
	cut := runeCut(b)
	if cut > 0 && b[cut-1] == '\r' {
		cut-- // its LF may start the next piece
	}
	return cut
}

// readUpTo appends to buf what r holds, reading at most max bytes.
func readUpTo(buf []byte, r io.Reader, max int) ([]byte, error) {
	for len(buf) < max {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):min(cap(buf), max)]
		k, err := r.Read(room)
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// artifact streams an entity's decoded content into the batch and returns
// the object. A part over the size limit is skipped and noted (a zero
// Object); only I/O errors are returned.
func (w *mimeWalker) artifact(d Artifact, cte string, body io.Reader, what string) (dropzone.Object, error) {
	r := w.decoder(cte, body, what)
	dec := r
	if d.lf {
		r = &lfReader{r: r}
	}
	var head *capBuffer
	if d.message {
		head = &capBuffer{max: 64 << 10}
		r = io.TeeReader(r, head)
	}
	if w.max > 0 {
		r = &limitReader{r: r, n: w.max}
	}
	obj, err := w.b.Put(r)
	if err != nil {
		if errors.Is(err, errOverLimit) || errors.Is(err, dropzone.ErrTooLarge) {
			w.notes.Addf("%s (%s): over the artifact size limit: skipped", what, d.Media)
			return dropzone.Object{}, nil
		}
		return dropzone.Object{}, w.ioError(err)
	}
	if bad := badBytes(dec); bad > 0 {
		w.notes.Addf("%s: %d characters that are not base64 skipped", what, bad)
	}
	d.Object = obj
	if head != nil {
		var scratch Notes
		h, _ := readHeader(bufio.NewReader(bytes.NewReader(head.b)), true, "", &scratch)
		d.subject = h.Get("Subject")
	}
	w.drafts = append(w.drafts, d)
	return obj, nil
}

// ioError prefers the error of the message's reader, when there is one, to
// what a layer above made of it.
func (w *mimeWalker) ioError(err error) error {
	if w.src.err != nil {
		return fmt.Errorf("email: read message: %w", w.src.err)
	}
	return err
}

// limitReader fails with errOverLimit once more than n bytes were read.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, errOverLimit
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	if l.n < 0 {
		return k, errOverLimit
	}
	return k, err
}

// capBuffer keeps the first max bytes written to it.
type capBuffer struct {
	b   []byte
	max int
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// errReader records the first error other than io.EOF of the message's
// reader: that one is an I/O error, where everything else is bad input.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	k, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return k, err
}
