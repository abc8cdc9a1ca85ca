package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/schema"
)

// seed52Draft is the outbound example of seed 004 §5.2, as written there:
// a card answering lark_om_abc123 with thread_key om_abc123, the parent's
// own id, which opens a thread at the parent.
const seed52Draft = `---
to: "oc_123456"
provider: lark
reply_to: "lark_om_abc123"
thread_key: "om_abc123"
type: card
content:
  card:
    header:
      title: "Bug 分析完成"
      template: "green"
    elements:
      - tag: div
        text: "问题已定位：内存溢出"
      - tag: action
        actions:
          - tag: button
            text: "查看 PR"
            url: "https://github.com/..."
artifacts: []
options:
  silent: false
---
`

// larkReplyEvent is an im.message.receive_v1 envelope of a text message
// in a thread, from a user or (senderType app) the app itself.
func larkReplyEvent(eventID, messageID, chatID, sender, senderType string, created time.Time, text, threadID, rootID, parentID string) json.RawMessage {
	content, _ := json.Marshal(map[string]string{"text": text})
	msg := map[string]any{"message_id": messageID, "chat_id": chatID, "chat_type": "group", "message_type": "text",
		"content": string(content), "create_time": strconv.FormatInt(created.UnixMilli(), 10),
		"thread_id": threadID, "root_id": rootID, "parent_id": parentID}
	b, _ := json.Marshal(map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": eventID, "event_type": "im.message.receive_v1", "create_time": strconv.FormatInt(created.UnixMilli(), 10),
			"token": larkVerificationToken, "app_id": larkAppID, "tenant_key": "tenant_fake"},
		"event": map[string]any{"message": msg, "sender": map[string]any{"sender_id": map[string]any{"open_id": sender}, "sender_type": senderType, "tenant_key": "tenant_fake"}}})
	return b
}

// sendLarkEvent sends an event over the long connection and waits for its
// ack.
func sendLarkEvent(ctx context.Context, t *testing.T, fake *larkfake.Server, s *testutil.Serve, ev json.RawMessage) {
	t.Helper()
	id, err := fake.SendEvent(ctx, ev)
	if err != nil {
		t.Fatalf("send the event: %v\n%s", err, s.Log())
	}
	select {
	case <-fake.Acked(id):
	case <-ctx.Done():
		t.Fatalf("the event was not acked\n%s", s.Log())
	}
}

// archivedDraft reads the one draft archived for provider.
func archivedDraft(t *testing.T, ws, provider string) *schema.Draft {
	t.Helper()
	archived, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive", provider, "*.md"))
	if len(archived) != 1 {
		t.Fatalf("archived drafts %v", archived)
	}
	b, err := os.ReadFile(archived[0])
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := schema.ParseDraft(b)
	if err != nil {
		t.Fatalf("%s: %v", archived[0], err)
	}
	return d
}

