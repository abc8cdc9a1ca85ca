package mime

import (
	"fmt"
	"io"
	"os"

	"github.com/monoco/courier/dropzone"
)

// Options say how Read stores a message's parts.
type Options struct {
	// MaxArtifact is the largest part stored, in bytes (0: no limit). A
	// part over it, or over the batch's own limit, is skipped and noted;
	// the message is not failed.
	MaxArtifact int64
	// BodyTee, when set, is called with the message's header as soon as it
	// is read. When it returns a writer, the raw body (everything after the
	// header, as received) is written to it as it is read, to its end: the
	// caller can hash a body that is never held whole.
	BodyTee func(Header) io.Writer
	// MaxHeld bounds the decoded body text held in memory, in bytes (0:
	// DefaultMaxHeld). Past it, text parts wait in a spool file until
	// they are rendered: a message of many large parts costs this much
	// memory, not their sum.
	MaxHeld int64
	// Spool returns that file, empty, unlinked, open for reading and
	// writing; nil is an unlinked file in the system's temporary
	// directory. Normalize passes the dropzone's (dropzone.Batch.Spool),
	// on the same disk as the mail.
	Spool func() (*os.File, error)
}

// Message is what Read makes of a message. Its header text is still raw:
// Decoder decodes it with the charset of the message's text.
type Message struct {
	// Header is the message's top-level header.
	Header Header
	// Body is the message's body text, in order, for a Renderer.
	Body *Body
	// Artifacts are the parts stored in the batch, in the order found.
	Artifacts []Artifact
	// Decoder decodes the message's header values, its addresses and its
	// artifacts' names; what it repairs or guesses goes to Notes.
	Decoder *Decoder
	// Notes are what could not be parsed, or was repaired, in the order
	// found.
	Notes *Notes

	texts *textStore
}

// Close releases the spool file of the body text; the Body cannot be
// rendered after.
func (m *Message) Close() error {
	if err := m.texts.close(); err != nil {
		return fmt.Errorf("email: close spool: %w", err)
	}
	return nil
}

// Read reads one raw RFC 5322 message from r. Attachments and inline parts
// are streamed into b, never held whole in memory; body text is decoded to
// UTF-8 and kept, in memory up to Options.MaxHeld and in a spool file past
// it. The caller commits or aborts b, and closes the Message once its Body
// is rendered.
//
// Read does not fail on what the message holds: what cannot be parsed is
// repaired or skipped and noted in the Message's Notes. Only I/O errors
// (reading r, writing or reading b) are returned.
func Read(r io.Reader, b *dropzone.Batch, opts Options) (*Message, error) {
	n := &Notes{}
	src := &errReader{r: r}
	texts := &textStore{max: opts.MaxHeld, spool: opts.Spool}
	if texts.max <= 0 {
		texts.max = DefaultMaxHeld
	}
	if texts.spool == nil {
		texts.spool = tempSpool
	}
	w := &mimeWalker{b: b, max: opts.MaxArtifact, notes: n, src: src, texts: texts}
	defer w.release()
	br := w.reader(src)
	h, left := readHeader(br, true, "header", n)
	body := bodyReader(br, left)

	var tee io.Writer
	if opts.BodyTee != nil {
		tee = opts.BodyTee(h)
	}
	if tee != nil {
		body = w.reader(io.TeeReader(body, tee))
	}

	col := &Body{}
	fail := func(err error) (*Message, error) {
		texts.close()
		return nil, err
	}
	if err := w.walk(h, body, entityPos{defaultType: "text/plain"}, col, 0); err != nil {
		return fail(err)
	}
	if tee != nil {
		// The walk may stop short of the end (an epilogue, parts past
		// the limits): the tee sees the rest too.
		if _, err := io.Copy(io.Discard, body); err != nil {
			return fail(w.ioError(err))
		}
	}
	if src.err != nil {
		return fail(fmt.Errorf("email: read message: %w", src.err))
	}
	return &Message{
		Header:    h,
		Body:      col,
		Artifacts: w.drafts,
		Decoder:   &Decoder{hint: w.hint, notes: n},
		Notes:     n,
		texts:     texts,
	}, nil
}
