// Package mrkdwn converts Slack message text both ways: Slack's mrkdwn and
// rich_text blocks to CommonMark for the mailbox, and an agent's CommonMark
// draft to mrkdwn for chat.postMessage.
//
// It is a library in spirit: pure functions, no I/O, and its corpus test
// (COURIER_CORPUS) is its contract. Names are resolved by the caller: Refs
// lists the ids a message mentions so the caller can look them up once
// (users.info, conversations.info) and pass them in as Names.
//
// What arrives is not trusted. Only http, https and mailto links become
// Markdown links; any other scheme stays visible as text. A link whose label
// differs from its address keeps both visible, so a reader sees where it
// points. Characters that would be Markdown in plain text are escaped, so
// they render as the sender typed them. Output is valid UTF-8 for any input.
//
// Bounds, so that what an outsider sends costs at most a small multiple of
// its size in time and memory (TestHuge* feeds 10 MB of each hostile
// shape): every recursion stops at maxDepth (32) and writes what is deeper
// as text; resolved names are cut to 256 bytes and, together, to the
// input's size plus 64 KiB; *bold* and the like are resolved on lines up
// to 64 KiB (longer ones are text); blocks over 1 MiB, or nested deeper
// than encoding/json reads, are written as their words; drafts over
// 320 KiB (eight times what Slack posts) are escaped rather than parsed,
// and under that the shapes goldmark is quadratic on are defused first.
// Past a bound the words are kept, only their formatting is not.
package mrkdwn
