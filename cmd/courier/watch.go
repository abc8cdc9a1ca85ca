package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// watchGateEnv names a FIFO watch reads one line from between taking its
// position in the journal and listing what came before: the tests put a
// message in at exactly that instant, to show it is printed once.
const watchGateEnv = "COURIER_TEST_WATCH_GATE"

func (a *app) watchCommand() *cobra.Command {
	var (
		since, corr, format  string
		providers, statuses  []string
		all, outbound, today bool
	)
	c := &cobra.Command{
		Use:   "watch",
		Short: "Print new messages as JSON lines as they arrive (with --since, those since first), until interrupted",
		Long: `Print each new inbound message, one JSON object a line (what list --format json
prints for it), as soon as it is durable in the mailbox; with --outbound,
each draft delivered or dead-lettered instead. It works with or without
the service: it follows the mailbox's event journal, which every writer
keeps, so nothing that arrives while it starts is missed or printed twice.

--since TIME (2h, 30m, 7d, 2026-02-06) first prints the messages since
then, as list does (--all, --status, --provider, --correlation filter
them as list's do); --since ID prints what arrived after that message,
so a loop that remembers the last id it handled misses nothing across a
restart of its own.

It ends with exit 0 on SIGINT or SIGTERM, and when its reader goes away
(courier watch | head -1) while it waits; a write into a pipe already
closed ends it by SIGPIPE, as it ends any filter.`,
		Example: `  courier watch | while read -r m; do echo "$m" | jq -r .id; done
  courier watch --provider slack --format id
  courier watch --since email_3f2a9c0d1e2f3a4b5c6d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"json", "id", "compact"}); err != nil {
				return err
			}
			w := &watcher{a: a, format: format, outbound: outbound}
			f := &w.filter
			f.All, f.Outbound, f.Correlation = all, outbound, corr
			if err := mailview.AddFilters(f, providers, statuses); err != nil {
				return err
			}
			if today {
				since = mailview.Midnight(time.Now()).Format(time.RFC3339)
			}
			return w.run(cmd.Context(), since)
		},
	}
	fl := c.Flags()
	fl.StringVar(&since, "since", "", "first print what arrived since a time (2h, 30m, 7d, 2026-02-06) or after a message id")
	fl.BoolVar(&today, "today", false, "first print the messages since midnight")
	fl.BoolVar(&all, "all", false, "with --since: include done and dead messages")
	fl.BoolVar(&outbound, "outbound", false, "print drafts as they are delivered or dead-lettered instead")
	fl.StringSliceVar(&providers, "provider", nil, "only these providers (email, lark, slack)")
	fl.StringSliceVar(&statuses, "status", nil, "only these statuses (new, claimed, failed, done, dead; sent)")
	fl.StringVar(&corr, "correlation", "", "only messages with this correlation id")
	fl.StringVar(&format, "format", "json", "json (one object a line), id, or compact (id | from | preview)")
	return c
}

type watcher struct {
	a        *app
	mb       *mailbox.Mailbox
	format   string
	outbound bool
	filter   mailbox.Filter
	out      *bufio.Writer
	printed  map[string]bool // by the first listing: not printed again from the journal
	cursor   int64
	gapSaid  bool
}

func (w *watcher) run(ctx context.Context, since string) error {
	mb, err := w.a.Mailbox()
	if err != nil {
		return err
	}
	w.mb = mb
	w.out = bufio.NewWriter(w.a.stdout)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f, ok := w.a.stdout.(*os.File); ok {
		go readerGone(ctx, f, cancel)
	}
	// Wake on the journal before taking the position: a commit between
	// the two is then both after the position and a wake-up.
	wake, stop := mb.Waker(ctx)
	defer stop()
	if w.cursor, _, err = mb.LastEvent(ctx); err != nil {
		return err
	}
	if gate := os.Getenv(watchGateEnv); gate != "" {
		if f, err := os.Open(gate); err == nil {
			bufio.NewReader(f).ReadString('\n')
			f.Close()
		}
	}
	if err := w.first(ctx, since); err != nil {
		return err
	}
	for {
		if err := w.follow(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
	}
}

// first prints what --since asks for: the messages since a time, as list
// selects them, or what the journal holds after a message's arrival (what
// arrived since a time when the journal no longer holds it).
func (w *watcher) first(ctx context.Context, since string) error {
	w.printed = map[string]bool{}
	if since == "" {
		return nil
	}
	if t, err := mailview.ParseSince(since, time.Now()); err == nil {
		f := w.filter
		f.Since = t
		return w.list(ctx, f, nil)
	}
	e, err := w.mb.Get(ctx, since)
	if err != nil {
		if errors.Is(err, mailbox.ErrNotFound) {
			return usageError("--since %q is neither a time (2h, 30m, 7d, 2026-02-06) nor the id of a message in the mailbox", since)
		}
		return err
	}
	kind := mailbox.EventInbound
	if e.Direction == schema.Outbound {
		kind = mailbox.EventDelivered
		if e.Status == mailbox.StatusDead {
			kind = mailbox.EventDead
		}
	}
	if ev, ok, err := w.mb.EventOf(ctx, e.ID, kind); err != nil {
		return err
	} else if ok && ev.Seq <= w.cursor {
		w.cursor = ev.Seq // the journal holds what came after it, in order
		return nil
	}
	// Pruned from the journal: what is newer than it, by its time.
	f := w.filter
	f.Since = e.Timestamp
	return w.list(ctx, f, e)
}

// list prints what f selects, leaving out after and what came before it.
func (w *watcher) list(ctx context.Context, f mailbox.Filter, after *mailbox.Entry) error {
	err := w.mb.List(ctx, f, func(e *mailbox.Entry) error {
		if after != nil && (e.Timestamp.Before(after.Timestamp) || (e.Timestamp.Equal(after.Timestamp) && e.ID <= after.ID)) {
			return nil
		}
		w.printed[e.ID] = true
		return w.print(e)
	})
	if err != nil {
		return err
	}
	return w.out.Flush()
}

// follow prints what the journal holds after the position.
func (w *watcher) follow(ctx context.Context) error {
	for {
		evs, err := w.mb.Events(ctx, w.cursor, 256)
		if err != nil {
			return err
		}
		if len(evs) > 0 && evs[0].Seq > w.cursor+1 && !w.gapSaid {
			// The service prunes what every hook has taken a day after:
			// this watch was stopped (SIGSTOP, a suspended laptop) longer.
			fmt.Fprintf(w.a.stderr, "courier: watch: the journal no longer holds events %d to %d (pruned while this watch was stopped): `courier list --since` shows what arrived\n", w.cursor+1, evs[0].Seq-1)
			w.gapSaid = true
		}
		for _, ev := range evs {
			w.cursor = ev.Seq
			// A draft held for approval is printed when it is sent or dead.
			if (ev.Kind == mailbox.EventInbound) == w.outbound || w.printed[ev.ID] || ev.Kind == mailbox.EventAwaitingApproval {
				continue
			}
			e, err := w.mb.Get(ctx, ev.ID)
			if errors.Is(err, mailbox.ErrNotFound) {
				continue // set aside or forgotten since
			}
			if err != nil {
				return err
			}
			if w.keep(e) {
				if err := w.print(e); err != nil {
					return err
				}
			}
		}
		if err := w.out.Flush(); err != nil {
			return err
		}
		if len(evs) < 256 {
			return nil
		}
	}
}

// keep applies the filters list applies, but for the time.
func (w *watcher) keep(e *mailbox.Entry) bool {
	f := w.filter
	if len(f.Providers) > 0 && !containsProvider(f.Providers, e.Provider) {
		return false
	}
	if f.Correlation != "" && e.CorrelationID != f.Correlation {
		return false
	}
	if len(f.Statuses) > 0 {
		for _, s := range f.Statuses {
			if s == e.Status {
				return true
			}
		}
		return false
	}
	return true
}

func containsProvider(ps []schema.Provider, p schema.Provider) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

func (w *watcher) print(e *mailbox.Entry) error {
	switch w.format {
	case "id":
		_, err := fmt.Fprintln(w.out, e.ID)
		return err
	case "compact":
		_, err := fmt.Fprintf(w.out, "%s | %s | %s\n", e.ID, mailview.OneLine(mailview.SafeText(e.From.Name)), mailview.SafeText(e.Preview))
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	w.out.Write(mailview.JSONSafe(b))
	return w.out.WriteByte('\n')
}

// readerGone cancels when the reading end of a pipe (or socket) on f is
// closed, so that `courier watch | head -1` ends once head has its line,
// not at the next message's write. poll reports POLLERR on a pipe whose
// reader is gone (POLLHUP on a socket), whatever events were asked for.
func readerGone(ctx context.Context, f *os.File, cancel func()) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return
	}
	if m := st.Mode & unix.S_IFMT; m != unix.S_IFIFO && m != unix.S_IFSOCK {
		return
	}
	fds := []unix.PollFd{{Fd: int32(f.Fd())}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 500)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			cancel()
			return
		}
	}
}
