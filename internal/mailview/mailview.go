// Package mailview is the read side of the mailbox as agents see it: list
// with its filters (Query) and, for MCP, its pages (Cursor, ParsePage);
// thread and context; read, in each of its forms (Form: the text a person
// reads, JSON, the raw file, the body), in bounded memory whatever a
// file's size; and a dropzone object's bytes (ReadAttachment). The command
// line prints what it gives, and the MCP server returns the same, so an
// agent sees one message the same way through either.
//
// What it prints comes from files anyone may have written: the text forms
// lose control characters, JSON escapes them (sanitize.go).
//
// Its errors carry a fault.Kind: a filter that is not one is a Usage
// error naming the command line's flag; nothing in a thread is NotFound.
package mailview

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Query is what list selects, as its flags give it.
type Query struct {
	All      bool // done and dead messages too
	Outbound bool // queued, sent and dead drafts instead
	// Providers and Statuses may each hold comma-separated lists.
	Providers, Statuses []string
	// Since is a duration back from now (2h, 30m, 7d) or a date or time.
	Since string
	// Today is since midnight, local time (it wins over Since).
	Today       bool
	Correlation string
	Limit       int // at most this many; 0 for all
}

// Filter is the mailbox's filter of q at now. A provider, status or time
// that is not one is a Usage error naming its flag.
func (q Query) Filter(now time.Time) (mailbox.Filter, error) {
	f := mailbox.Filter{All: q.All, Outbound: q.Outbound, Correlation: q.Correlation, Limit: q.Limit}
	if err := AddFilters(&f, q.Providers, q.Statuses); err != nil {
		return f, err
	}
	var err error
	if f.Since, err = ParseSince(q.Since, now); err != nil {
		return f, err
	}
	if q.Today {
		f.Since = Midnight(now)
	}
	return f, nil
}

// Midnight is the start of now's day, in its location.
func Midnight(now time.Time) time.Time {
	y, m, d := now.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, now.Location())
}

// AddFilters adds the --provider and --status values (each repeated, or
// comma-separated) to f, refusing a value that is not one.
func AddFilters(f *mailbox.Filter, providers, statuses []string) error {
	for _, p := range providers {
		for _, p := range strings.Split(p, ",") {
			if !schema.Provider(p).Valid() {
				return fault.Errorf(fault.Usage, "--provider %q is not one of %s", p, "email, lark, slack, discord, teams, wecom, dingtalk")
			}
			f.Providers = append(f.Providers, schema.Provider(p))
		}
	}
	for _, s := range statuses {
		for _, s := range strings.Split(s, ",") {
			if !validStatus(s) {
				return fault.Errorf(fault.Usage, "--status %q is not one of new, claimed, failed, done, dead, queued, sent", s)
			}
			f.Statuses = append(f.Statuses, mailbox.Status(s))
		}
	}
	return nil
}

func validStatus(s string) bool {
	for _, v := range mailbox.Statuses {
		if string(v) == s {
			return true
		}
	}
	return false
}

// ParseSince reads --since: a duration back from now (2h, 30m, 7d) or a
// date or time; "" is no bound.
func ParseSince(s string, now time.Time) (time.Time, error) {
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
	return time.Time{}, fault.Errorf(fault.Usage, "--since %q is neither a duration (2h, 30m, 7d) nor a date (2026-02-06)", s)
}

// Thread calls fn for every message and draft of a thread, oldest first;
// key is a thread key or the id of any message in it. A thread of nothing
// is a NotFound error, returned after the (empty) listing.
func Thread(ctx context.Context, mb *mailbox.Mailbox, key string, fn func(*mailbox.Entry) error) error {
	return listAll(ctx, mb, mailbox.Filter{Both: true, Thread: key}, fn, "no thread %q", key)
}

// Context calls fn for everything that carries a correlation id, inbound,
// archived and sent, oldest first. Nothing is a NotFound error.
func Context(ctx context.Context, mb *mailbox.Mailbox, corr string, fn func(*mailbox.Entry) error) error {
	return listAll(ctx, mb, mailbox.Filter{Both: true, Correlation: corr}, fn, "nothing carries correlation id %q", corr)
}

func listAll(ctx context.Context, mb *mailbox.Mailbox, f mailbox.Filter, fn func(*mailbox.Entry) error, none, arg string) error {
	n := 0
	err := mb.List(ctx, f, func(e *mailbox.Entry) error {
		n++
		return fn(e)
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fault.Wrap(fault.NotFound, &emptyError{fmt.Sprintf(none, arg)})
	}
	return nil
}

// emptyError is a thread or context of nothing.
type emptyError struct{ msg string }

func (e *emptyError) Error() string { return e.msg }

// Empty reports whether err is Thread's or Context's for nothing (rather
// than a failure to list).
func Empty(err error) bool {
	var e *emptyError
	return errors.As(err, &e)
}
