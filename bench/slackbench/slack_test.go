package slackbench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/monoco/courier/bench/internal/benchutil"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
)

var (
	eventsFlag  = flag.Int("events", 5000, "events in the event → file benchmark")
	repliesFlag = flag.Int("replies", 1000, "drafts in the replies benchmark")
)

const channel = "C0BENCH01"

func newFake(b *testing.B) *slackfake.Server {
	fake := slackfake.New(b, slackfake.Options{})
	fake.AddUser(slackapi.User{ID: "U0ANN1234", Name: "ann", Profile: slackapi.UserProfile{DisplayName: "Ann"}})
	fake.AddConversation(slackapi.Channel{GroupConversation: slackapi.GroupConversation{Name: "bench",
		Conversation: slackapi.Conversation{ID: channel}}, IsMember: true})
	return fake
}

// event is the Events API callback of message i, added to the fake's
// history first as Slack has it.
func event(fake *slackfake.Server, i int) json.RawMessage {
	ts := fmt.Sprintf("1700000000.%06d", i)
	text := fmt.Sprintf("Message %d: the *nightly build* failed at step `link`, see <https://ci.example.com/%d|the log>.", i, i)
	fake.AddMessage(channel, slackapi.Message{Msg: slackapi.Msg{Type: "message", User: "U0ANN1234", Timestamp: ts, Text: text}})
	b, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T0FAKE", "event_id": fmt.Sprintf("Ev%08d", i),
		"event_time": 1700000000, "event": map[string]any{"type": "message", "channel": channel, "channel_type": "channel",
			"user": "U0ANN1234", "ts": ts, "event_ts": ts, "text": text}})
	return b
}

