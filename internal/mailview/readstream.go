package mailview

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"unicode/utf8"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Write writes a mailbox file, open at f, in form, in bounded memory
// whatever its size. A file up to mailbox.WholeFile bytes (every file
// Courier writes now) is read whole and written by writeWhole. A larger one (an
// inbound file written before courier.limits.max_text_bytes, hundreds of
// megabytes) is streamed: --raw copies it; the other forms read its front
// matter with schema.ReadHead (long values cut, saying so) and copy its
// body after the header, escaping it on the way for JSON.
func Write(w io.Writer, f *os.File, e *mailbox.Entry, form Form) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	if fi.Size() <= mailbox.WholeFile {
		data, err := io.ReadAll(io.LimitReader(f, mailbox.WholeFile+1))
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		if !form.Raw && e.Direction == schema.Inbound {
			data, _ = schema.CapLists(data, 0) // as mailbox.Message reads it
		}
		return writeWhole(w, data, e, form)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if form.Raw {
		clean := func(b []byte) []byte { return b }
		if form.Terminal {
			clean = VisibleControls
		}
		_, err := copyRunes(w, br, func(s string) []byte { return clean([]byte(s)) })
		return err
	}
	if e.Direction != schema.Inbound {
		return fmt.Errorf("%s: a draft of %d bytes, larger than a draft may be: `courier read --raw %s` shows it as it is", e.Path, fi.Size(), e.ID)
	}
	// The text forms show none of content.*: their long values are read
	// no further than the 64 KiB every value keeps.
	budget := 1
	if form.JSON && !form.Content {
		budget = schema.MaxReadText
	}
	head, _, err := schema.ReadHead(br, budget)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	head, _ = schema.CapLists(head, 0)
	msg, err := schema.Decode(head)
	if err != nil {
		return fmt.Errorf("%s: %w", e.Path, err)
	}
	// The head and its parse tree are garbage now: collected before the
	// JSON doubles the message, the peaks do not add up.
	runtime.GC()
	text := func(s string) []byte { return []byte(SafeText(s)) }
	switch {
	case form.Content:
		_, err := copyRunes(w, br, text)
		return err
	case form.JSON:
		return streamJSON(w, e, msg, br)
	}
	var b bytes.Buffer
	writeMessageHead(&b, e, msg)
	if _, err := io.WriteString(w, SafeText(b.String())); err != nil {
		return err
	}
	last, err := copyRunes(w, br, text)
	if err == nil && last != '\n' {
		_, err = io.WriteString(w, "\n")
	}
	return err
}

// streamJSON writes the entry and the message as read --format json does,
// without a copy of their long strings: the JSON is encoded with
// placeholders for content.text, content.html, content.markdown and the
// body, and each is written in their place escaped a piece at a time (the
// body as it is read from br). A 16 MiB HTML is printed for its 16 MiB,
// not for the four copies an encoder's buffers would make of it.
func streamJSON(out io.Writer, e *mailbox.Entry, msg *schema.Message, br *bufio.Reader) error {
	// The values, in the order encoding/json writes them.
	type value struct {
		field *schema.NullString
		text  string
	}
	values := []value{{field: &msg.Content.Text}, {field: &msg.Content.HTML}, {field: &msg.Content.Markdown}}
	for i := range values {
		v := &values[i]
		if *v.field != "" {
			v.text, *v.field = string(*v.field), schema.NullString(placeholder(i))
		}
	}
	msg.Body = placeholder(len(values))
	head, doc, err := joinEntry(e, struct {
		Message *schema.Message `json:"message"`
	}{msg})
	if err != nil {
		return err
	}
	w := &JSONSafeWriter{W: out}
	if _, err := w.Write(head); err != nil {
		return err
	}
	escape := jsonPieces()
	for i := 0; i <= len(values); i++ {
		ph, _ := json.Marshal(placeholder(i))
		before, after, found := bytes.Cut(doc, ph)
		if !found {
			continue // a null value
		}
		if _, err := w.Write(append(before, '"')); err != nil {
			return err
		}
		var err error
		if i < len(values) {
			err = writeEscaped(w, values[i].text, escape)
		} else {
			_, err = copyRunes(w, br, escape)
		}
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte{'"'}); err != nil {
			return err
		}
		doc = after
	}
	if _, err := w.Write(doc); err != nil {
		return err
	}
	return w.Close()
}

// placeholder stands in the JSON for the i-th long value: NUL bytes, which
// no value of a valid file holds, are escaped as \u0000, so it cannot
// occur otherwise.
func placeholder(i int) string { return fmt.Sprintf("\x00courier-value-%d\x00", i) }

// jsonPieces returns a function escaping a piece of a string as JSON does
// inside quotes (SetEscapeHTML off, as read's encoder).
func jsonPieces() func(string) []byte {
	var piece bytes.Buffer
	enc := json.NewEncoder(&piece)
	enc.SetEscapeHTML(false)
	return func(s string) []byte {
		piece.Reset()
		enc.Encode(s) // a string always encodes
		b := bytes.TrimSuffix(piece.Bytes(), []byte("\n"))
		return b[1 : len(b)-1]
	}
}

// writeEscaped writes s to w through escape, 64 KiB at a time, each piece
// ending between characters.
func writeEscaped(w io.Writer, s string, escape func(string) []byte) error {
	for s != "" {
		k := min(len(s), 64<<10)
		for j := k; j > k-utf8.UTFMax && j > 0 && j < len(s); j-- {
			if utf8.RuneStart(s[j]) {
				k = j
				break
			}
		}
		if _, err := w.Write(escape(s[:k])); err != nil {
			return err
		}
		s = s[k:]
	}
	return nil
}

// copyRunes copies r to w a piece at a time, each cut at a character
// boundary and passed through conv, and returns the last byte copied.
func copyRunes(w io.Writer, r io.Reader, conv func(string) []byte) (last byte, err error) {
	buf := make([]byte, 64<<10+utf8.UTFMax)
	carry := 0
	for {
		n, rerr := io.ReadFull(r, buf[carry:carry+64<<10])
		n += carry
		cut := n
		if rerr == nil {
			cut = runeBoundary(buf[:n])
		}
		if cut > 0 {
			if _, err := w.Write(conv(string(buf[:cut]))); err != nil {
				return last, err
			}
			last = buf[cut-1]
		}
		carry = copy(buf, buf[cut:n])
		switch rerr {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return last, nil
		default:
			return last, rerr
		}
	}
}

// runeBoundary returns the length of the longest prefix of b that ends
// between characters.
func runeBoundary(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
