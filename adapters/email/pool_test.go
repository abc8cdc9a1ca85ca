package email

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// pooledMessage is a message whose every part goes through a pooled
// buffer (quoted-printable and base64 decoders, the text buffer), its
// text made of word repeated to about size bytes.
func pooledMessage(word string, size int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "Message-ID: <%s@example.com>\r\nFrom: %s <%s@example.com>\r\nTo: agent@monoco.dev\r\n", word, word, word)
	fmt.Fprintf(&b, "Subject: %s\r\nDate: Fri, 06 Feb 2026 19:30:00 +0100\r\nMIME-Version: 1.0\r\n", word)
	b.WriteString("Content-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n--mix\r\nContent-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n")
	b.WriteString("--alt\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	line := strings.Repeat(word+" =E2=80=94 ", 6)
	for n := 0; n < size; n += len(line) {
		b.WriteString(line + "\r\n")
	}
	b.WriteString("\r\n--alt\r\nContent-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<p>")
	for n := 0; n < size; n += len(word) + 5 {
		b.WriteString(word + " =E9 =\r\n")
	}
	b.WriteString("</p>\r\n--alt--\r\n--mix\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat(word+"\r\n", size/len(word))))
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--mix--\r\n")
	return []byte(b.String())
}

// Messages normalised at once, over and over, each come out as when
// normalised alone: no pooled buffer is shared while in use, and no text
// kept points into one after it went back (a message showing another's
// bytes).
func TestNormalizePooledConcurrent(t *testing.T) {
	raws := [][]byte{pooledMessage("alpha", 40<<10), pooledMessage("bravissimo", 3<<10), pooledMessage("c", 20<<10)}
	s := testutil.NewDropzone(t, nil)
	encode := func(raw []byte) ([]byte, error) {
		batch := s.NewBatch()
		defer batch.Abort()
		m, err := Normalize(bytes.NewReader(raw), batch, dropzone.Object{}, normOptions())
		if err != nil {
			return nil, err
		}
		return schema.Encode(m)
	}
	want := make([][]byte, len(raws))
	for i, raw := range raws {
		var err error
		if want[i], err = encode(raw); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(want[i], []byte(raws[i][13:18])) {
			t.Fatalf("message %d: its word is not in its file", i)
		}
	}
	rounds := 12
	if testing.Short() {
		rounds = 5
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for r := range rounds {
				i := (g + r) % len(raws)
				got, err := encode(raws[i])
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(got, want[i]) {
					t.Errorf("goroutine %d round %d: message %d came out different from alone", g, r, i)
					return
				}
			}
		})
	}
	wg.Wait()
}

// readLiteral reads what io.ReadAll reads (or fails as it fails), in one
// allocation when the literal is the size it says.
func TestReadLiteral(t *testing.T) {
	raw := typicalMessage()
	for name, c := range map[string]struct {
		r    func() io.Reader
		size int64
	}{
		"exact":     {func() io.Reader { return bytes.NewReader(raw) }, int64(len(raw))},
		"one byte":  {func() io.Reader { return iotest.OneByteReader(bytes.NewReader(raw)) }, int64(len(raw))},
		"longer":    {func() io.Reader { return bytes.NewReader(raw) }, 10},
		"shorter":   {func() io.Reader { return bytes.NewReader(raw) }, int64(len(raw)) + 100},
		"empty":     {func() io.Reader { return bytes.NewReader(nil) }, 0},
		"data+EOF":  {func() io.Reader { return iotest.DataErrReader(bytes.NewReader(raw)) }, int64(len(raw))},
		"truncated": {func() io.Reader { return iotest.TimeoutReader(bytes.NewReader(raw)) }, int64(len(raw))},
	} {
		want, werr := io.ReadAll(c.r())
		got, err := readLiteral(c.r(), c.size)
		if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; io.ReadAll: %d bytes, %v", name, len(got), err, len(want), werr)
		}
	}
	r := bytes.NewReader(raw)
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(raw)
		readLiteral(r, int64(len(raw)))
	})
	if allocs > 1 {
		t.Errorf("a literal of its size read in %v allocations, want 1", allocs)
	}
}
