// Package outbound delivers the drafts queued in outbound/<provider>/.
//
// The delivery contract, in the manner of maddy's queue:
//
//   - A draft is queued when its file is in outbound/<provider>/; `courier
//     send` puts it there atomically with its id and the provider's
//     idempotency key (email Message-ID, Lark uuid) already fixed. The file
//     is never changed while it is queued: attempts, the next try, the last
//     error and the claim live in the state database.
//   - Discovery. Each outbound/<provider>/ folder is watched (fsnotify), and
//     every RescanInterval the folders are read again, so a draft queued
//     while the service was down, or an event the watch dropped, is still
//     picked up.
//   - Claim, then send. A draft is claimed in the database (state sending,
//     the attempt counted) before its Sender is called. Only one service
//     runs on a mailbox (serve holds a lock), so every claim found at start
//     is left over from a crash, and its draft is due again at once.
//   - Success. The draft is written with a delivery block (status sent,
//     attempts, sent_at, provider_message_id) into archive/<provider>/,
//     indexed, and only then removed from outbound/. A crash in between
//     leaves both copies; Reconcile keeps the archived one and the draft is
//     not sent again.
//   - Temporary failure (adapters.Temporary, or any error not marked
//     Permanent): tried again after an exponential backoff, BackoffBase ×
//     2^(attempt−1) capped at BackoffMax, at a random point of its upper
//     half (jitter), or after the provider's Retry-After if it gave one.
//   - Permanent failure, or MaxAttempts used up: the draft goes to
//     .deadletter/<provider>/ with a delivery block saying why. So does what
//     cannot be sent at all — a file that is not a valid draft (moved as it
//     is, the reason in <name>.reason beside it), a folder that is not a
//     provider's, a draft whose artifact is gone from the dropzone. Nothing
//     is deleted and nothing blocks the rest of the queue.
//   - options.schedule_at holds a draft until that time; a draft for a
//     provider with no Sender (not enabled) stays queued and Status says so.
//   - Duplicates. A crash after the provider accepted a message and before
//     the archive copy was written resends it on restart, with the same
//     idempotency key: once at most per crash, and not at all where the
//     provider deduplicates on that key (Lark's uuid).
package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Options of an Engine. The zero value means defaults.
type Options struct {
	Logger *slog.Logger
	// Senders delivers drafts, per provider. A provider without one is not
	// enabled: its drafts wait.
	Senders map[schema.Provider]adapters.Sender
	// Dropzone is checked for the artifacts a draft names.
	Dropzone       *dropzone.Store
	MaxAttempts    int           // default 8
	BackoffBase    time.Duration // default 2 s
	BackoffMax     time.Duration // default 10 min
	RescanInterval time.Duration // default 30 s
	Concurrency    int           // sends in flight, default 8
	SendTimeout    time.Duration // default 2 min
	// MaxRecipients bounds a draft's to, cc and bcc together (default
	// 50, courier.outbound.max_recipients): `courier send` refuses more,
	// and a draft past it dropped into outbound/ by hand is dead-lettered.
	MaxRecipients int
	// Observer is told of each outcome (metrics).
	Observer Observer
	Now      func() time.Time
}

// Observer receives delivery outcomes. Its methods must not block.
type Observer interface {
	// Sent is called after a draft was accepted; latency runs from when
	// it was queued.
	Sent(p schema.Provider, latency time.Duration)
	// Failed is called for each failed attempt.
	Failed(p schema.Provider, permanent bool)
}

// Engine watches the outbound folders and delivers what is queued there.
type Engine struct {
	mb    *mailbox.Mailbox
	opts  Options
	log   *slog.Logger
	owner string
	enab  []schema.Provider

	wake     chan struct{}
	stop     chan struct{}
	stopped  chan struct{}
	sendCtx  context.Context
	cancel   context.CancelFunc
	inflight sync.WaitGroup

	mu     sync.Mutex
	busy   map[string]bool // drafts being sent
	closed bool

	// commit lets one send at a time hand its message over and keeps the
	// next out until that one is recorded (see adapters.Committer).
	commit chan struct{}

	sent, failed atomic.Uint64
}

