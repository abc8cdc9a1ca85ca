// Package notify wakes agents: it runs the configured hooks (courier.notify)
// when a message becomes durable in inbound/, when a draft is delivered or
// dead-lettered, so that an agent learns its reply failed, and when an
// inbound event or mail that could not become a message is set aside in
// .deadletter/<provider>/ (a dead event too).
//
// The contract, at least once and in order per thread:
//
//   - The mailbox journals every such event in the same transaction as the
//     index row that records it (mailbox/events.go). The runner moves the
//     events each hook wants into the hook's durable queue (the
//     notify_queue table) and advances the hook's position in the journal
//     (notify_cursors) in one transaction; a queue row goes only once its
//     call succeeded. A crash at any instant therefore leaves the event in
//     the journal after the hook's position, or in its queue: it runs
//     after the restart. A call that was running when the service died
//     runs again (at least once, not exactly once: X-Courier-Delivery and
//     COURIER_DELIVERY_ID name the event, so a receiver can tell).
//   - A call that fails (exit status not 0, an HTTP status not 2xx, a
//     redirect, no answer in the timeout) is retried with a backoff
//     (1 s doubling, at most 10 min), forever: the queue is durable.
//   - Per hook, the events of one thread (the message's thread key; a
//     message without one is its session's) run one at a time in the
//     journal's order; a failed one holds the later ones of its thread
//     back. Other threads go on, up to the hook's concurrency.
//   - A digest window makes one call of the events of a burst: the first
//     event waits the window, then everything queued for the hook goes
//     in one call (at most max_digest events), in order; the hook's calls
//     then run one at a time.
//   - Bounds: a hook's queue holds at most max_queue events. Past it the
//     runner stops moving events into it and its position stops: they
//     wait in the journal, nothing is dropped, and the log says so once.
//     The output an exec hook prints is kept up to max_output bytes for
//     the log; an HTTP answer is read up to 4 KiB. The journal keeps an
//     event a day after every hook has taken it (for `courier watch`).
//
// What a hook receives: an exec hook runs its argv (or, with shell, its
// one string under /bin/sh -c) in the workspace, with a clean environment
// (PATH, HOME, LANG, USER and TZ of the service's, none of its secrets,
// plus the hook's env) and:
//
//	COURIER_EVENT           inbound, delivered, dead or awaiting_approval
//	COURIER_HOOK            the hook's name
//	COURIER_DELIVERY_ID     <hook>:<journal seq> of the (last) event: the same on every retry
//	COURIER_ROOT            the workspace
//	COURIER_MESSAGE_ID      the message's (draft's) id
//	COURIER_MESSAGE_PATH    its file, absolute (it may move to archive/ later)
//	COURIER_PROVIDER        email, slack, lark, ...
//	COURIER_THREAD_KEY      session.thread_key ("" when none)
//	COURIER_CORRELATION_ID  correlation_id ("" when none)
//	COURIER_COUNT           how many events the call carries (1 without a digest)
//	COURIER_MESSAGE_IDS     the ids of every event of the call, oldest first, space-separated
//
// For a digest the single-message variables are those of the call's last
// (newest) event. On standard input it gets the message's front matter
// and body as one JSON object (a draft's for delivered and dead, with its
// delivery block); a digest gets a JSON array of them, oldest first. A
// dead event of an inbound event set aside is not a message: its id is
// the payload's path below the mailbox folder (.deadletter/slack/...),
// COURIER_MESSAGE_PATH the payload, and the JSON mailbox.DeadLetterInfo
// (id, provider, path, reason, source, set_aside_at, size); its
// provider's dead letters are one thread.
//
// A url hook gets the same JSON as a POST (Content-Type application/json)
// with the headers X-Courier-Event, X-Courier-Hook, X-Courier-Delivery,
// X-Courier-Timestamp (Unix seconds) and X-Courier-Signature: "v0=" and
// the hex HMAC-SHA256, keyed with the hook's secret, of
// "v0:<timestamp>:<body>" (Slack's scheme: check it in constant time and
// refuse a timestamp more than 5 minutes away). Redirects are not
// followed.
package notify
