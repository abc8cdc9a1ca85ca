package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
)

// mcppSession serves the mailbox $COURIER_MCPP_WS, or one made here by
// bench/genmailbox (MaxLimit+1 messages, so that a page of list's largest
// size is full and truncated), over the go-sdk's in-memory transports,
// and connects its client.
func mcppSession(b *testing.B) (*Server, *mcp.ClientSession) {
	ws := os.Getenv("COURIER_MCPP_WS")
	if ws == "" {
		dir := b.TempDir()
		gen := filepath.Join(dir, "genmailbox")
		if out, err := exec.Command("go", "build", "-o", gen, "github.com/monoco/courier/bench/genmailbox").CombinedOutput(); err != nil {
			b.Fatalf("go build ./bench/genmailbox: %v\n%s", err, out)
		}
		ws = filepath.Join(dir, "ws")
		if out, err := exec.Command(gen, "-root", ws, "-n", strconv.Itoa(MaxLimit+1)).CombinedOutput(); err != nil {
			b.Fatalf("genmailbox: %v\n%s", err, out)
		}
	}
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mb.Close() })
	dz, err := dropzone.Open(mailbox.Layout{Root: ws}.Dropzone(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dz.Close() })
	return serveInProcess(b, ws, workspace{mb, dz})
}

// BenchmarkMCPPList is one page of list's largest size (MaxLimit,
// ending at MaxPage bytes), go-sdk client included, over in-memory
// transports, for profiling (go test -run '^$' -bench MCPP
// -cpuprofile); bench/mcp.sh is the measure, over stdio.
func BenchmarkMCPPList(b *testing.B) {
	_, cs := mcppSession(b)
	for b.Loop() {
		res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "list", Arguments: map[string]any{"all": true, "limit": MaxLimit}})
		if err != nil || res.IsError {
			b.Fatalf("list: %v %v", err, textOf(res))
		}
		var l struct{ Count int }
		sc, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(sc, &l); err != nil || l.Count == 0 || l.Count > MaxLimit {
			b.Fatalf("list gave %d entries (%v), want 1 to %d", l.Count, err, MaxLimit)
		}
	}
}