// New returns an engine for mb. It does no I/O; call Start.
func New(mb *mailbox.Mailbox, opts *Options) *Engine {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 2 * time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Minute
	}
	if o.RescanInterval <= 0 {
		o.RescanInterval = 30 * time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 2 * time.Minute
	}
	if o.MaxRecipients <= 0 {
		o.MaxRecipients = 50
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var enab []schema.Provider
	for p, s := range o.Senders {
		if s != nil {
			enab = append(enab, p)
		}
	}
	sort.Slice(enab, func(i, j int) bool { return enab[i] < enab[j] })
	ctx, cancel := context.WithCancel(context.Background())
	host, _ := os.Hostname()
	return &Engine{
		mb: mb, opts: o, log: o.Logger, owner: fmt.Sprintf("%s/%d", host, os.Getpid()), enab: enab,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{}),
		sendCtx: ctx, cancel: cancel, busy: map[string]bool{}, commit: make(chan struct{}, 1),
	}
}

// Start releases drafts a crash left claimed, watches the outbound folders,
// looks at what is queued, and starts delivering.
func (e *Engine) Start(ctx context.Context) error {
	n, err := e.mb.ResetSending(ctx)
	if err != nil {
		return fmt.Errorf("outbound: %w", err)
	}
	if n > 0 {
		e.log.Warn("drafts were being sent when the service stopped; they will be sent again", "drafts", n)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("outbound: watch: %w", err)
	}
	base := filepath.Join(e.mb.Mailbox(), string(mailbox.BoxOutbound))
	if err := os.MkdirAll(base, 0o750); err != nil {
		w.Close()
		return fmt.Errorf("outbound: %w", err)
	}
	for _, p := range e.enab {
		os.MkdirAll(e.mb.Dir(mailbox.BoxOutbound, p), 0o750)
	}
	if err := e.watchAll(w, base); err != nil {
		w.Close()
		return err
	}
	e.scan(ctx)
	go e.run(w)
	return nil
}

// Stop stops taking drafts and waits for the sends in flight to finish,
// until ctx is done; then it cancels them (they are retried after a
// restart, with the same idempotency key).
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	close(e.stop)
	<-e.stopped
	done := make(chan struct{})
	go func() { e.inflight.Wait(); close(done) }()
	select {
	case <-done:
		e.cancel()
		return nil
	case <-ctx.Done():
		e.cancel()
		<-done
		return fmt.Errorf("outbound: sends still in flight at shutdown were cancelled: %w", ctx.Err())
	}
}

// Enabled returns the providers with a Sender.
func (e *Engine) Enabled() []schema.Provider { return e.enab }

// Counts returns the drafts sent and the failed attempts so far.
func (e *Engine) Counts() (sent, failed uint64) { return e.sent.Load(), e.failed.Load() }

// Wake asks the engine to look at the queue now (after `courier send`,
// say); it never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) watchAll(w *fsnotify.Watcher, base string) error {
	if err := w.Add(base); err != nil {
		return fmt.Errorf("outbound: watch %s: %w", base, err)
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		return fmt.Errorf("outbound: %w", err)
	}
	for _, d := range ents {
		if d.IsDir() {
			if err := w.Add(filepath.Join(base, d.Name())); err != nil {
				return fmt.Errorf("outbound: watch %s: %w", d.Name(), err)
			}
		}
	}
	return nil
}

// run is the engine's loop: it reacts to the watch, the rescan timer, the
// next retry time and finished sends, and dispatches due drafts.
func (e *Engine) run(w *fsnotify.Watcher) {
	defer close(e.stopped)
	defer w.Close()
	base := filepath.Join(e.mb.Mailbox(), string(mailbox.BoxOutbound))
	rescan := time.NewTicker(e.opts.RescanInterval)
	defer rescan.Stop()
	next := time.NewTimer(time.Hour)
	defer next.Stop()
	ctx := context.Background()
	for {
		e.dispatch(ctx)
		e.resetNext(ctx, next)
		select {
		case <-e.stop:
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Op&(fsnotify.Create|fsnotify.Rename|fsnotify.Write) == 0 {
				continue
			}
			if filepath.Dir(ev.Name) == base {
				// Lstat: a link to a folder elsewhere is not watched (scan
				// sets it aside).
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					w.Add(ev.Name)
				}
				e.scan(ctx)
				continue
			}
			if strings.HasSuffix(ev.Name, ".md") {
				e.noteFile(ctx, ev.Name)
			}
			// Take the other events waiting before dispatching once: a
			// burst of queued drafts is one look at the queue, not many.
		drain:
			for {
				select {
				case ev, ok := <-w.Events:
					if !ok {
						return
					}
					if ev.Op&(fsnotify.Create|fsnotify.Rename|fsnotify.Write) != 0 && strings.HasSuffix(ev.Name, ".md") && filepath.Dir(ev.Name) != base {
						e.noteFile(ctx, ev.Name)
					}
				default:
					break drain
				}
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			e.log.Warn("outbound watch error; rescanning", "err", err)
			e.scan(ctx)
		case <-rescan.C:
			e.scan(ctx)
		case <-next.C:
		case <-e.wake:
		}
	}
}

