package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/mcptest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// stdioFrames serves ws over stdio (ServeStdio, pipes) to a client that
// writes and reads the JSON-RPC lines itself, so that a test sees each
// frame as sent. call sends a tools/call and returns its response line.
func stdioFrames(t *testing.T, ws string, w workspace) (call func(tool string, args map[string]any) []byte) {
	t.Helper()
	s := New(Options{Mailbox: w.mb, Dropzone: w.dz,
		Local: &agents.Local{Root: ws, Config: config.Default(nil), User: "agent", Workspace: w}})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.ServeStdio(ctx, inR, outW); outW.Close(); close(done) }()
	t.Cleanup(func() { cancel(); inW.Close(); outR.Close(); <-done })
	out := bufio.NewReader(outR)
	id := 0
	send := func(method string, params any, reply bool) []byte {
		t.Helper()
		msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
		if reply {
			id++
			msg["id"] = id
		}
		b, _ := json.Marshal(msg)
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		if !reply {
			return nil
		}
		for {
			line, err := out.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			var r struct{ ID int }
			if json.Unmarshal(line, &r) == nil && r.ID == id {
				return line
			}
		}
	}
	send("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "frames", "version": "1"}}, true)
	send("notifications/initialized", map[string]any{}, false)
	return func(tool string, args map[string]any) []byte {
		return send("tools/call", map[string]any{"name": tool, "arguments": args}, true)
	}
}

