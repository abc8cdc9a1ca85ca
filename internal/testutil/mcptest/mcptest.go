// Package mcptest is an MCP client for tests: the go-sdk's client, with
// calls that fail the test on a protocol error and check a tool's result
// or refusal (the command line's exit code in its text). Imported by
// _test.go files only.
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect opens a session of the go-sdk's client over tr, closed when the
// test ends.
func Connect(t testing.TB, tr mcp.Transport, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, opts).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Call calls a tool and returns its result, failing the test on a
// protocol error (a tool's refusal is a result, IsError).
func Call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	return res
}

// OK calls a tool that must succeed and decodes its structured result
// into out (when not nil).
func OK(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res := Call(t, cs, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: refused: %s", tool, args, Text(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	return res
}

// Refused calls a tool that must refuse, with the command line's exit
// code, in words that contain want; it returns the refusal's text.
func Refused(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any, code int, want string) string {
	t.Helper()
	res := Call(t, cs, tool, args)
	text := Text(res)
	if !res.IsError || !strings.Contains(text, fmt.Sprintf("(exit %d)", code)) || !strings.Contains(text, want) {
		t.Errorf("%s %v: want a refusal, exit %d, saying %q; got error=%v %q", tool, args, code, want, res.IsError, text)
	}
	return text
}

// Text is a result's text content.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Listed is a listing tool's structured result (list, thread, context).
type Listed struct {
	Messages []struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		ClaimedBy string `json:"claimed_by"`
	} `json:"messages"`
	Count     int  `json:"count"`
	Truncated bool `json:"truncated"`
}

// ListingHeader is the header line of a listing's text.
const ListingHeader = "id\tprovider\tdirection\tfrom\tstatus\tclaimed_by\ttimestamp\tcorrelation_id\treply_to\tpreview"

// ListingText checks a listing's text (list, thread, context), what a
// host gives a model: not the structured content's JSON again, but a line
// with the count and, when more follow, the cursor of the next page; the
// header; and one line an entry, its id first, ten tab-separated columns.
func ListingText(text string, ids []string, next string) error {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	head := fmt.Sprintf("%d entries", len(ids))
	if !strings.HasPrefix(lines[0], head) || (next != "") != strings.Contains(lines[0], fmt.Sprintf("cursor %q", next)) {
		return fmt.Errorf("the text's first line %q does not say %q and the cursor %q", lines[0], head, next)
	}
	if len(ids) == 0 {
		if len(lines) != 1 {
			return fmt.Errorf("the text of no entries is %q", text)
		}
		return nil
	}
	if len(lines) != len(ids)+2 || lines[1] != ListingHeader {
		return fmt.Errorf("the text has %d lines for %d entries, its header %q: %.300q", len(lines), len(ids), lines[1], text)
	}
	for i, id := range ids {
		if l := lines[i+2]; !strings.HasPrefix(l, id+"\t") || strings.Count(l, "\t") != 9 {
			return fmt.Errorf("line %d of the text, for %s, is %q", i+3, id, l)
		}
	}
	return nil
}

// IDs are the ids of a listing's entries.
func (l *Listed) IDs() []string {
	ids := make([]string, len(l.Messages))
	for i, m := range l.Messages {
		ids[i] = m.ID
	}
	return ids
}

// Post posts one JSON-RPC message to a streamable HTTP endpoint, as a
// client without the SDK does: in session sid at protocol version if sid
// is not empty, with the bearer token if not empty. It returns the
// answer's session id and its body as sent (JSON, or an event stream).
func Post(t testing.TB, url, token, sid, version, body string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.Header.Get("Mcp-Session-Id"), string(b)
}
