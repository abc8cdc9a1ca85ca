package slack

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// inbound sets the provider's receiving side for the configured mode:
// Socket Mode is one Source that also catches up after each (re)connect;
// the Events API is a Webhook plus a Source of its own for the catch-up,
// since a webhook has no connection whose start marks a gap.
func (a *Adapter) inbound(p *adapters.Provider) {
	in := newReceiver(a)
	switch a.cfg.Mode {
	case "events":
		p.Webhook = adapters.WebhookFunc(in.webhook)
		p.Sources = append(p.Sources, newReplaySource(in))
	default:
		p.Sources = append(p.Sources, newSocketSource(in))
	}
}

// maxChannels bounds the per-channel state the receiver keeps in memory
// (the last ts delivered, the threads seen lately). Past it, idle entries
// are dropped; their position is read back from the Sink when needed.
const maxChannels = 10000

// maxThreads is how many recently active threads a channel remembers, for
// the catch-up to look for replies posted to them during a gap:
// conversations.history lists top-level messages only, so a reply in a
// thread whose parent is older than the checkpoint is found only by asking
// that thread. Each costs one conversations.replies call per channel per
// pass; past the bound the least recently active thread is dropped.
const maxThreads = 100

// threadIdle is how long a thread is remembered after its last activity:
// a reply after a month of silence is rare, and asking about every thread
// that ever was would cost a call each per pass.
const threadIdle = 30 * 24 * time.Hour

// activeThread is one remembered thread: its parent's ts and the ts of the
// newest message of it seen (Slack's clock, as ts are).
type activeThread struct {
	TS   string `json:"ts"`
	Last string `json:"last"`
}

// receiver is what every transport shares: the path from a Slack event to
// a durable file (handle) and the per-channel positions.
type receiver struct {
	a *Adapter
	// normalize turns an event into a message; a.normalize, swapped in
	// tests.
	normalize func(ctx context.Context, ev event) (*adapters.Event, error)

	// now is the clock that ages threads out (threadIdle); time.Now,
	// swapped in tests.
	now func() time.Time

	mu    sync.Mutex
	chans map[string]*channelState

	// timeout bounds a webhook request's handling (webhookTimeout when 0).
	timeout  time.Duration
	flightMu sync.Mutex
	flights  map[string]*inflight // event ids being handled, by webhook requests
	// refusedLog paces the log of refused webhook requests.
	refusedLog rateLog
	// failed gets a value (without blocking) when the webhook could not
	// store an event: a possible gap for the catch-up to read.
	failed chan struct{}
}

// channelState is one channel's position. Its mutex is held while an
// event of the channel is delivered, so that the live stream and the
// catch-up never save an older ts after a newer one.
//
// The checkpoint moves with live events only once the channel is caught
// up: after a (re)connect or a restart, live events arrive at once while
// the catch-up is still reading the gap, and a checkpoint moved past the
// gap by a live event would make a crash then lose the gap for good. Until
// the catch-up completes, live events are delivered without a checkpoint
// and the newest ts delivered is kept; the catch-up saves the newer of
// that and its own newest when it is done.
type channelState struct {
	mu        sync.Mutex
	users     int    // goroutines using the entry; guarded by receiver.mu
	loaded    bool   // ts holds the Sink's saved value
	ts        string // the newest ts saved as the checkpoint ("" = none)
	caughtUp  bool   // no gap since the last catch-up of the channel
	delivered string // the newest ts delivered since the last catch-up
	// resume is where the next catch-up goes on reading history back
	// from (its latest), after a pass that stopped at its bounds.
	resume        string
	resumeNewest  string   // the newest ts the passes that stopped read
	resumeThreads []string // threads found by the passes that stopped
	// passedTo is the newest ts the last complete catch-up read from
	// history: the next one reads from there (in this process; a
	// restart reads from the checkpoint).
	passedTo string
	// threads are the channel's recently active threads, most recent
	// first; saved under threadsKey with each event that changes them.
	threads []activeThread
}

func newReceiver(a *Adapter) *receiver {
	return &receiver{a: a, normalize: a.normalize, now: time.Now, chans: map[string]*channelState{}, failed: make(chan struct{}, 1)}
}

// checkpointKey is where a channel's position is saved.
func checkpointKey(channel string) string { return "slack/" + channel }

// threadsKey is where a channel's recently active threads are saved (JSON,
// []activeThread). A key of its own rather than a richer value under
// checkpointKey: the position stays a bare ts as it always was (values
// saved before are read as they are, and nothing else reading it changes),
// and the list, up to a few kilobytes, is written only with the events
// that change it (a message in a thread), not with every message.
func threadsKey(channel string) string { return "slack/" + channel + "/threads" }

// acquire returns the channel's state, locked; release unlocks it.
func (r *receiver) acquire(channel string) *channelState {
	r.mu.Lock()
	cs := r.chans[channel]
	if cs == nil {
		if len(r.chans) >= maxChannels {
			for k, v := range r.chans {
				if v.users == 0 {
					delete(r.chans, k)
				}
			}
		}
		cs = &channelState{}
		r.chans[channel] = cs
	}
	cs.users++
	r.mu.Unlock()
	cs.mu.Lock()
	return cs
}