// resetNext sets the timer to when the next waiting draft is due. With no
// free slot it waits for a send to finish instead (that wakes the loop).
func (e *Engine) resetNext(ctx context.Context, t *time.Timer) {
	d := time.Hour
	e.mu.Lock()
	free := e.opts.Concurrency - len(e.busy)
	e.mu.Unlock()
	if free > 0 {
		if at, err := e.mb.NextDue(ctx, e.enab); err == nil && !at.IsZero() {
			d = max(at.Sub(e.opts.Now()), time.Millisecond)
		}
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

// scan reads every outbound folder: files the index does not know are
// indexed (or set aside when they cannot be sent), folders that are not a
// provider's are set aside.
func (e *Engine) scan(ctx context.Context) {
	base := filepath.Join(e.mb.Mailbox(), string(mailbox.BoxOutbound))
	dirs, err := os.ReadDir(base)
	if err != nil {
		e.log.Error("outbound: cannot read the queue", "err", err)
		return
	}
	for _, d := range dirs {
		p := filepath.Join(base, d.Name())
		if !d.IsDir() {
			e.setAside(ctx, p, "a file directly in outbound/: drafts go in outbound/<provider>/ (use `courier send`)")
			continue
		}
		prov := schema.Provider(d.Name())
		ents, err := os.ReadDir(p)
		if err != nil {
			e.log.Error("outbound: cannot read a queue folder", "dir", p, "err", err)
			continue
		}
		for _, f := range ents {
			if f.IsDir() || strings.HasPrefix(f.Name(), ".") {
				continue
			}
			fp := filepath.Join(p, f.Name())
			if !prov.Valid() {
				e.setAside(ctx, fp, fmt.Sprintf("outbound/%s/ is not a provider's folder (providers: email, lark, slack)", d.Name()))
				continue
			}
			e.noteFile(ctx, fp)
		}
	}
	e.Wake()
}

// noteFile makes sure a file in an outbound folder is indexed, or set
// aside.
func (e *Engine) noteFile(ctx context.Context, path string) {
	rel := e.mb.Rel(path)
	if !strings.HasSuffix(path, ".md") {
		e.setAside(ctx, path, "not a draft: drafts are .md files (use `courier send`)")
		return
	}
	_, id, ok := mailbox.ParseFileName(filepath.Base(path))
	if ok {
		if _, err := e.mb.Get(ctx, id); err == nil {
			// Known: queued by `courier send`, or already delivered and
			// this is the copy about to be removed.
			e.Wake()
			return
		}
	}
	if _, err := os.Lstat(path); err != nil {
		return // gone already (delivered, or moved by someone)
	}
	// A link or a FIFO is refused unread (mailbox.UnsafePathError): the
	// reason then names the path only. Only a regular file inside the
	// workspace is parsed, and only what its parse says is quoted.
	if _, err := e.mb.IndexQueued(ctx, rel); err != nil {
		e.setAside(ctx, path, "not a valid queued draft: "+oneLine(err.Error()))
		return
	}
	e.Wake()
}

func (e *Engine) setAside(ctx context.Context, path, reason string) {
	to, err := e.mb.SetAside(ctx, e.mb.Rel(path), reason)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			e.log.Error("outbound: could not set a file aside", "path", e.mb.Rel(path), "err", err)
		}
		return
	}
	e.log.Warn("outbound: set a file aside in .deadletter", "path", e.mb.Rel(path), "to", to, "reason", reason)
}

