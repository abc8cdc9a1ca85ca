package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/notify"
)

func (a *app) statusCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the service's health, adapters, queues and totals (exit 3 when it is not running)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			rep, live := a.fetchHealth(cmd.Context(), cfg.Courier.HTTP.Listen)
			if !live {
				mb, err := a.Mailbox()
				if err != nil {
					return err
				}
				if rep, err = service.Offline(cmd.Context(), mb, nil, nil); err != nil {
					return err
				}
				// No listener: rep.Listen stays empty, and status names
				// no address nothing listens on.
				rep.Hooks = service.HookStates(cmd.Context(), mb, service.HookNames(cfg))
			}
			if mb, err := a.Mailbox(); err == nil {
				rep.HookDead, _ = notify.DeadCounts(cmd.Context(), mb.DB())
			}
			if format == "json" {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				enc.Encode(rep)
			} else {
				printReport(a.stdout, rep)
			}
			if !live {
				return silentExit(fault.NoService)
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

// fetchHealth asks the running service for its report.
func (a *app) fetchHealth(ctx context.Context, listen string) (service.Report, bool) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/health", nil)
	if err != nil {
		// Not an address a request can go to: no service answers there.
		return service.Report{}, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return service.Report{}, false
	}
	defer resp.Body.Close()
	var rep service.Report
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep); err != nil {
		return service.Report{}, false
	}
	return rep, true
}

// degraded is an adapter a running service reports in error.
type degraded struct {
	name string
	why  string // its last error, and when it is tried again
}

func (d degraded) String() string { return d.name + " is degraded: " + d.why }

// degradedAdapters lists the adapters of a running service's report that
// are in error or degraded (a scope missing), by name.
func degradedAdapters(r service.Report) []degraded {
	var out []degraded
	for name, h := range r.Adapters {
		if h.Status != adapters.StatusError && h.Status != adapters.StatusDegraded {
			continue
		}
		d := degraded{name: name, why: h.LastError}
		if h.Status == adapters.StatusDegraded {
			d.why = h.Detail // connected, lacking what Detail says (a scope)
		}
		if h.RetryAt != nil {
			d.why += "; tried again at " + h.RetryAt.Format(time.RFC3339)
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func printReport(w io.Writer, r service.Report) {
	svc := r.Service
	if r.PID != 0 {
		svc += fmt.Sprintf(" (pid %d, up %s)", r.PID, time.Duration(r.Uptime*float64(time.Second)))
	}
	fmt.Fprintf(w, "Service:   %s\n", svc)
	if r.Status != "" {
		fmt.Fprintf(w, "Health:    %s\n", r.Status)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "Error:     %s\n", r.Error)
	}
	if r.Listen != "" {
		fmt.Fprintf(w, "HTTP:      http://%s (/health, /metrics)\n", r.Listen)
	}
	if len(r.Adapters) > 0 {
		fmt.Fprintln(w, "Adapters:")
		names := make([]string, 0, len(r.Adapters))
		for name := range r.Adapters {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			h := r.Adapters[name]
			line := fmt.Sprintf("  %-6s %-11s", name, h.Status)
			if h.Detail != "" {
				line += " " + h.Detail
			}
			if h.LastEvent != nil {
				line += " last event " + h.LastEvent.Format(time.RFC3339)
			}
			if h.LastError != "" {
				line += " last error: " + h.LastError
			}
			if h.RetryAt != nil {
				line += "; tried again at " + h.RetryAt.Format(time.RFC3339)
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
	}
	var inbox []string
	for _, st := range []mailbox.Status{mailbox.StatusNew, mailbox.StatusClaimed, mailbox.StatusFailed, mailbox.StatusDone, mailbox.StatusDead} {
		inbox = append(inbox, fmt.Sprintf("%s %d", st, r.Inbox[st]))
	}
	fmt.Fprintf(w, "Inbox:     %s\n", strings.Join(inbox, ", "))
	if len(r.Outbound) == 0 {
		fmt.Fprintln(w, "Outbound:  empty")
	} else {
		fmt.Fprintln(w, "Outbound:")
		for _, q := range r.Outbound {
			fmt.Fprintf(w, "  %-6s queued %d (due %d, sending %d, retrying %d, scheduled %d)", q.Provider, q.Queued, q.Due, q.Sending, q.Retrying, q.Scheduled)
			if q.AwaitingApproval > 0 {
				fmt.Fprintf(w, "; awaiting approval %d (`courier approve ID`)", q.AwaitingApproval)
			}
			if q.Dead > 0 {
				fmt.Fprintf(w, "; dead %d (`courier outbound list` says why)", q.Dead)
			}
			if q.Waiting != "" && r.Service != "stopped" {
				fmt.Fprintf(w, "; waiting: %s", q.Waiting)
			}
			if q.LastError != "" {
				fmt.Fprintf(w, "; last error: %s", q.LastError)
			}
			fmt.Fprintln(w)
		}
	}
	hookDeadLines(w, r)
	if r.Service != "stopped" {
		fmt.Fprintf(w, "Totals:    received %d (duplicates %d, merged %d), sent %d, failed attempts %d\n",
			r.Totals.Received, r.Totals.Duplicates, r.Totals.Merged, r.Totals.Sent, r.Totals.Failed)
		deadLetterLines(w, r)
	} else {
		fmt.Fprintln(w, "The service is not running: start it with `courier start` (in the background; `courier serve` in the foreground, or systemctl start courier under systemd).")
	}
}

// deadLetterLines says, per provider that has any, what could not be
// filed: the raw dead letters kept, set aside since the start, and
// refused beyond the bound.
func deadLetterLines(w io.Writer, r service.Report) {
	names := make([]string, 0, len(r.DeadLetter))
	for name, st := range r.DeadLetter {
		if st.Kept > 0 || st.SetAside > 0 || st.Refused > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		st := r.DeadLetter[name]
		fmt.Fprintf(w, "Unfiled:   %-6s %d in .monoco/mailbox/.deadletter/%s/ (%d set aside since the start, %d refused beyond the bound)\n",
			name, st.Kept, name, st.SetAside, st.Refused)
	}
}

// hookDeadLines says, per hook, its dead letters, backlog, failing calls
// and last error (Report.Hooks); from a report without them, the dead
// letters alone.
func hookDeadLines(w io.Writer, r service.Report) {
	names := make([]string, 0, len(r.HookDead)+len(r.Hooks))
	for name, n := range r.HookDead {
		if _, ok := r.Hooks[name]; n > 0 && !ok {
			names = append(names, name)
		}
	}
	for name := range r.Hooks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		st, ok := r.Hooks[name]
		if !ok {
			st.Dead = r.HookDead[name]
		}
		line := "Hooks:     " + name + ": "
		if st.Dead > 0 {
			line += fmt.Sprintf("%d call(s) set aside in its dead letters (`courier hooks retry %s` runs them again); ", st.Dead, name)
		}
		line += fmt.Sprintf("backlog %d, failing %d", st.Backlog, st.Failing)
		if st.RetryAt != nil {
			line += " (next try " + st.RetryAt.Format(time.RFC3339) + ")"
		}
		if st.LastError != "" {
			line += "; last error: " + st.LastError
		}
		fmt.Fprintln(w, line)
	}
}
