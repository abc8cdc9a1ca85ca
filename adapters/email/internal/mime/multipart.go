package mime

import (
	"bufio"
	"bytes"
	"io"
)

// maxBoundary bounds a usable boundary (RFC 2046 allows 70 characters; a
// test of mime4j has one of 7,000).
const maxBoundary = 16 << 10

// multipartReader splits a multipart body into its parts, streaming, one line
// at a time (a line longer than the buffer is passed through in pieces).
// Unlike mime/multipart it never fails: a body that ends before the close
// delimiter ends the last part (Truncated says so), and a body with no
// delimiter at all has no parts (NoDelimiter; Preamble holds its start).
//
// A delimiter is a line that starts with "--" + boundary followed by "--"
// (the close delimiter), by white space (and then anything, ignored) or by
// the line end: so the boundary "abc" does not match the line "--abcd" of a
// nested part whose boundary is "abcd". The line end before a delimiter
// belongs to the delimiter.
type multipartReader struct {
	br    *bufio.Reader
	dash  []byte // "--" + boundary
	cur   *mimePart
	state int

	// Preamble is the first bytes before the first delimiter (at most
	// preambleKeep), kept in case there is no delimiter at all.
	Preamble []byte
	// Truncated is set when the body ended before the close delimiter.
	Truncated bool
	// NoDelimiter is set when the body held no delimiter at all.
	NoDelimiter bool
}

const (
	statePreamble = iota
	stateParts
	stateDone
)

const preambleKeep = 64 << 10

func newMultipartReader(br *bufio.Reader, boundary string) *multipartReader {
	return &multipartReader{br: br, dash: []byte("--" + boundary)}
}

// NextPart returns the next part, after reading what is left of the current
// one, or io.EOF when there are no more.
func (mr *multipartReader) NextPart() (*mimePart, error) {
	if mr.state == statePreamble {
		pre := &mimePart{mr: mr, atLineStart: true}
		buf := make([]byte, 4096)
		for {
			k, err := pre.Read(buf)
			if len(mr.Preamble) < preambleKeep {
				mr.Preamble = append(mr.Preamble, buf[:min(k, preambleKeep-len(mr.Preamble))]...)
			}
			if err != nil {
				break
			}
		}
		if mr.state == stateDone && mr.Truncated {
			// Reached the end without a delimiter.
			mr.NoDelimiter, mr.Truncated = true, false
		}
	}
	if mr.cur != nil {
		if _, err := io.Copy(io.Discard, mr.cur); err != nil {
			return nil, err
		}
		mr.cur = nil
	}
	if mr.state == stateDone {
		return nil, io.EOF
	}
	mr.cur = &mimePart{mr: mr, atLineStart: true}
	return mr.cur, nil
}

// delimiter kinds.
const (
	notDelimiter = iota
	delimiter
	closeDelimiter
	endOfInput
)

// delimiterAhead looks at the line that starts at the reader's position.
func (mr *multipartReader) delimiterAhead() int {
	b, err := mr.br.Peek(len(mr.dash) + 2)
	if len(b) == 0 && err != nil {
		return endOfInput
	}
	if !bytes.HasPrefix(b, mr.dash) {
		return notDelimiter
	}
	rest := b[len(mr.dash):]
	switch {
	case len(rest) == 0:
		return delimiter // the last line of the input
	case len(rest) >= 2 && rest[0] == '-' && rest[1] == '-':
		return closeDelimiter
	case rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r' || rest[0] == '\n':
		// Transport padding, or text after the boundary, which RFC 2046
		// says to ignore ("it is sufficient that the boundary appear in
		// its entirety following the CRLF").
		return delimiter
	}
	return notDelimiter
}

// skipLine reads through the end of the current line.
func (mr *multipartReader) skipLine() {
	for {
		_, err := mr.br.ReadSlice('\n')
		if err != bufio.ErrBufferFull {
			return
		}
	}
}

// mimePart is the body of one part (or the preamble) of a multipart body.
type mimePart struct {
	mr          *multipartReader
	atLineStart bool
	pend        [2]byte // held-back line end: it belongs to a delimiter that may follow
	npend       int
	out         []byte // bytes ready to return (in br's buffer, or pend)
	done        bool
	err         error // a read error of the input other than io.EOF
}

func (p *mimePart) finish(state int) {
	p.done = true
	p.mr.state = state
}

func (p *mimePart) Read(dst []byte) (int, error) {
	mr := p.mr
	for {
		if len(p.out) > 0 {
			k := copy(dst, p.out)
			p.out = p.out[k:]
			return k, nil
		}
		if p.done {
			if p.err != nil {
				return 0, p.err
			}
			return 0, io.EOF
		}
		if p.atLineStart {
			switch mr.delimiterAhead() {
			case delimiter:
				mr.skipLine()
				p.npend = 0
				p.finish(stateParts)
				continue
			case closeDelimiter:
				mr.skipLine()
				p.npend = 0
				p.finish(stateDone)
				continue
			case endOfInput:
				// The input ended: what was held back is content.
				p.out = p.pend[:p.npend]
				p.npend = 0
				mr.Truncated = true
				p.finish(stateDone)
				if _, err := mr.br.Peek(1); err != nil && err != io.EOF {
					p.err = err
				}
				continue
			}
		}
		if p.npend > 0 {
			// Not before a delimiter: the held-back line end is content.
			p.out = p.pend[:p.npend]
			p.npend = 0
			continue
		}
		chunk, err := mr.br.ReadSlice('\n')
		if len(chunk) == 0 {
			// The input ended in the middle of a line.
			mr.Truncated = true
			p.finish(stateDone)
			if err != nil && err != io.EOF {
				p.err = err
			}
			continue
		}
		last := len(chunk) - 1
		switch {
		case chunk[last] == '\n':
			end := 1
			if last > 0 && chunk[last-1] == '\r' {
				end = 2
			}
			p.npend = copy(p.pend[:], chunk[len(chunk)-end:])
			p.out = chunk[:len(chunk)-end]
			p.atLineStart = true
		case err == bufio.ErrBufferFull && chunk[last] == '\r' && last > 0:
			// The '\r' may start the line end: read it again with what
			// follows.
			mr.br.UnreadByte()
			p.out = chunk[:last]
			p.atLineStart = false
		default:
			p.out = chunk
			p.atLineStart = false
		}
	}
}
