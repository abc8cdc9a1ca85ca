package mailview

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/freelist"
	"github.com/monoco/courier/mailbox"
)

// WriteJSON writes what f selects as `courier list --format json` prints
// it: a JSON array, one entry a line, oldest first, made safe for a
// terminal (JSONSafe).
func WriteJSON(ctx context.Context, mb *mailbox.Mailbox, f mailbox.Filter, w io.Writer) error {
	sw := &JSONSafeWriter{W: w}
	bw := listBufs.Get(func() *bufio.Writer { return bufio.NewWriterSize(nil, 256<<10) })
	bw.Reset(sw)
	defer func() {
		bw.Reset(nil) // holds no writer of this call
		listBufs.Put(bw)
	}()
	if _, err := mb.ListJSON(ctx, f, bw); err != nil {
		return err
	}
	return sw.Close()
}

// listBufs are the buffers ListJSON writes through (it takes a
// bufio.Writer as large as its own as it is), kept from one listing to
// the next: the MCP server lists a page at a time, and a new buffer of
// 256 KiB for each was a tenth of what it allocated.
var listBufs = make(freelist.List[*bufio.Writer], 4)

// EntryEncoder encodes entries as list --format json prints each (one
// line, HTML left as it is, made safe for a terminal), reusing its buffer.
type EntryEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// Encode returns e's line, without its line break; it is valid until the
// next call.
func (x *EntryEncoder) Encode(e *mailbox.Entry) ([]byte, error) {
	if x.enc == nil {
		x.enc = json.NewEncoder(&x.buf)
		x.enc.SetEscapeHTML(false)
	}
	x.buf.Reset()
	if err := x.enc.Encode(e); err != nil {
		return nil, err
	}
	return JSONSafe(bytes.TrimSuffix(x.buf.Bytes(), []byte("\n"))), nil
}

// maxSkip bounds how many entries at one time a cursor may pass over: a
// page is read from that time on, the entries before it read again.
const maxSkip = 160_000

// Cursor is where a page of list ends: the time of its last entry and
// how many entries at that time were given (list is ordered by time, then
// id, and its since is inclusive). Its string is opaque to clients.
type Cursor struct {
	T    string `json:"t"`
	Skip int    `json:"n"`
}

// ParseCursor reads the cursor a page gave as its next; "" is the start.
func ParseCursor(s string) (Cursor, error) {
	var cur Cursor
	if s == "" {
		return cur, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &cur)
	}
	if err != nil || cur.T == "" || cur.Skip < 1 || cur.Skip > maxSkip {
		return Cursor{}, fault.Errorf(fault.Usage, "cursor %q is not one list gave", s)
	}
	return cur, nil
}

func (c Cursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Query is q for the page of limit entries after c: the listing it
// selects holds the entries c skips, the page, and one more (which says
// there is a next page). The next page starts at the last entry's time,
// which is at or after q's since or today's midnight.
func (c Cursor) Query(q Query, limit int) Query {
	q.Limit = limit + c.Skip + 1
	if c.T != "" {
		q.Since, q.Today = c.T, false
	}
	return q
}

// Page is one page of list's entries.
type Page struct {
	// Entries are the entries, each as list --format json prints it.
	Entries [][]byte
	// Next is the cursor of the next page; "" for the last.
	Next string
}

// ParsePage reads the page after c out of a listing WriteJSON wrote of
// c.Query(q, limit): at most limit entries (limit 0: all of them). The
// entries are spliced out of the listing as they are, not decoded and
// encoded again.
func ParsePage(listing []byte, limit int, c Cursor) (*Page, error) {
	list := bytes.TrimSpace(listing)
	if !bytes.HasPrefix(list, []byte("[")) || !bytes.HasSuffix(list, []byte("]")) {
		return nil, fmt.Errorf("mailview: the listing is not a JSON array: %.100q", list)
	}
	var lines [][]byte
	if inner := bytes.TrimSpace(list[1 : len(list)-1]); len(inner) > 0 {
		lines = bytes.Split(inner, []byte("\n"))
	}
	for i, l := range lines {
		lines[i] = bytes.TrimSuffix(l, []byte(","))
	}
	lines = lines[min(c.Skip, len(lines)):]
	p := &Page{Entries: lines}
	if limit == 0 || len(lines) <= limit {
		return p, nil
	}
	p.Entries = lines[:limit]
	next, err := nextCursor(p.Entries, c)
	if err != nil {
		return nil, err
	}
	p.Next = next.String()
	return p, nil
}

// Cut ends p after its first n entries, more entries following them:
// Next is the cursor after the n-th. c is the cursor p was read after.
func (p *Page) Cut(n int, c Cursor) error {
	p.Entries = p.Entries[:n]
	next, err := nextCursor(p.Entries, c)
	if err != nil {
		return err
	}
	p.Next = next.String()
	return nil
}

// Whole is the start of a listing WriteJSON was writing when its writer
// took no more: the whole entries in it, as a listing. It reuses part's
// bytes.
func Whole(part []byte) []byte {
	i := bytes.LastIndex(part, []byte(",\n"))
	if i < 0 {
		return []byte("[]")
	}
	return append(part[:i], "\n]"...)
}

// nextCursor is the cursor after a page: from its last entry's time,
// past the entries at that time given so far.
func nextCursor(page [][]byte, c Cursor) (Cursor, error) {
	var last struct {
		Timestamp string `json:"timestamp"`
	}
	if err := json.Unmarshal(page[len(page)-1], &last); err != nil {
		return Cursor{}, fmt.Errorf("mailview: reading the listing: %w", err)
	}
	next := Cursor{T: last.Timestamp}
	for i := len(page) - 1; i >= 0; i-- {
		var e struct {
			Timestamp string `json:"timestamp"`
		}
		json.Unmarshal(page[i], &e)
		if e.Timestamp != next.T {
			break
		}
		next.Skip++
	}
	if next.Skip == len(page) && c.T == next.T {
		next.Skip += c.Skip // a page all at one time
	}
	return next, nil
}
