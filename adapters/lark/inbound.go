package lark

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/threading"
)

// inbound sets the provider's receiving side for the configured mode: the
// long connection is one Source that also catches up after each
// (re)connect; webhooks are a Webhook plus a Source of their own for the
// catch-up, since a webhook has no connection whose start marks a gap.
func (a *Adapter) inbound(p *adapters.Provider) {
	r := newReceiver(a)
	switch a.cfg.Mode {
	case "webhook":
		p.Webhook = newWebhook(r)
		p.Sources = append(p.Sources, newReplaySource(r))
	default:
		p.Sources = append(p.Sources, newWSSource(r))
	}
}

// maxChats bounds the per-chat state the receiver keeps in memory. Past it,
// idle entries are dropped; their position is read back from the Sink when
// needed.
const maxChats = 10000

// receiver is what every transport shares: the path from a Lark event to a
// durable file (handle) and the per-chat positions (the create_time, in
// milliseconds, of the newest message delivered).
type receiver struct {
	a *Adapter
	// normalize turns an event into a message; a.normalize, swapped in
	// tests.
	normalize func(ctx context.Context, ev event) (*adapters.Event, error)

	mu    sync.Mutex
	chats map[string]*chatState
	// live is set once a catch-up pass over every chat completed with no
	// gap since: a chat first met then (a new chat, or one whose entry was
	// dropped past maxChats) has missed nothing, and is caught up.
	live bool
	gaps uint64 // how many times gap was called
	// passGen is gaps when the running catch-up pass began (passStart):
	// a gap since makes its caughtUpTo save only what it read.
	passGen uint64

	// failed gets a value (without blocking; buffered 1) when the webhook
	// could not store an event (answered 500 or 503): Lark retries, but
	// only four times over 6 h, so the webhook-mode catch-up reads it as
	// a possible gap and passes over the chats again.
	failed chan struct{}

	// replay is what catch-up passes remember between them (replay.go).
	replay replayState
}

// chatState is one chat's position. Its mutex is held while an event of
// the chat is delivered, so that the live stream and the catch-up never
// save an older position after a newer one.
//
// The checkpoint moves with live events only once the chat is caught up:
// after a (re)connect or a restart, live events arrive at once while the
// catch-up is still reading the gap, and a checkpoint moved past the gap
// by a live event would make a crash then lose the gap for good. Until
// the catch-up completes, live events are delivered without a checkpoint
// and the newest position delivered is kept; the catch-up saves the newer
// of that and its own newest when it is done (caughtUpTo).
type chatState struct {
	mu        sync.Mutex
	users     int   // goroutines using the entry; guarded by receiver.mu
	loaded    bool  // ms holds the Sink's saved value
	ms        int64 // the newest create_time saved as the checkpoint (0 = none)
	caughtUp  bool  // no gap since the last catch-up of the chat
	delivered int64 // the newest create_time delivered since the last catch-up
}

func newReceiver(a *Adapter) *receiver {
	return &receiver{a: a, normalize: a.normalize, chats: map[string]*chatState{}, failed: make(chan struct{}, 1)}
}

// checkpointKey is where a chat's position is saved: the create_time in
// milliseconds (Lark's own unit) of the newest message delivered.
func checkpointKey(chat string) string { return "lark/" + chat }

// acquire returns the chat's state, locked; release unlocks it.
func (r *receiver) acquire(chat string) *chatState {
	r.mu.Lock()
	cs := r.chats[chat]
	if cs == nil {
		if len(r.chats) >= maxChats {
			for k, v := range r.chats {
				if v.users == 0 {
					delete(r.chats, k)
				}
			}
		}
		cs = &chatState{caughtUp: r.live}
		r.chats[chat] = cs
	}
	cs.users++
	r.mu.Unlock()
	cs.mu.Lock()
	return cs
}

func (r *receiver) release(cs *chatState) {
	cs.mu.Unlock()
	r.mu.Lock()
	cs.users--
	r.mu.Unlock()
}

// position returns the chat's saved create_time (0 for none), reading it
// from the Sink the first time. cs must be held.
func (r *receiver) position(ctx context.Context, cs *chatState, sink adapters.Sink, chat string) (int64, error) {
	if !cs.loaded {
		v, ok, err := sink.Checkpoint(ctx, checkpointKey(chat))
		if err != nil {
			return 0, fmt.Errorf("lark: checkpoint of %s: %w", chat, err)
		}
		cs.ms = 0
		if ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				// Not worth stopping for: the catch-up then reads the
				// chat from its start window, and dedupe keeps it once.
				r.a.log.Warn("lark: the saved position of a chat is unreadable; starting without it", "key", checkpointKey(chat), "value", clip(v, 40))
			} else {
				cs.ms = n
			}
		}
		cs.loaded = true
	}
	return cs.ms, nil
}

// Position returns a chat's saved position: the create_time in
// milliseconds of the newest message of it delivered, 0 for none.
func (r *receiver) Position(ctx context.Context, sink adapters.Sink, chat string) (int64, error) {
	cs := r.acquire(chat)
	defer r.release(cs)
	return r.position(ctx, cs, sink, chat)
}

// peek is what handle reads of an event itself: which message, where and
// when.
type peek struct {
	Message struct {
		MessageID  string `json:"message_id"`
		ChatID     string `json:"chat_id"`
		CreateTime string `json:"create_time"`
		ThreadID   string `json:"thread_id"`
	} `json:"message"`
}

