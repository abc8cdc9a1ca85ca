package lark

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// TestResolveRecognizes: Lark's chat, user and message ids are Lark's; an
// address is the email provider's (a Lark draft to one names provider:
// lark), and other providers' ids are not Lark's.
func TestResolveRecognizes(t *testing.T) {
	for r, want := range map[string]bool{
		"oc_a1b2": true, "ou_7d8a6e": true, "on_94a1": true, "om_dc13264520392913993dd051dba21dcf": true,
		"ann@example.com": false, "C024BE91L": false, "U0G9QF9C6": false, "oc_": false, "oc_x y": false, "lark_om_1": false,
	} {
		if got := (Resolver{}).Recognizes(r); got != want {
			t.Errorf("Recognizes(%q) = %v; want %v", r, got, want)
		}
	}
}

// sndParent is an inbound Lark message in oc_team, in thread (or none).
func sndParent(id, thread string) *adapters.Parent {
	return &adapters.Parent{Message: &schema.Message{ID: "lark_" + id, Provider: schema.Lark,
		Session: schema.Session{ID: "oc_team", Type: schema.Group, ThreadKey: schema.NullString(thread)}}}
}

// TestResolveReply: a reply goes to its parent's chat, in its thread,
// with a uuid key of its own that Lark takes (36 characters, well under
// its 50 with a step's suffix).
func TestResolveReply(t *testing.T) {
	d := &schema.Draft{Provider: schema.Lark, ReplyTo: "lark_om_parent", Content: sndMD("ok")}
	if err := (Resolver{}).Resolve(d, sndParent("om_parent", "omt_t1"), adapters.ResolveOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if len(d.To) != 1 || d.To[0] != "oc_team" || d.ThreadKey != "omt_t1" || d.ReplyTo != "lark_om_parent" {
		t.Errorf("resolved to %v, thread %q, reply_to %q; want oc_team, omt_t1, lark_om_parent", d.To, d.ThreadKey, d.ReplyTo)
	}
	if _, err := uuid.Parse(d.IdempotencyKey); err != nil || len(d.IdempotencyKey) != 36 {
		t.Errorf("idempotency key %q is not a uuid", d.IdempotencyKey)
	}
	// Each draft has its own, even one whose file carried another's
	// (copied from an archived draft): Lark would answer that one's
	// message and send nothing.
	key := d.IdempotencyKey
	other := &schema.Draft{Provider: schema.Lark, To: schema.Recipients{"oc_team"}, IdempotencyKey: key}
	if err := (Resolver{}).Resolve(other, nil, adapters.ResolveOptions{}, nil); err != nil || other.IdempotencyKey == key || other.IdempotencyKey == "" {
		t.Errorf("another draft's key %q, %v; want a new one, not %q", other.IdempotencyKey, err, key)
	}
}

// TestResolveFollowUp: a follow-up to one of our delivered drafts answers
// the message it became (reply_to its lark_om_ id), in its thread; one to
// a draft not yet posted is refused, since Lark has nothing to answer.
func TestResolveFollowUp(t *testing.T) {
	ours := &schema.Draft{ID: "lark_out_1", Provider: schema.Lark, To: schema.Recipients{"ou_ann"}, ThreadKey: "omt_t2",
		Delivery: &schema.Delivery{Status: schema.DeliverySent, ProviderMessageID: "om_sent1"}}
	d := &schema.Draft{Provider: schema.Lark, ReplyTo: "lark_out_1", Content: sndMD("and one more thing")}
	if err := (Resolver{}).Resolve(d, &adapters.Parent{Draft: ours}, adapters.ResolveOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if d.ReplyTo != "lark_om_sent1" || len(d.To) != 1 || d.To[0] != "ou_ann" || d.ThreadKey != "omt_t2" {
		t.Errorf("follow-up: reply_to %q, to %v, thread %q; want lark_om_sent1, ou_ann, omt_t2", d.ReplyTo, d.To, d.ThreadKey)
	}
	queued := &schema.Draft{ID: "lark_out_2", Provider: schema.Lark, To: schema.Recipients{"oc_team"}}
	d = &schema.Draft{Provider: schema.Lark, ReplyTo: "lark_out_2", Content: sndMD("x")}
	err := (Resolver{}).Resolve(d, &adapters.Parent{Draft: queued}, adapters.ResolveOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "not posted yet") {
		t.Errorf("follow-up to a queued draft: %v; want an error saying it is not posted yet", err)
	}
}

// TestResolveRefuses: what Lark cannot do is refused naming the field.
func TestResolveRefuses(t *testing.T) {
	recall := sndParent("om_gone_recall", "")
	recall.Message.Metadata.Extra.Recalls = "lark_om_gone"
	for _, c := range []struct {
		name   string
		d      schema.Draft
		parent *adapters.Parent
		field  string
		says   string
	}{
		{"cc", schema.Draft{To: schema.Recipients{"oc_team"}, Cc: schema.Recipients{"ou_bob"}}, nil, "cc", "no cc"},
		{"bcc", schema.Draft{To: schema.Recipients{"oc_team"}, Bcc: schema.Recipients{"ou_bob"}}, nil, "bcc", "no bcc"},
		{"reply elsewhere", schema.Draft{To: schema.Recipients{"oc_other"}, ReplyTo: "lark_om_p"}, sndParent("om_p", ""), "to", "leave to empty"},
		{"wrong thread", schema.Draft{ReplyTo: "lark_om_p", ThreadKey: "omt_other"}, sndParent("om_p", "omt_t1"), "thread_key", "not the thread"},
		{"another message's id as thread", schema.Draft{ReplyTo: "lark_om_p", ThreadKey: "om_other"}, sndParent("om_p", ""),
			"thread_key", "om_other is not the thread of lark_om_p (none): leave thread_key empty in a reply"},
		{"the parent's root as thread", schema.Draft{ReplyTo: "lark_om_p", ThreadKey: "om_root"}, sndParent("om_p", "omt_t1"), "thread_key", "not the thread"},
		{"recall", schema.Draft{ReplyTo: "lark_om_gone_recall"}, recall, "reply_to", "recalled"},
		{"message as recipient", schema.Draft{To: schema.Recipients{"om_abc"}}, nil, "to", "set reply_to: lark_om_abc"},
		{"two recipients", schema.Draft{To: schema.Recipients{"ou_ann", "ou_bob"}}, nil, "to", "one chat or person"},
		{"address with a name", schema.Draft{To: schema.Recipients{"Ann <ann@example.com>"}}, nil, "to", "bare email address"},
		{"thread without reply", schema.Draft{To: schema.Recipients{"oc_team"}, ThreadKey: "omt_t1"}, nil, "thread_key", "set reply_to"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			d.Provider = schema.Lark
			err := (Resolver{}).Resolve(&d, c.parent, adapters.ResolveOptions{}, nil)
			if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v; want an error on %s saying %q", err, c.field, c.says)
			}
		})
	}
}

