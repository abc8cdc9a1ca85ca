package threading

import (
	"regexp"
	"strings"
)

// KeyPrefix begins every email thread key.
const KeyPrefix = "email-thread:"

// Headers are the raw header values of one email.
type Headers struct {
	MessageID, InReplyTo, References string
}

// Thread is where an email belongs.
type Thread struct {
	Key       string // "email-thread:<root>" (root normalised); "" only when there was nothing to key by
	Root      string // normalised root id
	Parent    string // normalised id of the direct parent: first In-Reply-To id, else last References id; "" for a root
	IsRoot    bool   // the message is its own root
	Synthetic bool   // no usable ids: the key was made from the synthetic id
}

// EmailThread applies seed 003. The root is the first id of References, else
// the first id of In-Reply-To, else the message's own Message-ID; when none
// of those exists the root is synthetic (pass SyntheticUID of the message)
// and Synthetic is set. The key is KeyPrefix + root.
//
// The parent is the first In-Reply-To id, else the last References id, never
// the message itself (a message that names itself has no parent by that
// name). Only this message's headers count: a reply with In-Reply-To and no
// References is keyed by its parent even when the parent is itself a reply;
// resolving that chain needs the mailbox index and is the ingest layer's job.
func EmailThread(h Headers, synthetic string) Thread {
	refs := ParseIDs(h.References)
	irt := ParseIDs(h.InReplyTo)
	own := NormalizeID(h.MessageID)

	var root string
	switch {
	case len(refs) > 0:
		root = refs[0]
	case len(irt) > 0:
		root = irt[0]
	case own != "":
		root = own
	default:
		root = strings.ToLower(strings.TrimSpace(synthetic))
		if root == "" {
			return Thread{Synthetic: true}
		}
		return Thread{Key: KeyPrefix + root, Root: root, IsRoot: true, Synthetic: true}
	}
	return Thread{
		Key:    KeyPrefix + root,
		Root:   root,
		Parent: parent(own, irt, refs),
		IsRoot: root == own,
	}
}

// parent is the first In-Reply-To id, else the last References id, skipping
// the message's own id.
func parent(own string, irt, refs []string) string {
	for _, id := range irt {
		if id != own {
			return id
		}
	}
	for i := len(refs) - 1; i >= 0; i-- {
		if refs[i] != own {
			return refs[i]
		}
	}
	return ""
}

// ReplyToID returns the schema id of the parent (reply_to), or "".
func (t Thread) ReplyToID() string {
	if t.Parent == "" {
		return ""
	}
	return EmailID(t.Parent)
}

// RootID returns the schema id of the root (thread_root), or "" when the
// message is the root.
func (t Thread) RootID() string {
	if t.IsRoot || t.Root == "" {
		return ""
	}
	return EmailID(t.Root)
}

// ReplyHeaders returns In-Reply-To and References for a reply to a parent
// with the given raw Message-ID, References and In-Reply-To values (RFC 5322
// §3.6.4, seed 003): In-Reply-To is "<parent id>"; References is the parent's
// References (or, when it has none, its In-Reply-To if that holds exactly one
// id) followed by the parent's Message-ID, duplicates removed, each as
// "<id>". So the first element is the root of the parent's thread.
//
// Ids keep the case they were written in: Message-IDs are case-sensitive on
// the wire and another client may compare them exactly. Only the duplicate
// check ignores case. A parent without a Message-ID gives an empty
// In-Reply-To; nothing at all gives nil References.
func ReplyHeaders(parentMessageID, parentReferences, parentInReplyTo string) (inReplyTo string, references []string) {
	chain := scanIDs(parentReferences)
	if len(chain) == 0 {
		if irt := dedupe(scanIDs(parentInReplyTo)); len(irt) == 1 {
			chain = irt
		}
	}
	own := rawID(parentMessageID)
	if own != "" {
		inReplyTo = "<" + own + ">"
		chain = append(chain, own)
	}
	for _, id := range dedupe(chain) {
		references = append(references, "<"+id+">")
	}
	return inReplyTo, references
}

// replyPrefix matches the prefixes that already mark a reply: Re: in any
// case, with a counter (Re[2]:, Re(2):) or a space before the colon, and the
// common localised ones (German Aw:, Nordic Sv:, Dutch Antw:, Polish Odp:,
// Chinese 回复: 答复: 回覆:), with an ASCII or a full-width colon.
var replyPrefix = regexp.MustCompile(`^(?i:re|aw|sv|antw|odp|回复|答复|回覆)\s*(?:\[\d+\]|\(\d+\))?\s*[:：]`)

// ReplySubject returns the subject of a reply: "Re: " + s, unless s already
// starts with a reply prefix, in which case s is kept as it is (trimmed), so
// replies never pile up "Re: Re:". An empty subject gives "Re:".
func ReplySubject(s string) string {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "Re:"
	case replyPrefix.MatchString(s):
		return s
	}
	return "Re: " + s
}
