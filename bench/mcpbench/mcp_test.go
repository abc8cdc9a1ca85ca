package mcpbench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/bench/internal/benchutil"
)

var (
	messagesFlag = flag.Int("messages", 100000, "messages in the mailbox")
	readsFlag    = flag.Int("reads", 1000, "read calls in the read benchmark")
	runsFlag     = flag.Int("runs", 5, "runs of the list benchmark (the median is reported)")
	genFlag      = flag.String("genmailbox", "", "the genmailbox binary (default: built from ./bench/genmailbox for this run)")
)

var (
	wsOnce sync.Once
	wsDir  string
	wsErr  error
)

// workspace is a mailbox of -messages messages, made once for the run.
func workspace(b *testing.B) string {
	b.Helper()
	wsOnce.Do(func() {
		dir, err := mkdtemp()
		if err != nil {
			wsErr = err
			return
		}
		gen := *genFlag
		if gen == "" {
			gen = filepath.Join(dir, "genmailbox")
			if out, err := exec.Command("go", "build", "-o", gen, "github.com/monoco/courier/bench/genmailbox").CombinedOutput(); err != nil {
				wsErr = fmt.Errorf("go build ./bench/genmailbox: %v\n%s", err, out)
				return
			}
		}
		wsDir = filepath.Join(dir, "ws")
		if out, err := exec.Command(gen, "-root", wsDir, "-n", fmt.Sprint(*messagesFlag)).CombinedOutput(); err != nil {
			wsErr = fmt.Errorf("genmailbox: %v\n%s", err, out)
		}
	})
	if wsErr != nil {
		b.Fatal(wsErr)
	}
	return wsDir
}

// session spawns `courier mcp` in ws and connects the go-sdk's client.
func session(b *testing.B, bin, ws string) *mcp.ClientSession {
	b.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(bin, "--root", ws, "mcp")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func call(b *testing.B, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	b.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		b.Fatal(err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		b.Fatalf("%s: %s", tool, strings.Join(text, " "))
	}
	return res
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func BenchmarkList(b *testing.B) {
	bin := benchutil.CourierBin(b)
	ws := workspace(b)
	n := *messagesFlag
	cs := session(b, bin, ws)
	call(b, cs, "list", map[string]any{"limit": 1}) // the mailbox opened, as the CLI's first run below warms the cache
	var ours, base []time.Duration
	pages := 0
	for range *runsFlag {
		// The whole mailbox, page after page of list's most (10,000).
		start := time.Now()
		got, cursor := 0, ""
		pages = 0
		for {
			args := map[string]any{"all": true, "limit": 10000}
			if cursor != "" {
				args["cursor"] = cursor
			}
			res := call(b, cs, "list", args)
			pages++
			var out struct {
				Count      int
				NextCursor string `json:"next_cursor"`
			}
			sc, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(sc, &out)
			got += out.Count
			if cursor = out.NextCursor; cursor == "" {
				break
			}
		}
		ours = append(ours, time.Since(start))
		if got != n {
			b.Fatalf("list's pages gave %d entries, want %d", got, n)
		}

		cmd := exec.Command(bin, "--root", ws, "list", "--all", "--format", "json")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		start = time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(start))
		if c := strings.Count(stdout.String(), "\n{"); c != n {
			b.Fatalf("courier list printed %d entries, want %d", c, n)
		}
	}
	c, bl := median(ours), median(base)
	benchutil.Report(b, fmt.Sprintf("MCP list (all) over %d messages: %d pages of 10,000 on an open stdio session, median of %d", n, pages, *runsFlag),
		fmt.Sprintf("%.2f s", c.Seconds()), fmt.Sprintf("`courier list --all --format json`, a process: %.2f s", bl.Seconds()),
		fmt.Sprintf("%.2f×", float64(c)/float64(bl)))
}

func BenchmarkRead(b *testing.B) {
	bin := benchutil.CourierBin(b)
	ws := workspace(b)
	reads := *readsFlag
	cs := session(b, bin, ws)
	res := call(b, cs, "list", map[string]any{"limit": reads})
	var out struct {
		Messages []struct{ ID string }
	}
	sc, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(sc, &out)
	if len(out.Messages) == 0 {
		b.Fatal("no messages")
	}
	id := func(i int) string { return out.Messages[i%len(out.Messages)].ID }

	start := time.Now()
	for i := range reads {
		r := call(b, cs, "read", map[string]any{"id": id(i)})
		if len(r.Content) == 0 {
			b.Fatal("read gave no content")
		}
	}
	ours := time.Since(start)

	start = time.Now()
	for i := range reads {
		if err := exec.Command(bin, "--root", ws, "read", id(i)).Run(); err != nil {
			b.Fatal(err)
		}
	}
	base := time.Since(start)
	rate := func(d time.Duration) float64 { return float64(reads) / d.Seconds() }
	benchutil.Report(b, fmt.Sprintf("MCP read, %d calls one after another over one stdio session", reads),
		fmt.Sprintf("%.0f calls/s", rate(ours)), fmt.Sprintf("`courier read ID`, a process a read: %.0f/s", rate(base)),
		fmt.Sprintf("%.1f×", rate(ours)/rate(base)))
}

// mkdtemp is the run's folder, under $TMPDIR (bench/mcp.sh removes its own).
func mkdtemp() (string, error) { return os.MkdirTemp("", "courier-mcpbench") }
