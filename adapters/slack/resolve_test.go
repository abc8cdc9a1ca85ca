package slack

import (
	"errors"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

func TestResolverRecognizes(t *testing.T) {
	for _, r := range []string{"C024BE91L", "G0123ABCD", "D024BE91L", "U024BE7LH", "W0123ABCD"} {
		if !(Resolver{}).Recognizes(r) {
			t.Errorf("%s not recognised", r)
		}
	}
	for _, r := range []string{"#general", "agent@example.com", "c024be91l", "C12", "X024BE91L", "om_abc123", "C024BE91L "} {
		if (Resolver{}).Recognizes(r) {
			t.Errorf("%q recognised as a Slack id", r)
		}
	}
}

// inbound is a Slack message as the mailbox holds it: thread is its
// thread_ts when it is a reply.
func inbound(channel, ts, thread string) *schema.Message {
	m := &schema.Message{ID: "slack_" + channel + "_" + replaceDot(ts), Provider: schema.Slack,
		Session: schema.Session{ID: channel, Type: schema.Group, ThreadKey: schema.NullString(thread)}}
	return m
}

func replaceDot(ts string) string {
	b := []byte(ts)
	for i := range b {
		if b[i] == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

func TestResolveReply(t *testing.T) {
	sent := func(to, channel, ts, thread string) *schema.Draft {
		return &schema.Draft{ID: "slack_out_1", Provider: schema.Slack, To: schema.Recipients{to}, ThreadKey: schema.NullString(thread),
			Delivery: &schema.Delivery{Status: schema.DeliverySent, ProviderMessageID: ts, Channel: channel}}
	}
	cases := []struct {
		name string
		par  *adapters.Parent
		// inherited is the thread_key the generic send step copied from
		// the parent's index entry (its session.thread_key).
		inherited          string
		wantTo, wantThread string
	}{
		{"top-level message: its own ts starts the thread", &adapters.Parent{Message: inbound("C024BE91L", "1355517523.000005", "")}, "",
			"C024BE91L", "1355517523.000005"},
		{"reply: the parent's thread", &adapters.Parent{Message: inbound("C024BE91L", "1355517600.000100", "1355517523.000005")}, "1355517523.000005",
			"C024BE91L", "1355517523.000005"},
		{"reply, thread_key not yet inherited", &adapters.Parent{Message: inbound("C024BE91L", "1355517600.000100", "1355517523.000005")}, "",
			"C024BE91L", "1355517523.000005"},
		{"DM", &adapters.Parent{Message: inbound("D024BE91L", "1355517523.000005", "")}, "",
			"D024BE91L", "1355517523.000005"},
		{"our top-level post, delivered", &adapters.Parent{Draft: sent("C024BE91L", "C024BE91L", "1700000000.000200", "")}, "",
			"C024BE91L", "1700000000.000200"},
		{"our DM to a user: the channel it was posted in", &adapters.Parent{Draft: sent("U024BE7LH", "D0ABCDEF1", "1700000000.000200", "")}, "",
			"D0ABCDEF1", "1700000000.000200"},
		{"our reply in a thread", &adapters.Parent{Draft: sent("C024BE91L", "C024BE91L", "1700000000.000200", "1355517523.000005")}, "1355517523.000005",
			"C024BE91L", "1355517523.000005"},
		// Seed 004 §5.2: thread_key the parent's own id (its ts) opens
		// the thread at the parent; a reply's is the thread it is in,
		// Slack's threads being one level deep.
		{"top-level message, thread_key its ts", &adapters.Parent{Message: inbound("C024BE91L", "1355517523.000005", "")}, "1355517523.000005",
			"C024BE91L", "1355517523.000005"},
		{"reply, thread_key its own ts", &adapters.Parent{Message: inbound("C024BE91L", "1355517600.000100", "1355517523.000005")}, "1355517600.000100",
			"C024BE91L", "1355517523.000005"},
		{"our reply in a thread, thread_key its ts", &adapters.Parent{Draft: sent("C024BE91L", "C024BE91L", "1700000000.000200", "1355517523.000005")}, "1700000000.000200",
			"C024BE91L", "1355517523.000005"},
		{"our top-level post, thread_key its ts", &adapters.Parent{Draft: sent("C024BE91L", "C024BE91L", "1700000000.000200", "")}, "1700000000.000200",
			"C024BE91L", "1700000000.000200"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &schema.Draft{Provider: schema.Slack, ReplyTo: "x", ThreadKey: schema.NullString(c.inherited), Body: "ok\n"}
			if err := (Resolver{}).Resolve(d, c.par, adapters.ResolveOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			if len(d.To) != 1 || d.To[0] != c.wantTo || string(d.ThreadKey) != c.wantThread {
				t.Errorf("to %v thread_key %q, want %s %s", d.To, d.ThreadKey, c.wantTo, c.wantThread)
			}
			if d.IdempotencyKey == "" || d.InboundID != "" {
				t.Errorf("idempotency_key %q inbound_id %q: want a key, and no inbound id before the post", d.IdempotencyKey, d.InboundID)
			}
		})
	}
}

func TestResolveNewMessage(t *testing.T) {
	keys := map[string]bool{}
	for _, to := range []schema.Recipients{{"C024BE91L"}, {"U024BE7LH"}, {"U024BE7LH", "W0123ABCD"}} {
		d := &schema.Draft{Provider: schema.Slack, To: to, Body: "hi\n"}
		if err := (Resolver{}).Resolve(d, nil, adapters.ResolveOptions{}, nil); err != nil {
			t.Fatalf("%v: %v", to, err)
		}
		if d.ThreadKey != "" || keys[d.IdempotencyKey] || d.IdempotencyKey == "" {
			t.Errorf("%v: thread_key %q, idempotency_key %q (want none, and a new key)", to, d.ThreadKey, d.IdempotencyKey)
		}
		keys[d.IdempotencyKey] = true
	}
	// A thread named by the draft itself, without reply_to.
	d := &schema.Draft{Provider: schema.Slack, To: schema.Recipients{"C024BE91L"}, ThreadKey: "1355517523.000005", Body: "hi\n"}
	if err := (Resolver{}).Resolve(d, nil, adapters.ResolveOptions{}, nil); err != nil || d.ThreadKey != "1355517523.000005" {
		t.Errorf("thread_key given: %v, %q", err, d.ThreadKey)
	}
}

func TestResolveRefuses(t *testing.T) {
	unsent := &schema.Draft{ID: "slack_out_1", Provider: schema.Slack, To: schema.Recipients{"C024BE91L"}}
	many := schema.Recipients{}
	for i := range 9 {
		many = append(many, "U00000000"+string(rune('0'+i)))
	}
	cases := []struct {
		name  string
		d     schema.Draft
		par   *adapters.Parent
		field string
	}{
		{"cc", schema.Draft{To: schema.Recipients{"C024BE91L"}, Cc: schema.Recipients{"C0ABCDEF1"}}, nil, "cc"},
		{"bcc", schema.Draft{To: schema.Recipients{"C024BE91L"}, Bcc: schema.Recipients{"U024BE7LH"}}, nil, "bcc"},
		{"not an id", schema.Draft{To: schema.Recipients{"#general"}}, nil, "to"},
		{"two channels", schema.Draft{To: schema.Recipients{"C024BE91L", "C0ABCDEF1"}}, nil, "to"},
		{"a channel and a user", schema.Draft{To: schema.Recipients{"U024BE7LH", "C0ABCDEF1"}}, nil, "to"},
		{"nine users", schema.Draft{To: many}, nil, "to"},
		{"thread_key not a ts", schema.Draft{To: schema.Recipients{"C024BE91L"}, ThreadKey: "email-thread:x@y"}, nil, "thread_key"},
		{"reply into another channel", schema.Draft{To: schema.Recipients{"C0ABCDEF1"}, ReplyTo: "m"},
			&adapters.Parent{Message: inbound("C024BE91L", "1355517523.000005", "")}, "to"},
		{"reply with another thread", schema.Draft{ThreadKey: "1111111111.000001", ReplyTo: "m"},
			&adapters.Parent{Message: inbound("C024BE91L", "1355517523.000005", "")}, "thread_key"},
		{"reply in a thread with another message's ts", schema.Draft{ThreadKey: "1355517599.000001", ReplyTo: "m"},
			&adapters.Parent{Message: inbound("C024BE91L", "1355517600.000100", "1355517523.000005")}, "thread_key"},
		{"reply to our draft not posted yet", schema.Draft{ReplyTo: "slack_out_1"}, &adapters.Parent{Draft: unsent}, "reply_to"},
		{"parent id of another channel", schema.Draft{ReplyTo: "m"},
			&adapters.Parent{Message: &schema.Message{ID: "slack_C0ABCDEF1_1355517523_000005", Session: schema.Session{ID: "C024BE91L"}}}, "reply_to"},
		{"parent whose session is not a channel", schema.Draft{ReplyTo: "m"},
			&adapters.Parent{Message: &schema.Message{ID: "slack_x_1355517523_000005", Session: schema.Session{ID: "x"}}}, "reply_to"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			d.Provider = schema.Slack
			err := (Resolver{}).Resolve(&d, c.par, adapters.ResolveOptions{}, nil)
			var errs schema.Errors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != c.field {
				t.Fatalf("error %v, want one naming %s", err, c.field)
			}
			if d.IdempotencyKey != "" {
				t.Errorf("refused, yet given idempotency_key %q", d.IdempotencyKey)
			}
		})
	}
}
