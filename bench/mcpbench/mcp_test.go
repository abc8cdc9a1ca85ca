package mcpbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/mcpserver"
)

var (
	messagesFlag = flag.Int("messages", 100000, "messages in the mailbox")
	readsFlag    = flag.Int("reads", 1000, "read calls in the read benchmark")
	runsFlag     = flag.Int("runs", 5, "runs of the list benchmark (min, median and max are reported)")
	limitsFlag   = flag.String("limits", "0,1000,5000,10000", "list's page sizes the list benchmark pages at, 0 the tool's default")
	tsFlag       = flag.String("tsclient", "../../cmd/courier/testdata/mcpconformance", "the folder of tslist.cjs and the TypeScript SDK it runs (npm ci there)")
	genFlag      = flag.String("genmailbox", "", "the genmailbox binary (default: built from ./bench/genmailbox for this run)")
	wsFlag       = flag.String("ws", "", "a mailbox of -messages messages made by genmailbox (default: one made for the run, before timing)")
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
		if *wsFlag != "" {
			wsDir = *wsFlag
			return
		}
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

// BenchmarkList pages through the whole mailbox (all) with list at each
// of -limits on one open `courier mcp` session of the official
// TypeScript SDK's stdio client (tslist.cjs, which tools/lists first so
// that the client checks each page against list's output schema), and
// runs `courier list --all --format json`, a process, before each: the
// two sides interleaved, -runs times, in the mailbox made before timing.
// Each pair gives a ratio of wall times, and one of CPU times (the
// client's and the server's against the process's), which the load of a
// shared machine moves less.
func BenchmarkList(b *testing.B) {
	bin := benchutil.CourierBin(b)
	ws := workspace(b)
	n := *messagesFlag
	limits := pageSizes(b)
	ts := startTS(b, bin, ws)
	cliRun(b, bin, ws, n) // the first run warms the cache, as the client's first call does
	sides := map[int]*listSides{}
	for range *runsFlag {
		for _, l := range limits {
			if sides[l] == nil {
				sides[l] = &listSides{}
			}
			c := cliRun(b, bin, ws, n)
			c.parse = ts.parse(b, c.out, n)
			r, err := ts.page(b, l, n)
			sides[l].add(c, r, err)
		}
	}
	for _, l := range limits {
		sides[l].report(b, n, l)
	}
}

// listSides are the paired runs of one page size.
type listSides struct {
	cli, cliCPU       []time.Duration
	wall, cpu, decode []time.Duration
	ratio, cpuRatio   []float64
	// The CLI and node's JSON.parse of what it printed, one after the
	// other: what a consumer of the CLI's JSON spends.
	parsed, parsedCPU           []time.Duration
	parsedRatio, parsedCPURatio []float64
	last                        tsRun
	err                         error
}

func (s *listSides) add(c cliTime, r tsRun, err error) {
	if err != nil {
		s.err = err
		return
	}
	s.cli, s.cliCPU = append(s.cli, c.wall), append(s.cliCPU, c.cpu)
	s.wall, s.cpu, s.decode = append(s.wall, r.Wall), append(s.cpu, r.CPU+r.ServerCPU), append(s.decode, r.Decode)
	s.ratio = append(s.ratio, r.Wall.Seconds()/c.wall.Seconds())
	s.cpuRatio = append(s.cpuRatio, (r.CPU+r.ServerCPU).Seconds()/c.cpu.Seconds())
	pw, pc := c.wall+c.parse.wall, c.cpu+c.parse.cpu
	s.parsed, s.parsedCPU = append(s.parsed, pw), append(s.parsedCPU, pc)
	s.parsedRatio = append(s.parsedRatio, r.Wall.Seconds()/pw.Seconds())
	s.parsedCPURatio = append(s.parsedCPURatio, (r.CPU+r.ServerCPU).Seconds()/pc.Seconds())
	s.last = r
}

func (s *listSides) report(b *testing.B, n, limit int) {
	page := fmt.Sprint(limit)
	if limit == 0 {
		page = "the default"
	}
	measure := fmt.Sprintf("MCP list (all) of %d messages, limit %s", n, page)
	if len(s.wall) == 0 {
		benchutil.Report(b, measure, "failed: "+s.err.Error(), "", "")
		return
	}
	benchutil.Report(b, fmt.Sprintf("%s: %d pages, the largest %.2f MB", measure, s.last.Pages, float64(s.last.MaxFrame)/1e6),
		fmt.Sprintf("%s; CPU %.2f s (client and server), the client's decode %.2f s", spread(s.wall), median(s.cpu).Seconds(), median(s.decode).Seconds()),
		fmt.Sprintf("%s; CPU %.2f s", spread(s.cli), median(s.cliCPU).Seconds()),
		fmt.Sprintf("%.1f× (%.1f–%.1f); CPU %.1f×", medianF(s.ratio), slices.Min(s.ratio), slices.Max(s.ratio), medianF(s.cpuRatio)),
		fmt.Sprintf("%s; CPU %.2f s: %.1f×; CPU %.1f×", spread(s.parsed), median(s.parsedCPU).Seconds(), medianF(s.parsedRatio), medianF(s.parsedCPURatio)))
}

// pageSizes is -limits: list's page sizes, 0 for the tool's default.
func pageSizes(b *testing.B) []int {
	var limits []int
	for _, f := range strings.Split(*limitsFlag, ",") {
		l, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || l < 0 || l > mcpserver.MaxLimit {
			b.Fatalf("-limits %q: %q is not a page size (0 to %d)", *limitsFlag, f, mcpserver.MaxLimit)
		}
		limits = append(limits, l)
	}
	return limits
}

// cliTime is a run of the CLI: its wall and CPU time, what it printed,
// and node's JSON.parse of that.
type cliTime struct {
	wall, cpu time.Duration
	out       []byte
	parse     parseTime
}

// parseTime is node's JSON.parse of the CLI's output: wall and CPU time.
type parseTime struct{ wall, cpu time.Duration }

// cliRun times `courier list --all --format json`, a process, checking
// that it printed n entries.
func cliRun(b *testing.B, bin, ws string, n int) cliTime {
	b.Helper()
	cmd := exec.Command(bin, "--root", ws, "list", "--all", "--format", "json")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	if c := bytes.Count(stdout.Bytes(), []byte("\n{")); c != n {
		b.Fatalf("courier list printed %d entries, want %d", c, n)
	}
	return cliTime{wall: d, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), out: stdout.Bytes()}
}

