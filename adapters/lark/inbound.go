package lark

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// inbound sets the provider's receiving side for the configured mode, and
// refuses a mode it does not know: the long connection is one Source that
// also catches up after each (re)connect; webhooks are a Webhook plus a
// Source of their own for the catch-up, since a webhook has no connection
// whose start marks a gap.
func (a *Adapter) inbound(p *adapters.Provider) error {
	r := newReceiver(a)
	switch a.cfg.Mode {
	case "", "ws":
		p.Sources = append(p.Sources, newWSSource(r))
	case "webhook":
		p.Webhook = newWebhook(r)
		p.Sources = append(p.Sources, newReplaySource(r))
	default:
		return fmt.Errorf("courier.adapters.lark.mode: %q is not one of ws, webhook", a.cfg.Mode)
	}
	return nil
}

// maxChats bounds the per-chat state the receiver keeps in memory. Past it,
// idle entries are dropped; their position is read back from the Sink when
// needed.
const maxChats = chatsync.DefaultMaxConversations

// receiver is what every transport shares: the path from a Lark event to a
// durable file (handle), the per-chat positions (track), the catch-up
// (catchUp, run by the transport's Source) and what its passes remember
// between them (replay).
type receiver struct {
	a *Adapter
	// normalize turns an event into a message; a.normalize, swapped in
	// tests.
	normalize func(ctx context.Context, ev event) (*adapters.Event, error)

	// track keeps each chat's checkpoint: the create_time, in
	// milliseconds (Lark's own unit), of the newest message delivered.
	// It moves with live events only once the chat is caught up: after
	// a (re)connect or a restart, live events arrive at once while the
	// catch-up is still reading the gap, and a checkpoint moved past the
	// gap by a live event would make a crash then lose the gap for good.
	track *chatsync.Tracker[int64, struct{}]
	// catchUp runs the passes (r.pass, or the long connection's
	// wrapper of it); the webhook and the long connection tell it of
	// the events they could not store.
	catchUp *chatsync.CatchUp

	// replay is what catch-up passes remember between them (replay.go).
	replay replayState
}

// chatPass is one catch-up pass over the chats.
type chatPass = chatsync.Pass[int64, struct{}]

func newReceiver(a *Adapter) *receiver {
	r := &receiver{a: a, normalize: a.normalize}
	r.track = chatsync.NewTracker(chatsync.Config[int64, struct{}]{
		Name: "lark", Key: checkpointKey, Max: maxChats,
		Format:  func(ms int64) string { return strconv.FormatInt(ms, 10) },
		Parse:   r.position,
		Compare: cmp.Compare[int64],
	})
	r.catchUp = &chatsync.CatchUp{Name: "lark", Pass: r.pass, Tracker: r.track, Health: &a.health, Log: a.log}
	return r
}

// checkpointKey is where a chat's position is saved: the create_time in
// milliseconds (Lark's own unit) of the newest message delivered.
func checkpointKey(chat string) string { return "lark/" + chat }

// position reads a chat's saved position back; 0 (none) when it is
// unreadable.
func (r *receiver) position(key, v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		// Not worth stopping for: the catch-up then reads the chat from
		// its start window, and dedupe keeps it once.
		r.a.log.Warn("lark: the saved position of a chat is unreadable; starting without it", "key", key, "value", clip(v, 40))
		return 0
	}
	return n
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
// moves its checkpoint forward, never back, and only once the chat is
// caught up (chatsync.Tracker.Live). An error means nothing was
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
	if reason, ok := adapters.UndeliverableReason(err); ok {
		return r.setAside(ctx, sink, ev, reason)
	}
	if err != nil {
		return err
	}
	if out == nil || out.Message == nil {
		// Deliberately nothing to write (not a message, our own).
		return nil
	}
	chat := strings.TrimSpace(pk.Message.ChatID)
	ms, _ := strconv.ParseInt(strings.TrimSpace(pk.Message.CreateTime), 10, 64)
	if chat == "" || !ids.MatchString(chat) || ms <= 0 {
		return r.deliver(ctx, sink, *out)
	}
	return r.track.Live(ctx, sink, chat, ms, func(cp *adapters.Checkpoint, _ *struct{}) error {
		out.Checkpoint = cp
		if err := r.deliver(ctx, sink, *out); err != nil {
			return err
		}
		// The catch-up reads the threads active lately (a group's
		// history lists a thread's root, not its replies).
		r.replay.noteThread(chat, pk.Message.ThreadID, ms)
		return nil
	})
}

// setAside keeps an event that cannot be filed as a dead letter: the
// event as the transport received it (a message from history as the
// event normalize read).
func (r *receiver) setAside(ctx context.Context, sink adapters.Sink, ev event, reason string) error {
	payload := ev.raw
	if payload == nil {
		payload = ev.Event
	}
	source := "lark " + cmp.Or(ev.via, "history")
	if id := strings.TrimSpace(ev.Header.EventID); id != "" {
		source += ", event " + clip(id, 64)
	}
	return adapters.SetAside(ctx, sink, r.a.log, adapters.DeadLetter{Provider: schema.Lark, Source: source, Reason: reason, Payload: payload})
}

// deliver hands ev to the Sink.
func (r *receiver) deliver(ctx context.Context, sink adapters.Sink, ev adapters.Event) error {
	if err := sink.Deliver(ctx, ev); err != nil {
		return fmt.Errorf("lark: deliver %s: %w", ev.Message.ID, err)
	}
	r.a.health.Event()
	return nil
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
