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

// workspace makes a workspace for courier against fake, ws mode, debounce
// off, and returns it and its HTTP address.
func workspace(b *testing.B, bin string, fake *larkfake.Server) (string, string) {
	b.Helper()
	ws := b.TempDir()
	if out, err := exec.Command(bin, "--root", ws, "init").CombinedOutput(); err != nil {
		b.Fatalf("init: %v\n%s", err, out)
	}
	secret := filepath.Join(b.TempDir(), "app_secret")
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
	return ws, web
}

// BenchmarkEventToFile: event → durable file, Courier against a bare SDK
// handler that writes and fsyncs the JSON before it returns (and the SDK
// acks).
func BenchmarkEventToFile(b *testing.B) {
	n := *eventsFlag
	bin := benchutil.CourierBin(b)

	fake := newFake(b)
	ws, web := workspace(b, bin, fake)
	s := testutil.StartServe(b, bin, web, "--root", ws, "serve")
	lat := latencies(b, fake, 0, n)
	s.Stop(b)
	files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound/lark/*.md"))
	if len(files) != n {
		b.Fatalf("%d files for %d events", len(files), n)
	}

	base := newFake(b)
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go bareHandler(ctx, base, dir)
	blat := latencies(b, base, 0, n)
	cancel()
	if got, _ := os.ReadDir(dir); len(got) != n {
		b.Fatalf("the baseline wrote %d files for %d events", len(got), n)
	}

	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		c, bl := benchutil.Pct(lat, p.q), benchutil.Pct(blat, p.q)
		target, met := "", ""
		if p.name == "p99" {
			target, met = "< 20 ms", fmt.Sprint(c < 20*time.Millisecond)
		}
		benchutil.Report(b, fmt.Sprintf("Lark event → durable file, %s over %d events", p.name, n), benchutil.Ms(c),
			"bare oapi-sdk-go ws handler + fsync "+benchutil.Ms(bl), fmt.Sprintf("%.2f×", float64(c)/float64(bl)), target, met)
	}
}

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

// BenchmarkReplies: drafts queued while the service is down, then sent by
// `courier serve`; against the SDK's Im.Message.Reply in a loop.
func BenchmarkReplies(b *testing.B) {
	n := *repliesFlag
	bin := benchutil.CourierBin(b)
	fake := newFake(b)
	ws, web := workspace(b, bin, fake)

	// The messages answered: in the mailbox and in Lark.
	s := testutil.StartServe(b, bin, web, "--root", ws, "serve")
	latencies(b, fake, 0, n)
	s.Stop(b)
	drafts := b.TempDir()
	for i := 0; i < n; i++ {
		d := filepath.Join(drafts, fmt.Sprintf("r%d.md", i))
		body := fmt.Sprintf("---\nreply_to: lark_om_bench_%06d\n---\nRe-running **step %d** now; see [the runbook](https://example.com/rb/%d).\n", i, i, i)
		os.WriteFile(d, []byte(body), 0o600)
		if out, err := exec.Command(bin, "--root", ws, "send", d).CombinedOutput(); err != nil {
			b.Fatalf("send %d: %v\n%s", i, err, out)
		}
	}

	start := time.Now()
	s = testutil.StartServe(b, bin, web, "--root", ws, "serve")
	if !testutil.Poll(10*time.Minute, func() bool { return len(fake.Sent()) >= n }) {
		b.Fatalf("%d of %d sent", len(fake.Sent()), n)
	}
	took := time.Since(start)
	if !testutil.Poll(time.Minute, func() bool {
		a, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive/lark/*.md"))
		return len(a) == n
	}) {
		b.Fatal("not every draft archived")
	}
	s.Stop(b)

	o := fake.Options()
	client := lark.NewClient(o.AppID, o.AppSecret, lark.WithOpenBaseUrl(fake.URL()), lark.WithLogLevel(larkcore.LogLevelError))
	bstart := time.Now()
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
	btook := time.Since(bstart)
	benchutil.Report(b, fmt.Sprintf("%d Lark replies queued → sent (service start included)", n), fmt.Sprintf("%.2f s, %.0f/s", took.Seconds(), float64(n)/took.Seconds()),
		fmt.Sprintf("oapi-sdk-go Reply loop %.2f s, %.0f/s", btook.Seconds(), float64(n)/btook.Seconds()), fmt.Sprintf("%.2f×", took.Seconds()/btook.Seconds()), "", "")
}
