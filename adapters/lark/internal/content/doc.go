// Package content converts Lark (Feishu) message content both ways: the
// JSON `content` string of every message_type to plain text and Markdown
// for the mailbox (Parse), and an agent's Markdown draft to the content of
// a `post` or `text` message (FromMarkdown).
//
// It is a library in spirit: pure functions over the JSON Lark sends,
// parsed here without the Lark SDK, no I/O. Its contract is the corpus's
// reference normaliser cases (COURIER_CORPUS), read as a conformance
// table. Names are the caller's: Parse takes the event's mentions and an
// optional Names lookup, and lists the resources (image_key, file_key) a
// message carries so the caller can fetch them
// (im/v1/messages/{id}/resources/{key}?type=image|file).
//
// What arrives is not trusted. Only http, https and mailto links become
// Markdown links; other schemes stay visible as text. Characters that
// would be Markdown in plain text are escaped, so they render as typed.
// Markdown that arrives (a post's md tags, a card's lark_md and markdown)
// is read the way a draft is, into what a post can say, so it obeys the
// same rules. A message whose content is not what its type says, or whose type is
// unknown, is kept: its raw content becomes a code block, never dropped.
// Output is valid UTF-8 for any input.
//
// Bounds, so that what an outsider sends costs at most a small multiple of
// its size: cards are walked to depth maxDepth (32), deeper parts written
// as their words; names from mentions or the Names lookup are cut to
// maxName bytes, and every use of one is charged to a budget of the
// content's size plus 64 KiB, past which the placeholder or id is written
// instead; at most maxResources resources (100) and maxMentions mentions
// (200) are listed, the rest still written as text; Markdown lines over
// 4 KiB and quotes nested past 32 are read as text (goldmark is quadratic
// in them); drafts over maxDraft
// (150 KiB) and posts over maxPost (30 KiB), Lark's own limits, are
// refused with ErrTooLarge.
package content