// TestResolveEmailRecipient: with provider: lark, an address is a Lark
// recipient (receive_id_type email), as the Sender's test of it sends.
func TestResolveEmailRecipient(t *testing.T) {
	d := &schema.Draft{Provider: schema.Lark, To: schema.Recipients{"ann@example.com"}, Content: sndMD("hi")}
	if err := (Resolver{}).Resolve(d, nil, adapters.ResolveOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if id, typ, err := receiveID(d.To[0]); err != nil || id != "ann@example.com" || typ != "email" {
		t.Errorf("receiveID = %q, %q, %v; want the address as email", id, typ, err)
	}
}

// TestResolveThreadAtParent: seed 004 §5.2's reply names the parent's own
// id as its thread_key: a thread opened at the parent, which the draft
// keeps (the Sender replies with reply_in_thread); a parent already in a
// thread is answered in that thread. Also for one of our own messages.
func TestResolveThreadAtParent(t *testing.T) {
	ours := &schema.Draft{ID: "lark_out_1", Provider: schema.Lark, To: schema.Recipients{"oc_team"},
		Delivery: &schema.Delivery{Status: schema.DeliverySent, ProviderMessageID: "om_sent1"}}
	for _, c := range []struct {
		name       string
		parent     *adapters.Parent
		replyTo    string
		key        string
		want       string
		wantTarget target
	}{
		{"top-level", sndParent("om_abc123", ""), "lark_om_abc123", "om_abc123", "om_abc123", target{reply: "om_abc123", inThread: true}},
		{"quoted chain", sndParent("om_p", "om_root"), "lark_om_p", "om_p", "om_p", target{reply: "om_p", inThread: true}},
		{"in a thread", sndParent("om_p", "omt_t1"), "lark_om_p", "om_p", "omt_t1", target{reply: "om_p", inThread: true}},
		{"our message", &adapters.Parent{Draft: ours}, "lark_out_1", "om_sent1", "om_sent1", target{reply: "om_sent1", inThread: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &schema.Draft{Provider: schema.Lark, To: schema.Recipients{"oc_team"}, ReplyTo: schema.NullString(c.replyTo), ThreadKey: schema.NullString(c.key), Content: sndMD("ok")}
			if err := (Resolver{}).Resolve(d, c.parent, adapters.ResolveOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			if string(d.ThreadKey) != c.want {
				t.Errorf("thread_key %q, want %q", d.ThreadKey, c.want)
			}
			if got, err := checkDraft(d); err != nil || got != c.wantTarget {
				t.Errorf("target %+v, %v; want %+v", got, err, c.wantTarget)
			}
		})
	}
}