// BenchmarkMCPPEncode is the server's encoding of a page of MaxLimit
// entries as the go-sdk's jsonrpc2 encodes a result (marshalled without
// HTML escaping, then as a response): "sdk" the CallToolResult entries
// returns, "raw" what rawListings makes of it.
func BenchmarkMCPPEncode(b *testing.B) {
	s, _ := mcppSession(b)
	res, err := s.list(b.Context(), listIn{All: true, Limit: MaxLimit})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		res  any
	}{{"sdk", res}, {"raw", &rawResult{CallToolResult: res, raw: res.StructuredContent.(*listingDoc).doc, text: textOf(res), esc: res.StructuredContent.(*listingDoc).text}}} {
		b.Run(c.name, func(b *testing.B) {
			id, _ := jsonrpc.MakeID(float64(1))
			for b.Loop() {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(c.res); err != nil {
					b.Fatal(err)
				}
				if _, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: bytes.TrimSuffix(buf.Bytes(), []byte("\n"))}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// appendString escapes as encoding/json does without HTML escaping
// (as jsonrpc2 sends), byte for byte for ASCII: control characters,
// quotes; and every rune past ASCII as \uXXXX (a listing is sent as
// ASCII, which the TypeScript SDK's client decodes faster), invalid UTF-8
// as \ufffd: the same string decoded.
func TestMCPPAppendString(t *testing.T) {
	var ctl []byte
	for c := range 0x20 {
		ctl = append(ctl, byte(c))
	}
	for _, in := range []string{"", "plain", `"quoted" \back\slash`, string(ctl), "\x7f", "<a href='x'>&amp;</a>",
		"\xff\xfe", "trunc\xe2\x80", "\xe2\x80\xa8 \xe2\x80\xa9 \xe2\x80\xaa", "é中🙂", `{"a":"b\"c","d":"\u2028"}` + "\n"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(in); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		got := appendString([]byte("x"), []byte(in))[1:]
		var g, w string
		if err := json.Unmarshal(got, &g); err != nil || json.Unmarshal(want, &w) != nil || g != w {
			t.Errorf("%q: got %s (%q, %v), want %s", in, got, g, err, want)
		}
		if i := bytes.IndexFunc(got, func(r rune) bool { return r >= utf8.RuneSelf }); i >= 0 {
			t.Errorf("%q: got %s, not ASCII", in, got)
		}
		if ascii := !bytes.ContainsFunc([]byte(in), func(r rune) bool { return r >= utf8.RuneSelf }); ascii && !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
	// A listing's structured content, as ASCII: the same JSON.
	doc := []byte(`{"a":"é中🙂 \u2028","b":["` + "\u2029" + `",1,null],"c":{"d":"plain"}}`)
	var g, w any
	if err := json.Unmarshal(appendASCII(nil, doc), &g); err != nil || json.Unmarshal(doc, &w) != nil || !reflect.DeepEqual(g, w) {
		t.Errorf("appendASCII(%s) = %s (%v)", doc, appendASCII(nil, doc), err)
	}
	if out := appendASCII(nil, doc); bytes.ContainsFunc(out, func(r rune) bool { return r >= utf8.RuneSelf }) || highBytes(doc) != 12 {
		t.Errorf("appendASCII(%s) = %s; %d bytes past ASCII", doc, out, highBytes(doc))
	}
}

// A listing's result encoded by rawResult is the result the SDK
// would send: the same content, structured content and other fields
// (_meta, isError), and the SDK's client decodes it to the same.
func TestMCPPRawResult(t *testing.T) {
	text := "{\"messages\":[\n{\"id\":\"a\",\"subject\":\"<b>\\\"x\\\" & \\u2028 é\"},\n{\"id\":\"b\"}\n],\"count\":2,\"truncated\":false}"
	page := pageJSON(strings.ReplaceAll(text, "\n", ""))
	res := &mcp.CallToolResult{StructuredContent: page, Content: []mcp.Content{&mcp.TextContent{Text: text}},
		Meta: mcp.Meta{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "courier"}}, IsError: true}
	want, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&rawResult{CallToolResult: res, raw: page, text: text}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if !reflect.DeepEqual(w, g) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var dec mcp.CallToolResult
	if err := dec.UnmarshalJSON(got); err != nil {
		t.Fatal(err)
	}
	if tc, ok := dec.Content[0].(*mcp.TextContent); !ok || tc.Text != text || !dec.IsError || dec.Meta == nil {
		t.Errorf("the SDK decodes %s as %+v", got, dec)
	}
}

// The middleware encodes a listing, and only a listing's result (its
// structured content made by listing, one plain text): read's text is
// the message, not its JSON, and must reach the agent as it was.
func TestMCPPRawListingsOnly(t *testing.T) {
	page := pageJSON(`{"count":0}`)
	other := json.RawMessage(page)
	for _, c := range []struct {
		name string
		res  *mcp.CallToolResult
		raw  bool
	}{
		{"listing", &mcp.CallToolResult{StructuredContent: page, Content: []mcp.Content{&mcp.TextContent{Text: string(page)}}}, true},
		{"other text", &mcp.CallToolResult{StructuredContent: other, Content: []mcp.Content{&mcp.TextContent{Text: "# a message"}}}, false},
		{"other JSON", &mcp.CallToolResult{StructuredContent: other, Content: []mcp.Content{&mcp.TextContent{Text: string(page)}}}, false},
		{"two contents", &mcp.CallToolResult{StructuredContent: page, Content: []mcp.Content{&mcp.TextContent{Text: string(page)}, &mcp.TextContent{Text: "x"}}}, false},
		{"annotated", &mcp.CallToolResult{StructuredContent: page, Content: []mcp.Content{&mcp.TextContent{Text: string(page), Annotations: &mcp.Annotations{Priority: 1}}}}, false},
		{"decoded", &mcp.CallToolResult{StructuredContent: map[string]any{"count": 0}, Content: []mcp.Content{&mcp.TextContent{Text: string(page)}}}, false},
	} {
		h := rawListings(func(context.Context, string, mcp.Request) (mcp.Result, error) { return c.res, nil })
		got, err := h(t.Context(), "tools/call", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, raw := got.(*rawResult); raw != c.raw {
			t.Errorf("%s: raw %v, want %v", c.name, raw, c.raw)
		}
		if other, _ := h(t.Context(), "resources/read", nil); other != mcp.Result(c.res) {
			t.Errorf("%s: resources/read's result was changed", c.name)
		}
	}
}