// dispatch starts sends for due drafts while slots are free.
func (e *Engine) dispatch(ctx context.Context) {
	e.mu.Lock()
	free := e.opts.Concurrency - len(e.busy)
	skip := make(map[string]bool, len(e.busy))
	for id := range e.busy {
		skip[id] = true
	}
	closed := e.closed
	e.mu.Unlock()
	if free <= 0 || closed {
		return
	}
	due, err := e.mb.DueDrafts(ctx, e.enab, e.opts.Now(), free, skip)
	if err != nil {
		e.log.Error("outbound: cannot read the queue", "err", err)
		return
	}
	for _, d := range due {
		if d.State == mailbox.DeliveryAccepted {
			// Taken by the provider before a crash: file it, do not send.
			e.mu.Lock()
			e.busy[d.ID] = true
			e.mu.Unlock()
			e.inflight.Add(1)
			go func(d mailbox.Due) {
				defer e.inflight.Done()
				e.fileAccepted(ctx, d)
				e.mu.Lock()
				delete(e.busy, d.ID)
				e.mu.Unlock()
				e.Wake()
			}(d)
			continue
		}
		attempts, ok, err := e.mb.ClaimDelivery(ctx, d.ID, e.owner, e.opts.Now(), 2*e.opts.SendTimeout)
		if err != nil {
			e.log.Error("outbound: claim failed", "id", d.ID, "err", err)
			continue
		}
		if !ok {
			continue
		}
		e.mu.Lock()
		e.busy[d.ID] = true
		e.mu.Unlock()
		e.inflight.Add(1)
		go func(d mailbox.Due, attempts int) {
			defer e.inflight.Done()
			e.deliver(d, attempts)
			e.mu.Lock()
			delete(e.busy, d.ID)
			e.mu.Unlock()
			e.Wake()
		}(d, attempts)
	}
}

// deliver sends one claimed draft and records the outcome.
func (e *Engine) deliver(due mailbox.Due, attempts int) {
	ctx := context.Background()
	log := e.log.With("id", due.ID, "provider", due.Provider, "attempt", attempts)
	d := e.readQueued(ctx, log, due, attempts)
	if d == nil {
		return
	}
	if at := d.Options.ScheduleAt; at != nil && at.After(e.opts.Now()) {
		if err := e.mb.ScheduleDelivery(ctx, d.ID, at.Time); err != nil {
			log.Error("outbound: cannot schedule", "err", err)
		}
		log.Debug("outbound: held until its schedule_at", "at", at.Format())
		return
	}
	if err := d.CheckRecipients(nil, e.opts.MaxRecipients); err != nil {
		e.fail(ctx, log, due, d, attempts, adapters.Permanent(err))
		return
	}
	if err := e.artifactsReady(d); err != nil {
		e.fail(ctx, log, due, d, attempts, err)
		return
	}
	sender := e.opts.Senders[d.Provider]
	if sender == nil {
		e.retry(ctx, log, due, attempts-1, nil, fmt.Errorf("provider %s is not enabled", d.Provider))
		return
	}
	accepted, err := e.mb.Accepted(ctx, d.ID)
	if err != nil {
		e.retry(ctx, log, due, attempts, nil, err)
		return
	}
	tk := &ticket{gate: e.commit}
	defer tk.Leave()
	start := e.opts.Now()
	rcpt, accepted, err := e.send(ctx, log, sender, d, accepted, tk)
	if err != nil {
		d.Delivery = &schema.Delivery{Recipients: accepted}
		if adapters.IsPermanent(err) || attempts >= e.opts.MaxAttempts {
			e.fail(ctx, log, due, d, attempts, err)
			return
		}
		e.retry(ctx, log, due, attempts, d, err)
		return
	}
	e.fileSent(ctx, log, due, d, attempts, tk, start, rcpt, accepted)
}

