package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/monoco/courier/internal/freelist"
)

// frames hold listings' results, encoded by rawResult, until the stdio
// writer sends them: the go-sdk's jsonrpc2 gets a placeholder instead,
// {"courier.raw.KEY":N}, which it validates and compacts twice (once as
// the result, once in the response), and the writer puts the result in
// its place. A page's result was compacted twice, copy and all, which
// took most of the server's time for a listing. KEY is random: only
// JSON structure shows it unescaped, and no message can name another's
// result.
type frames struct {
	key  []byte // {"courier.raw.KEY":
	mu   sync.Mutex
	next int
	held map[int][]byte
}

type framesKey struct{}

func newFrames() *frames {
	var k [8]byte
	rand.Read(k[:])
	return &frames{key: []byte(`{"courier.raw.` + hex.EncodeToString(k[:]) + `":`), held: map[int][]byte{}}
}

// framesOf is the frames of the stdio session serving ctx; nil over
// HTTP, where results are encoded by the SDK.
func framesOf(ctx context.Context) *frames {
	f, _ := ctx.Value(framesKey{}).(*frames)
	return f
}

// hold keeps a result and returns its placeholder.
func (f *frames) hold(result []byte) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.held[f.next] = result
	return fmt.Appendf(bytes.Clone(f.key), "%d}", f.next)
}

// frameBufs are the buffers results are encoded into (rawResult) over
// stdio, given back once written.
var frameBufs = make(freelist.List[[]byte], concurrent)

// buffer is a buffer to encode a result into.
func (f *frames) buffer() []byte { return frameBufs.Get(func() []byte { return nil }) }

// recycle gives back the buffer of a result written.
func recycle(b []byte) {
	if cap(b) <= 2*maxFrame {
		frameBufs.Put(b[:0])
	}
}

// take returns and forgets the result held as n.
func (f *frames) take(n int) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.held[n]
	delete(f.held, n)
	return b, ok
}

// framesWriter writes messages to w with each placeholder of f replaced
// by its result. The SDK writes a message (or a batch of responses) in
// one call.
type framesWriter struct {
	w io.Writer
	f *frames
}

func (fw framesWriter) Write(p []byte) (int, error) {
	rest := p
	for {
		i := bytes.Index(rest, fw.f.key)
		if i < 0 {
			break
		}
		j := i + len(fw.f.key)
		end := bytes.IndexByte(rest[j:], '}')
		if end < 0 {
			break
		}
		n, err := strconv.Atoi(string(rest[j : j+end]))
		result, ok := fw.f.take(n)
		if err != nil || !ok {
			break
		}
		if _, err := fw.w.Write(rest[:i]); err != nil {
			return 0, err
		}
		_, err = fw.w.Write(result)
		recycle(result)
		if err != nil {
			return 0, err
		}
		rest = rest[j+end+1:]
	}
	if _, err := fw.w.Write(rest); err != nil {
		return 0, err
	}
	return len(p), nil
}
