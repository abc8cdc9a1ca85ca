package notify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Hook is one configured hook (courier.notify[i]), its secrets revealed.
type Hook struct {
	Name string
	// On lists the events the hook runs for (default: inbound).
	On []mailbox.EventKind

	// Exec is the command's argv; with Shell, its one element is a script
	// for /bin/sh -c. Env is added to the clean environment.
	Exec  []string
	Shell bool
	Env   map[string]string
	// URL receives a signed POST instead; Secret keys the signature.
	URL    string
	Secret string

	// Timeout bounds one call (default 30 s).
	Timeout time.Duration
	// Backoff is the first wait before a failed call runs again; it
	// doubles up to Options.BackoffMax (default Options.BackoffBase).
	Backoff time.Duration

	// Filters; an empty one lets everything through.
	Providers []schema.Provider
	// Mentions are the ids that are us: an inbound message passes when it
	// mentions one (an IM mention's target; "all" for @all/@here) or, for
	// email, has one among its To and Cc addresses.
	Mentions []string
	// PersonalEligible, when set, keeps inbound messages whose
	// metadata.extra.personal_eligible is that value.
	PersonalEligible *bool
	// Correlation keeps events whose correlation id matches this glob
	// (path.Match); "*" means any correlation id at all.
	Correlation string

	// Digest is the window of a burst: one call for what it gathers.
	Digest    time.Duration
	MaxDigest int // events a digest call carries at most (default 100)
	// RateCalls calls per RatePer at most (0: no limit); a call over the
	// rate waits, it is never dropped.
	RateCalls int
	RatePer   time.Duration

	MaxQueue    int // events queued for the hook at most (default 10,000)
	Concurrency int // calls at once (default 4)
	MaxOutput   int // bytes of an exec hook's output kept for the log (default 16 KiB)
	// MaxAttempts is how many times a call runs before it is set aside in
	// the hook's dead letters (default 20).
	MaxAttempts int
}

func (h *Hook) defaults() {
	if len(h.On) == 0 {
		h.On = []mailbox.EventKind{mailbox.EventInbound}
	}
	if h.Timeout <= 0 {
		h.Timeout = 30 * time.Second
	}
	if h.MaxDigest <= 0 {
		h.MaxDigest = 100
	}
	if h.MaxQueue <= 0 {
		h.MaxQueue = 10000
	}
	if h.Concurrency <= 0 {
		h.Concurrency = 4
	}
	if h.MaxOutput <= 0 {
		h.MaxOutput = 16 << 10
	}
	if h.MaxAttempts <= 0 {
		h.MaxAttempts = 20
	}
	if h.RateCalls > 0 && h.RatePer <= 0 {
		h.RatePer = time.Minute
	}
}