func (r *receiver) release(cs *channelState) {
	cs.mu.Unlock()
	r.mu.Lock()
	cs.users--
	r.mu.Unlock()
}

// position returns the channel's saved ts, reading it and the channel's
// active threads from the Sink the first time. cs must be held.
func (r *receiver) position(ctx context.Context, cs *channelState, sink adapters.Sink, channel string) (string, bool, error) {
	if !cs.loaded {
		v, ok, err := sink.Checkpoint(ctx, checkpointKey(channel))
		if err != nil {
			return "", false, fmt.Errorf("slack: checkpoint of %s: %w", channel, err)
		}
		tv, tok, err := sink.Checkpoint(ctx, threadsKey(channel))
		if err != nil {
			return "", false, fmt.Errorf("slack: active threads of %s: %w", channel, err)
		}
		if ok {
			cs.ts = v
		}
		cs.threads = nil
		if tok {
			threads, err := decodeThreads(tv)
			if err != nil {
				// Not worth stopping the channel's catch-up for: what is
				// lost is at most the replies to older threads posted
				// during a gap, and the list is rebuilt as threads move.
				r.a.log.Warn("slack: the saved active threads are unreadable; starting without them", "key", threadsKey(channel), "err", err)
			}
			cs.threads = threads
		}
		cs.loaded = true
	}
	return cs.ts, cs.ts != "", nil
}

// decodeThreads reads a saved thread list: its valid entries, most
// recent first (prune relies on the order), at most maxThreads.
func decodeThreads(v string) ([]activeThread, error) {
	var all []activeThread
	if err := json.Unmarshal([]byte(v), &all); err != nil {
		return nil, fmt.Errorf("slack: active threads %.40q are not a JSON list: %w", v, err)
	}
	out := make([]activeThread, 0, len(all))
	for _, t := range all {
		if validTS(t.TS) && validTS(t.Last) {
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return tsAfter(out[i].Last, out[j].Last) })
	return out[:min(len(out), maxThreads)], nil
}

// withThread returns the channel's thread list with thread active at
// last, most recent first, without those idle since before now-threadIdle
// and past maxThreads; changed is false when that is the list as it is.
// cs must be held.
func (cs *channelState) withThread(thread, last string, now time.Time) (out []activeThread, changed bool) {
	out = make([]activeThread, 0, len(cs.threads)+1)
	found := false
	for _, t := range cs.threads {
		if t.TS == thread {
			found = true
			if tsAfter(last, t.Last) {
				t.Last = last
			}
		}
		out = append(out, t)
	}
	if !found {
		out = append(out, activeThread{TS: thread, Last: last})
	}
	sort.SliceStable(out, func(i, j int) bool { return tsAfter(out[i].Last, out[j].Last) })
	out = prune(out, now)
	return out, !slices.Equal(out, cs.threads)
}

// prune drops from a most-recent-first list the threads idle too long and
// those past maxThreads.
func prune(threads []activeThread, now time.Time) []activeThread {
	cutoff := now.Add(-threadIdle).Unix()
	for i, t := range threads {
		if sec, _, _ := parseTS(t.Last); sec < cutoff || i >= maxThreads {
			return threads[:i]
		}
	}
	return threads
}

// activeThreads returns the parents' ts of the threads the channel saw
// lately, read from the Sink after a restart. cs must be held.
func (r *receiver) activeThreads(cs *channelState) []string {
	cs.threads = prune(cs.threads, r.now())
	out := make([]string, len(cs.threads))
	for i, t := range cs.threads {
		out[i] = t.TS
	}
	return out
}

// peek is what handle reads of an event itself: where it happened and when.
type peek struct {
	Type     string `json:"type"`
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
	EventTS  string `json:"event_ts"`
	ThreadTS string `json:"thread_ts"`
	Message  *struct {
		ThreadTS string `json:"thread_ts"`
	} `json:"message"`
}

