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
// they render as the sender typed them. Output is valid UTF-8 for any input,
// and every recursion has a depth bound, so a hostile message cannot blow
// the stack.
package mrkdwn
