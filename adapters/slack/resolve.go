package slack

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Resolver is Slack's rules for drafts. A draft goes to one conversation:
// a channel (C, G), a DM (D), or users (U, W), whose DM, or group DM for
// several, the Sender opens when it sends. A reply goes to the channel of
// the message answered, in its thread: the thread of the parent when the
// parent is a reply, else the thread the parent starts (its own ts).
//
// The thread goes in Draft.ThreadKey as the thread_ts itself. That is the
// value the generic send step already copies from the parent's
// session.thread_key, which for Slack is the thread_ts of a reply
// (DESIGN §3): a draft in a thread then has the thread key of the
// messages around it, and `courier thread` finds them together. The
// Resolver adds only what that step cannot know: the ts of a parent that
// is top-level, which starts the thread. A draft may name the parent's
// own ts as its thread_key (seed 004 §5.2 names the parent's provider id):
// that is the same thread, the one the parent starts or, for a reply, the
// one it is in. Any other thread_key in a reply is refused.
//
// The IdempotencyKey is a uuid fixed here; the Sender tags each post with
// it. The InboundID (slack_<channel>_<ts>) is known only once Slack
// answers the post with its ts, so the Sender's receipt carries it.
type Resolver struct{}

var _ adapters.Resolver = Resolver{}

// maxGroupDM is the most users conversations.open takes: a group DM has
// at most 9 members, the bot being one.
const maxGroupDM = 8

// tsRE is a Slack message ts ("1355517523.000005"); a thread_ts is one.
var tsRE = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)

// Recognizes reports whether r is a Slack conversation or user id.
func (Resolver) Recognizes(r string) bool { return ids.MatchString(r) }

// Resolve sets the recipient and thread of a reply, checks what the draft
// names, and fixes the idempotency key.
func (Resolver) Resolve(d *schema.Draft, parent *adapters.Parent, _ adapters.ResolveOptions, src *schema.Source) error {
	if len(d.Cc) > 0 {
		return src.Errorf("cc", "Slack has no cc: put the conversation in to")
	}
	if len(d.Bcc) > 0 {
		return src.Errorf("bcc", "Slack has no bcc: put the conversation in to")
	}
	if parent != nil {
		channel, thread, own, err := replyTarget(parent)
		if err != nil {
			return src.Errorf("reply_to", "%s: %v", d.ReplyTo, err)
		}
		switch {
		case len(d.To) == 0:
			d.To = schema.Recipients{channel}
		case len(d.To) != 1 || d.To[0] != channel:
			// A thread_ts exists in one channel only: posted elsewhere it
			// would be refused, or land outside any thread.
			return src.Errorf("to", "%s answers a message in %s, and a thread lives in one channel: leave to empty, or drop reply_to to start a new message in %s",
				strings.Join(d.To, ", "), channel, strings.Join(d.To, ", "))
		}
		switch tk := string(d.ThreadKey); {
		case tk == "", tk == own:
			// The parent's own ts (seed 004 §5.2: thread_key the
			// parent's provider id) names the thread at the parent: the
			// thread it starts, or, for a reply, the thread it is in,
			// Slack's threads being one level deep.
			d.ThreadKey = schema.NullString(thread)
		case tk != thread:
			return src.Errorf("thread_key", "%s is not the thread of %s (%s): leave thread_key empty in a reply", d.ThreadKey, d.ReplyTo, thread)
		}
	}
	if err := checkTo(d.To); err != nil {
		return src.Errorf("to", "%v", err)
	}
	if d.ThreadKey != "" && !tsRE.MatchString(string(d.ThreadKey)) {
		return src.Errorf("thread_key", "%q is not a Slack thread_ts (like 1355517523.000005)", d.ThreadKey)
	}
	d.IdempotencyKey = uuid.NewString()
	return nil
}

