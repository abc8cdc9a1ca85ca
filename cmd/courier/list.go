package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"golang.org/x/text/width"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// entryWriter prints entries in one of the list formats, streaming.
type entryWriter struct {
	format string
	w      *bufio.Writer
	table  *tableWriter
	enc    *json.Encoder
	buf    bytes.Buffer
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
	case "json":
		ew.enc = json.NewEncoder(&ew.buf)
		ew.enc.SetEscapeHTML(false)
	}
	return ew
}

func (ew *entryWriter) write(e *mailbox.Entry) error {
	ew.n++
	switch ew.format {
	case "table":
		ew.table.row(e.ID, string(e.Provider), cell(safeText(e.From.Name), 24), string(e.Status), ago(ew.now, e.Timestamp), cell(safeText(e.Preview), 50))
		if ew.n%1000 == 0 {
			return ew.table.flush() // keep memory flat on long listings
		}
		return nil
	case "json":
		ew.buf.Reset()
		if err := ew.enc.Encode(e); err != nil {
			return err
		}
		if ew.n == 1 {
			ew.w.WriteString("[\n")
		} else {
			ew.w.WriteString(",\n")
		}
		_, err := ew.w.Write(jsonSafe(bytes.TrimSuffix(ew.buf.Bytes(), []byte("\n")))) // one entry per line
		return err
	case "compact":
		_, err := fmt.Fprintf(ew.w, "%s | %s | %s\n", e.ID, oneLine(safeText(e.From.Name)), safeText(e.Preview))
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
	s = oneLine(s)
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

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// ago prints a time relative to now, as upstream's table does.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return t.UTC().Format("2006-01-02 15:04")
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	case d < 7*24*time.Hour:
		return fmt.Sprintf("%d d ago", int(d.Hours()/24))
	}
	return t.UTC().Format("2006-01-02")
}

// parseSince reads --since: a duration back from now (2h, 30m, 7d) or a
// date or time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if strings.HasSuffix(s, "d") {
		if n, err := strconv.Atoi(strings.TrimSuffix(s, "d")); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageError("--since %q is neither a duration (2h, 30m, 7d) nor a date (2026-02-06)", s)
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
		Example: `  courier list
  courier list --provider lark --status new --format id | courier claim -
  courier list --all --since 2h --format json
  courier list --correlation bug_123`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, listFormats); err != nil {
				return err
			}
			f := mailbox.Filter{All: all, Outbound: outbound, Correlation: corr, Limit: limit}
			if err := addFilterFlags(&f, providers, statuses); err != nil {
				return err
			}
			now := time.Now()
			var err error
			if f.Since, err = parseSince(since, now); err != nil {
				return err
			}
			if today {
				y, m, d := now.Date()
				f.Since = time.Date(y, m, d, 0, 0, 0, 0, now.Location())
			}
			mb, err := a.mailbox()
			if err != nil {
				return err
			}
			if format == "json" {
				w := &jsonSafeWriter{w: a.stdout} // see sanitize.go
				if _, err := mb.ListJSON(cmd.Context(), f, w); err != nil {
					return err
				}
				return w.Close()
			}
			ew := newEntryWriter(a.stdout, format)
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
	fl.IntVar(&limit, "limit", 0, "at most this many")
	fl.StringVar(&format, "format", "table", "table, json, compact (id | from | preview) or id")
	return c
}

func validStatus(s string) bool {
	for _, v := range mailbox.Statuses {
		if string(v) == s {
			return true
		}
	}
	return false
}

func (a *app) threadCommand() *cobra.Command {
	return a.filterCommand("thread KEY", "Show every message and draft of a thread (KEY is a thread key or any message id in it)",
		func(key string) mailbox.Filter { return mailbox.Filter{Both: true, Thread: key} }, "no thread %q")
}

func (a *app) contextCommand() *cobra.Command {
	return a.filterCommand("context CORRELATION_ID", "Show everything with a correlation id: inbound, archived and sent, by time",
		func(corr string) mailbox.Filter { return mailbox.Filter{Both: true, Correlation: corr} }, "nothing carries correlation id %q")
}

// filterCommand is a command listing, in the list formats, what a filter
// made of its one argument selects; nothing selected is exit 1.
func (a *app) filterCommand(use, short string, filter func(arg string) mailbox.Filter, none string) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, listFormats); err != nil {
				return err
			}
			mb, err := a.mailbox()
			if err != nil {
				return err
			}
			ew := newEntryWriter(a.stdout, format)
			if err := mb.List(cmd.Context(), filter(args[0]), ew.write); err != nil {
				return err
			}
			if err := ew.close(); err != nil {
				return err
			}
			if ew.n == 0 {
				return withCode(exitNotFound, fmt.Errorf(none, args[0]))
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "table", "table, json, compact or id")
	return c
}

// addFilterFlags adds the --provider and --status flags (each repeatable,
// or comma-separated) to f, refusing a value that is not one.
func addFilterFlags(f *mailbox.Filter, providers, statuses []string) error {
	for _, p := range providers {
		for _, p := range strings.Split(p, ",") {
			if !schema.Provider(p).Valid() {
				return usageError("--provider %q is not one of %s", p, "email, lark, slack, discord, teams, wecom, dingtalk")
			}
			f.Providers = append(f.Providers, schema.Provider(p))
		}
	}
	for _, s := range statuses {
		for _, s := range strings.Split(s, ",") {
			if !validStatus(s) {
				return usageError("--status %q is not one of new, claimed, failed, done, dead, queued, sent", s)
			}
			f.Statuses = append(f.Statuses, mailbox.Status(s))
		}
	}
	return nil
}