// Options of a Runner. The zero value means defaults.
type Options struct {
	Logger *slog.Logger
	Hooks  []Hook
	// Root is the workspace (the hooks' working folder, COURIER_ROOT).
	Root string
	// BackoffBase and BackoffMax bound the wait before a failed call is
	// tried again (default 1 s doubling to 10 min).
	BackoffBase, BackoffMax time.Duration
	// Poll is how often the journal is read without a wake-up from the
	// mailbox (default 5 s; the mailbox wakes the runner on each commit).
	Poll time.Duration
	// Retention is how long the journal keeps events every hook has taken
	// (default 24 h), for `courier watch`.
	Retention time.Duration
	// HTTPClient makes url hooks' requests (default: one that follows no
	// redirect); its Timeout is left to each hook's.
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Runner runs the hooks. Start it with the service, Stop it before.
type Runner struct {
	mb    *mailbox.Mailbox
	opts  Options
	log   *slog.Logger
	hooks []*hookState

	results chan result
	stopped chan struct{} // closed when the loop has returned: results go nowhere
	cancel  context.CancelFunc
	runCtx  context.Context // calls; cancelled when Stop runs out of time
	stopRun context.CancelFunc
	wg      sync.WaitGroup
	calls   sync.WaitGroup
	pruned  time.Time
	wakeAt  time.Time
}

// hookState is a hook and what the runner holds of its queue: every
// queued event, in journal order (the durable copy is notify_queue).
type hookState struct {
	Hook
	cursor   int64
	items    []*item
	inflight int
	lim      limiter
	full     bool // the queue is at max_queue (said once)
}

type item struct {
	seq      int64
	kind     mailbox.EventKind
	id       string
	lane     string
	attempts int
	nextAt   time.Time
	queuedAt time.Time
	running  bool
}

type result struct {
	h     *hookState
	items []*item
	err   error
}

const ddl = `
-- Each hook's position in the mailbox's event journal.
CREATE TABLE IF NOT EXISTS notify_cursors (hook TEXT PRIMARY KEY, seq INTEGER NOT NULL);
-- Each hook's durable queue: the events it wants that have not run yet.
CREATE TABLE IF NOT EXISTS notify_queue (
	hook       TEXT NOT NULL,
	seq        INTEGER NOT NULL, -- the journal's
	kind       TEXT NOT NULL,
	id         TEXT NOT NULL,
	lane       TEXT NOT NULL,    -- the thread its order is kept in
	attempts   INTEGER NOT NULL DEFAULT 0,
	next_at    INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	queued_at  INTEGER NOT NULL,
	PRIMARY KEY (hook, seq)
) WITHOUT ROWID;
-- Each hook's dead letters: calls that cannot succeed (the hook cannot be
-- run, or it failed max_attempts times), set aside so their thread goes on.
CREATE TABLE IF NOT EXISTS notify_dead (
	hook       TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	kind       TEXT NOT NULL,
	id         TEXT NOT NULL,
	lane       TEXT NOT NULL,
	attempts   INTEGER NOT NULL,
	last_error TEXT NOT NULL,
	queued_at  INTEGER NOT NULL,
	dead_at    INTEGER NOT NULL,
	PRIMARY KEY (hook, seq)
) WITHOUT ROWID;
`

// New makes a runner over mb. It does no I/O.
func New(mb *mailbox.Mailbox, opts *Options) *Runner {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	r := &Runner{mb: mb, opts: o, log: o.Logger, results: make(chan result, 64), stopped: make(chan struct{})}
	for _, h := range o.Hooks {
		h.defaults()
		r.hooks = append(r.hooks, &hookState{Hook: h, lim: limiter{calls: h.RateCalls, per: h.RatePer}})
	}
	return r
}

// Start loads the queues and runs the hooks in the background.
func (r *Runner) Start(ctx context.Context) error {
	if err := r.load(ctx); err != nil {
		return err
	}
	wake, unsub := r.mb.Subscribe()
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	r.runCtx, r.stopRun = context.WithCancel(context.WithoutCancel(ctx))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(r.stopped)
		defer unsub()
		r.loop(lctx, wake)
	}()
	return nil
}

// Stop stops taking events and waits for the calls running to end, until
// ctx is done; then it kills them (they run again after the next start).
func (r *Runner) Stop(ctx context.Context) error {
	if r.cancel == nil {
		return nil
	}
	r.cancel() // no new calls; the loop records those that end
	done := make(chan struct{})
	go func() { r.wg.Wait(); r.calls.Wait(); close(done) }()
	select {
	case <-done:
		r.stopRun()
		return nil
	case <-ctx.Done():
		r.stopRun()
		<-done
		return fmt.Errorf("notify: hooks still running at shutdown were stopped; they run again after the next start")
	}
}

func (r *Runner) now() time.Time { return r.opts.Now() }

