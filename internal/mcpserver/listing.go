package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/freelist"
)

// refusal is a refusal as a tool error: the command line's message, and
// its exit code. The SDK makes it a result with isError set.
type refusal struct {
	msg  string
	code int
}

func (e *refusal) Error() string { return fmt.Sprintf("%s (exit %d)", e.msg, e.code) }

// refuse is err as a refusal: its message and the exit code of its kind.
func refuse(err error) error {
	return &refusal{msg: err.Error(), code: fault.ExitCode(err)}
}

// unavailable is a call that could not be served (its context ended while
// it waited for its turn).
func unavailable(err error) error { return fault.Wrap(fault.Unavailable, err) }

// asRefusal is err as a refusal: itself, or an error of no known kind.
func asRefusal(err error) *refusal {
	var r *refusal
	if errors.As(err, &r) {
		return r
	}
	return &refusal{msg: err.Error(), code: fault.Internal.ExitCode()}
}

// toolError is a refusal as a result, for a tool that gives a structured
// result with it (claim's holder).
func toolError(r *refusal) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: r.Error()}}}
}

// textResult is a tool result whose text is what the CLI prints.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// pageBuilder makes a listing's result entry by entry: the structured
// content {"messages": [...], "count": n, "truncated": bool,
// "next_cursor": c}, the entries spliced in as list --format json prints
// them (a listing is not decoded and encoded again entry by entry), and
// its text, lines for a model to read (listtext.go). Both are made as
// they are sent, ASCII (escape.go), the text also escaped in a JSON
// string, so that the size of the result as sent is known entry by
// entry and the result is not read again to encode it (rawResult).
type pageBuilder struct {
	doc   []byte // {"messages":[ and the entries so far, comma-separated, as ASCII
	lines []byte // their lines of text
	esc   []byte // the lines escaped in a JSON string, as ASCII
	count int
	size  int // the result as sent: pageOverhead, the entries and the lines
	max   int // the bound of size
}

// newPage is a builder of a result of at most max bytes as sent; free
// gives its buffers back.
func newPage(max int) *pageBuilder {
	b := pageScratch.Get(func() *pageBuilder { return new(pageBuilder) })
	b.doc, b.lines, b.esc = append(b.doc[:0], `{"messages":[`...), b.lines[:0], b.esc[:0]
	b.count, b.size, b.max = 0, pageOverhead, max
	return b
}

// pageScratch are builders kept from one page to the next.
var pageScratch = make(freelist.List[*pageBuilder], concurrent)

func (b *pageBuilder) free() {
	if cap(b.doc) <= 2*maxFrame {
		pageScratch.Put(b)
	}
}

// add adds e (as list --format json prints it) unless the result would
// pass its bound with it; the first entry is always added, so that a
// page moves on.
func (b *pageBuilder) add(e []byte) bool {
	d, l, x := len(b.doc), len(b.lines), len(b.esc)
	if b.count > 0 {
		b.doc = append(b.doc, ',')
	}
	b.doc = appendASCII(b.doc, e)
	b.lines, b.esc = appendLine(b.lines, b.esc, e)
	size := len(b.doc) - d + len(b.esc) - x
	if b.size+size > b.max && b.count > 0 {
		b.doc, b.lines, b.esc = b.doc[:d], b.lines[:l], b.esc[:x]
		return false
	}
	b.size += size
	b.count++
	return true
}

// addAll adds the first of entries that fit and returns how many.
func (b *pageBuilder) addAll(entries [][]byte) int {
	for i, e := range entries {
		if !b.add(e) {
			return i
		}
	}
	return len(entries)
}

// listing is the result: the structured content, compact as it is sent
// (rawResult does not compact it again), next the cursor of the next page
// ("" for the last), and one text. It copies what it keeps: the builder
// may be freed.
func (b *pageBuilder) listing(next string) *mcp.CallToolResult {
	b.doc = fmt.Appendf(b.doc, "],\"count\":%d,\"truncated\":%t", b.count, next != "")
	if next != "" {
		b.doc = fmt.Appendf(b.doc, `,"next_cursor":%q`, next)
	}
	b.doc = append(b.doc, '}')
	head := textHead(b.count, next)
	if b.count > 0 {
		head += textHeader
	}
	var text strings.Builder
	text.Grow(len(head) + len(b.lines))
	text.WriteString(head)
	text.Write(b.lines)
	// Copied by append, not into a made slice, which would be zeroed
	// first.
	esc := append(appendEscaped(nil, []byte(head)), b.esc...)
	return &mcp.CallToolResult{StructuredContent: &listingDoc{doc: append([]byte(nil), b.doc...), text: esc},
		Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}
}

// pageJSON is a listing's structured content: compact JSON, encoded as it
// is.
type pageJSON []byte

