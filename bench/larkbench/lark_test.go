package larkbench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
)

var (
	eventsFlag  = flag.Int("events", 5000, "events in the event → file benchmark")
	repliesFlag = flag.Int("replies", 1000, "drafts in the replies benchmark")
)

const chat = "oc_bench"

var epoch = time.Unix(1700000000, 0)

func newFake(b *testing.B) *larkfake.Server {
	fake := larkfake.New(b, larkfake.Options{PingInterval: 30 * time.Second})
	fake.AddUser(larkfake.User{OpenID: "ou_ann", Name: "Ann Lee"})
	fake.AddChat(larkfake.Chat{ChatID: chat, Name: "bench"})
	return fake
}

// event is the im.message.receive_v1 envelope of message i (a post with
// bold, code and a link), added to the fake's history first as Lark has it.
func event(fake *larkfake.Server, i int) json.RawMessage {
	mid := fmt.Sprintf("om_bench_%06d", i)
	at := epoch.Add(time.Duration(i) * time.Millisecond)
	post, _ := json.Marshal(map[string]any{"title": "", "content": [][]map[string]any{{
		{"tag": "text", "text": fmt.Sprintf("Message %d: the ", i)},
		{"tag": "text", "text": "nightly build", "style": []string{"bold"}},
		{"tag": "text", "text": " failed at step "},
		{"tag": "a", "text": "the log", "href": fmt.Sprintf("https://ci.example.com/%d", i)},
	}}})
	fake.AddMessage(chat, larkfake.Message{MessageID: mid, ChatID: chat, MsgType: "post", Content: string(post), CreateTime: at, SenderID: "ou_ann"})
	ms := strconv.FormatInt(at.UnixMilli(), 10)
	b, _ := json.Marshal(map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": fmt.Sprintf("ev_bench_%06d", i), "event_type": "im.message.receive_v1", "create_time": ms,
			"app_id": fake.Options().AppID, "tenant_key": "tenant_fake"},
		"event": map[string]any{"message": map[string]any{"message_id": mid, "chat_id": chat, "chat_type": "group", "message_type": "post",
			"content": string(post), "create_time": ms},
			"sender": map[string]any{"sender_id": map[string]any{"open_id": "ou_ann"}, "sender_type": "user", "tenant_key": "tenant_fake"}}})
	return b
}

// latencies sends n events one at a time (from first) and returns the time
// from each frame written to its ack read.
func latencies(b *testing.B, fake *larkfake.Server, first, n int) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := make([]time.Duration, 0, n)
	for i := first; i < first+n; i++ {
		payload := event(fake, i)
		start := time.Now()
		id, err := fake.SendEvent(ctx, payload)
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-fake.Acked(id):
		case <-ctx.Done():
			b.Fatalf("event %d never acked", i)
		}
		out = append(out, time.Since(start))
		if a, _ := fake.Ack(id); a.Code != 200 {
			b.Fatalf("event %d acked with %d", i, a.Code)
		}
	}
	return out
}

// workspace makes a workspace in ws (an empty folder) for courier against
// fake, ws mode, debounce off, and returns its HTTP address.
func workspace(b *testing.B, bin string, fake *larkfake.Server, ws string) string {
	b.Helper()
	if out, err := exec.Command(bin, "--root", ws, "init").CombinedOutput(); err != nil {
		b.Fatalf("init: %v\n%s", err, out)
	}
	secret := filepath.Join(ws, "app_secret")
	o := fake.Options()
	os.WriteFile(secret, []byte(o.AppSecret), 0o600)
	web := testutil.FreeAddr(b)
	cfg := fmt.Sprintf(`courier:
  http: {listen: %s}
  debounce: {window_ms: 0}
  adapters:
    email: {enabled: false}
    lark: {enabled: true, mode: ws, domain: %s, app_id: %s, app_secret_file: %s}
`, web, fake.URL(), o.AppID, secret)
	if err := os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(cfg), 0o640); err != nil {
		b.Fatal(err)
	}
	return web
}