// load creates the tables, forgets hooks no longer configured, starts new
// hooks at the journal's end (a new hook is not run for the past) and
// reads each queue.
func (r *Runner) load(ctx context.Context) error {
	db := r.mb.DB()
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("notify: state database: %w", err)
	}
	last, _, err := r.mb.LastEvent(ctx)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	names := make([]any, 0, len(r.hooks))
	for _, h := range r.hooks {
		names = append(names, h.Name)
	}
	keep := "''"
	if len(names) > 0 {
		keep = strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	defer tx.Rollback()
	var dropped int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM notify_queue WHERE hook NOT IN (`+keep+`)`, names...).Scan(&dropped); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if dropped > 0 {
		// The operator removed (or renamed) the hook: its calls are not
		// wanted any more.
		r.log.Warn("notify: dropping the queue of hooks no longer configured", "events", dropped)
	}
	for _, q := range []string{`DELETE FROM notify_queue WHERE hook NOT IN (` + keep + `)`, `DELETE FROM notify_cursors WHERE hook NOT IN (` + keep + `)`} {
		if _, err := tx.ExecContext(ctx, q, names...); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	for _, h := range r.hooks {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO notify_cursors (hook, seq) VALUES (?, ?)`, h.Name, last); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT seq FROM notify_cursors WHERE hook = ?`, h.Name).Scan(&h.cursor); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT seq, kind, id, lane, attempts, next_at, queued_at FROM notify_queue WHERE hook = ? ORDER BY seq`, h.Name)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		for rows.Next() {
			it := &item{}
			var k string
			var next, queued int64
			if err := rows.Scan(&it.seq, &k, &it.id, &it.lane, &it.attempts, &next, &queued); err != nil {
				rows.Close()
				return fmt.Errorf("notify: %w", err)
			}
			it.kind, it.queuedAt = mailbox.EventKind(k), time.Unix(0, queued)
			if next > 0 {
				it.nextAt = time.Unix(0, next)
			}
			h.items = append(h.items, it)
		}
		rows.Close()
		if len(h.items) > 0 {
			r.log.Info("notify: queued calls from before the restart", "hook", h.Name, "events", len(h.items))
		}
	}
	return tx.Commit()
}

func (r *Runner) loop(ctx context.Context, wake <-chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if err := r.fanOut(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("notify: reading the event journal", "err", err)
		}
		r.dispatch()
		r.prune(ctx)
		next := r.now().Add(r.opts.Poll)
		if !r.wakeAt.IsZero() && r.wakeAt.Before(next) {
			next = r.wakeAt
		}
		timer.Reset(max(time.Until(next), time.Millisecond))
		select {
		case <-ctx.Done():
			r.drain()
			return
		case <-wake:
		case res := <-r.results:
			r.finish(res)
		case <-timer.C:
			r.adopt(ctx)
		}
	}
}

// drain records the calls running at a stop as they end, so that a call
// that succeeded during the shutdown grace does not run again, until
// Stop's time is up.
func (r *Runner) drain() {
	for r.running() > 0 {
		select {
		case res := <-r.results:
			r.finish(res)
		case <-r.runCtx.Done():
			return
		}
	}
}

func (r *Runner) running() int {
	n := 0
	for _, h := range r.hooks {
		n += h.inflight
	}
	return n
}

// fanOut moves new journal events into the queues of the hooks that want
// them, and moves each hook's position, in one transaction a batch.
func (r *Runner) fanOut(ctx context.Context) error {
	for {
		from := int64(-1)
		for _, h := range r.hooks {
			if len(h.items) < h.MaxQueue && (from < 0 || h.cursor < from) {
				from = h.cursor
			}
		}
		if from < 0 {
			return nil // no hooks, or every queue is full
		}
		evs, err := r.mb.Events(ctx, from, 256)
		if err != nil || len(evs) == 0 {
			return err
		}
		now := r.now()
		adds, cursors, err := r.route(ctx, evs, now)
		if err != nil {
			return err // nothing moved: this batch is read again
		}
		if len(cursors) == 0 {
			return nil
		}
		if err := r.enqueue(ctx, adds, cursors, now); err != nil {
			return err
		}
		if len(evs) < 256 {
			return nil
		}
	}
}

// hookItem is an item for a hook's queue.
type hookItem struct {
	h  *hookState
	it *item
}