// readQueued reads and decodes the draft due; nil when there is none to
// send: it was removed, set aside (unreadable, no longer valid, edited) or
// is to be read again later.
func (e *Engine) readQueued(ctx context.Context, log *slog.Logger, due mailbox.Due, attempts int) *schema.Draft {
	data, err := e.mb.ReadPath(due.Path)
	if errors.Is(err, mailbox.ErrUnsafePath) {
		// Replaced by a link (to a secret, say) since it was queued: set
		// aside as it is, unread, never retried.
		e.setAside(ctx, e.mb.Abs(due.Path), "the queued draft cannot be read: "+oneLine(err.Error()))
		e.observeFail(due.Provider, true)
		return nil
	}
	if errors.Is(err, os.ErrNotExist) {
		log.Warn("outbound: queued draft was removed before it was sent")
		if err := e.mb.Forget(ctx, due.ID); err != nil {
			log.Error("outbound: cannot forget a vanished draft", "err", err)
		}
		return nil
	}
	if err != nil {
		e.retry(ctx, log, due, attempts, nil, err)
		return nil
	}
	d, _, err := schema.DecodeDraft(data)
	switch {
	case err != nil:
		e.setAside(ctx, e.mb.Abs(due.Path), "the queued draft is no longer valid: "+oneLine(err.Error()))
		e.observeFail(due.Provider, true)
		return nil
	case d.ID != due.ID || d.Provider != due.Provider:
		e.setAside(ctx, e.mb.Abs(due.Path), fmt.Sprintf("the queued draft was edited: it now says id %q provider %q", d.ID, d.Provider))
		e.observeFail(due.Provider, true)
		return nil
	}
	return d
}

// artifactsReady says why the draft's artifacts cannot be sent (a local
// path, permanently; an object gone from the dropzone), or nil.
func (e *Engine) artifactsReady(d *schema.Draft) error {
	for i, a := range d.Artifacts {
		if a.ID == "" {
			// Only `courier send` reads local files, under its attach
			// rules; a dropped draft's path is never opened here.
			return adapters.Permanent(fmt.Errorf("artifacts[%d] names a local path (%s), which only `courier send` copies into the dropzone; the service sends dropzone objects only", i, a.Path))
		}
		if e.opts.Dropzone != nil && !e.opts.Dropzone.Has(a.ID) {
			return fmt.Errorf("artifact %d (%s, %s) is no longer in the dropzone", i, a.Name, a.ID)
		}
	}
	return nil
}

// send hands the draft to its provider, within SendTimeout, with the
// recipients an earlier try reached (accepted); each step the provider
// reports reached is recorded as it goes. It returns the receipt and the
// recipients reached so far, those of a partial failure included.
func (e *Engine) send(ctx context.Context, log *slog.Logger, sender adapters.Sender, d *schema.Draft, accepted []schema.RecipientResult, tk *ticket) (adapters.Receipt, []schema.RecipientResult, error) {
	sctx, cancel := context.WithTimeout(e.sendCtx, e.opts.SendTimeout)
	progress := func(ctx context.Context, reached ...schema.RecipientResult) error {
		return e.mb.AddAccepted(ctx, d.ID, reached)
	}
	rcpt, err := sender.Send(sctx, &adapters.Attempt{Draft: d, Accepted: accepted, Gate: tk, Progress: progress})
	cancel()
	var pe *adapters.PartialError
	if errors.As(err, &pe) && len(pe.Accepted) > 0 {
		if aerr := e.mb.AddAccepted(ctx, d.ID, pe.Accepted); aerr != nil {
			log.Error("outbound: cannot record the recipients reached", "err", aerr)
		}
		accepted = append(accepted, pe.Accepted...)
		log.Warn("outbound: some recipients have it; the others will be tried again", "reached", len(pe.Accepted))
	}
	return rcpt, accepted, err
}

// fileSent records a sent draft's receipt, lets the next send through the
// commit gate, and files the draft in archive/.
func (e *Engine) fileSent(ctx context.Context, log *slog.Logger, due mailbox.Due, d *schema.Draft, attempts int, tk *ticket, start time.Time, rcpt adapters.Receipt, accepted []schema.RecipientResult) {
	now := e.opts.Now()
	results := append(accepted, rcpt.Recipients...)
	r := mailbox.Receipt{ProviderMessageID: rcpt.ProviderMessageID, Channel: rcpt.Channel, InboundID: rcpt.InboundID, ThreadKey: rcpt.ThreadKey,
		Recipients: results, At: now}
	if err := e.mb.MarkAccepted(ctx, d.ID, r); err != nil {
		log.Error("outbound: sent, but could not record it", "err", err)
	}
	tk.Leave() // recorded: the next send may hand its message over
	r.File(d, attempts)
	rel, err := e.mb.FinishDelivery(ctx, d, due.Path, mailbox.BoxArchive)
	if err != nil {
		// Accepted but not filed: a restart finds it queued and sends it
		// again (the one duplicate the contract allows).
		log.Error("outbound: sent, but could not file it in archive/", "err", err)
		return
	}
	e.sent.Add(1)
	if e.opts.Observer != nil {
		queued := start
		if d.CreatedAt != nil {
			queued = d.CreatedAt.Time
		}
		e.opts.Observer.Sent(d.Provider, now.Sub(queued))
	}
	log.Info("sent", "to", strings.Join(d.To, ","), "provider_message_id", rcpt.ProviderMessageID, "archived", rel)
}

