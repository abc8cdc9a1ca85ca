// Package chatsync is the engine the chat providers (adapters/slack,
// adapters/lark) share, as mautrix's bridgev2 serves its network
// connectors: what every chat provider does alike, written once, so that a
// provider is its API calls and its normaliser. It imports adapters,
// schema and, for a provider's Options, the leaves confkit and dropzone:
// never a provider's SDK.
//
// # The parts
//
// Tracker keeps each conversation's checkpoint (a channel, a chat),
// generic over the provider's position type: Slack's ts "<sec>.<micro>",
// Lark's create_time in milliseconds. The provider supplies, in Config,
// the checkpoint key of a conversation ("slack/<channel>"), how a position
// is written and read back, and how two compare; the tracker keeps the
// rule that makes a crash lose nothing: a conversation's checkpoint moves
// with live events only while it is caught up, and a gap (a lost
// connection, a failed store: Tracker.Gap) makes every conversation wait
// for the next catch-up. A conversation may carry extra state of the
// provider's (X: Slack's active threads), read with its position
// (Config.Load) and changed under the conversation's lock.
//
// Catch-up passes go through a Pass: Tracker.StartPass (or RunPass), then
// per conversation Pass.Begin (where to read from), the provider's
// reading, and Pass.CaughtUp (or Pass.Advance when a bound stopped it, or
// nothing after an error), then Tracker.EndPass with the pass's outcome.
// A pass that stopped at its bounds returns ErrIncomplete, and the round
// goes on in the next pass, which skips what the round read (Pass.Done). A
// pass that began before a gap saves only what it read and leaves the
// conversation not caught up; the gap also begins a new round.
//
// Joiner keeps one handling in flight per provider message: a
// redelivery (a retry after a slow answer) joins it.
//
// Webhook is the skeleton of an event subscription's endpoint: the
// method, the content type, the body's bound, then the provider's Verify,
// Challenge and Parse hooks, the handling within a budget, a success only
// once durable, and on failure a 5xx, a gap and a pass asked for; refused
// requests logged at most once a minute (Pacer).
//
// CatchUp runs the passes: at once (or at the first Kick of a
// connection), again soon after ErrIncomplete, every Interval, after a
// failure with a doubling backoff, and AfterFailure after Failed (a store
// failed: a gap at once); a pass the provider refused the credentials
// ends its Run (Refused), and the service tries the Source again later.
// FetchOnce is `courier fetch`.
//
// Poster posts a draft as steps (its text's parts, its files), each once
// across attempts: the steps done travel in Attempt.Accepted, uploads come
// before Attempt.EnterCommit, and each post but the last is recorded at
// once (Attempt.Reached).
//
// # A provider on the engine
//
// A chat provider's receiver holds one Tracker, one Joiner, one CatchUp
// and, when it receives over HTTP, one Webhook, all made when the
// provider is assembled:
//
//	r.track = chatsync.NewTracker(chatsync.Config[string, channelState]{
//		Name: "slack", Key: checkpointKey, Compare: tsCompare, ...})
//	r.catchUp = &chatsync.CatchUp{Name: "slack", Pass: r.replay.pass, Tracker: r.track, ...}
//	r.hook = &chatsync.Webhook{Name: "slack", Verify: r.verify, Parse: r.parse, CatchUp: r.catchUp, ...}
//
// Its one path from an event to the mailbox normalises the event, then
// hands it to the Sink inside Tracker.Live, which says whether the event
// carries the checkpoint:
//
//	return r.track.Live(ctx, sink, channel, ts, func(cp *adapters.Checkpoint, x *channelState) error {
//		ev.Checkpoint = cp
//		return sink.Deliver(ctx, ev)
//	})
//
// An event its normaliser cannot make a message of (adapters.Undeliverable)
// it hands to adapters.SetAside instead, as received, and an event it does
// not file on purpose it counts in its Provider.Ignored: neither is only a
// log line.
//
// Its transports call that path through Joiner.Do, keyed by the
// provider's message or event id (a transport that takes a slot before it
// begins a handling, as Lark's long connection does, uses Join, Begin and
// End). A connection's Source calls Tracker.Gap when a connection is lost
// or begins (whichever comes first in its client: before the new
// connection's first event), CatchUp.Kick when one is up, and
// CatchUp.Failed when an event could not be stored; it runs CatchUp.Run
// beside its connection (OnKick), and may wrap its Pass (Lark's runs only
// while connected and is stopped when the connection is lost). A webhook
// provider's Source runs CatchUp.Run alone (an Interval as the safety net)
// and the service mounts Webhook.Handler.
//
// Its catch-up pass lists the conversations (the provider's list and
// Tracker.Known), and for each not Pass.Done: Pass.Begin, reads history
// from Reading.From (a conversation without a position is recorded where
// it is now, not backfilled, or read from a window back as Lark does,
// which also bounds how far back PassedTo may take it), hands each
// message to the same path as a live event, and ends with Pass.CaughtUp
// at the newest position read (Pass.Advance when it read in order but
// stopped at a bound or at a message that failed; Pass.Finish for a
// conversation it may not read); the whole pass inside Tracker.RunPass,
// returning ErrIncomplete when a bound stopped it, and resetting what it
// keeps of a round of its own when Pass.NewRound says one begins.
package chatsync