// route takes each hook through the events past its cursor, up to its
// max_queue: the events it wants become items for its queue, and its
// cursor moves past each event it took through. The facts of an event are
// read once for every hook. It returns the items and the new cursors.
func (r *Runner) route(ctx context.Context, evs []mailbox.Event, now time.Time) ([]hookItem, map[*hookState]int64, error) {
	facts := map[int64]*facts{}
	var adds []hookItem
	cursors := map[*hookState]int64{}
	for _, h := range r.hooks {
		n := len(h.items)
		for _, ev := range evs {
			if ev.Seq <= h.cursor {
				continue
			}
			if n >= h.MaxQueue {
				if !h.full {
					h.full = true
					r.log.Warn("notify: the hook's queue is full (max_queue); later events wait in the journal until it drains", "hook", h.Name, "max_queue", h.MaxQueue)
				}
				break
			}
			f := facts[ev.Seq]
			if f == nil {
				var err error
				if f, err = r.factsOf(ctx, ev); err != nil {
					return nil, nil, err
				}
				facts[ev.Seq] = f
			}
			cursors[h] = ev.Seq
			if f.missing || !h.wants(ev.Kind, f) {
				continue
			}
			adds = append(adds, hookItem{h, &item{seq: ev.Seq, kind: ev.Kind, id: ev.ID, lane: f.lane, queuedAt: now}})
			n++
		}
	}
	return adds, cursors, nil
}

