package slack

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
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
const maxChannels = chatsync.DefaultMaxConversations

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
// a durable file (handle), the per-channel positions (track), the
// catch-up (catchUp, run by the transport's Source) and the Events API
// endpoint (hook).
type receiver struct {
	a *Adapter
	// normalize turns an event into a message; a.normalize, swapped in
	// tests.
	normalize func(ctx context.Context, ev event) (*adapters.Event, error)

	// now is the clock that ages threads out (threadIdle); time.Now,
	// swapped in tests.
	now func() time.Time

	// track keeps each channel's checkpoint, a ts "<sec>.<micro>", and
	// its recently active threads.
	track *chatsync.Tracker[string, channelState]
	// flights join a redelivery of an event_id with its handling under
	// way (X-Slack-Retry-Num after a slow answer, a Socket Mode
	// redelivery).
	flights chatsync.Joiner[string]
	replay  *replayer
	catchUp *chatsync.CatchUp
	hook    *chatsync.Webhook
}

// channelState is what a channel keeps besides its position, read back
// from the Sink with it: the channel's recently active threads, most
// recent first, saved under threadsKey with each event that changes them.
type channelState struct {
	threads []activeThread
}

func newReceiver(a *Adapter) *receiver {
	r := &receiver{a: a, normalize: a.normalize, now: time.Now}
	r.track = chatsync.NewTracker(chatsync.Config[string, channelState]{
		Name: "slack", Key: checkpointKey, Max: maxChannels,
		Format:  func(ts string) string { return ts },
		Parse:   func(_, v string) string { return v },
		Compare: tsCompare,
		Load:    r.loadThreads,
	})
	r.replay = &replayer{r: r, limits: defaultReplayLimits}
	r.catchUp = &chatsync.CatchUp{Name: "slack", Pass: r.replay.pass, Tracker: r.track,
		Again: time.Second, AfterFailure: afterFailure, Refused: refusedPass, Health: &a.health, Log: a.log}
	r.hook = r.newWebhook()
	return r
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

// loadThreads reads a channel's active threads from the Sink, when the
// tracker first meets the channel.
func (r *receiver) loadThreads(ctx context.Context, sink adapters.Sink, channel string, cs *channelState) error {
	tv, tok, err := sink.Checkpoint(ctx, threadsKey(channel))
	if err != nil {
		return fmt.Errorf("slack: active threads of %s: %w", channel, err)
	}
	if !tok {
		return nil
	}
	threads, err := decodeThreads(tv)
	if err != nil {
		// Not worth stopping the channel's catch-up for: what is
		// lost is at most the replies to older threads posted
		// during a gap, and the list is rebuilt as threads move.
		r.a.log.Warn("slack: the saved active threads are unreadable; starting without them", "key", threadsKey(channel), "err", err)
	}
	cs.threads = threads
	return nil
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
// The channel must be held.
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
// lately, read from the Sink after a restart. The channel must be held.
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
// acks). The event's channel moves its checkpoint forward, never back,
// and only once the channel is caught up (chatsync.Tracker.Live). An
// error means nothing was acknowledged and a retry may succeed.
func (r *receiver) handle(ctx context.Context, sink adapters.Sink, ev event) error {
	// A field of another type is left empty, as normalize leaves it; an
	// event that is no JSON object is normalize's to set aside.
	var pk peek
	_ = json.Unmarshal(ev.Inner, &pk)
	channel := cmp.Or(ev.Channel, pk.Channel)
	ts := cmp.Or(pk.TS, pk.EventTS)
	out, err := r.normalize(ctx, ev)
	if reason, ok := adapters.UndeliverableReason(err); ok {
		return r.setAside(ctx, sink, ev, reason)
	}
	if err != nil {
		return err
	}
	if out == nil || out.Message == nil {
		// Deliberately nothing to write (not a message, filtered).
		return nil
	}
	extra := out.Message.Metadata.Extra
	out.Debounce = extra.Edits == "" && extra.Recalls == ""
	if key := schema.EventKey(schema.Slack, ev.ID); ev.ID != "" && !slices.Contains(out.Keys, key) {
		out.Keys = append(out.Keys, key)
	}
	if channel == "" || !ids.MatchString(channel) || !validTS(ts) {
		return r.deliver(ctx, sink, *out)
	}
	thread := threadOf(pk, ts, out.Self)
	return r.track.Live(ctx, sink, channel, ts, func(cp *adapters.Checkpoint, cs *channelState) error {
		out.Checkpoint = cp
		// The thread the message is part of is active: saved with the
		// message, in the same Deliver (one write), whether or not the
		// channel is caught up (the list says where to look, not how far).
		var more []adapters.Event
		threads, changed := []activeThread(nil), false
		if validTS(thread) {
			if threads, changed = cs.withThread(thread, ts, r.now()); changed {
				v, err := json.Marshal(threads)
				if err != nil {
					return fmt.Errorf("slack: active threads of %s: %w", channel, err)
				}
				more = append(more, adapters.Event{Checkpoint: &adapters.Checkpoint{Key: threadsKey(channel), Value: string(v)}})
			}
		}
		if err := r.deliver(ctx, sink, *out, more...); err != nil {
			return err
		}
		if changed {
			cs.threads = threads
		}
		return nil
	})
}

// setAside keeps an event that cannot be filed as a dead letter: the
// payload as the transport received it (a history message as read).
func (r *receiver) setAside(ctx context.Context, sink adapters.Sink, ev event, reason string) error {
	payload, source := ev.Raw, "slack "+cmp.Or(ev.Via, "history")
	if payload == nil {
		payload = ev.Inner
	}
	if ev.ID != "" {
		source += fmt.Sprintf(", event %.64s", ev.ID)
	}
	if ev.Channel != "" {
		source += fmt.Sprintf(", channel %.64s", ev.Channel)
	}
	return adapters.SetAside(ctx, sink, r.a.log, adapters.DeadLetter{Provider: schema.Slack, Source: source, Reason: reason, Payload: payload})
}

// otherPayload counts an Events API payload that is no event_callback.
// app_rate_limited says Slack dropped the app's events for a minute: the
// catch-up reads them from history.
func (r *receiver) otherPayload(typ string) {
	if typ != "app_rate_limited" {
		r.a.ignored.Add("not_event_callback")
		return
	}
	r.a.ignored.Add("app_rate_limited")
	r.a.log.Warn("slack: Slack rate-limited the app's events (app_rate_limited) and dropped some; the catch-up reads them from history")
	r.catchUp.Failed()
}

// threadOf is the thread an event at ts is part of, "" for none: its
// thread_ts (or its edited message's); our own top-level post (its echo)
// starts one, where a person answers the agent, so its first reply is
// worth looking for after a gap.
func threadOf(pk peek, ts string, self bool) string {
	thread := pk.ThreadTS
	if thread == "" && pk.Message != nil {
		thread = pk.Message.ThreadTS
	}
	if !validTS(thread) && self && pk.Type == "message" && pk.Message == nil {
		thread = ts
	}
	return thread
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

// tsCompare orders two ts as chatsync.Config.Compare wants: an invalid
// one (and "", no position) before every valid one.
func tsCompare(a, b string) int {
	switch {
	case tsAfter(a, b):
		return 1
	case tsAfter(b, a):
		return -1
	}
	return 0
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
