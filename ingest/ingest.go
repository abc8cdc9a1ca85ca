// Package ingest is the inbound pipeline of DESIGN §5: normalised events
// from adapters are deduplicated, enriched (thread and correlation
// inheritance), debounced (IM) and written to the mailbox.
//
// The Pipeline is the adapters.Sink every Source delivers to. Its contract:
//
//   - Exactly once. A message whose id or dedupe key the mailbox (or the
//     debounce staging) already holds is dropped, so redeliveries after a
//     restart, a network retry or a provider's at-least-once push write
//     nothing. Deliver returns only when every event is durable, written or
//     staged, and the checkpoints that came with the events are saved after
//     that, in the same database transaction as the index rows.
//   - Group commit. Concurrent Deliver calls are written together, so many
//     small deliveries (webhooks) share one round of fsyncs.
//   - Enrichment. An email whose parent or root is already in the mailbox
//     joins the parent's thread (seed 003 keys a reply whose References
//     start mid-thread, or that has only In-Reply-To, by its parent); a
//     message that answers, edits or recalls a message carrying a
//     correlation id, or one Courier sent, inherits that correlation id,
//     unless its event is marked UnverifiedSender and its sender is not
//     among that message's participants (From, To, Cc, Bcc), or is marked
//     SenderNotAligned (the reason goes to metadata.extra.auth.correlation):
//     a forged From must not attach a stranger's mail to an agent's task.
//   - Debounce. Events marked Debounce with the same provider, session,
//     thread and sender within Window merge into one file, flushed at most
//     MaxWait after the first; the merged ids go to metadata.extra.merged_ids.
//     Groups are staged durably in .tmp/debounce and flushed at Start after
//     a crash, before any source runs.
//   - The bot's own messages (Event.Self, or a sender listed in Options.Self)
//     are dropped.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Options of a Pipeline. The zero value means defaults.
type Options struct {
	Logger   *slog.Logger
	Debounce Debounce
	// Self lists the bot's own participant ids per provider; their messages
	// are dropped.
	Self map[schema.Provider][]string
	// BatchSize caps the messages written in one round (default 512).
	BatchSize int
	// Observer is told of each write round (metrics). It must not block.
	Observer Observer
	Now      func() time.Time
}

// Observer receives the outcome of each write round.
type Observer interface {
	// Written reports n messages of provider p made durable in d.
	Written(p schema.Provider, n int, d time.Duration)
}

// Stats are counters per provider.
type Stats struct {
	Received   uint64 // events delivered
	Written    uint64 // files written (a merged group counts once)
	Duplicates uint64 // events dropped as already seen
	Self       uint64 // events dropped as the bot's own
	Merged     uint64 // messages merged into another by debounce
	Batches    uint64 // write rounds
	Nanos      uint64 // time spent writing
}

type counters struct {
	received, written, duplicates, self, merged, batches, nanos atomic.Uint64
}

// Pipeline is the inbound pipeline; it implements adapters.Sink.
type Pipeline struct {
	mb   *mailbox.Mailbox
	opts Options
	log  *slog.Logger

	reqs    chan *request
	stop    chan struct{}
	stopped chan struct{}
	state   atomic.Int32 // 0 new, 1 running, 2 stopped

	statsMu sync.Mutex
	stats   map[schema.Provider]*counters

	// Debounce state; owned by the writer goroutine.
	groups map[string]*group
	staged map[string]bool // ids and keys of staged messages
	seq    uint64
	wake   chan struct{}
}

var _ adapters.Sink = (*Pipeline)(nil)

type request struct {
	events []adapters.Event
	flush  []string // debounce groups to flush
	due    bool     // flush the groups that are due now
	all    bool     // flush every group (Stop)
	done   chan error
}