// larkChat is the Lark side of benchutil.Chat: the fake, the workspace,
// the events and the replies.
var larkChat = benchutil.Chat[*larkfake.Server]{
	Provider: "lark", Title: "Lark", NewFake: newFake, Workspace: workspace,
	Latencies:   func(b *testing.B, fake *larkfake.Server, n int) []time.Duration { return latencies(b, fake, 0, n) },
	Bare:        "bare oapi-sdk-go ws handler + fsync",
	BareHandler: bareHandler,
	Draft: func(i int) string {
		return fmt.Sprintf("---\nreply_to: lark_om_bench_%06d\n---\nRe-running **step %d** now; see [the runbook](https://example.com/rb/%d).\n", i, i, i)
	},
	Delivered: func(fake *larkfake.Server) int { return len(fake.Sent()) },
	LoopName:  "oapi-sdk-go Reply loop",
	Loop:      replyLoop,
}

// BenchmarkEventToFile: event → durable file, Courier against a bare SDK
// handler that writes and fsyncs the JSON before it returns (and the SDK
// acks); the two interleaved over -rounds rounds, each against a fresh
// fake Lark into a fresh folder (benchutil.Chat).
func BenchmarkEventToFile(b *testing.B) { larkChat.EventToFile(b, *eventsFlag) }

// BenchmarkReplies: drafts queued while the service is down, then sent by
// `courier serve`; against the SDK's Im.Message.Reply in a loop;
// interleaved likewise.
func BenchmarkReplies(b *testing.B) { larkChat.Replies(b, *repliesFlag) }

// bareHandler is what a user would write without Courier: the SDK's ws
// client, each message event's JSON written to a file and fsynced in the
// handler (the SDK acks when it returns).
func bareHandler(ctx context.Context, fake *larkfake.Server, dir string) {
	o := fake.Options()
	d := dispatcher.NewEventDispatcher("", "").OnP2MessageReceiveV1(func(_ context.Context, ev *larkim.P2MessageReceiveV1) error {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, *ev.Event.Message.MessageId+".json"))
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write(data); err != nil {
			return err
		}
		return f.Sync()
	})
	c := larkws.NewClient(o.AppID, o.AppSecret, larkws.WithEventHandler(d), larkws.WithDomain(fake.URL()), larkws.WithLogLevel(larkcore.LogLevelError))
	c.Start(ctx)
}

// replyLoop is the baseline of BenchmarkReplies: the SDK's
// Im.Message.Reply, n replies, one after the other.
func replyLoop(b *testing.B, fake *larkfake.Server, n int) func() {
	for i := range n { // the messages answered, as Courier's side has them
		event(fake, i)
	}
	o := fake.Options()
	client := lark.NewClient(o.AppID, o.AppSecret, lark.WithOpenBaseUrl(fake.URL()), lark.WithLogLevel(larkcore.LogLevelError))
	return func() {
		for i := 0; i < n; i++ {
			post, _ := json.Marshal(map[string]any{"zh_cn": map[string]any{"content": [][]map[string]any{{
				{"tag": "text", "text": "Re-running "}, {"tag": "text", "text": fmt.Sprintf("step %d", i), "style": []string{"bold"}},
				{"tag": "text", "text": " now; see "}, {"tag": "a", "text": "the runbook", "href": fmt.Sprintf("https://example.com/rb/%d", i)}}}}})
			resp, err := client.Im.Message.Reply(context.Background(), larkim.NewReplyMessageReqBuilder().MessageId(fmt.Sprintf("om_bench_%06d", i)).
				Body(larkim.NewReplyMessageReqBodyBuilder().MsgType("post").Content(string(post)).Uuid(fmt.Sprintf("bench-%d", i)).Build()).Build())
			if err != nil || !resp.Success() {
				b.Fatalf("reply %d: %v %+v", i, err, resp)
			}
		}
	}
}
