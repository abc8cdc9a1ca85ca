package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/text/width"

	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/mailbox"
)

// entryWriter prints entries in one of the list formats, streaming.
type entryWriter struct {
	format string
	w      *bufio.Writer
	table  *tableWriter
	enc    mailview.EntryEncoder
	n      int
	now    time.Time
}

var listFormats = []string{"table", "json", "compact", "id"}

func checkFormat(format string, allowed []string) error {
	for _, f := range allowed {
		if f == format {
			return nil
		}
	}
	return usageError("--format %q is not one of %s", format, strings.Join(allowed, ", "))
}

func newEntryWriter(out io.Writer, format string) *entryWriter {
	ew := &entryWriter{format: format, w: bufio.NewWriterSize(out, 64*1024), now: time.Now()}
	switch format {
	case "table":
		ew.table = &tableWriter{w: ew.w}
		ew.table.row("ID", "PROVIDER", "FROM", "STATUS", "TIME", "PREVIEW")
	}
	return ew
}

func (ew *entryWriter) write(e *mailbox.Entry) error {
	ew.n++
	switch ew.format {
	case "table":
		ew.table.row(e.ID, string(e.Provider), cell(mailview.SafeText(e.From.Name), 24), string(e.Status), mailview.Ago(ew.now, e.Timestamp), cell(mailview.SafeText(e.Preview), 50))
		if ew.n%1000 == 0 {
			return ew.table.flush() // keep memory flat on long listings
		}
		return nil
	case "json":
		line, err := ew.enc.Encode(e)
		if err != nil {
			return err
		}
		if ew.n == 1 {
			ew.w.WriteString("[\n")
		} else {
			ew.w.WriteString(",\n")
		}
		_, err = ew.w.Write(line) // one entry per line
		return err
	case "compact":
		_, err := fmt.Fprintf(ew.w, "%s | %s | %s\n", e.ID, mailview.OneLine(mailview.SafeText(e.From.Name)), mailview.SafeText(e.Preview))
		return err
	default:
		_, err := fmt.Fprintln(ew.w, e.ID)
		return err
	}
}

func (ew *entryWriter) close() error {
	switch ew.format {
	case "table":
		if err := ew.table.flush(); err != nil {
			return err
		}
	case "json":
		if ew.n == 0 {
			ew.w.WriteString("[]\n")
		} else {
			ew.w.WriteString("\n]\n")
		}
	}
	return ew.w.Flush()
}

// tableWriter aligns columns by the width they take on a terminal (a CJK
// character takes two cells; text/tabwriter counts it as one, so Chinese
// names and previews pushed the columns out of line). Rows are held in
// blocks; a column's width only grows from one block to the next.
type tableWriter struct {
	w      io.Writer
	rows   [][]string
	widths []int
}

func (t *tableWriter) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *tableWriter) flush() error {
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(t.widths) {
				t.widths = append(t.widths, 0)
			}
			t.widths[i] = max(t.widths[i], displayWidth(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		b.Reset()
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", t.widths[i]-displayWidth(c)+2))
			}
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(t.w, b.String()); err != nil {
			return err
		}
	}
	t.rows = t.rows[:0]
	return nil
}

// displayWidth is the number of terminal cells s takes.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	if unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == '\u200b' {
		return 0
	}
	return 1
}

// cell cuts s to n terminal cells for a table column.
func cell(s string, n int) string {
	s = mailview.OneLine(s)
	if displayWidth(s) <= n {
		return s
	}
	w := 0
	for i, r := range s {
		if w+runeWidth(r) > n-1 {
			return s[:i] + "…"
		}
		w += runeWidth(r)
	}
	return s
}