// enqueue records the items in the hooks' queues and their new cursors in
// one transaction, then in memory.
func (r *Runner) enqueue(ctx context.Context, adds []hookItem, cursors map[*hookState]int64, now time.Time) error {
	err := withTx(ctx, r.mb.DB(), func(tx *sql.Tx) error {
		for _, a := range adds {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO notify_queue (hook, seq, kind, id, lane, queued_at) VALUES (?, ?, ?, ?, ?, ?)`,
				a.h.Name, a.it.seq, string(a.it.kind), a.it.id, a.it.lane, now.UnixNano()); err != nil {
				return err
			}
		}
		for h, seq := range cursors {
			if _, err := tx.ExecContext(ctx, `UPDATE notify_cursors SET seq = ? WHERE hook = ?`, seq, h.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range adds {
		a.h.items = append(a.h.items, a.it)
	}
	for h, seq := range cursors {
		h.cursor = seq
	}
	return nil
}

func withTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// facts are what the filters look at, read once from the event's file.
type facts struct {
	missing     bool // the file is gone (nothing to call with)
	provider    schema.Provider
	lane        string
	correlation string
	mentions    []string // targets, and the email To/Cc addresses
	personal    *bool
}

// factsOf reads an event's file for the filters. A file gone or not
// valid is missing (no hook runs for it, and the log says so); a database
// busy or a stop is an error, and the event is read again later.
func (r *Runner) factsOf(ctx context.Context, ev mailbox.Event) (*facts, error) {
	f := &facts{}
	if ev.Kind == mailbox.EventInbound {
		m, _, err := r.mb.Message(ctx, ev.ID)
		if err != nil {
			return r.missing(ctx, ev, err)
		}
		f.provider, f.correlation, f.personal = m.Provider, string(m.CorrelationID), m.Metadata.Extra.PersonalEligible
		f.lane = lane(m.Provider, string(m.Session.ThreadKey), m.Session.ID, m.ID)
		for _, mn := range m.Participants.Mentions {
			t := mn.Target
			if mn.Type == schema.MentionAll || mn.Type == schema.MentionChannel {
				t = "all"
			}
			f.mentions = append(f.mentions, t)
		}
		if m.Provider == schema.Email {
			for _, p := range slices.Concat(m.Participants.To, m.Participants.Cc) {
				if p.Email != "" {
					f.mentions = append(f.mentions, strings.ToLower(p.Email))
				}
			}
		}
		return f, nil
	}
	if ev.Kind == mailbox.EventDead && mailbox.IsDeadLetterID(ev.ID) {
		// An inbound event that could not become a message: no
		// correlation, no mentions; its provider's dead letters are one
		// lane.
		dl, err := r.mb.DeadLetter(ev.ID)
		if err != nil {
			return r.missing(ctx, ev, err)
		}
		f.provider, f.lane = dl.Provider, string(dl.Provider)+" deadletter"
		return f, nil
	}
	d, _, err := r.mb.Draft(ctx, ev.ID)
	if err != nil {
		return r.missing(ctx, ev, err)
	}
	to := ""
	if len(d.To) > 0 {
		to = d.To[0]
	}
	f.provider, f.correlation = d.Provider, string(d.CorrelationID)
	f.lane = lane(d.Provider, string(d.ThreadKey), to, d.ID)
	return f, nil
}

func (r *Runner) missing(ctx context.Context, ev mailbox.Event, err error) (*facts, error) {
	if ctx.Err() != nil || errors.Is(err, mailbox.ErrBusy) {
		return nil, err
	}
	r.log.Warn("notify: an event's file cannot be read; no hook runs for it", "event", string(ev.Kind), "id", ev.ID, "err", err)
	return &facts{missing: true}, nil
}

// lane is the thread an event's order is kept in: the thread key, else
// the session (a channel's top-level messages), else the message alone.
func lane(p schema.Provider, thread, session, id string) string {
	switch {
	case thread != "":
		return string(p) + " thread " + thread
	case session != "":
		return string(p) + " session " + session
	}
	return string(p) + " id " + id
}

// wants applies the hook's filters. Mentions and personal_eligible are
// about messages received: a hook that sets them takes no draft event.
func (h *Hook) wants(k mailbox.EventKind, f *facts) bool {
	if !slices.Contains(h.On, k) {
		return false
	}
	if len(h.Providers) > 0 && !slices.Contains(h.Providers, f.provider) {
		return false
	}
	if h.Correlation != "" {
		if f.correlation == "" {
			return false
		}
		if ok, _ := path.Match(h.Correlation, f.correlation); !ok {
			return false
		}
	}
	if h.PersonalEligible != nil && (f.personal == nil || *f.personal != *h.PersonalEligible) {
		return false
	}
	if len(h.Mentions) > 0 {
		hit := false
		for _, m := range h.Mentions {
			if slices.Contains(f.mentions, m) || slices.Contains(f.mentions, strings.ToLower(m)) {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// dispatch starts the calls that may start now, and sets r.wakeAt to the
// earliest time another may.
func (r *Runner) dispatch() {
	now := r.now()
	r.wakeAt = time.Time{}
	later := func(t time.Time) {
		if r.wakeAt.IsZero() || t.Before(r.wakeAt) {
			r.wakeAt = t
		}
	}
	for _, h := range r.hooks {
		if h.Digest > 0 {
			r.dispatchDigest(h, now, later)
			continue
		}
		busy := map[string]bool{}
		for _, it := range h.items {
			if h.inflight >= h.Concurrency {
				break
			}
			if busy[it.lane] {
				continue
			}
			busy[it.lane] = true // later events of the lane wait for this one
			if it.running {
				continue
			}
			if it.nextAt.After(now) {
				later(it.nextAt)
				continue
			}
			if at, ok := h.lim.take(now); !ok {
				later(at)
				break
			}
			r.start(h, []*item{it})
		}
	}
}

// dispatchDigest starts one call of everything due for a digest hook once
// its first event has waited the window.
func (r *Runner) dispatchDigest(h *hookState, now time.Time, later func(time.Time)) {
	if h.inflight > 0 || len(h.items) == 0 {
		return
	}
	first := h.items[0]
	if first.nextAt.After(now) {
		later(first.nextAt)
		return
	}
	if first.attempts == 0 {
		if end := first.queuedAt.Add(h.Digest); end.After(now) {
			later(end)
			return
		}
	}
	if at, ok := h.lim.take(now); !ok {
		later(at)
		return
	}
	n := min(len(h.items), h.MaxDigest)
	r.start(h, slices.Clone(h.items[:n]))
}

func (r *Runner) start(h *hookState, items []*item) {
	for _, it := range items {
		it.running = true
	}
	h.inflight++
	r.calls.Add(1)
	go func() {
		defer r.calls.Done()
		err := r.call(r.runCtx, h, items)
		select {
		case r.results <- result{h: h, items: items, err: err}:
		case <-r.stopped:
			// Stopping: what succeeded is not recorded, and runs again
			// after the next start (at least once).
		}
	}()
}

// finish records a call's outcome: its queue rows go, or wait for a retry.
func (r *Runner) finish(res result) {
	h := res.h
	h.inflight--
	ctx := context.Background()
	now := r.now()
	seqs := make([]any, 0, len(res.items)+1)
	seqs = append(seqs, h.Name)
	for _, it := range res.items {
		it.running = false
		seqs = append(seqs, it.seq)
	}
	in := strings.TrimSuffix(strings.Repeat("?, ", len(res.items)), ", ")
	if res.err == nil || errors.Is(res.err, errGone) {
		if _, err := r.mb.DB().ExecContext(ctx, `DELETE FROM notify_queue WHERE hook = ? AND seq IN (`+in+`)`, seqs...); err != nil {
			// Kept in memory as done; the rows run again after a restart.
			r.log.Error("notify: recording a call that succeeded", "hook", h.Name, "err", err)
		}
		h.remove(res.items)
		return
	}
	attempts := 0
	for _, it := range res.items {
		it.attempts++
		attempts = max(attempts, it.attempts)
	}
	var perm *permanentError
	if errors.As(res.err, &perm) || attempts >= h.MaxAttempts {
		r.bury(h, res.items, attempts, res.err, seqs, in, now)
		return
	}
	base := r.opts.BackoffBase
	if h.Backoff > 0 {
		base = h.Backoff
	}
	wait := base << min(attempts-1, 20)
	if wait > r.opts.BackoffMax || wait <= 0 {
		wait = r.opts.BackoffMax
	}
	next := now.Add(wait)
	msg := oneLine(res.err.Error(), 500)
	for _, it := range res.items {
		it.nextAt = next
	}
	r.log.Warn("notify: hook failed; retrying", "hook", h.Name, "id", res.items[len(res.items)-1].id, "attempt", attempts, "in", wait, "err", msg)
	args := append([]any{next.UnixNano(), msg}, seqs...)
	if _, err := r.mb.DB().ExecContext(ctx, `UPDATE notify_queue SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE hook = ? AND seq IN (`+
		in+`)`, args...); err != nil {
		r.log.Error("notify: recording a failed call", "hook", h.Name, "err", err)
	}
}

// remove drops items, whose call is over, from h's queue in memory.
func (h *hookState) remove(items []*item) {
	done := map[*item]bool{}
	for _, it := range items {
		done[it] = true
	}
	h.items = slices.DeleteFunc(h.items, func(it *item) bool { return done[it] })
	if h.full && len(h.items) < h.MaxQueue {
		h.full = false
	}
}

// bury moves a call that cannot succeed (or failed max_attempts times)
// from the queue to the hook's dead letters, so its thread goes on.
func (r *Runner) bury(h *hookState, items []*item, attempts int, cause error, seqs []any, in string, now time.Time) {
	ctx := context.Background()
	msg := oneLine(cause.Error(), 500)
	args := append([]any{attempts, msg, now.UnixNano()}, seqs...)
	err := withTx(ctx, r.mb.DB(), func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO notify_dead (hook, seq, kind, id, lane, attempts, last_error, queued_at, dead_at)
			SELECT hook, seq, kind, id, lane, ?, ?, queued_at, ? FROM notify_queue WHERE hook = ? AND seq IN (`+in+`)`, args...); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM notify_queue WHERE hook = ? AND seq IN (`+in+`)`, seqs...)
		return err
	})
	if err != nil {
		// Kept in memory as set aside; the rows run again after a restart.
		r.log.Error("notify: recording a call set aside", "hook", h.Name, "err", err)
	}
	// Said once it is so: `courier status` and `hooks retry` see the row.
	r.log.Error("notify: hook call set aside in its dead letters (notify_dead); its thread goes on", "hook", h.Name,
		"id", items[len(items)-1].id, "events", len(items), "attempts", attempts, "err", msg)
	h.remove(items)
}

// prune drops journal events every hook has taken that are older than the
// retention, at most once a minute.
func (r *Runner) prune(ctx context.Context) {
	now := r.now()
	if now.Sub(r.pruned) < time.Minute {
		return
	}
	r.pruned = now
	upTo, _, err := r.mb.LastEvent(ctx)
	if err != nil {
		return
	}
	for _, h := range r.hooks {
		upTo = min(upTo, h.cursor)
	}
	if n, err := r.mb.PruneEvents(ctx, upTo, now.Add(-r.opts.Retention)); err == nil && n > 0 {
		r.log.Debug("notify: pruned the event journal", "events", n)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