// latencies sends n events one at a time (from first) and returns the time
// from each frame written to its ack read.
func latencies(b *testing.B, fake *slackfake.Server, first, n int) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := make([]time.Duration, 0, n)
	for i := first; i < first+n; i++ {
		payload := event(fake, i)
		start := time.Now()
		env, err := fake.SendEvent(ctx, payload)
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-fake.Acked(env):
		case <-ctx.Done():
			b.Fatalf("event %d never acked", i)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// workspace makes a workspace for courier against fake, socket mode,
// debounce off, and returns it and its HTTP address.
func workspace(b *testing.B, bin string, fake *slackfake.Server) (string, string) {
	b.Helper()
	ws := b.TempDir()
	if out, err := exec.Command(bin, "--root", ws, "init").CombinedOutput(); err != nil {
		b.Fatalf("init: %v\n%s", err, out)
	}
	secrets := b.TempDir()
	o := fake.Options()
	os.WriteFile(filepath.Join(secrets, "bot"), []byte(o.BotToken), 0o600)
	os.WriteFile(filepath.Join(secrets, "app"), []byte(o.AppToken), 0o600)
	web := testutil.FreeAddr(b)
	cfg := fmt.Sprintf(`courier:
  http: {listen: %s}
  debounce: {window_ms: 0}
  adapters:
    email: {enabled: false}
    slack: {enabled: true, mode: socket, api_url: %s, bot_token_file: %s, app_token_file: %s}
`, web, fake.APIURL(), filepath.Join(secrets, "bot"), filepath.Join(secrets, "app"))
	if err := os.WriteFile(filepath.Join(ws, ".monoco/config/courier.yaml"), []byte(cfg), 0o640); err != nil {
		b.Fatal(err)
	}
	return ws, web
}

// BenchmarkEventToFile: event → durable file, Courier against a bare
// slack-go handler that writes and fsyncs the JSON before it acks.
func BenchmarkEventToFile(b *testing.B) {
	n := *eventsFlag
	bin := benchutil.CourierBin(b)

	fake := newFake(b)
	ws, web := workspace(b, bin, fake)
	s := testutil.StartServe(b, bin, web, "--root", ws, "serve")
	lat := latencies(b, fake, 0, n)
	s.Stop(b)
	files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound/slack/*.md"))
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
		benchutil.Report(b, fmt.Sprintf("Slack event → durable file, %s over %d events", p.name, n), benchutil.Ms(c),
			"bare slack-go handler + fsync "+benchutil.Ms(bl), fmt.Sprintf("%.2f×", float64(c)/float64(bl)), target, met)
	}
}

// bareHandler is what a user would write without Courier: slack-go's
// socketmode client, each event's JSON written to a file and fsynced, then
// acked.
func bareHandler(ctx context.Context, fake *slackfake.Server, dir string) {
	o := fake.Options()
	api := slackapi.New(o.BotToken, slackapi.OptionAPIURL(fake.APIURL()), slackapi.OptionAppLevelToken(o.AppToken))
	client := socketmode.New(api)
	go func() {
		for ev := range client.Events {
			if ev.Type != socketmode.EventTypeEventsAPI {
				continue
			}
			cb, ok := ev.Data.(slackevents.EventsAPIEvent)
			if !ok {
				continue
			}
			inner, _ := json.Marshal(cb.InnerEvent.Data)
			name := filepath.Join(dir, ev.Request.EnvelopeID+".json")
			f, err := os.Create(name)
			if err == nil {
				f.Write(inner)
				f.Sync()
				f.Close()
			}
			client.Ack(*ev.Request)
		}
	}()
	client.RunContext(ctx)
}

// BenchmarkReplies: drafts queued while the service is down, then posted
// by `courier serve`; against slack-go's PostMessage in a loop.
func BenchmarkReplies(b *testing.B) {
	n := *repliesFlag
	bin := benchutil.CourierBin(b)
	fake := newFake(b)
	ws, web := workspace(b, bin, fake)

	// The messages answered: in the mailbox and in Slack.
	s := testutil.StartServe(b, bin, web, "--root", ws, "serve")
	latencies(b, fake, 0, n)
	s.Stop(b)
	drafts := b.TempDir()
	for i := 0; i < n; i++ {
		d := filepath.Join(drafts, fmt.Sprintf("r%d.md", i))
		body := fmt.Sprintf("---\nreply_to: slack_%s_1700000000_%06d\n---\nRe-running **step %d** now; see [the runbook](https://example.com/rb/%d).\n", channel, i, i, i)
		os.WriteFile(d, []byte(body), 0o600)
		if out, err := exec.Command(bin, "--root", ws, "send", d).CombinedOutput(); err != nil {
			b.Fatalf("send %d: %v\n%s", i, err, out)
		}
	}

	start := time.Now()
	s = testutil.StartServe(b, bin, web, "--root", ws, "serve")
	if !testutil.Poll(10*time.Minute, func() bool { return len(fake.Posts()) >= n }) {
		b.Fatalf("%d of %d posted", len(fake.Posts()), n)
	}
	took := time.Since(start)
	if !testutil.Poll(time.Minute, func() bool {
		a, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive/slack/*.md"))
		return len(a) == n
	}) {
		b.Fatal("not every draft archived")
	}
	s.Stop(b)

	o := fake.Options()
	api := slackapi.New(o.BotToken, slackapi.OptionAPIURL(fake.APIURL()))
	bstart := time.Now()
	for i := 0; i < n; i++ {
		_, _, err := api.PostMessage(channel, slackapi.MsgOptionText(fmt.Sprintf("Re-running *step %d* now; see <https://example.com/rb/%d|the runbook>.", i, i), false),
			slackapi.MsgOptionTS(fmt.Sprintf("1700000000.%06d", i)))
		if err != nil {
			b.Fatal(err)
		}
	}
	btook := time.Since(bstart)
	benchutil.Report(b, fmt.Sprintf("%d Slack replies queued → posted (service start included)", n), fmt.Sprintf("%.2f s, %.0f/s", took.Seconds(), float64(n)/took.Seconds()),
		fmt.Sprintf("slack-go PostMessage loop %.2f s, %.0f/s", btook.Seconds(), float64(n)/btook.Seconds()), fmt.Sprintf("%.2f×", took.Seconds()/btook.Seconds()), "", "")
}
