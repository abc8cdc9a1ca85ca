package lark

import (
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Resolver is Lark's rules for drafts. A draft goes to one chat (oc_) or
// one person: an open_id (ou_), a union_id (on_) or, when the draft names
// provider: lark, an email address. Recognizes claims the ids only: an
// address alone is the email provider's, so `courier send` picks Lark for
// one only when the draft says so.
//
// A reply answers its parent through im/v1/messages/{id}/reply, in the
// parent's chat; the Sender takes the parent's om_ id from reply_to
// (lark_om_…). A follow-up to one of our own drafts answers the message
// that draft became, so reply_to is set to its inbound id (lark_om_…,
// which the mailbox knows as the same draft): Lark can answer only a
// message it knows.
//
// The thread goes in Draft.ThreadKey, which the generic send step copies
// from the parent's session.thread_key: Lark's thread_id (omt_…) when the
// parent is in a thread, and then the Sender replies with
// reply_in_thread, else the root of a quoted reply chain (om_…), which a
// plain reply continues. A draft may also name the parent's own id
// (om_…, seed 004 §5.2: reply_to lark_om_abc123, thread_key om_abc123):
// that opens a thread at the parent, the Sender replying with
// reply_in_thread; a parent already in a thread is answered in it. Any
// other thread_key in a reply is refused.
//
// The IdempotencyKey is a uuid fixed here, sent as Lark's uuid on every
// attempt (Lark makes one message of the calls that share one within an
// hour); the steps after the first (attachments) send it with "-1",
// "-2"... The InboundID (lark_om_…) is known only once Lark answers, so
// the Sender's receipt carries it.
type Resolver struct{}

var _ adapters.Resolver = Resolver{}

var (
	// omRE is a Lark message id; threadRE a thread id.
	omRE     = regexp.MustCompile(`^om_[A-Za-z0-9_-]{1,128}$`)
	threadRE = regexp.MustCompile(`^omt_[A-Za-z0-9_-]{1,128}$`)
	// receiveRE are the ids a message can be sent to.
	receiveRE = regexp.MustCompile(`^(oc|ou|on)_[A-Za-z0-9_-]{1,128}$`)
	// keyRE is an idempotency key Lark takes as its uuid (at most 50
	// characters) with room for a step's suffix ("-" and its number).
	keyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
)

// Recognizes reports whether r is a Lark chat, user or message id.
func (Resolver) Recognizes(r string) bool { return ids.MatchString(r) }

// Resolve sets the recipient and the message answered of a reply, checks
// what the draft names, and fixes the idempotency key.
func (Resolver) Resolve(d *schema.Draft, parent *adapters.Parent, _ adapters.ResolveOptions, src *schema.Source) error {
	if len(d.Cc) > 0 {
		return src.Errorf("cc", "Lark has no cc: a message goes to one chat or person, in to")
	}
	if len(d.Bcc) > 0 {
		return src.Errorf("bcc", "Lark has no bcc: a message goes to one chat or person, in to")
	}
	if parent != nil {
		to, replyTo, thread, err := replyTarget(parent)
		if err != nil {
			return src.Errorf("reply_to", "%s: %v", d.ReplyTo, err)
		}
		switch {
		case len(d.To) == 0:
			d.To = to
		case !sameRecipients(d.To, to):
			// A reply lands where its parent is, whatever to says.
			return src.Errorf("to", "%s answers a message in %s, and a reply goes to its parent's chat: leave to empty, or drop reply_to to start a new message to %s",
				strings.Join(d.To, ", "), strings.Join(to, ", "), strings.Join(d.To, ", "))
		}
		own, _ := omOf(replyTo)
		switch tk := string(d.ThreadKey); {
		case tk == "":
			d.ThreadKey = schema.NullString(thread)
		case tk == own && threadRE.MatchString(thread):
			// The parent's own id (seed 004 §5.2) with a parent already in
			// a thread: Lark answers it in that thread, which the draft
			// then names.
			d.ThreadKey = schema.NullString(thread)
		case tk == own:
			// The parent's own id opens a thread at it (seed 004 §5.2):
			// the Sender replies with reply_in_thread.
		case tk != thread:
			return src.Errorf("thread_key", "%s is not the thread of %s (%s): leave thread_key empty in a reply", d.ThreadKey, d.ReplyTo, orNone(thread))
		}
		d.ReplyTo = schema.NullString(replyTo)
	}
	if err := checkTo(d.To); err != nil {
		return src.Errorf("to", "%v", err)
	}
	if err := checkThread(d); err != nil {
		return src.Errorf("thread_key", "%v", err)
	}
	// New for every draft queued, whatever the file said: a key copied
	// from another draft would make Lark answer that draft's message
	// and send nothing.
	d.IdempotencyKey = uuid.NewString()
	return nil
}

// validKey reports whether k can be Lark's uuid with a step's suffix.
func validKey(k string) bool {
	return keyRE.MatchString(k)
}

// checkTo accepts one chat or person; nil is left to the caller, which
// names the missing recipient.
func checkTo(to schema.Recipients) error {
	if len(to) > 1 {
		return fmt.Errorf("%s: a Lark message goes to one chat or person (send one draft each, or put them in a chat)", strings.Join(to, ", "))
	}
	for _, r := range to {
		if _, _, err := receiveID(r); err != nil {
			return err
		}
	}
	return nil
}

// receiveID returns the receive_id and receive_id_type a message to r is
// created with.
func receiveID(r string) (id, idType string, err error) {
	switch {
	case receiveRE.MatchString(r):
		return r, map[string]string{"oc": "chat_id", "ou": "open_id", "on": "union_id"}[r[:2]], nil
	case omRE.MatchString(r):
		return "", "", fmt.Errorf("%s is a message, not a chat or person: to answer it, set reply_to: %s and leave to empty", r, threading.LarkID(r))
	case strings.Contains(r, "@"):
		a, err := mail.ParseAddress(r)
		if err != nil || a.Address != r || a.Name != "" {
			return "", "", fmt.Errorf("%q is not a bare email address (name@example.com)", clip(r, 200))
		}
		return r, "email", nil
	}
	return "", "", fmt.Errorf("%q is not a Lark chat (oc_…), user (ou_… open_id, on_… union_id) or email address", clip(r, 200))
}

// checkThread checks that a thread is joined by answering one of its
// messages: Lark posts into a thread only as a reply.
func checkThread(d *schema.Draft) error {
	tk := string(d.ThreadKey)
	if tk == "" {
		return nil
	}
	if !threadRE.MatchString(tk) && !omRE.MatchString(tk) {
		return fmt.Errorf("%q is not a Lark thread (omt_…) or message (om_…) id", clip(tk, 200))
	}
	if d.ReplyTo == "" {
		return fmt.Errorf("%s: Lark joins a thread only by answering one of its messages: set reply_to to one of them", tk)
	}
	return nil
}

// replyTarget returns where a reply to p goes: its recipients (the
// parent's chat), the id it answers (lark_om_…) and the thread.
func replyTarget(p *adapters.Parent) (to schema.Recipients, replyTo, thread string, err error) {
	if m := p.Message; m != nil {
		if m.Metadata.Extra.Recalls != "" {
			return nil, "", "", fmt.Errorf("it is the notice that %s was recalled, and Lark takes no reply to a recalled message", m.Metadata.Extra.Recalls)
		}
		chat := m.Session.ID
		if !strings.HasPrefix(chat, "oc_") || !receiveRE.MatchString(chat) {
			return nil, "", "", fmt.Errorf("the message's session id %q is not a Lark chat (oc_…)", clip(chat, 200))
		}
		if _, ok := omOf(m.ID); !ok {
			return nil, "", "", fmt.Errorf("the message's id %q is not a Lark message (lark_om_…)", clip(m.ID, 200))
		}
		return schema.Recipients{chat}, m.ID, string(m.Session.ThreadKey), nil
	}
	d := p.Draft
	if d == nil {
		return nil, "", "", errors.New("the message answered is empty")
	}
	if d.Delivery == nil || d.Delivery.Status != schema.DeliverySent || !omRE.MatchString(d.Delivery.ProviderMessageID) {
		// Lark answers a message only by its om_ id, which comes back
		// when the draft is posted.
		return nil, "", "", errors.New("our draft is not posted yet, so Lark has no message to answer: answer it once it is delivered, or drop reply_to and set to")
	}
	if len(d.To) != 1 {
		return nil, "", "", fmt.Errorf("our draft names no single Lark recipient (to %s)", strings.Join(d.To, ", "))
	}
	return d.To, threading.LarkID(d.Delivery.ProviderMessageID), string(d.ThreadKey), nil
}

// omOf returns the Lark message id of a Courier id lark_om_….
func omOf(id string) (string, bool) {
	om, ok := strings.CutPrefix(id, "lark_")
	if !ok || !omRE.MatchString(om) {
		return "", false
	}
	return om, true
}

func sameRecipients(a, b schema.Recipients) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