// A page of large entries, at list's largest limit, ends before MaxPage
// bytes as sent, with a cursor; the pages give every entry once, in
// order, runs of entries at one time cut across pages included; and a
// listing is sent as ASCII, its text the listing's lines. The page was 10,000
// entries whatever their size: at 12.7 MB for 10,000 entries of
// bench/genmailbox, more than the TypeScript SDK's client reads.
func TestMCPPageBound(t *testing.T) {
	const n = 1000
	t0 := testutil.Time("2026-03-01T08:00:00Z")
	// About 9 KB an entry as list prints it, and twice more in the text
	// (each quote and backslash escaped again): about 15 MB unbounded.
	subject := strings.Repeat(`"q\ é `, 700)
	var msgs []*schema.Message
	for i := range n {
		at := t0.Add(time.Duration(i/50) * time.Second) // runs of 50 at one time
		m := testutil.Message(schema.Email, fmt.Sprintf("big%05d", i), at, "hello")
		m.Session.Name = subject + fmt.Sprint(i)
		msgs = append(msgs, m)
	}
	ws, w := newWorkspace(t, msgs...)
	call := stdioFrames(t, ws, w)

	var got []string
	seen := map[string]bool{}
	cursor, pages := "", 0
	for ; ; pages++ {
		args := map[string]any{"all": true, "limit": MaxLimit}
		if cursor != "" {
			args["cursor"] = cursor
		}
		frame := call("list", args)
		if len(frame) >= MaxPage {
			t.Fatalf("page %d is %d bytes as sent, the bound %d", pages, len(frame), MaxPage)
		}
		l := listingOf(t, frame)
		if l.Count != len(l.Messages) || l.Count == 0 || l.Truncated != (l.NextCursor != "") {
			t.Fatalf("page %d: count %d, %d messages, truncated %v, next %q", pages, l.Count, len(l.Messages), l.Truncated, l.NextCursor)
		}
		for _, m := range l.Messages {
			if seen[m.ID] {
				t.Fatalf("page %d gives %s again", pages, m.ID)
			}
			seen[m.ID] = true
			got = append(got, m.ID)
		}
		if cursor = l.NextCursor; cursor == "" {
			break
		}
		if pages > n {
			t.Fatal("the pages do not end")
		}
	}
	var want []string
	err := w.mb.List(context.Background(), mailbox.Filter{All: true}, func(e *mailbox.Entry) error {
		want = append(want, e.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the pages give %d entries, list %d, or not in its order", len(got), len(want))
	}
	if pages < 3 {
		t.Errorf("%d pages of about 15 MB: the pages are not bounded", pages+1)
	}
	t.Logf("%d entries in %d pages", len(got), pages+1)
}

// listingOf decodes a listing's tools/call response, checking that it is
// sent as ASCII (every rune past it escaped) and that its one text is
// the listing's lines, not its JSON again (mcptest.ListingText).
func listingOf(t *testing.T, frame []byte) (l struct {
	mcptest.Listed
	NextCursor string `json:"next_cursor"`
}) {
	t.Helper()
	if i := bytes.IndexFunc(frame, func(r rune) bool { return r >= utf8.RuneSelf }); i >= 0 {
		t.Fatalf("the frame is not ASCII at %d: %.100q", i, frame[i:])
	}
	var r struct {
		Result struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(frame, &r); err != nil {
		t.Fatalf("%v: %.300s", err, frame)
	}
	if r.Result.IsError || len(r.Result.Content) != 1 || r.Result.Content[0].Type != "text" {
		t.Fatalf("not a listing: %.300s", frame)
	}
	if err := json.Unmarshal(r.Result.StructuredContent, &l); err != nil {
		t.Fatal(err)
	}
	if err := mcptest.ListingText(r.Result.Content[0].Text, l.IDs(), l.NextCursor); err != nil {
		t.Fatal(err)
	}
	return l
}

// The stdio writer puts each held result in its placeholder's place, in
// a response and in a batch of them, and leaves what is not one of its
// placeholders as it is (another session's key, a number not held).
func TestFramesWriter(t *testing.T) {
	f := newFrames()
	a, b := f.hold([]byte(`{"content":[{"type":"text","text":"a"}]}`)), f.hold([]byte(`{"count":2}`))
	var out strings.Builder
	fw := framesWriter{&out, f}
	other := newFrames().hold([]byte("x"))
	notHeld := fmt.Appendf(bytes.Clone(f.key), "%d}", 99)
	for _, c := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":` + string(a) + "}\n", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a"}]}}` + "\n"},
		{`[{"id":2,"result":` + string(b) + `},{"id":3,"result":` + string(other) + `}]` + "\n", `[{"id":2,"result":{"count":2}},{"id":3,"result":` + string(other) + `}]` + "\n"},
		{`{"id":4,"result":` + string(notHeld) + "}\n", `{"id":4,"result":` + string(notHeld) + "}\n"},
		{`{"id":5,"result":` + string(a) + "}\n", `{"id":5,"result":` + string(a) + "}\n"}, // taken once
	} {
		out.Reset()
		if n, err := fw.Write([]byte(c.in)); err != nil || n != len(c.in) || out.String() != c.want {
			t.Errorf("Write(%s) = %d, %v, wrote %s, want %s", c.in, n, err, out.String(), c.want)
		}
	}
}

// Paging through a listing at list's largest limit, each page but the
// last fills MaxPage as sent (within an entry), and the server does not
// allocate many times what it sends. A page read up to 768 KiB of
// entries to send about 512 KiB of them, and made its buffers anew,
// grown from nothing, at each page: 11 bytes allocated for each byte
// sent, 7 now, of which about 2 are the test's reading of the frames and
// 2 the mailbox's reading of its rows.
func TestMCPPageCost(t *testing.T) {
	const n = 3000
	t0 := testutil.Time("2026-03-01T08:00:00Z")
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4)
	var msgs []*schema.Message
	for i := range n {
		msgs = append(msgs, testutil.Message(schema.Email, fmt.Sprintf("m%05d", i), t0.Add(time.Duration(i)*time.Second), fmt.Sprint(i, ": ", text)))
	}
	ws, w := newWorkspace(t, msgs...)
	call := stdioFrames(t, ws, w)
	page := func() (sent int, frames []int) {
		for cursor := ""; ; {
			args := map[string]any{"all": true, "limit": MaxLimit}
			if cursor != "" {
				args["cursor"] = cursor
			}
			frame := call("list", args)
			sent += len(frame)
			frames = append(frames, len(frame))
			if cursor = listingOf(t, frame).NextCursor; cursor == "" {
				return sent, frames
			}
		}
	}
	page() // the pools filled, the mailbox's statements and pages read
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sent, frames := page()
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	if ratio := float64(alloc) / float64(sent); ratio > 8.5 {
		t.Errorf("paging %d entries sent %d bytes and allocated %d: %.1f bytes a byte sent", n, sent, alloc, ratio)
	}
	entry := sent / n * 2
	for i, f := range frames[:len(frames)-1] {
		if f < MaxPage-entry {
			t.Errorf("page %d of %d is %d bytes as sent, more than an entry short of %d", i, len(frames), f, MaxPage)
		}
	}
	t.Logf("%d pages, %d bytes sent, %d allocated; frames %v", len(frames), sent, alloc, frames)
}