// checkTo accepts one conversation, or up to maxGroupDM users (a group
// DM); nil is left to the caller, which names the missing recipient.
func checkTo(to schema.Recipients) error {
	for _, r := range to {
		if !ids.MatchString(r) {
			return fmt.Errorf("%q is not a Slack channel, DM or user id (C…, G…, D…, U…, W…)", r)
		}
	}
	if len(to) <= 1 {
		return nil
	}
	for _, r := range to {
		if !isUser(r) {
			return fmt.Errorf("a Slack message goes to one conversation, and %s is a channel: several recipients can only be users (a group DM)", r)
		}
	}
	if len(to) > maxGroupDM {
		return fmt.Errorf("%d users: a group DM holds at most %d besides the bot", len(to), maxGroupDM)
	}
	return nil
}

func isUser(id string) bool { return id != "" && (id[0] == 'U' || id[0] == 'W') }

// replyTarget returns the channel and thread_ts a reply to parent goes
// to, and the parent's own ts when it is known ("" for our draft not yet
// posted).
func replyTarget(p *adapters.Parent) (channel, thread, own string, err error) {
	if m := p.Message; m != nil {
		channel = m.Session.ID
		if !ids.MatchString(channel) {
			return "", "", "", fmt.Errorf("the message's session id %q is not a Slack channel", channel)
		}
		ts, ok := tsOfID(m.ID, channel)
		if tk := string(m.Session.ThreadKey); tk != "" {
			if !tsRE.MatchString(tk) {
				return "", "", "", fmt.Errorf("the message's thread_key %q is not a Slack thread_ts", tk)
			}
			return channel, tk, ts, nil
		}
		if !ok {
			return "", "", "", fmt.Errorf("the message's id %q is not slack_%s_<ts>", m.ID, channel)
		}
		return channel, ts, ts, nil
	}
	d := p.Draft
	if d == nil {
		return "", "", "", fmt.Errorf("the message answered is empty")
	}
	channel, thread, err = draftTarget(d)
	if d.Delivery != nil && d.Delivery.Status == schema.DeliverySent && tsRE.MatchString(d.Delivery.ProviderMessageID) {
		own = d.Delivery.ProviderMessageID
	}
	return channel, thread, own, err
}

// draftTarget returns the channel and thread_ts a reply to our draft d
// goes to.
func draftTarget(d *schema.Draft) (channel, thread string, err error) {
	if d.Delivery != nil && d.Delivery.Channel != "" {
		channel = d.Delivery.Channel // a DM to a user: the D… it was posted in
	} else if len(d.To) == 1 {
		channel = d.To[0]
	}
	if !ids.MatchString(channel) {
		return "", "", fmt.Errorf("our draft names no single Slack conversation (to %s)", strings.Join(d.To, ", "))
	}
	if tk := string(d.ThreadKey); tk != "" {
		if !tsRE.MatchString(tk) {
			return "", "", fmt.Errorf("our draft's thread_key %q is not a Slack thread_ts", tk)
		}
		return channel, tk, nil
	}
	if d.Delivery == nil || d.Delivery.Status != schema.DeliverySent || !tsRE.MatchString(d.Delivery.ProviderMessageID) || !ids.MatchString(d.Delivery.Channel) {
		// Its ts, which names the thread it starts, comes back only when
		// it is posted.
		return "", "", fmt.Errorf("our draft is not posted yet, so the thread it starts has no ts: answer it once it is delivered, or drop reply_to and set to")
	}
	return d.Delivery.Channel, d.Delivery.ProviderMessageID, nil
}

// tsOfID returns the ts of a message whose id is slack_<channel>_<ts>
// (threading.SlackID); false when id is not one of channel's.
func tsOfID(id, channel string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "slack_"+channel+"_")
	if !ok {
		return "", false
	}
	sec, frac, ok := strings.Cut(rest, "_")
	ts := sec + "." + frac
	if !ok || !tsRE.MatchString(ts) || threading.SlackID(channel, ts) != id {
		return "", false
	}
	return ts, true
}
