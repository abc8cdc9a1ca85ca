package mcpserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/mcptest"
)

// httpServer serves a workspace's /mcp with at most max sessions.
func httpServer(t *testing.T, max int) (*Server, string) {
	t.Helper()
	return httpServerLog(t, max, nil)
}

// httpServerLog is httpServer logging to log.
func httpServerLog(t *testing.T, max int, log *slog.Logger) (*Server, string) {
	t.Helper()
	ws, w := newWorkspace(t)
	s := New(Options{Mailbox: w.mb, Dropzone: w.dz, Backend: &agents.Backend{}, Caller: HTTPCaller})
	cfg := config.Default(nil).Courier.MCP
	cfg.AllowAnonymous, cfg.MaxSessions = true, max
	h, err := NewHTTP(s, ws, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { h.Stop(context.Background()) })
	return s, srv.URL
}

// initialize opens a session over the 2025-06-18 protocol and returns
// the HTTP status.
func initialize(t *testing.T, url string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHTTPSessionBoundCountsOpenSessions: max_sessions counts the sessions
// an initialize opened, not one the SDK holds that never was (a
// server/discover's, or a failed initialize's, which the SDK closes a
// moment after answering: counted, it made the bound refuse the
// initialize a go-sdk client sends after its discover, now and then, in
// TestMCPHTTPGuards). Such a session is held here for good, so the test
// does not depend on that moment; and the go-sdk client, which asks
// server/discover first, then initializes, finds its discover's place
// free once it has the answer.
func TestHTTPSessionBoundCountsOpenSessions(t *testing.T) {
	s, url := httpServer(t, 1)
	_, st := mcp.NewInMemoryTransports()
	ss, err := s.srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	for range 20 {
		cs := mcptest.Connect(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if got := initialize(t, url); got != http.StatusServiceUnavailable {
			t.Fatalf("a second session of max_sessions 1: %d, want 503", got)
		}
		cs.Close()
		testutil.WaitFor(t, 10*time.Second, "the client's session to end", func() bool {
			n := 0
			for ss := range s.srv.Sessions() {
				if ss.InitializeParams() != nil {
					n++
				}
			}
			return n == 0
		})
	}
	if got := initialize(t, url); got != http.StatusOK {
		t.Fatalf("initialize beside a session never initialized: %d, want 200", got)
	}
}

// TestHTTPSessionBoundConcurrent: initializes that arrive together do not
// all take the last places (counting and taking a place are one step):
// they get in by ending the idlest sessions without a stream, and no
// more than max are ever open.
func TestHTTPSessionBoundConcurrent(t *testing.T) {
	const max = 3
	s, url := httpServer(t, max)
	var (
		wg sync.WaitGroup
		mu sync.Mutex
		ok int
	)
	for range 4 * max {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if initialize(t, url) == http.StatusOK {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok == 0 {
		t.Errorf("no session opened under max_sessions %d", max)
	}
	if n := initialized(s); n > max {
		t.Errorf("%d sessions open under max_sessions %d", n, max)
	}
}

// initialized counts s's sessions that were initialized.
func initialized(s *Server) int {
	n := 0
	for ss := range s.srv.Sessions() {
		if ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// TestHTTPSessionBoundEvictsIdlest: one-shot clients (initialize, a call,
// no DELETE, as the MCP Inspector's --cli) do not lock the others out:
// past max_sessions the idlest session without a stream is ended, and
// the log says so; one with its event stream open stays.
func TestHTTPSessionBoundEvictsIdlest(t *testing.T) {
	const max = 4
	var buf testutil.Buffer
	s, url := httpServerLog(t, max, slog.New(slog.NewTextHandler(&buf, nil)))
	streamed := mcptest.Connect(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	for i := range max + 5 {
		sid, ans := rawRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if sid == "" {
			t.Fatalf("one-shot client %d: no session: %.300s", i, ans)
		}
		rawRPC(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if _, ans := rawRPC(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`); !strings.Contains(ans, `"tools"`) {
			t.Fatalf("one-shot client %d: tools/list: %.300s", i, ans)
		}
	}
	cs := mcptest.Connect(t, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("a new client after %d one-shot ones: %v", max+5, err)
	}
	if _, err := streamed.ListTools(context.Background(), nil); err != nil {
		t.Errorf("the client with its stream open was ended: %v", err)
	}
	if n := initialized(s); n > max {
		t.Errorf("%d sessions open under max_sessions %d", n, max)
	}
	if !strings.Contains(buf.String(), "ended the idlest session") {
		t.Errorf("no eviction in the log:\n%s", buf.String())
	}
}

// rawRPC posts one JSON-RPC message to /mcp, in session sid (at
// 2025-11-25) if not empty, and returns the answer's session id and body
// as sent.
func rawRPC(t *testing.T, url, sid, body string) (string, string) {
	t.Helper()
	return mcptest.Post(t, url, "", sid, "2025-11-25", body)
}

// TestResourcesListCacheScope: resources/list, which Courier answers
// itself, says its cacheScope on the wire as the SDK's own lists do; an
// empty one ("cacheScope":"") is a result the Python SDK 2.x refuses.
// The mailbox is the user's own: private.
func TestResourcesListCacheScope(t *testing.T) {
	_, url := httpServer(t, 4)
	sid, _ := rawRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	rawRPC(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, ans := rawRPC(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{}}`)
	if !strings.Contains(ans, `"cacheScope":"private"`) || !strings.Contains(ans, InboxURI) {
		t.Errorf("resources/list: %.400s", ans)
	}
}

// TestHTTPProtocolVersion: /mcp speaks up to 2025-11-25, because the
// go-sdk (v1.8.0) serves 2026-07-28 over streamable HTTP only when
// stateless, where there are no sessions and no event stream, so the
// clients of the 2025 protocols could not be told of new mail (docs/agents.md,
// "Protocol versions"). A client that asks for 2026-07-28 is answered
// 2025-11-25. When the SDK serves both on one endpoint, this fails.
func TestHTTPProtocolVersion(t *testing.T) {
	_, url := httpServer(t, 4)
	_, ans := rawRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !strings.Contains(ans, `"protocolVersion":"2025-11-25"`) {
		t.Errorf("initialize at 2026-07-28: %.300s", ans)
	}
}