func (a *app) listCommand() *cobra.Command {
	var (
		all, outbound, today bool
		providers, statuses  []string
		since, corr, format  string
		limit                int
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List messages (by default those still in the inbox: new, claimed, failed)",
		Long: `List messages (by default those still in the inbox: new, claimed, failed),
first in time first.

On a terminal, list shows the newest 50 (--limit N: the newest N) and a
last line saying how many more there are; --all (done and dead messages
too) or --limit 0 lists every one. Written to a pipe or a file, and with
--format json, it lists every message (--limit N: the first N).`,
		Example: `  courier list
  courier list --provider lark --status new --format id | courier claim -
  courier list --all --since 2h --format json
  courier list --correlation bug_123`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, listFormats); err != nil {
				return err
			}
			q := mailview.Query{All: all, Outbound: outbound, Providers: providers, Statuses: statuses, Since: since, Today: today,
				Correlation: corr, Limit: limit}
			f, err := q.Filter(time.Now())
			if err != nil {
				return err
			}
			mb, err := a.Mailbox()
			if err != nil {
				return err
			}
			if format == "json" {
				return mailview.WriteJSON(cmd.Context(), mb, f, a.stdout)
			}
			ew := newEntryWriter(a.stdout, format)
			if n, ok := terminalView(cmd, a.stdout, format, all, limit); ok {
				return listNewest(cmd.Context(), mb, f, n, ew, a.stdout)
			}
			if err := mb.List(cmd.Context(), f, ew.write); err != nil {
				return err
			}
			return ew.close()
		},
	}
	fl := c.Flags()
	fl.BoolVar(&all, "all", false, "include done and dead messages")
	fl.BoolVar(&outbound, "outbound", false, "list queued, sent and dead drafts instead")
	fl.StringSliceVar(&providers, "provider", nil, "only these providers (email, lark, slack)")
	fl.StringSliceVar(&statuses, "status", nil, "only these statuses (new, claimed, failed, done, dead; queued, sent)")
	fl.StringVar(&since, "since", "", "only messages since a time: 2h, 30m, 7d, or 2026-02-06")
	fl.BoolVar(&today, "today", false, "only messages since midnight")
	fl.StringVar(&corr, "correlation", "", "only messages with this correlation id")
	fl.IntVar(&limit, "limit", 0, "at most this many, the first in time; on a terminal without --all, the newest (default 50 there; 0 for all)")
	fl.StringVar(&format, "format", "table", "table, json, compact (id | from | preview) or id")
	return c
}

// terminalLimit is how many messages list shows on a terminal when
// neither --all nor --limit says: the newest.
const terminalLimit = 50

// ttyWriter is an output that says itself whether it is a terminal (tests
// give one to take the terminal's path).
type ttyWriter interface{ IsTerminal() bool }

// terminalView says how many of the newest entries list shows, when its
// output is a terminal a person reads (not JSON, not --all, no --limit 0:
// a person cannot read 100,000 rows); ok is false otherwise, and every
// entry the filter selects is listed, first in time first, as before.
func terminalView(c *cobra.Command, out io.Writer, format string, all bool, limit int) (n int, ok bool) {
	tty := isTerminal(out)
	if t, is := out.(ttyWriter); is {
		tty = t.IsTerminal()
	}
	switch {
	case format == "json" || all || !tty:
		return 0, false
	case !c.Flags().Changed("limit"):
		return terminalLimit, true
	}
	return limit, limit > 0
}

// listNewest lists the newest n entries f selects (in time order, as
// every listing), then a footer counting those it left out. It keeps only
// n entries in memory whatever the mailbox holds.
func listNewest(ctx context.Context, mb *mailbox.Mailbox, f mailbox.Filter, n int, ew *entryWriter, out io.Writer) error {
	f.Limit = 0
	ring := make([]*mailbox.Entry, 0, min(n, 1024))
	total := 0
	err := mb.List(ctx, f, func(e *mailbox.Entry) error {
		if len(ring) < n {
			ring = append(ring, e)
		} else {
			ring[total%n] = e
		}
		total++
		return nil
	})
	if err != nil {
		return err
	}
	start := 0
	if total > n {
		start = total % n // the oldest kept
	}
	for i := range ring {
		if err := ew.write(ring[(start+i)%len(ring)]); err != nil {
			return err
		}
	}
	if err := ew.close(); err != nil {
		return err
	}
	if more := total - len(ring); more > 0 {
		_, err := fmt.Fprintf(out, "%d more: --all\n", more)
		return err
	}
	return nil
}

func (a *app) threadCommand() *cobra.Command {
	return a.filterCommand("thread KEY", "Show every message and draft of a thread (KEY is a thread key or any message id in it)", mailview.Thread)
}

func (a *app) contextCommand() *cobra.Command {
	return a.filterCommand("context CORRELATION_ID", "Show everything with a correlation id: inbound, archived and sent, by time", mailview.Context)
}

// filterCommand is a command listing, in the list formats, what list
// gives for its one argument; nothing is exit 1.
func (a *app) filterCommand(use, short string, list func(context.Context, *mailbox.Mailbox, string, func(*mailbox.Entry) error) error) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, listFormats); err != nil {
				return err
			}
			mb, err := a.Mailbox()
			if err != nil {
				return err
			}
			ew := newEntryWriter(a.stdout, format)
			err = list(cmd.Context(), mb, args[0], ew.write)
			if err != nil && !mailview.Empty(err) {
				return err
			}
			if cerr := ew.close(); cerr != nil {
				return cerr
			}
			return err
		},
	}
	c.Flags().StringVar(&format, "format", "table", "table, json, compact or id")
	return c
}