// fileAccepted archives a draft the provider took before a crash stopped
// the engine from filing it.
func (e *Engine) fileAccepted(ctx context.Context, due mailbox.Due) {
	log := e.log.With("id", due.ID, "provider", due.Provider)
	r, err := e.mb.AcceptedReceipt(ctx, due.ID)
	if err != nil {
		log.Error("outbound: cannot read the receipt of a sent draft", "err", err)
		return
	}
	d, _, err := e.mb.Draft(ctx, due.ID)
	if err != nil {
		log.Error("outbound: cannot read a sent draft", "err", err)
		return
	}
	r.File(d, max(due.Attempts, 1))
	if _, err := e.mb.FinishDelivery(ctx, d, due.Path, mailbox.BoxArchive); err != nil {
		log.Error("outbound: cannot file a sent draft", "err", err)
		return
	}
	log.Info("filed a draft sent before the service stopped")
}

func (e *Engine) observeFail(p schema.Provider, permanent bool) {
	e.failed.Add(1)
	if e.opts.Observer != nil {
		e.opts.Observer.Failed(p, permanent)
	}
}

// retry releases the draft to be tried again after the backoff (or the
// provider's Retry-After).
func (e *Engine) retry(ctx context.Context, log *slog.Logger, due mailbox.Due, attempts int, d *schema.Draft, cause error) {
	wait := e.backoff(attempts)
	if ra, ok := adapters.RetryAfter(cause); ok {
		wait = ra
	}
	next := e.opts.Now().Add(wait)
	if err := e.mb.RetryDelivery(ctx, due.ID, next, oneLine(cause.Error())); err != nil {
		log.Error("outbound: cannot record the retry", "err", err)
	}
	if d != nil {
		e.observeFail(due.Provider, false)
	}
	log.Warn("outbound: temporary failure; will retry", "err", cause, "retry_in", wait.Round(time.Millisecond))
}

// fail sets the draft aside in .deadletter with the reason.
func (e *Engine) fail(ctx context.Context, log *slog.Logger, due mailbox.Due, d *schema.Draft, attempts int, cause error) {
	reason := oneLine(cause.Error())
	if !adapters.IsPermanent(cause) && attempts >= e.opts.MaxAttempts {
		reason = fmt.Sprintf("gave up after %d attempts: %s", attempts, reason)
	}
	var reached []schema.RecipientResult
	if d.Delivery != nil {
		reached = d.Delivery.Recipients
	}
	d.Delivery = &schema.Delivery{Status: schema.DeliveryFailed, Attempts: attempts, FailedAt: schema.TimePtr(e.opts.Now()), Reason: schema.Text(reason), Recipients: reached}
	rel, err := e.mb.FinishDelivery(ctx, d, due.Path, mailbox.BoxDeadletter)
	if err != nil {
		log.Error("outbound: cannot set the draft aside", "err", err)
		return
	}
	e.observeFail(due.Provider, true)
	log.Error("outbound: delivery failed for good", "reason", reason, "deadletter", rel)
}

// backoff is BackoffBase × 2^(attempts−1), capped at BackoffMax, at a
// random point in its upper half.
func (e *Engine) backoff(attempts int) time.Duration {
	d := e.opts.BackoffBase
	for i := 1; i < attempts && d < e.opts.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, e.opts.BackoffMax)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ticket is one send's pass through the engine's commit gate.
type ticket struct {
	gate chan struct{}
	held atomic.Bool
}

// Enter implements adapters.Gate.
func (t *ticket) Enter(ctx context.Context) error {
	if t.held.Load() {
		return nil
	}
	select {
	case t.gate <- struct{}{}:
		t.held.Store(true)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave releases the gate if this send holds it.
func (t *ticket) Leave() {
	if t.held.CompareAndSwap(true, false) {
		<-t.gate
	}
}
