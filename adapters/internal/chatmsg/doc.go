// Package chatmsg holds what the chat providers (adapters/slack,
// adapters/lark) do alike with a message's content, outside the sync
// engine (adapters/chatsync): the text a file keeps within
// courier.limits.max_text_bytes, the rest in artifacts (Fit); a download
// read within the artifact limit (LimitReader); the words of a draft, as
// plain text or Markdown (DraftWords).
package chatmsg
