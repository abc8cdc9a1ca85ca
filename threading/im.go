package threading

import (
	"strings"

	"github.com/monoco/courier/schema"
)

// IMThread is where an IM message belongs, in schema terms (ids already
// provider-prefixed). Empty strings stand for null.
type IMThread struct {
	SessionID   string
	SessionType schema.SessionType
	ThreadKey   string // "" means null
	ThreadRoot  string // schema id or ""
	ReplyTo     string // schema id or ""
}

// LarkRef holds the fields of a Lark im.message.receive_v1 message.
type LarkRef struct {
	ChatID, ChatType, MessageID, ThreadID, RootID, ParentID string
}

// Lark maps a Lark message (DESIGN §3): the session is the chat, direct for
// chat_type "p2p" and group for anything else; the thread key is thread_id,
// else root_id, else null; thread_root is the id of root_id and reply_to the
// id of parent_id, each only when set and not the message itself.
func Lark(r LarkRef) IMThread {
	msg := strings.TrimSpace(r.MessageID)
	thread := strings.TrimSpace(r.ThreadID)
	root := strings.TrimSpace(r.RootID)
	par := strings.TrimSpace(r.ParentID)

	t := IMThread{SessionID: strings.TrimSpace(r.ChatID), SessionType: schema.Group}
	if strings.EqualFold(strings.TrimSpace(r.ChatType), "p2p") {
		t.SessionType = schema.Direct
	}
	switch {
	case thread != "":
		t.ThreadKey = thread
	case root != "":
		t.ThreadKey = root
	}
	if root != "" && root != msg {
		t.ThreadRoot = LarkID(root)
	}
	if par != "" && par != msg {
		t.ReplyTo = LarkID(par)
	}
	return t
}

// SlackRef holds the fields of a Slack message event.
type SlackRef struct {
	Channel, ChannelType, TS, ThreadTS string
}

// Slack maps a Slack message (DESIGN §3): the session is the channel, direct
// for channel_type "im" and group for the others. A reply (thread_ts set and
// not its own ts) has thread key thread_ts and both thread_root and reply_to
// the id of the thread's parent; a top-level message, a thread's parent
// included, has none of them.
func Slack(r SlackRef) IMThread {
	channel := strings.TrimSpace(r.Channel)
	ts := strings.TrimSpace(r.TS)
	threadTS := strings.TrimSpace(r.ThreadTS)

	t := IMThread{SessionID: channel, SessionType: schema.Group}
	if strings.EqualFold(strings.TrimSpace(r.ChannelType), "im") {
		t.SessionType = schema.Direct
	}
	if threadTS != "" && threadTS != ts {
		t.ThreadKey = threadTS
		t.ThreadRoot = SlackID(channel, threadTS)
		t.ReplyTo = t.ThreadRoot
	}
	return t
}

// SlackID returns the schema id of a Slack message: "slack_" + channel + "_"
// + ts with "." replaced by "_" (slack_C024BE91L_1355517523_000005); "" when
// either part is empty.
func SlackID(channel, ts string) string {
	channel, ts = strings.TrimSpace(channel), strings.TrimSpace(ts)
	if channel == "" || ts == "" {
		return ""
	}
	return "slack_" + idSafe(channel) + "_" + idSafe(strings.ReplaceAll(ts, ".", "_"))
}

// LarkID returns the schema id of a Lark message: "lark_" + message_id
// (lark_om_abc123); "" when the id is empty.
func LarkID(messageID string) string {
	messageID = strings.TrimSpace(messageID)
	if messageID == "" {
		return ""
	}
	return "lark_" + idSafe(messageID)
}

// idSafe replaces every byte that a schema id may not hold (anything but
// ASCII letters, digits, '_' and '-') with '_'. Provider ids never hold such
// bytes in practice; this keeps a malformed one from making an invalid id.
func idSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