// New returns a pipeline writing to mb. It does no I/O; call Start.
func New(mb *mailbox.Mailbox, opts *Options) *Pipeline {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Debounce.Window > 0 && o.Debounce.MaxWait <= 0 {
		o.Debounce.MaxWait = 30 * time.Second
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 512
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Pipeline{
		mb: mb, opts: o, log: o.Logger,
		reqs: make(chan *request, 64), stop: make(chan struct{}), stopped: make(chan struct{}),
		stats: map[schema.Provider]*counters{}, groups: map[string]*group{}, staged: map[string]bool{},
		wake: make(chan struct{}, 1),
	}
}

// Start repairs the mailbox after a crash (Reconcile), flushes debounce
// groups staged before it, and starts the writer. Call it before any
// Source runs.
func (p *Pipeline) Start(ctx context.Context) error {
	st, err := p.mb.Reconcile(ctx)
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	if st.Indexed > 0 || st.Removed > 0 {
		p.log.Info("mailbox repaired after an unclean stop", "indexed", st.Indexed, "removed", st.Removed)
	}
	for _, s := range st.Invalid {
		p.log.Warn("mailbox file does not parse; left in place", "file", s)
	}
	if err := p.flushStaged(ctx); err != nil {
		return err
	}
	p.state.Store(1)
	go p.run()
	return nil
}

// Stop flushes every debounce group and stops the writer. Deliver calls
// after Stop fail.
func (p *Pipeline) Stop(ctx context.Context) error {
	if !p.state.CompareAndSwap(1, 2) {
		return nil
	}
	r := &request{all: true, done: make(chan error, 1)}
	var err error
	select {
	case p.reqs <- r:
		select {
		case err = <-r.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(p.stop)
	<-p.stopped
	return err
}

// ErrStopped is returned by Deliver on a stopped pipeline.
var ErrStopped = errors.New("ingest: pipeline stopped")

// Deliver implements adapters.Sink.
func (p *Pipeline) Deliver(ctx context.Context, events ...adapters.Event) error {
	if len(events) == 0 {
		return nil
	}
	switch p.state.Load() {
	case 0:
		return errors.New("ingest: Deliver before Start")
	case 2:
		return ErrStopped
	}
	return p.call(ctx, &request{events: events, done: make(chan error, 1)})
}

// call hands a request to the writer and waits for its outcome. When ctx
// ends first the write still goes on and will be durable; the source
// redelivers and the duplicate is dropped.
func (p *Pipeline) call(ctx context.Context, r *request) error {
	select {
	case p.reqs <- r:
	case <-p.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-p.stopped:
		select {
		case err := <-r.done:
			return err
		default:
			return ErrStopped
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Checkpoint implements adapters.Sink.
func (p *Pipeline) Checkpoint(ctx context.Context, key string) (string, bool, error) {
	return p.mb.Checkpoint(ctx, key)
}

// Seen implements adapters.Sink: the mailbox holds the id or key.
func (p *Pipeline) Seen(ctx context.Context, key string) (bool, error) {
	return p.mb.Seen(ctx, key)
}

// Stats returns the counters per provider.
func (p *Pipeline) Stats() map[schema.Provider]Stats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	out := make(map[schema.Provider]Stats, len(p.stats))
	for k, c := range p.stats {
		out[k] = Stats{Received: c.received.Load(), Written: c.written.Load(), Duplicates: c.duplicates.Load(),
			Self: c.self.Load(), Merged: c.merged.Load(), Batches: c.batches.Load(), Nanos: c.nanos.Load()}
	}
	return out
}

func (p *Pipeline) counter(pr schema.Provider) *counters {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	c := p.stats[pr]
	if c == nil {
		c = &counters{}
		p.stats[pr] = c
	}
	return c
}

// run is the writer: it takes every request waiting and processes them as
// one batch (group commit), and flushes debounce groups when they are due.
func (p *Pipeline) run() {
	defer close(p.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.resetTimer(timer)
		var batch []*request
		select {
		case <-p.stop:
			for {
				select {
				case r := <-p.reqs:
					r.done <- ErrStopped
				default:
					return
				}
			}
		case r := <-p.reqs:
			batch = append(batch, r)
		case <-timer.C:
			batch = append(batch, &request{due: true})
		case <-p.wake:
		}
		n := 0
		for _, r := range batch {
			n += len(r.events)
		}
	drain:
		for n < p.opts.BatchSize {
			select {
			case r := <-p.reqs:
				batch = append(batch, r)
				n += len(r.events)
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			continue
		}
		err := p.process(context.Background(), batch)
		if err != nil {
			p.log.Error("ingest: write failed; sources will redeliver", "err", err)
		}
		for _, r := range batch {
			if r.done != nil {
				r.done <- err
			}
		}
	}
}

// batchWork is what process gathers from one batch of requests.
type batchWork struct {
	start, now   time.Time
	direct       []mailbox.Inbound // messages to write in this round
	cps          []mailbox.Checkpoint
	local        map[string]*schema.Message // this batch's messages by id and key, for dedupe and lookups
	asked        map[string]bool            // the keys asked of the mailbox in one query (known: those it holds)
	known        map[string]bool
	digests      map[string][]*schema.Message // this batch's messages by digest (adapters.Content)
	digestsFiled map[mailbox.DigestSpan]bool  // the digest spans asked of the mailbox in one query: whether it holds a copy
	stage        map[string][]mailbox.Inbound // debounced messages by group
	flush        []string                     // groups to flush
	flushAll     bool
}

// process handles one batch of requests: each request's flushes and events
// are taken in (the bot's own messages and duplicates dropped, the rest
// enriched and routed to debounce or to the write), then the debounced
// messages are staged, the groups to flush merged, and everything written
// in one round.
func (p *Pipeline) process(ctx context.Context, batch []*request) error {
	w := &batchWork{start: time.Now(), now: p.opts.Now(),
		local: map[string]*schema.Message{}, stage: map[string][]mailbox.Inbound{}}
	if err := p.askKeys(ctx, w, batch); err != nil {
		return err
	}
	for _, r := range batch {
		w.flush = append(w.flush, r.flush...)
		if r.due {
			w.flush = append(w.flush, p.dueGroups()...)
		}
		w.flushAll = w.flushAll || r.all
		for _, ev := range r.events {
			if err := p.admit(ctx, w, ev); err != nil {
				return err
			}
		}
	}
	// Stage first: the checkpoints saved below cover staged events too.
	if err := p.stageGroups(w); err != nil {
		return err
	}
	flushed := p.mergeFlushed(w)
	if len(w.direct) == 0 && len(w.cps) == 0 {
		return nil
	}
	if err := p.write(ctx, w); err != nil {
		return err
	}
	p.forgetFlushed(flushed)
	if len(w.direct) > 0 {
		c := p.counter(w.direct[0].Message.Provider)
		c.batches.Add(1)
		c.nanos.Add(uint64(time.Since(w.start)))
	}
	return nil
}

// admit takes one event into the batch: its checkpoint, and its message
// unless it is the bot's own or already seen, enriched, then debounced or
// set to be written.
func (p *Pipeline) admit(ctx context.Context, w *batchWork, ev adapters.Event) error {
	if ev.Checkpoint != nil {
		w.cps = append(w.cps, mailbox.Checkpoint{Key: ev.Checkpoint.Key, Value: ev.Checkpoint.Value})
	}
	m := ev.Message
	if m == nil {
		return nil
	}
	c := p.counter(m.Provider)
	c.received.Add(1)
	if ev.Self || p.isSelf(m) {
		c.self.Add(1)
		return nil
	}
	if ev.Content != nil {
		dup, err := p.identify(ctx, w, m, ev.Content)
		if err != nil {
			return err
		}
		if dup {
			c.duplicates.Add(1)
			return nil
		}
	}
	keys := dedupeKeys(m, ev.Keys)
	dup, err := p.seen(ctx, w, keys)
	if err != nil {
		return err
	}
	if dup {
		c.duplicates.Add(1)
		return nil
	}
	if err := p.enrich(ctx, m, ev, w.local); err != nil {
		return err
	}
	for _, k := range keys {
		w.local[k] = m
	}
	w.addDigest(m)
	in := mailbox.Inbound{Message: m, Keys: ev.Keys}
	if ev.Debounce && p.opts.Debounce.Window > 0 {
		p.debounce(w, in)
		return nil
	}
	w.direct = append(w.direct, in)
	return nil
}

// write writes the round's messages and checkpoints to the mailbox, in one
// transaction, and counts what was written and what was a duplicate.
func (p *Pipeline) write(ctx context.Context, w *batchWork) error {
	written, err := p.mb.WriteInbound(ctx, w.direct, w.cps)
	if err != nil {
		return err
	}
	perProvider := map[schema.Provider]int{}
	for i, in := range w.direct {
		c := p.counter(in.Message.Provider)
		if written[i] {
			c.written.Add(1)
			perProvider[in.Message.Provider]++
		} else {
			c.duplicates.Add(1)
		}
	}
	if p.opts.Observer != nil {
		d := time.Since(w.start)
		for pr, n := range perProvider {
			p.opts.Observer.Written(pr, n, d)
		}
	}
	return nil
}