// tsClient is tslist.cjs running: one session of the TypeScript SDK's
// client, a listing paged through for each line written to it.
type tsClient struct {
	in  io.Writer
	out *bufio.Scanner
}

// tsRun is one listing paged through, as tslist.cjs measured it.
type tsRun struct {
	Wall, CPU, ServerCPU, Decode time.Duration
	Pages, MaxFrame              int
}

func startTS(b *testing.B, bin, ws string) *tsClient {
	b.Helper()
	dir, err := filepath.Abs(*tsFlag)
	if err != nil {
		b.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(node); err != nil {
		b.Skipf("the TypeScript SDK is not installed (npm ci --prefix %s): %v", dir, err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "tslist.cjs"), bin, ws)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); cmd.Wait() })
	return &tsClient{in: in, out: bufio.NewScanner(out)}
}

// page pages through the listing at limit (0: the tool's default),
// checking that it gave n entries; an error is the client's.
func (c *tsClient) page(b *testing.B, limit, n int) (tsRun, error) {
	b.Helper()
	answer := c.ask(b, fmt.Sprint(limit))
	var r struct {
		Ms          float64 `json:"ms"`
		CPUMs       float64 `json:"cpu_ms"`
		ServerCPUMs float64 `json:"server_cpu_ms"`
		DecodeMs    float64 `json:"decode_ms"`
		Entries     int     `json:"entries"`
		Pages       int     `json:"pages"`
		MaxFrame    int     `json:"max_frame"`
		Error       string  `json:"error"`
	}
	if err := json.Unmarshal(answer, &r); err != nil {
		b.Fatalf("tslist, limit %d: %s: %v", limit, answer, err)
	}
	if r.Error != "" {
		return tsRun{}, errors.New(r.Error)
	}
	if r.Entries != n {
		b.Fatalf("tslist, limit %d: %d entries, want %d", limit, r.Entries, n)
	}
	return tsRun{Wall: ms(r.Ms), CPU: ms(r.CPUMs), ServerCPU: ms(r.ServerCPUMs), Decode: ms(r.DecodeMs), Pages: r.Pages, MaxFrame: r.MaxFrame}, nil
}

// parse has tslist.cjs read the CLI's output from a file (written
// before timing) and JSON.parse it, checking that it holds n entries.
func (c *tsClient) parse(b *testing.B, out []byte, n int) parseTime {
	b.Helper()
	f, err := os.CreateTemp("", "cli-*.json")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(out); err != nil {
		b.Fatal(err)
	}
	f.Close()
	answer := c.ask(b, "parse "+f.Name())
	var r struct {
		Ms      float64 `json:"ms"`
		CPUMs   float64 `json:"cpu_ms"`
		Entries int     `json:"entries"`
		Error   string  `json:"error"`
	}
	if err := json.Unmarshal(answer, &r); err != nil || r.Error != "" || r.Entries != n {
		b.Fatalf("tslist, parse: %s (%v; want %d entries)", answer, err, n)
	}
	return parseTime{ms(r.Ms), ms(r.CPUMs)}
}

// ask writes a request to tslist.cjs and returns its answer.
func (c *tsClient) ask(b *testing.B, req string) []byte {
	b.Helper()
	fmt.Fprintln(c.in, req)
	if !c.out.Scan() {
		b.Fatalf("tslist ended: %v", c.out.Err())
	}
	return c.out.Bytes()
}

// ms is f milliseconds.
func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// spread is the min, median and max of d in seconds.
func spread(d []time.Duration) string {
	return fmt.Sprintf("%.2f s (%.2f–%.2f)", median(d).Seconds(), slices.Min(d).Seconds(), slices.Max(d).Seconds())
}

func medianF(f []float64) float64 {
	s := slices.Clone(f)
	slices.Sort(s)
	return s[len(s)/2]
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
