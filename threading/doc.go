// Package threading decides where a message belongs: the thread key, the
// reply_to and thread_root ids, the external participants of an email, and
// the headers and subject of an outgoing email reply. It is pure: no I/O, no
// clock, no global state; the same input always gives the same output.
//
// # Email (seed 003)
//
// Message ids are compared in normalised form (NormalizeID: trim, strip the
// angle brackets, lowercase). The root of an email's thread is the first id of
// References, else the first id of In-Reply-To, else the message's own
// Message-ID; the thread key is "email-thread:<root>" (EmailThread). Subjects,
// senders and participant sets never split or join threads. A message with
// none of those ids is keyed by a synthetic id (SyntheticUID) and flagged.
//
// EmailThread looks at one message only. When a reply carries In-Reply-To but
// no References, its root is its parent, not the top of the conversation: the
// ingest layer, which has the mailbox index, resolves such chains; this
// package does not guess.
//
// The schema id of an email is "email_" + the first 20 hex digits of the
// SHA-256 of its normalised Message-ID (EmailID), so reply_to and thread_root
// can be computed even when the parent was never seen.
//
// Participants are the addresses of From, Reply-To, To, Cc and Bcc without the
// account's own addresses, deduplicated case-insensitively; a thread event is
// eligible for personal behaviour only with exactly one external participant.
// Replies go to Reply-To, else From (ReplyTarget), with In-Reply-To and
// References built as RFC 5322 §3.6.4 says (ReplyHeaders). Outgoing headers
// keep the original case of ids: only comparisons are case-insensitive.
//
// # Instant messaging (DESIGN §3)
//
// Lark and Slack map a provider's message fields to the session, thread key,
// thread_root and reply_to of the schema (Lark, Slack). Every id this package
// returns is either empty or satisfies schema.ValidID.
package threading
