package mime

import (
	"bufio"
	"bytes"
	"io"
)

// transferDecoder returns a reader of the decoded content of a body sent
// with Content-Transfer-Encoding cte. Both decoders are lenient: they never
// fail, and what they skip is counted (see badBytes). Unknown encodings
// pass the bytes through, noted.
func transferDecoder(cte string, r io.Reader, what string, n *Notes) io.Reader {
	switch cte {
	case "", "7bit", "8bit", "binary":
		return r
	case "base64":
		return &base64Reader{r: r}
	case "quoted-printable":
		return newQPReader(r)
	}
	n.Addf("%s: unknown Content-Transfer-Encoding %s: kept as is", what, QuoteShort(cte))
	return r
}

// decoder is transferDecoder with the decoders taken from the pools,
// released with the part (see releaseFrom).
func (w *mimeWalker) decoder(cte string, r io.Reader, what string) io.Reader {
	switch cte {
	case "quoted-printable":
		d := qpPool.Get().(*qpReader)
		d.reset(w.reader(r))
		w.pooled = append(w.pooled, pooled{qp: d})
		return d
	case "base64":
		d := b64Pool.Get().(*base64Reader)
		d.reset(r)
		w.pooled = append(w.pooled, pooled{b64: d})
		return d
	}
	return transferDecoder(cte, r, what, w.notes)
}

// badBytes returns how many input bytes a decoder could not decode.
func badBytes(r io.Reader) int {
	switch d := r.(type) {
	case *base64Reader:
		return d.bad
	}
	return 0
}

// base64Reader decodes base64 leniently: characters outside the alphabet
// are skipped (white space silently, anything else counted in bad), the
// URL-safe alphabet is accepted too, padding may appear in the middle (as
// when encoded blocks were concatenated), and a final group without its
// padding is decoded as far as it goes. One bad character never costs the
// rest of the content.
type base64Reader struct {
	r    io.Reader
	in   [8 << 10]byte
	out  [6 << 10]byte
	o, e int // out[o:e] is decoded and not yet returned
	q    [4]byte
	nq   int
	bad  int
	err  error
}

// reset makes d a decoder of r, as new; its buffers are kept.
func (d *base64Reader) reset(r io.Reader) {
	d.r, d.o, d.e, d.nq, d.bad, d.err = r, 0, 0, 0, 0, nil
}

var b64 = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = byte(i)
	}
	t['-'], t['_'] = 62, 63
	t['='] = 0xfe
	for _, c := range " \t\r\n\f\v" {
		t[c] = 0xfd
	}
	return t
}()

func (d *base64Reader) Read(p []byte) (int, error) {
	for d.o == d.e {
		if d.err != nil {
			return 0, d.err
		}
		d.o, d.e = 0, 0
		m, err := d.r.Read(d.in[:])
		d.decode(d.in[:m])
		if err != nil {
			d.flush()
			d.err = err
		}
	}
	k := copy(p, d.out[d.o:d.e])
	d.o += k
	return k, nil
}

func (d *base64Reader) decode(in []byte) {
	out := d.out[:]
	e := d.e
	for _, c := range in {
		v := b64[c]
		switch v {
		case 0xfd: // white space
			continue
		case 0xff:
			d.bad++
			continue
		case 0xfe: // padding: end the group
			d.flushInto(out, &e)
			continue
		}
		d.q[d.nq] = v
		d.nq++
		if d.nq == 4 {
			out[e] = d.q[0]<<2 | d.q[1]>>4
			out[e+1] = d.q[1]<<4 | d.q[2]>>2
			out[e+2] = d.q[2]<<6 | d.q[3]
			e += 3
			d.nq = 0
		}
	}
	d.e = e
}

func (d *base64Reader) flush() {
	e := d.e
	d.flushInto(d.out[:], &e)
	d.e = e
}

// flushInto decodes a partial group: two characters give one byte, three
// give two; a lone character carries no whole byte and is counted bad.
func (d *base64Reader) flushInto(out []byte, e *int) {
	switch d.nq {
	case 1:
		d.bad++
	case 2:
		out[*e] = d.q[0]<<2 | d.q[1]>>4
		*e++
	case 3:
		out[*e] = d.q[0]<<2 | d.q[1]>>4
		out[*e+1] = d.q[1]<<4 | d.q[2]>>2
		*e += 2
	}
	d.nq = 0
}