// Seed 004 §5.2 on the real service against the fake Lark: its example
// draft is accepted by `courier send` and delivered as a reply to
// om_abc123 with reply_in_thread, which opens a thread at it; the archived
// draft names that thread; the app's echo writes nothing, and a person's
// answer in the thread lands in it, with the draft's correlation id. A
// thread_key that is neither the parent's thread nor its id is refused.
func TestSendSeedThreadReplyLark(t *testing.T) {
	fake := newLarkFake(t)
	fake.AddChat(larkfake.Chat{ChatID: "oc_123456", Name: "Monoco Dev Group"})
	web := testutil.FreeAddr(t)
	ws := larkWorkspace(t, fake, "ws", web)
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// §4.1: the message answered, top-level in the group.
	fake.AddMessage("oc_123456", larkfake.Message{MessageID: "om_abc123", ChatID: "oc_123456", Content: `{"text":"@Prime 帮我分析一下这个 Bug"}`, SenderID: "ou_ann"})
	sendLarkEvent(ctx, t, fake, s, larkEvent("ev_abc123", "om_abc123", "oc_123456", "group", "ou_ann", time.Now(), "@Prime 帮我分析一下这个 Bug", "", ""))
	if larkFiles(t, ws)["lark_om_abc123"] == nil {
		t.Fatalf("the parent was not written\n%s", s.Log())
	}

	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong.md")
	os.WriteFile(wrong, []byte(strings.Replace(seed52Draft, `thread_key: "om_abc123"`, `thread_key: "om_other"`, 1)), 0o600)
	if _, e, code := cli(t, ws, "", "send", wrong); code != exitDataErr || !strings.Contains(e, "thread_key: om_other is not the thread of lark_om_abc123 (none): leave thread_key empty in a reply") {
		t.Errorf("a thread_key of another message: exit %d %s", code, e)
	}

	draft := filepath.Join(dir, "seed52.md")
	os.WriteFile(draft, []byte(seed52Draft), 0o600)
	if _, e, code := cli(t, ws, "", "send", "--correlation", "task_bug_789", draft); code != 0 {
		t.Fatalf("send the §5.2 draft: %d %s", code, e)
	}
	if !testutil.Poll(20*time.Second, func() bool { return len(fake.Sent()) == 1 }) {
		t.Fatalf("the reply was not sent\n%s", s.Log())
	}
	sent := fake.Sent()[0]
	if sent.Route != larkfake.RouteReply || sent.ParentID != "om_abc123" || !sent.ReplyInThread || sent.MsgType != "interactive" ||
		!strings.Contains(sent.Content, "内存溢出") || !strings.HasPrefix(sent.ThreadID, "omt_") {
		t.Fatalf("sent %+v; want an interactive reply to om_abc123 opening a thread", sent)
	}
	testutil.WaitFor(t, 10*time.Second, "the draft archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 1 })
	if d := archivedDraft(t, ws, "lark"); string(d.ThreadKey) != sent.ThreadID || d.Delivery == nil || d.Delivery.ProviderMessageID != sent.MessageID {
		t.Errorf("archived draft: thread_key %q, delivery %+v; want the thread opened, %s", d.ThreadKey, d.Delivery, sent.ThreadID)
	}

	// The app's own message comes back as an event: nothing is written.
	n := len(larkFiles(t, ws))
	sendLarkEvent(ctx, t, fake, s, larkReplyEvent("ev_echo", sent.MessageID, "oc_123456", larkAppID, "app", time.Now(), "card", sent.ThreadID, "om_abc123", "om_abc123"))
	if got := len(larkFiles(t, ws)); got != n {
		t.Errorf("the echo of our reply: %d files, want %d", got, n)
	}
	// Someone answers our reply in the thread: it lands in that thread,
	// rooted at om_abc123, and keeps the draft's correlation id.
	sendLarkEvent(ctx, t, fake, s, larkReplyEvent("ev_answer", "om_answer", "oc_123456", "ou_bob", "user", time.Now(), "请提供错误日志",
		sent.ThreadID, "om_abc123", sent.MessageID))
	a := larkFiles(t, ws)["lark_om_answer"]
	if a == nil {
		t.Fatalf("the answer was not written\n%s", s.Log())
	}
	if string(a.Session.ThreadKey) != sent.ThreadID || a.ThreadRoot != "lark_om_abc123" || a.ReplyTo.String() != "lark_"+sent.MessageID || a.CorrelationID != "task_bug_789" {
		t.Errorf("the answer: thread_key %q thread_root %q reply_to %q correlation %q", a.Session.ThreadKey, a.ThreadRoot, a.ReplyTo, a.CorrelationID)
	}
	out, _, _ := cli(t, ws, "", "thread", sent.ThreadID, "--format", "json")
	for _, id := range []string{"lark_om_abc123", "lark_om_answer", "lark_out_"} {
		if !strings.Contains(out, id) {
			t.Errorf("courier thread %s does not list %s:\n%s", sent.ThreadID, id, out)
		}
	}
	s.Stop(t)
}

// Seed 004 §5.2 in Slack: thread_key the parent's own id (its ts) opens
// the thread at the parent (thread_ts = its ts); for a parent that is a
// reply, it is the thread the parent is in (Slack's threads are one level
// deep). A person's answer lands in the thread with the draft's
// correlation id. Another ts is refused with the same message as before.
func TestSendSeedThreadReplySlack(t *testing.T) {
	fake := newSlackFake(t)
	web := testutil.FreeAddr(t)
	ws := slackWorkspace(t, fake, "socket", web, "")
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked := func(env string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("send the event: %v\n%s", err, s.Log())
		}
		select {
		case <-fake.Acked(env):
		case <-ctx.Done():
			t.Fatalf("the event was not acked\n%s", s.Log())
		}
	}
	const top, reply = "1700000001.000100", "1700000002.000200"
	acked(sendSlack(ctx, fake, "Ev01", "C0OPS1234", "U0ANN1234", top, "", "Deploy failed"))
	acked(sendSlack(ctx, fake, "Ev02", "C0OPS1234", "U0ANN1234", reply, top, "the logs are in S3"))

	dir := t.TempDir()
	write := func(name, replyTo, threadKey string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("---\nprovider: slack\nreply_to: \""+replyTo+"\"\nthread_key: \""+threadKey+"\"\ncorrelation_id: task-7\n---\nOn it.\n"), 0o600)
		return p
	}
	if _, e, code := cli(t, ws, "", "send", write("wrong.md", "slack_C0OPS1234_1700000002_000200", "1700000001.000999")); code != exitDataErr ||
		!strings.Contains(e, "thread_key: 1700000001.000999 is not the thread of slack_C0OPS1234_1700000002_000200 (1700000001.000100): leave thread_key empty in a reply") {
		t.Errorf("a thread_key of another message: exit %d %s", code, e)
	}
	for i, c := range []struct{ replyTo, key, want string }{
		{"slack_C0OPS1234_1700000001_000100", top, top},
		{"slack_C0OPS1234_1700000002_000200", reply, top},
	} {
		if _, e, code := cli(t, ws, "", "send", write("d"+strconv.Itoa(i)+".md", c.replyTo, c.key)); code != 0 {
			t.Fatalf("send thread_key %s answering %s: %d %s", c.key, c.replyTo, code, e)
		}
		if !testutil.Poll(20*time.Second, func() bool { return len(fake.Posts()) == i+1 }) {
			t.Fatalf("the reply was not posted\n%s", s.Log())
		}
		if p := fake.Posts()[i]; p.Channel != "C0OPS1234" || p.ThreadTS != c.want {
			t.Errorf("answering %s with thread_key %s: posted in %s thread_ts %q, want %s", c.replyTo, c.key, p.Channel, p.ThreadTS, c.want)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the drafts archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 2 })
	// Slack's echo of our post writes nothing; Ann's answer to it lands
	// in the thread and keeps task-7.
	p := fake.Posts()[0]
	acked(fake.SendEvent(ctx, slackMessage("Ev03", "C0OPS1234", "channel", "U0BOT", p.TS, top, p.Text)))
	fake.AddMessage("C0OPS1234", slackapi.Message{Msg: slackapi.Msg{Type: "message", User: "U0ANN1234", Timestamp: "1700000009.000300", ThreadTimestamp: top, Text: "thanks"}})
	acked(fake.SendEvent(ctx, slackMessage("Ev04", "C0OPS1234", "channel", "U0ANN1234", "1700000009.000300", top, "thanks")))
	files := slackFiles(t, ws)
	if len(files) != 3 {
		t.Errorf("%d files, want Ann's three (the echo of our post dropped)", len(files))
	}
	if a := files["slack_C0OPS1234_1700000009_000300"]; a == nil || string(a.Session.ThreadKey) != top || a.CorrelationID != "task-7" {
		t.Errorf("Ann's answer: %+v", a)
	}
	s.Stop(t)
}
