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

// workspace makes a workspace in ws (an empty folder) for courier against
// fake, socket mode, debounce off, and returns its HTTP address.
func workspace(b *testing.B, bin string, fake *slackfake.Server, ws string) string {
	b.Helper()
	if out, err := exec.Command(bin, "--root", ws, "init").CombinedOutput(); err != nil {
		b.Fatalf("init: %v\n%s", err, out)
	}
	secrets := filepath.Join(ws, "secrets")
	os.Mkdir(secrets, 0o700)
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
	return web
}

// slack is the Slack side of benchutil.Chat: the fake, the workspace, the
// events and the replies.
var slack = benchutil.Chat[*slackfake.Server]{
	Provider: "slack", Title: "Slack", NewFake: newFake, Workspace: workspace,
	Latencies:   func(b *testing.B, fake *slackfake.Server, n int) []time.Duration { return latencies(b, fake, 0, n) },
	Bare:        "bare slack-go handler + fsync",
	BareHandler: bareHandler,
	Draft: func(i int) string {
		return fmt.Sprintf("---\nreply_to: slack_%s_1700000000_%06d\n---\nRe-running **step %d** now; see [the runbook](https://example.com/rb/%d).\n", channel, i, i, i)
	},
	Delivered: func(fake *slackfake.Server) int { return len(fake.Posts()) },
	LoopName:  "slack-go PostMessage loop",
	Loop:      postLoop,
}

// BenchmarkEventToFile: event → durable file, Courier against a bare
// slack-go handler that writes and fsyncs the JSON before it acks; the
// two interleaved over -rounds rounds, each against a fresh fake Slack
// into a fresh folder (benchutil.Chat).
func BenchmarkEventToFile(b *testing.B) { slack.EventToFile(b, *eventsFlag) }

// BenchmarkReplies: drafts queued while the service is down, then posted
// by `courier serve` (from its start until the fake holds every post);
// against slack-go's PostMessage in a loop; interleaved likewise.
func BenchmarkReplies(b *testing.B) { slack.Replies(b, *repliesFlag) }

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

// postLoop is the baseline of BenchmarkReplies: slack-go's PostMessage,
// n replies in their threads, one after the other.
func postLoop(b *testing.B, fake *slackfake.Server, n int) func() {
	for i := range n { // the messages answered, as Courier's side has them
		event(fake, i)
	}
	o := fake.Options()
	api := slackapi.New(o.BotToken, slackapi.OptionAPIURL(fake.APIURL()))
	return func() {
		for i := 0; i < n; i++ {
			_, _, err := api.PostMessage(channel, slackapi.MsgOptionText(fmt.Sprintf("Re-running *step %d* now; see <https://example.com/rb/%d|the runbook>.", i, i), false),
				slackapi.MsgOptionTS(fmt.Sprintf("1700000000.%06d", i)))
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