// handle is the one path from a Lark event to the mailbox, for every
// transport: normalise, deliver, and only then report success (the caller
// acks). A message already in the mailbox (a redelivery: Lark sends an
// unacknowledged event again after 15 s, 5 min, 1 h and 6 h, with the
// same message_id) writes nothing and fetches nothing. The event's chat
// moves its checkpoint forward, never back. An error means nothing was
// acknowledged and a retry may succeed.
func (r *receiver) handle(ctx context.Context, sink adapters.Sink, ev event) error {
	var pk peek
	if ev.Header.EventType == "im.message.receive_v1" {
		if err := json.Unmarshal(ev.Event, &pk); err == nil {
			if id := threading.LarkID(pk.Message.MessageID); id != "" {
				seen, err := sink.Seen(ctx, id)
				if err != nil {
					return fmt.Errorf("lark: is %s in the mailbox: %w", id, err)
				}
				if seen {
					return nil
				}
			}
		}
	}
	out, err := r.normalize(ctx, ev)
	if err != nil {
		return err
	}
	if out == nil || out.Message == nil {
		// Deliberately nothing to write (not a message, or unreadable).
		return nil
	}
	chat := strings.TrimSpace(pk.Message.ChatID)
	ms, _ := strconv.ParseInt(strings.TrimSpace(pk.Message.CreateTime), 10, 64)
	if chat == "" || !ids.MatchString(chat) || ms <= 0 {
		return r.deliver(ctx, sink, *out)
	}
	cs := r.acquire(chat)
	defer r.release(cs)
	saved, err := r.position(ctx, cs, sink, chat)
	if err != nil {
		return err
	}
	newer := cs.caughtUp && ms > saved
	if newer {
		out.Checkpoint = &adapters.Checkpoint{Key: checkpointKey(chat), Value: strconv.FormatInt(ms, 10)}
	}
	if err := r.deliver(ctx, sink, *out); err != nil {
		return err
	}
	if newer {
		cs.ms = ms
	}
	cs.delivered = max(cs.delivered, ms)
	// The catch-up reads the threads active lately (a group's history
	// lists a thread's root, not its replies).
	r.replay.noteThread(chat, pk.Message.ThreadID, ms)
	return nil
}

// deliver hands ev to the Sink.
func (r *receiver) deliver(ctx context.Context, sink adapters.Sink, ev adapters.Event) error {
	if err := sink.Deliver(ctx, ev); err != nil {
		return fmt.Errorf("lark: deliver %s: %w", ev.Message.ID, err)
	}
	r.a.health.Event()
	return nil
}

// caughtUpTo saves the chat's position once a catch-up read everything up
// to ms: the newer of ms and the newest delivered meanwhile, when it is
// newer than the saved one. Live events move the checkpoint from then on.
func (r *receiver) caughtUpTo(ctx context.Context, sink adapters.Sink, chat string, ms int64) error {
	cs := r.acquire(chat)
	defer r.release(cs)
	saved, err := r.position(ctx, cs, sink, chat)
	if err != nil {
		return err
	}
	r.mu.Lock()
	gapSince := r.gaps != r.passGen
	r.mu.Unlock()
	if gapSince {
		// The connection was lost after this pass began: what the pass
		// read is durable, but what live events delivered since may lie
		// beyond the new gap, and the chat is not caught up until the
		// next pass reads it.
		if ms > saved {
			if err := sink.Deliver(ctx, adapters.Event{Checkpoint: &adapters.Checkpoint{Key: checkpointKey(chat), Value: strconv.FormatInt(ms, 10)}}); err != nil {
				return fmt.Errorf("lark: save the position of %s: %w", chat, err)
			}
			cs.ms = ms
		}
		return nil
	}
	ms = max(ms, cs.delivered)
	if ms > saved {
		if err := sink.Deliver(ctx, adapters.Event{Checkpoint: &adapters.Checkpoint{Key: checkpointKey(chat), Value: strconv.FormatInt(ms, 10)}}); err != nil {
			return fmt.Errorf("lark: save the position of %s: %w", chat, err)
		}
		cs.ms = ms
	}
	cs.caughtUp = true
	cs.delivered = 0
	return nil
}

// gap marks every chat as having missed events (a connection was lost):
// their checkpoints wait for the next catch-up.
func (r *receiver) gap() {
	r.mu.Lock()
	r.live = false
	r.gaps++
	all := make([]*chatState, 0, len(r.chats))
	for _, cs := range r.chats {
		all = append(all, cs)
	}
	r.mu.Unlock()
	for _, cs := range all {
		cs.mu.Lock()
		cs.caughtUp = false
		cs.mu.Unlock()
	}
}

// passDone records a catch-up pass that went over every chat the app is in
// (and called caughtUpTo for each): chats first met from now on are caught
// up. A gap since the pass began undoes it: begun is the gap count
// passStart returned.
func (r *receiver) passDone(begun uint64) {
	r.mu.Lock()
	if r.gaps == begun {
		r.live = true
	}
	r.mu.Unlock()
}

// passStart is called as a catch-up pass begins; its value goes to
// passDone.
func (r *receiver) passStart() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passGen = r.gaps
	return r.gaps
}

// flightKey names what a redelivery of ev has in common with the delivery
// still being handled, for the transports to join them: the message_id
// (Lark redelivers a message with it; DESIGN §5 dedupes by it), else the
// event type and id; "" when it has neither.
func flightKey(ev event) string {
	if ev.Header.EventType == "im.message.receive_v1" {
		var pk peek
		if json.Unmarshal(ev.Event, &pk) == nil && strings.TrimSpace(pk.Message.MessageID) != "" {
			return "m:" + strings.TrimSpace(pk.Message.MessageID)
		}
	}
	if id := strings.TrimSpace(ev.Header.EventID); id != "" {
		return "e:" + ev.Header.EventType + ":" + id
	}
	return ""
}