// qpReader decodes quoted-printable leniently: "=XX" in either case is a
// byte, "=" at the end of a line (trailing white space allowed) is a soft
// line break, and an "=" that starts neither is kept as it is. White space at
// the end of a line is dropped, as RFC 2045 says; hard line breaks become
// CRLF, the canonical form.
type qpReader struct {
	br    *bufio.Reader
	out   []byte
	o     int
	carry []byte // the start of an escape split by a long line
	err   error
}

func newQPReader(r io.Reader) *qpReader {
	return &qpReader{br: bufio.NewReaderSize(r, 16<<10), out: make([]byte, 0, 16<<10)}
}

// reset makes d a decoder of br, as new; its output buffer is kept.
func (d *qpReader) reset(br *bufio.Reader) {
	d.br, d.out, d.o, d.carry, d.err = br, d.out[:0], 0, nil, nil
}

func (d *qpReader) Read(p []byte) (int, error) {
	for d.o == len(d.out) {
		if d.err != nil {
			return 0, d.err
		}
		d.out, d.o = d.out[:0], 0
		line, err := d.br.ReadSlice('\n')
		if len(d.carry) > 0 {
			line = append(d.carry, line...)
			d.carry = nil
		}
		if err == bufio.ErrBufferFull {
			// A piece of a long line: keep back an escape it may split.
			keep := 0
			if k := len(line); k >= 1 && line[k-1] == '=' {
				keep = 1
			} else if k >= 2 && line[k-2] == '=' {
				keep = 2
			}
			d.carry = append([]byte(nil), line[len(line)-keep:]...)
			d.out = decodeQP(d.out, line[:len(line)-keep], false)
			continue
		}
		if err != nil {
			d.err = err
		}
		d.out = decodeQP(d.out, line, true)
	}
	k := copy(p, d.out[d.o:])
	d.o += k
	return k, nil
}

// decodeQP appends the decoding of line to out. whole is set when line is a
// whole line (with its line end, or the last of the input), not a piece.
func decodeQP(out, line []byte, whole bool) []byte {
	hard, soft := false, false
	if whole {
		hard = len(line) > 0 && line[len(line)-1] == '\n'
		line = bytes.TrimRight(trimEOL(line), " \t")
		if len(line) > 0 && line[len(line)-1] == '=' {
			soft = true
			line = line[:len(line)-1]
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '=' && i+2 < len(line) {
			if h, ok := unhex(line[i+1]); ok {
				if l, ok := unhex(line[i+2]); ok {
					out = append(out, h<<4|l)
					i += 2
					continue
				}
			}
		}
		out = append(out, c)
	}
	if hard && !soft {
		out = append(out, '\r', '\n')
	}
	return out
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lfReader turns CRLF line breaks into LF as it streams; a CR not
// followed by LF is kept.
type lfReader struct {
	r       io.Reader
	in, out []byte
	o       int  // out[o:] is converted and not yet returned
	cr      bool // the last byte read was a CR, not yet written
	err     error
}

func (l *lfReader) Read(p []byte) (int, error) {
	for l.o == len(l.out) {
		if l.err != nil {
			if l.cr {
				l.cr = false
				l.out, l.o = append(l.out[:0], '\r'), 0
				break
			}
			return 0, l.err
		}
		if l.in == nil {
			l.in, l.out = make([]byte, 16<<10), make([]byte, 0, 16<<10+1)
		}
		n, err := l.r.Read(l.in)
		l.err = err
		l.out, l.o = l.out[:0], 0
		for _, c := range l.in[:n] {
			if l.cr && c != '\n' {
				l.out = append(l.out, '\r')
			}
			l.cr = c == '\r'
			if !l.cr {
				l.out = append(l.out, c)
			}
		}
	}
	k := copy(p, l.out[l.o:])
	l.o += k
	return k, nil
}
