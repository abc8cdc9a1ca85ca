package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/mcptest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// workspace is a Workspace of an open mailbox and dropzone, for
// agents.Local (tests do not send).
type workspace struct {
	mb *mailbox.Mailbox
	dz *dropzone.Store
}

func (w workspace) Mailbox() (*mailbox.Mailbox, error) { return w.mb, nil }
func (w workspace) Dropzone() (*dropzone.Store, error) { return w.dz, nil }
func (w workspace) Providers() (providers.Set, error) {
	return nil, fault.Errorf(fault.Config, "no providers here")
}

// newWorkspace makes a workspace holding msgs and opens its mailbox and
// dropzone.
func newWorkspace(t testing.TB, msgs ...*schema.Message) (string, workspace) {
	t.Helper()
	ws := t.TempDir()
	if err := mailbox.Init(ws); err != nil {
		t.Fatal(err)
	}
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close() })
	dz, err := dropzone.Open(mailbox.Layout{Root: ws}.Dropzone(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dz.Close() })
	in := make([]mailbox.Inbound, len(msgs))
	for i, m := range msgs {
		in[i] = mailbox.Inbound{Message: m}
	}
	if len(in) > 0 {
		if _, err := mb.WriteInbound(context.Background(), in, nil); err != nil {
			t.Fatal(err)
		}
	}
	return ws, workspace{mb, dz}
}

// inProcess serves a workspace holding msgs over in-memory transports, as
// `courier mcp` does, and connects the go-sdk's client.
func inProcess(t testing.TB, msgs ...*schema.Message) (*Server, *mcp.ClientSession) {
	t.Helper()
	ws, w := newWorkspace(t, msgs...)
	return serveInProcess(t, ws, w)
}

// serveInProcess serves the workspace ws, its mailbox and dropzone open
// in w, until the test ends.
func serveInProcess(t testing.TB, ws string, w workspace) (*Server, *mcp.ClientSession) {
	t.Helper()
	s := New(Options{Mailbox: w.mb, Dropzone: w.dz,
		Local: &agents.Local{Root: ws, Config: config.Default(nil), User: "agent", Workspace: w}})
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.srv.Run(ctx, st); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, mcptest.Connect(t, ct, nil)
}

// listIDs is what `courier list --format id` prints: the inbox's ids, in
// order.
func listIDs(t *testing.T, s *Server) string {
	t.Helper()
	var b strings.Builder
	err := s.mb.List(context.Background(), mailbox.Filter{}, func(e *mailbox.Entry) error {
		b.WriteString(e.ID + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var (
	callOK      = mcptest.OK
	callRefused = mcptest.Refused
	textOf      = mcptest.Text
)

type listed = mcptest.Listed

// list pages through a mailbox with next_cursor, each entry once and in
// order, entries sharing a time across pages included; resources/list
// pages too; attachment gives an object's bytes, bounded.
func TestMCPPagesAndAttachment(t *testing.T) {
	const n = 1203
	t0 := testutil.Time("2026-03-01T08:00:00Z")
	var msgs []*schema.Message
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Second)
		if i >= 300 && i < 700 {
			at = t0.Add(300 * time.Second) // 400 at one time: pages end inside them
		}
		msgs = append(msgs, testutil.Message(schema.Slack, fmt.Sprintf("C1_%010d", i), at, fmt.Sprintf("message %d", i)))
	}
	s, cs := inProcess(t, msgs...)

	var got []string
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		args := map[string]any{"limit": 150}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var l struct {
			listed
			NextCursor string `json:"next_cursor"`
		}
		res := callOK(t, cs, "list", args, &l)
		if err := mcptest.ListingText(textOf(res), l.IDs(), l.NextCursor); err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, m := range l.Messages {
			if seen[m.ID] {
				t.Fatalf("page %d gives %s again", page, m.ID)
			}
			seen[m.ID] = true
			got = append(got, m.ID)
		}
		if l.Truncated != (l.NextCursor != "") || (l.NextCursor == "" && l.Count == 150 && len(got) < n) {
			t.Fatalf("page %d: truncated %v, next %q, %d entries", page, l.Truncated, l.NextCursor, l.Count)
		}
		if l.NextCursor == "" {
			break
		}
		cursor = l.NextCursor
		if page > n/150+2 {
			t.Fatal("the pages do not end")
		}
	}
	want := listIDs(t, s)
	if strings.Join(got, "\n")+"\n" != want {
		t.Errorf("the pages give %d entries, list %d, or not in its order", len(got), len(strings.Fields(want)))
	}
	callRefused(t, cs, "list", map[string]any{"cursor": "bm9wZQ"}, fault.Usage.ExitCode(), "not one list gave")
	callRefused(t, cs, "list", map[string]any{"bogus": 1}, fault.Usage.ExitCode(), "bogus")

	ctx := context.Background()
	var uris []string
	rcursor := ""
	for {
		lr, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: rcursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range lr.Resources {
			uris = append(uris, r.URI)
		}
		if rcursor = lr.NextCursor; rcursor == "" {
			break
		}
	}
	if len(uris) != n+1 || uris[0] != InboxURI || uris[1] != MessageURI+got[0] || uris[n] != MessageURI+got[n-1] {
		t.Errorf("resources/list: %d resources, first %v", len(uris), uris[:min(2, len(uris))])
	}

	text := "café, 日本語 and more\n"
	obj, err := s.dz.Put(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var at AttachmentOut
	callOK(t, cs, "attachment", map[string]any{"id": obj.ID, "as": "text"}, &at)
	if at.Data != text || at.Size != int64(len(text)) || at.Truncated || at.Encoding != "text" {
		t.Errorf("attachment as text: %+v", at)
	}
	callOK(t, cs, "attachment", map[string]any{"id": obj.ID, "max_bytes": 4}, &at)
	if at.Data != "Y2Fmww==" || !at.Truncated || at.Encoding != "base64" {
		t.Errorf("attachment, 4 bytes as base64: %+v", at)
	}
	// Cut inside é: the text stops before it rather than break it.
	callOK(t, cs, "attachment", map[string]any{"id": obj.ID, "as": "text", "max_bytes": 4}, &at)
	if at.Data != "caf" || !at.Truncated {
		t.Errorf("attachment, 4 bytes as text: %+v", at)
	}
	bin, _ := s.dz.Put(bytes.NewReader([]byte{0xff, 0xfe, 0}))
	callRefused(t, cs, "attachment", map[string]any{"id": bin.ID, "as": "text"}, fault.Invalid.ExitCode(), "not UTF-8")
}
