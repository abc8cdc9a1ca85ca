package threading

import (
	"testing"

	"github.com/monoco/courier/schema"
)

func TestLark(t *testing.T) {
	tests := []struct {
		name string
		in   LarkRef
		want IMThread
	}{
		{
			name: "p2p top-level message is direct",
			in:   LarkRef{ChatID: "oc_p2p", ChatType: "p2p", MessageID: "om_1"},
			want: IMThread{SessionID: "oc_p2p", SessionType: schema.Direct},
		},
		{
			name: "group top-level message",
			in:   LarkRef{ChatID: "oc_g", ChatType: "group", MessageID: "om_1"},
			want: IMThread{SessionID: "oc_g", SessionType: schema.Group},
		},
		{
			name: "other chat types are group",
			in:   LarkRef{ChatID: "oc_t", ChatType: "topic_group", MessageID: "om_1"},
			want: IMThread{SessionID: "oc_t", SessionType: schema.Group},
		},
		{
			name: "missing chat type is group",
			in:   LarkRef{ChatID: "oc_x", MessageID: "om_1"},
			want: IMThread{SessionID: "oc_x", SessionType: schema.Group},
		},
		{
			name: "reply in a group without a thread: key is root_id",
			in:   LarkRef{ChatID: "oc_g", ChatType: "group", MessageID: "om_3", RootID: "om_1", ParentID: "om_2"},
			want: IMThread{SessionID: "oc_g", SessionType: schema.Group, ThreadKey: "om_1", ThreadRoot: "lark_om_1", ReplyTo: "lark_om_2"},
		},
		{
			name: "reply in a thread: key is thread_id, not root_id",
			in:   LarkRef{ChatID: "oc_g", ChatType: "group", MessageID: "om_3", ThreadID: "omt_9", RootID: "om_1", ParentID: "om_1"},
			want: IMThread{SessionID: "oc_g", SessionType: schema.Group, ThreadKey: "omt_9", ThreadRoot: "lark_om_1", ReplyTo: "lark_om_1"},
		},
		{
			name: "thread's first message: key but no root or parent",
			in:   LarkRef{ChatID: "oc_g", ChatType: "group", MessageID: "om_1", ThreadID: "omt_9"},
			want: IMThread{SessionID: "oc_g", SessionType: schema.Group, ThreadKey: "omt_9"},
		},
		{
			name: "root_id naming the message itself is no thread_root",
			in:   LarkRef{ChatID: "oc_g", ChatType: "group", MessageID: "om_1", ThreadID: "omt_9", RootID: "om_1"},
			want: IMThread{SessionID: "oc_g", SessionType: schema.Group, ThreadKey: "omt_9"},
		},
		{
			name: "p2p reply",
			in:   LarkRef{ChatID: "oc_p", ChatType: "p2p", MessageID: "om_2", RootID: "om_1", ParentID: "om_1"},
			want: IMThread{SessionID: "oc_p", SessionType: schema.Direct, ThreadKey: "om_1", ThreadRoot: "lark_om_1", ReplyTo: "lark_om_1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Lark(tt.in); got != tt.want {
				t.Errorf("Lark(%+v)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSlack(t *testing.T) {
	const parent = "slack_C024BE91L_1355517523_000005"
	tests := []struct {
		name string
		in   SlackRef
		want IMThread
	}{
		{
			name: "channel top-level message",
			in:   SlackRef{Channel: "C024BE91L", ChannelType: "channel", TS: "1355517523.000005"},
			want: IMThread{SessionID: "C024BE91L", SessionType: schema.Group},
		},
		{
			name: "im is direct",
			in:   SlackRef{Channel: "D024BE91L", ChannelType: "im", TS: "1355517523.000005"},
			want: IMThread{SessionID: "D024BE91L", SessionType: schema.Direct},
		},
		{
			name: "mpim is group",
			in:   SlackRef{Channel: "G024BE91L", ChannelType: "mpim", TS: "1355517523.000005"},
			want: IMThread{SessionID: "G024BE91L", SessionType: schema.Group},
		},
		{
			name: "private channel is group",
			in:   SlackRef{Channel: "G024BE91L", ChannelType: "group", TS: "1355517523.000005"},
			want: IMThread{SessionID: "G024BE91L", SessionType: schema.Group},
		},
		{
			name: "thread parent (thread_ts == ts) is top-level",
			in:   SlackRef{Channel: "C024BE91L", ChannelType: "channel", TS: "1355517523.000005", ThreadTS: "1355517523.000005"},
			want: IMThread{SessionID: "C024BE91L", SessionType: schema.Group},
		},
		{
			name: "reply: key thread_ts, root and reply_to the parent",
			in:   SlackRef{Channel: "C024BE91L", ChannelType: "channel", TS: "1355517599.000100", ThreadTS: "1355517523.000005"},
			want: IMThread{SessionID: "C024BE91L", SessionType: schema.Group, ThreadKey: "1355517523.000005", ThreadRoot: parent, ReplyTo: parent},
		},
		{
			name: "reply in an im",
			in:   SlackRef{Channel: "D024BE91L", ChannelType: "im", TS: "1355517599.000100", ThreadTS: "1355517523.000005"},
			want: IMThread{SessionID: "D024BE91L", SessionType: schema.Direct, ThreadKey: "1355517523.000005",
				ThreadRoot: "slack_D024BE91L_1355517523_000005", ReplyTo: "slack_D024BE91L_1355517523_000005"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Slack(tt.in); got != tt.want {
				t.Errorf("Slack(%+v)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSlackID(t *testing.T) {
	tests := []struct {
		name, channel, ts, want string
	}{
		{"design example", "C024BE91L", "1355517523.000005", "slack_C024BE91L_1355517523_000005"},
		{"channel case kept", "D0ABCdef1", "1.2", "slack_D0ABCdef1_1_2"},
		{"ts without a dot", "C1", "1355517523", "slack_C1_1355517523"},
		{"space trimmed", " C1 ", " 1.2 ", "slack_C1_1_2"},
		{"odd bytes made safe", "C1/x", "1.2.3", "slack_C1_x_1_2_3"},
		{"empty channel", "", "1.2", ""},
		{"empty ts", "C1", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SlackID(tt.channel, tt.ts)
			if got != tt.want {
				t.Errorf("SlackID(%q, %q) = %q, want %q", tt.channel, tt.ts, got, tt.want)
			}
			if got != "" && !schema.ValidID(got) {
				t.Errorf("SlackID(%q, %q) = %q is not a valid schema id", tt.channel, tt.ts, got)
			}
		})
	}
}

func TestLarkID(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"design example", "om_abc123", "lark_om_abc123"},
		{"real message id", "om_dc13264520392913993dd051dba21dcf", "lark_om_dc13264520392913993dd051dba21dcf"},
		{"dash kept", "om_a-b", "lark_om_a-b"},
		{"case kept", "om_ABC", "lark_om_ABC"},
		{"space trimmed", " om_1 ", "lark_om_1"},
		{"odd bytes made safe", "om_a.b/c", "lark_om_a_b_c"},
		{"non-ASCII made safe", "om_é", "lark_om___"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LarkID(tt.in)
			if got != tt.want {
				t.Errorf("LarkID(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got != "" && !schema.ValidID(got) {
				t.Errorf("LarkID(%q) = %q is not a valid schema id", tt.in, got)
			}
		})
	}
}

// Every id the package produces, from ordinary and odd inputs alike, is
// empty or a valid schema id.
func TestIDsValid(t *testing.T) {
	var ids []string
	for _, m := range []string{
		"<a@example>", `<"H000007100163fdf.1583792359.sx.f1-outsourcing.eu*"@MHS>`, "<日本@例え>",
		`<"we ird!#$%&'*+/=?^{|}~"@x>`, "<yes>", "bare@id", "", "<>",
	} {
		ids = append(ids, EmailID(m))
		th := EmailThread(Headers{MessageID: "<m@x>", InReplyTo: m, References: m}, "")
		ids = append(ids, th.ReplyToID(), th.RootID())
	}
	ids = append(ids, "email_"+SyntheticUID("a", "b", "c", []byte("\x00\xff")))
	for _, ch := range []string{"C024BE91L", "D0ABC", "G012", "c1", " C1 ", "C-1", "", "C.1"} {
		for _, ts := range []string{"1355517523.000005", "1355517523", " 1.2 ", "1.2.3", "", "x y"} {
			ids = append(ids, SlackID(ch, ts))
			s := Slack(SlackRef{Channel: ch, TS: "1.0", ThreadTS: ts})
			ids = append(ids, s.ThreadRoot, s.ReplyTo)
		}
	}
	for _, m := range []string{"om_dc13264520392913993dd051dba21dcf", "om_a-b", "om_ä", "om x", "om.x", "omt_1", "", " "} {
		ids = append(ids, LarkID(m))
		l := Lark(LarkRef{ChatID: "oc_1", MessageID: "om_self", RootID: m, ParentID: m})
		ids = append(ids, l.ThreadRoot, l.ReplyTo)
	}
	n := 0
	for _, id := range ids {
		if id == "" {
			continue
		}
		n++
		if !schema.ValidID(id) {
			t.Errorf("%q is not a valid schema id", id)
		}
	}
	if n < 50 {
		t.Errorf("only %d non-empty ids checked", n)
	}
}