func (p pageJSON) MarshalJSON() ([]byte, error) { return p, nil }

// listingDoc is the structured content pageBuilder makes: doc, compact
// JSON as ASCII, encoded as it is, and beside it the result's text as it
// is sent (escaped in a JSON string, as ASCII, without its quotes).
type listingDoc struct {
	doc  pageJSON
	text []byte
}

func (d *listingDoc) MarshalJSON() ([]byte, error) { return d.doc, nil }

// pageOverhead bounds what a listing's result holds besides its
// entries and their lines: the JSON-RPC envelope, count, cursor (twice),
// the text's first line and header, and _meta.
const pageOverhead = 1 << 10

// rawListings encodes a listing's result (structured content of
// pageJSON, one text) itself, without the go-sdk's own encoding:
// CallToolResult.MarshalJSON marshals the text and re-compacts both
// copies of the page, and jsonrpc2 compacts the result twice more,
// which for a page of 10,000 entries was most of the server's time. The
// result sent is the same (rawResult). The middleware is outside the
// SDK's own (added by mcp.NewServer), so the SDK's result is final but for
// _meta and resultType, which it sets on the result after every
// middleware and which rawResult encodes when it is sent.
func rawListings(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || method != "tools/call" || len(r.Content) != 1 {
			return res, err
		}
		var raw pageJSON
		var esc []byte
		switch sc := r.StructuredContent.(type) {
		case pageJSON:
			raw = sc
		case *listingDoc:
			raw, esc = sc.doc, sc.text
		default:
			return res, err
		}
		tc, isText := r.Content[0].(*mcp.TextContent)
		if !isText || tc.Meta != nil || tc.Annotations != nil {
			return res, err
		}
		return &rawResult{CallToolResult: r, raw: raw, text: tc.Text, esc: esc, frames: framesOf(ctx)}, nil
	}
}

// rawResult is a CallToolResult (every method the SDK calls on a
// result is the embedded one's) sent as
// {"content":[{"type":"text","text":TEXT}],"structuredContent":RAW,...}
// with RAW, compact JSON made by listing, copied in as it is, TEXT
// escaped, and the result's other fields as the SDK encodes them.
//
// Over stdio (frames set) it encodes as a placeholder of the result,
// which the stdio writer replaces (frames).
type rawResult struct {
	*mcp.CallToolResult
	raw         pageJSON
	text        string
	esc         []byte // text as sent, when listing made it (listingDoc)
	frames      *frames
	placeholder []byte
}

func (r *rawResult) MarshalJSON() ([]byte, error) {
	if r.frames == nil {
		return r.encode(nil)
	}
	if r.placeholder == nil {
		out, err := r.encode(r.frames.buffer())
		if err != nil {
			return nil, err
		}
		r.placeholder = r.frames.hold(out)
	}
	return r.placeholder, nil
}

// encode appends the result to out, grown to about its size (a rune past
// ASCII is longer escaped).
func (r *rawResult) encode(out []byte) ([]byte, error) {
	rest := *r.CallToolResult
	rest.Content, rest.StructuredContent = []mcp.Content{}, nil
	small, err := rest.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(small, &fields); err != nil {
		return nil, err
	}
	delete(fields, "content")
	delete(fields, "structuredContent")
	out = slices.Grow(out[:0], len(r.raw)+len(r.raw)/8+len(r.text)+len(r.text)/4+len(small)+64)
	out = append(out, `{"content":[{"type":"text","text":`...)
	if r.esc != nil {
		out = append(append(append(out, '"'), r.esc...), '"')
	} else {
		out = appendString(out, []byte(r.text))
	}
	out = append(out, `}],"structuredContent":`...)
	out = appendASCII(out, r.raw)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		key, _ := json.Marshal(k)
		out = append(append(append(append(out, ','), key...), ':'), fields[k]...)
	}
	return append(out, '}'), nil
}

// addListing adds a tool whose result is a listing: the
// SDK's typed AddTool would decode the listing and encode it again, and
// validate it entry by entry, which for 100,000 entries takes seconds.
// The input is decoded here as AddTool would, unknown fields refused.
func addListing[In any](s *Server, t *mcp.Tool, h func(context.Context, In) (*mcp.CallToolResult, error)) {
	t.InputSchema = schemaOf[In]()
	t.OutputSchema = schemaOf[entriesOut]()
	s.srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		args := req.Params.Arguments
		if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
			args = []byte("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return toolError(&refusal{msg: fmt.Sprintf("%s: the arguments: %v", t.Name, err), code: fault.Usage.ExitCode()}), nil
		}
		res, err := h(ctx, in)
		if err != nil {
			return toolError(asRefusal(err)), nil
		}
		return res, nil
	})
}
