package mime

import (
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// DefaultMaxHeld is how much decoded body text a message keeps in memory
// when Options.MaxHeld is 0; the rest waits in a spool file.
const DefaultMaxHeld = 4 << 20

// piece is a run of decoded body text: held in memory, or written to the
// message's spool file when the text held had reached its bound.
type piece struct {
	s   string   // the text, when held
	f   *os.File // the spool, when spooled
	off int64    // where in the spool
	n   int64    // how long, when spooled
}

// size is the piece's length in bytes.
func (p piece) size() int64 {
	if p.f == nil {
		return int64(len(p.s))
	}
	return p.n
}

// pieceChunk is how much of a spooled piece is read back at once.
const pieceChunk = 64 << 10

// each calls fn with the piece's text, whole when held, else a chunk at a
// time read back from the spool, each chunk ending on a character
// boundary, so that fn never sees half a character.
func (p piece) each(fn func(string) error) error {
	if p.f == nil {
		return fn(p.s)
	}
	sr := io.NewSectionReader(p.f, p.off, p.n)
	buf := make([]byte, pieceChunk+utf8.UTFMax)
	carry := 0
	for {
		k, err := io.ReadFull(sr, buf[carry:carry+pieceChunk])
		k += carry
		if k > 0 {
			cut := k
			if err == nil {
				cut = runeCut(buf[:k])
			}
			if e := fn(string(buf[:cut])); e != nil {
				return e
			}
			carry = copy(buf, buf[cut:k])
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			if carry > 0 {
				return fn(string(buf[:carry]))
			}
			return nil
		default:
			return fmt.Errorf("email: read spooled text back: %w", err)
		}
	}
}

// runeCut returns the length of the longest prefix of b that does not end
// inside a UTF-8 sequence: a cut there splits no character.
func runeCut(b []byte) int {
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

// textStore keeps the decoded body text of one message: in memory while
// the text held stays within max bytes, then in a spool file, so that a
// message of thirty 4 MB HTML parts costs max bytes of memory, not 120 MB.
type textStore struct {
	held  int64
	max   int64
	spool func() (*os.File, error)
	f     *os.File
	end   int64 // bytes written to f
}

// keep stores s and returns it as a piece.
func (t *textStore) keep(s string) (piece, error) {
	if t.held+int64(len(s)) <= t.max {
		t.held += int64(len(s))
		return piece{s: s}, nil
	}
	if t.f == nil {
		f, err := t.spool()
		if err != nil {
			return piece{}, err
		}
		t.f = f
	}
	if _, err := io.WriteString(t.f, s); err != nil {
		return piece{}, fmt.Errorf("email: spool body text: %w", err)
	}
	p := piece{f: t.f, off: t.end, n: int64(len(s))}
	t.end += int64(len(s))
	return p, nil
}

// close releases the spool; the pieces in it cannot be read after.
func (t *textStore) close() error {
	if t == nil || t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}

// tempSpool is the spool of a reader given none: an unlinked file in the
// system's temporary directory.
func tempSpool() (*os.File, error) {
	f, err := os.CreateTemp("", "courier-spool-")
	if err != nil {
		return nil, fmt.Errorf("email: create spool: %w", err)
	}
	os.Remove(f.Name())
	return f, nil
}