// handle is the one path from a Slack event to the mailbox, for every
// transport: normalise, deliver, and only then report success (the caller
// acks). The event's channel moves its checkpoint forward, never back. An
// error means nothing was acknowledged and a retry may succeed.
func (r *receiver) handle(ctx context.Context, sink adapters.Sink, ev event) error {
	var pk peek
	if err := json.Unmarshal(ev.Inner, &pk); err != nil {
		return fmt.Errorf("slack: event %s is not a JSON object: %w", ev.ID, err)
	}
	channel := ev.Channel
	if channel == "" {
		channel = pk.Channel
	}
	ts := pk.TS
	if ts == "" {
		ts = pk.EventTS
	}
	out, err := r.normalize(ctx, ev)
	if err != nil {
		return err
	}
	if out == nil || out.Message == nil {
		// Deliberately nothing to write (not a message, filtered).
		return nil
	}
	extra := out.Message.Metadata.Extra
	out.Debounce = extra.Edits == "" && extra.Recalls == ""
	if ev.ID != "" && !slices.Contains(out.Keys, schema.EventKey(schema.Slack, ev.ID)) {
		out.Keys = append(out.Keys, schema.EventKey(schema.Slack, ev.ID))
	}
	if channel == "" || !ids.MatchString(channel) || !validTS(ts) {
		return r.deliver(ctx, sink, *out)
	}
	cs := r.acquire(channel)
	defer r.release(cs)
	saved, _, err := r.position(ctx, cs, sink, channel)
	if err != nil {
		return err
	}
	newer := cs.caughtUp && tsAfter(ts, saved)
	if newer {
		out.Checkpoint = &adapters.Checkpoint{Key: checkpointKey(channel), Value: ts}
	}
	// The thread the message is part of is active: saved with the
	// message, in the same Deliver (one write), whether or not the
	// channel is caught up (the list says where to look, not how far).
	thread := pk.ThreadTS
	if thread == "" && pk.Message != nil {
		thread = pk.Message.ThreadTS
	}
	if !validTS(thread) && out.Self && pk.Type == "message" && pk.Message == nil {
		// Our own top-level post (its echo): where a person answers the
		// agent, so its first reply is worth looking for after a gap.
		thread = ts
	}
	var threads []activeThread
	var more []adapters.Event
	if validTS(thread) {
		last := ts
		if !validTS(last) {
			last = thread
		}
		var changed bool
		if threads, changed = cs.withThread(thread, last, r.now()); changed {
			v, err := json.Marshal(threads)
			if err != nil {
				return fmt.Errorf("slack: active threads of %s: %w", channel, err)
			}
			more = append(more, adapters.Event{Checkpoint: &adapters.Checkpoint{Key: threadsKey(channel), Value: string(v)}})
		} else {
			threads = nil
		}
	}
	if err := r.deliver(ctx, sink, *out, more...); err != nil {
		return err
	}
	if newer {
		cs.ts = ts
	}
	if tsAfter(ts, cs.delivered) {
		cs.delivered = ts
	}
	if threads != nil {
		cs.threads = threads
	}
	return nil
}

// deliver hands ev, and the checkpoint-only events more, to the Sink in
// one call.
func (r *receiver) deliver(ctx context.Context, sink adapters.Sink, ev adapters.Event, more ...adapters.Event) error {
	if err := sink.Deliver(ctx, append([]adapters.Event{ev}, more...)...); err != nil {
		return fmt.Errorf("slack: deliver %s: %w", ev.Message.ID, err)
	}
	r.a.health.Event()
	return nil
}

// caughtUp saves the channel's position once a catch-up read everything
// up to ts: the newer of ts and the newest delivered meanwhile, when it is
// newer than the saved one. Live events move the checkpoint from then on.
func (r *receiver) caughtUp(ctx context.Context, sink adapters.Sink, channel, ts string) error {
	cs := r.acquire(channel)
	defer r.release(cs)
	saved, _, err := r.position(ctx, cs, sink, channel)
	if err != nil {
		return err
	}
	if tsAfter(ts, cs.passedTo) {
		cs.passedTo = ts
	}
	if tsAfter(cs.delivered, ts) {
		ts = cs.delivered
	}
	if validTS(ts) && (saved == "" || tsAfter(ts, saved)) {
		if err := sink.Deliver(ctx, adapters.Event{Checkpoint: &adapters.Checkpoint{Key: checkpointKey(channel), Value: ts}}); err != nil {
			return fmt.Errorf("slack: save the position of %s: %w", channel, err)
		}
		cs.ts = ts
	}
	cs.caughtUp = true
	cs.delivered = ""
	cs.resume, cs.resumeNewest = "", ""
	cs.resumeThreads = nil
	return nil
}

// gap marks every channel as having missed events (a connection was
// lost): their checkpoints wait for the next catch-up.
func (r *receiver) gap() {
	r.mu.Lock()
	all := make([]*channelState, 0, len(r.chans))
	for _, cs := range r.chans {
		all = append(all, cs)
	}
	r.mu.Unlock()
	for _, cs := range all {
		cs.mu.Lock()
		cs.caughtUp = false
		cs.mu.Unlock()
	}
}

// A Slack ts is "<seconds>.<microseconds>": ordered as a pair of numbers,
// not as a string ("9.1" is before "10.0").
func parseTS(ts string) (sec, frac int64, ok bool) {
	s, f, found := strings.Cut(ts, ".")
	if s == "" || len(s) > 12 || len(f) > 9 || (found && f == "") || !digits(s) || !digits(f) {
		return 0, 0, false
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return 0, 0, false
	}
	if found {
		f += strings.Repeat("0", 9-len(f))
		frac, err = strconv.ParseInt(f, 10, 64)
		if err != nil || frac < 0 {
			return 0, 0, false
		}
	}
	return sec, frac, true
}

func validTS(ts string) bool {
	_, _, ok := parseTS(ts)
	return ok
}

// tsAfter reports whether ts is later than than; any valid ts is after "".
func tsAfter(ts, than string) bool {
	s1, f1, ok1 := parseTS(ts)
	if !ok1 {
		return false
	}
	s2, f2, ok2 := parseTS(than)
	if !ok2 {
		return true
	}
	return s1 > s2 || (s1 == s2 && f1 > f2)
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
