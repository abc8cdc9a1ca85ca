package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/mcpserver"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// tsPaging is a line of testdata/mcpconformance/tslist.cjs: one listing
// paged through by the official TypeScript SDK's stdio client.
type tsPaging struct {
	Limit    int    `json:"limit"`
	Entries  int    `json:"entries"`
	Pages    int    `json:"pages"`
	MaxFrame int    `json:"max_frame"`
	Error    string `json:"error"`
}

// The official TypeScript SDK's stdio client (installed beside the
// conformance suite: npm ci there) pages through list at the tool's
// largest limit and at its default, each entry once, validating the
// structured content against list's output schema, and each page's text
// is what a model reads of it: the count and the next cursor, then a line
// an entry (tslist.cjs checks it), not the structured content's JSON
// again. A page of 10,000 entries was about 12 MB here, and that client
// refuses a frame over 10 MiB: the call ended "Connection closed".
func TestMCPTypeScriptClient(t *testing.T) {
	dir, _ := filepath.Abs(filepath.Join("testdata", "mcpconformance"))
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	sdk := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	for _, p := range []string{node, sdk} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("the TypeScript SDK is not installed (npm ci --prefix %s): %v", dir, err)
		}
	}
	const n = mcpserver.MaxLimit + 1
	ws := newWorkspace(t)
	t0 := testutil.Time("2026-03-01T08:00:00Z")
	var msgs []*schema.Message
	for i := range n {
		m := testutil.Message(schema.Email, fmt.Sprintf("ts%05d", i), t0.Add(time.Duration(i)*time.Second),
			"A message of the kind a mailbox holds, long enough for a preview of a hundred and twenty characters, and a bit more.")
		m.Session.Name = "Re: the quarterly report, its figures and the meeting about them " + fmt.Sprint(i)
		msgs = append(msgs, m)
	}
	seed(t, ws, msgs...)

	cmd := exec.Command(node, filepath.Join(dir, "tslist.cjs"), courierBin, ws)
	cmd.Env = append(os.Environ(), "TSLIST_CHECK=1")
	cmd.Stdin = strings.NewReader(fmt.Sprintf("%d\n0\n", mcpserver.MaxLimit))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tslist: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for _, limit := range []int{mcpserver.MaxLimit, 0} {
		var p tsPaging
		if !sc.Scan() || json.Unmarshal(sc.Bytes(), &p) != nil {
			t.Fatalf("tslist printed %q\n%s", out, stderr.String())
		}
		if p.Error != "" || p.Entries != n || p.MaxFrame >= mcpserver.MaxPage {
			t.Errorf("limit %d: %+v (want %d entries, frames under %d bytes)", limit, p, n, mcpserver.MaxPage)
		}
		t.Logf("limit %d: %d entries in %d pages, the largest frame %d bytes", limit, p.Entries, p.Pages, p.MaxFrame)
	}
}
