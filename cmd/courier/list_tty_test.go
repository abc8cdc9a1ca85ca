package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// ttyBuffer is output that says it is a terminal (ttyWriter).
type ttyBuffer struct{ bytes.Buffer }

func (*ttyBuffer) IsTerminal() bool { return true }

// listTo runs list in ws with its output to out (a terminal when out is a
// ttyBuffer) and returns what it printed.
func listTo(t *testing.T, ws string, out interface {
	Write([]byte) (int, error)
	String() string
}, args ...string) string {
	t.Helper()
	var e bytes.Buffer
	if code := run(append([]string{"courier", "--root", ws, "list"}, args...), strings.NewReader(""), out, &e); code != 0 {
		t.Fatalf("list %v: exit %d %s", args, code, e.String())
	}
	return out.String()
}

// Issue 19, item 8: at 100k messages `courier list` printed every row on a
// terminal. There it now shows the newest 50 (--limit N: the newest N) and
// a footer counting the rest; --all, --limit 0, JSON and output to a pipe
// list every message as before.
func TestListTerminalShowsNewest(t *testing.T) {
	ws := newWorkspace(t)
	at := testutil.Time("2026-02-06T20:00:00Z")
	var ids []string
	var msgs []*schema.Message
	for i := range 60 {
		m := testutil.Message(schema.Slack, fmt.Sprintf("C1_x%03d", i), at.Add(time.Duration(i)*time.Minute), fmt.Sprintf("text %d", i))
		msgs = append(msgs, m)
		ids = append(ids, m.ID)
	}
	seed(t, ws, msgs...)
	idLines := func(ids []string) string { return strings.Join(ids, "\n") + "\n" }

	// A terminal: the newest 50, in time order, then the footer.
	if got, want := listTo(t, ws, &ttyBuffer{}, "--format", "id"), idLines(ids[10:])+"10 more: --all\n"; got != want {
		t.Errorf("terminal, --format id:\n%s\nwant\n%s", got, want)
	}
	table := listTo(t, ws, &ttyBuffer{})
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != 52 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], ids[10]+" ") ||
		!strings.HasPrefix(lines[50], ids[59]+" ") || lines[51] != "10 more: --all" {
		t.Errorf("terminal table: %d lines, want the header, the newest 50 and the footer:\n%s", len(lines), table)
	}
	if got, want := listTo(t, ws, &ttyBuffer{}, "--format", "compact", "--limit", "5"), "55 more: --all\n"; !strings.HasSuffix(got, want) ||
		strings.Count(got, "\n") != 6 || !strings.HasPrefix(got, ids[55]+" | ") {
		t.Errorf("terminal --limit 5:\n%s\nwant the newest 5 and %q", got, want)
	}

	// What lists everything on a terminal lists what a pipe does.
	all := idLines(ids)
	for _, args := range [][]string{{"--all"}, {"--limit", "0"}} {
		if got := listTo(t, ws, &ttyBuffer{}, append(args, "--format", "id")...); got != all {
			t.Errorf("terminal %v:\n%s\nwant all 60, no footer", args, got)
		}
	}
	if got := listTo(t, ws, &bytes.Buffer{}, "--format", "id"); got != all {
		t.Errorf("pipe:\n%s\nwant all 60, no footer", got)
	}
	if got := listTo(t, ws, &bytes.Buffer{}, "--format", "id", "--limit", "5"); got != idLines(ids[:5]) {
		t.Errorf("pipe --limit 5:\n%s\nwant the first 5, as before", got)
	}
	if got := listTo(t, ws, &bytes.Buffer{}); strings.Count(got, "\n") != 61 || strings.Contains(got, "more: --all") {
		t.Errorf("pipe table: want the header and 60 rows, no footer:\n%s", got)
	}
	pipeJSON := listTo(t, ws, &bytes.Buffer{}, "--format", "json")
	if got := listTo(t, ws, &ttyBuffer{}, "--format", "json"); got != pipeJSON || strings.Count(got, `"provider":`) != 60 {
		t.Errorf("terminal JSON differs from the pipe's, or lacks entries:\n%s", got)
	}

	// A terminal with no more than the limit: no footer.
	small := newWorkspace(t)
	seed(t, small, msgs[:3]...)
	if got := listTo(t, small, &ttyBuffer{}, "--format", "id"); got != idLines(ids[:3]) {
		t.Errorf("terminal, 3 messages:\n%s", got)
	}
}
