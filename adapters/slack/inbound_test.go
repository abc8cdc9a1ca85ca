package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// inWorld is a fake Slack, the real adapter pointed at it, and a real
// mailbox behind the real ingest pipeline: the transports' tests assert
// on the files written, not on what a double recorded.
type inWorld struct {
	fake *slackfake.Server
	a    *Adapter
	r    *receiver
	mb   *mailbox.Mailbox
	pipe *ingest.Pipeline
	// sink is pipe with the mailbox's dead letters, as the service
	// gives it to Sources and Webhooks.
	sink adapters.DeadLetterSink
	dl   *mailbox.DeadLetters
}

const inSecret = "8f742231b10e8888abcd99yyyzzz85a5"

func newInWorld(t testing.TB, mode string) *inWorld {
	t.Helper()
	fake := slackfake.New(t, slackfake.Options{PingInterval: 20 * time.Millisecond})
	w := wstest.New(t, nil)
	mb, dz, pipe := w.MB, w.DZ, w.Pipe
	o := fake.Options()
	a := newAdapter(Options{Config: Config{Enabled: true, Mode: mode,
		BotToken: confkit.Secret(o.BotToken), AppToken: confkit.Secret(o.AppToken),
		SigningSecret: confkit.Secret(inSecret), APIURL: fake.APIURL()}, Dropzone: dz})
	dl := mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{})
	sink := service.NewDeadLetterSink(pipe, dl, []confkit.Secret{confkit.Secret(inSecret), confkit.Secret(o.BotToken)}, slog.New(slog.DiscardHandler))
	return &inWorld{fake: fake, a: a, r: newReceiver(a), mb: mb, pipe: pipe, sink: sink, dl: dl}
}

// deadLetters returns the raw dead letters kept, payload and reason by
// payload name.
func (w *inWorld) deadLetters(t testing.TB) map[string][2]string {
	t.Helper()
	dir := w.mb.Dir(mailbox.BoxDeadletter, schema.Slack)
	names, _ := filepath.Glob(filepath.Join(dir, "*_raw_*.json"))
	out := map[string][2]string{}
	for _, n := range names {
		payload, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		reason, err := os.ReadFile(n + ".reason")
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = [2]string{string(payload), string(reason)}
	}
	return out
}

// files returns the inbound Slack files by message id.
func (w *inWorld) files(t testing.TB) map[string]*schema.Message {
	t.Helper()
	dir := w.mb.Dir(mailbox.BoxInbound, schema.Slack)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*schema.Message{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m, err := schema.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		testutil.ValidateInbound(t, e.Name(), data)
		if _, dup := out[m.ID]; dup {
			t.Errorf("two files for %s", m.ID)
		}
		out[m.ID] = m
	}
	return out
}

func (w *inWorld) ids(t testing.TB) []string {
	var out []string
	for id := range w.files(t) {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// hasFile reports whether the file of message id is on disk.
func (w *inWorld) hasFile(t testing.TB, id string) bool {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(w.mb.Dir(mailbox.BoxInbound, schema.Slack), "*_"+id+".md"))
	return len(m) == 1
}

func (w *inWorld) checkpoint(t testing.TB, channel string) string {
	t.Helper()
	v, _, err := w.pipe.Checkpoint(context.Background(), checkpointKey(channel))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// channel adds a public channel the bot is a member of.
func (w *inWorld) channel(id, name string) {
	var c slackapi.Channel
	c.ID, c.Name, c.IsMember = id, name, true
	w.fake.AddConversation(c)
}

// msgEvent is a message event as Slack sends it.
func msgEvent(channel, user, ts, text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "message", "channel": channel, "user": user, "ts": ts,
		"event_ts": ts, "text": text, "channel_type": "channel", "team": "T0FAKE"})
	return b
}

// callback is an Events API body (and a Socket Mode events_api payload).
func callback(eventID string, inner json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"token": "unused", "team_id": "T0FAKE", "api_app_id": "A0FAKE",
		"type": "event_callback", "event_id": eventID, "event_time": 1700000000, "event": inner})
	return b
}

func msgID(channel, ts string) string {
	return "slack_" + channel + "_" + strings.ReplaceAll(ts, ".", "_")
}

// countingSink is a Sink that counts and can hold or fail Deliver.
type countingSink struct {
	adapters.Sink
	mu      sync.Mutex
	events  []adapters.Event
	entered chan struct{} // gets a value as each Deliver starts, when set
	hold    chan struct{} // Deliver waits for it to close, when set
	fail    error
	failed  chan string // gets the message id of each failed Deliver, when set
}

func (s *countingSink) Deliver(ctx context.Context, evs ...adapters.Event) error {
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	fail := s.fail
	if fail == nil {
		s.events = append(s.events, evs...)
	}
	s.mu.Unlock()
	if fail != nil {
		if s.failed != nil {
			for _, ev := range evs {
				if ev.Message != nil {
					s.failed <- ev.Message.ID
				}
			}
		}
		return fail
	}
	return s.Sink.Deliver(ctx, evs...)
}

func (s *countingSink) delivered() []adapters.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]adapters.Event(nil), s.events...)
}

// caughtUp records that a catch-up read channel up to ts, as a pass that
// has read that channel alone does (its round goes on).
func caughtUp(ctx context.Context, r *receiver, sink adapters.Sink, channel, ts string) error {
	p := r.track.StartPass()
	err := p.CaughtUp(ctx, sink, channel, ts)
	r.track.EndPass(p, chatsync.ErrIncomplete)
	return err
}

func TestTSOrder(t *testing.T) {
	for _, c := range []struct {
		ts, than string
		want     bool
	}{
		{"10.000000", "9.100000", true}, // numbers, not strings
		{"9.100000", "10.000000", false},
		{"1700000000.000200", "1700000000.000100", true},
		{"1700000000.000100", "1700000000.000100", false},
		{"1700000000.1", "1700000000.000100", true}, // .1 is .100000
		{"1700000000.000100", "", true},
		{"", "1700000000.000100", false},
		{"1700000000.00x100", "1", false},
		{"-5.0", "1", false},
		{"+5", "1", false},
		{"1700000001", "1700000000.999999", true},
	} {
		if got := tsAfter(c.ts, c.than); got != c.want {
			t.Errorf("tsAfter(%q, %q) = %v, want %v", c.ts, c.than, got, c.want)
		}
	}
}

// A live event moves its channel's checkpoint once the channel is caught
// up, never backwards (an older ts arriving late), and not at all before
// (the gap after a reconnect is not read yet); the catch-up then saves
// the newest ts delivered meanwhile.
func TestHandleCheckpoint(t *testing.T) {
	w := newInWorld(t, "socket")
	ctx := context.Background()
	w.channel("C0CHECK01", "check")
	// Not caught up (a fresh start): delivered, no checkpoint.
	if err := w.r.handle(ctx, w.pipe, event{ID: "Ev01", Inner: msgEvent("C0CHECK01", "U0ANN", "1700000005.000100", "five")}); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "C0CHECK01"); got != "" {
		t.Fatalf("checkpoint %q saved before the channel was caught up", got)
	}
	if err := caughtUp(ctx, w.r, w.pipe, "C0CHECK01", "1700000004.000100"); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "C0CHECK01"); got != "1700000005.000100" {
		t.Fatalf("after the catch-up, checkpoint %q, want the newest delivered 1700000005.000100", got)
	}
	// Caught up: a newer ts moves it, an older one arriving late does not.
	if err := w.r.handle(ctx, w.pipe, event{ID: "Ev02", Inner: msgEvent("C0CHECK01", "U0ANN", "1700000007.000100", "seven")}); err != nil {
		t.Fatal(err)
	}
	if err := w.r.handle(ctx, w.pipe, event{ID: "Ev03", Inner: msgEvent("C0CHECK01", "U0ANN", "1700000006.000100", "six, late")}); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "C0CHECK01"); got != "1700000007.000100" {
		t.Errorf("checkpoint %q, want 1700000007.000100 (never backwards)", got)
	}
	want := []string{msgID("C0CHECK01", "1700000005.000100"), msgID("C0CHECK01", "1700000006.000100"), msgID("C0CHECK01", "1700000007.000100")}
	if got := w.ids(t); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("files %v, want %v", got, want)
	}
	// A gap (reconnect): live events stop moving it until the next catch-up.
	w.r.track.Gap()
	if err := w.r.handle(ctx, w.pipe, event{ID: "Ev04", Inner: msgEvent("C0CHECK01", "U0ANN", "1700000009.000100", "nine")}); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "C0CHECK01"); got != "1700000007.000100" {
		t.Errorf("checkpoint %q moved during a gap, want 1700000007.000100", got)
	}
	// A restart reads the saved position back.
	r2 := newReceiver(w.a)
	if err := caughtUp(ctx, r2, w.pipe, "C0CHECK01", "1700000001.000000"); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "C0CHECK01"); got != "1700000007.000100" {
		t.Errorf("a catch-up with an older ts after a restart moved the checkpoint to %q", got)
	}
}

// What normalize decides not to write is not delivered and is a success
// (the transport acks it); a normalize error is returned (no ack) and
// nothing is delivered. Keys and Debounce are set as the seam wants.
func TestHandleOutcomes(t *testing.T) {
	w := newInWorld(t, "socket")
	ctx := context.Background()
	sink := &countingSink{Sink: w.pipe}
	w.r.normalize = func(context.Context, event) (*adapters.Event, error) { return nil, nil }
	if err := w.r.handle(ctx, sink, event{ID: "Ev1", Inner: json.RawMessage(`{"type":"file_shared","channel_id":"C1"}`)}); err != nil {
		t.Errorf("nothing to write: %v", err)
	}
	w.r.normalize = func(context.Context, event) (*adapters.Event, error) {
		return nil, errors.New("slack: users.info: timeout")
	}
	if err := w.r.handle(ctx, sink, event{ID: "Ev2", Inner: msgEvent("C0OUT0001", "U1", "1700000001.000100", "x")}); err == nil {
		t.Error("normalize failed, handle returned nil")
	}
	if err := w.r.handle(ctx, sink, event{ID: "Ev3", Inner: json.RawMessage(`not json`)}); err == nil {
		t.Error("an event that is not JSON, handle returned nil")
	}
	if n := len(sink.delivered()); n != 0 {
		t.Fatalf("%d events delivered, want 0", n)
	}
	edit := testutil.Message(schema.Slack, "C0OUT0001_1700000002_000100", time.Unix(1700000002, 0), "edited")
	edit.Metadata.Extra.Edits = "slack_C0OUT0001_1700000001_000100"
	plain := testutil.Message(schema.Slack, "C0OUT0001_1700000003_000100", time.Unix(1700000003, 0), "plain")
	next := []*schema.Message{edit, plain}
	w.r.normalize = func(context.Context, event) (*adapters.Event, error) {
		m := next[0]
		next = next[1:]
		return &adapters.Event{Message: m, Debounce: true}, nil
	}
	for _, id := range []string{"EvEdit", "EvPlain"} {
		if err := w.r.handle(ctx, sink, event{ID: id, Inner: msgEvent("C0OUT0001", "U1", "1700000002.000100", "x")}); err != nil {
			t.Fatal(err)
		}
	}
	got := sink.delivered()
	if len(got) != 2 {
		t.Fatalf("%d delivered, want 2", len(got))
	}
	if got[0].Debounce || !got[1].Debounce {
		t.Errorf("Debounce edit=%v plain=%v, want false and true", got[0].Debounce, got[1].Debounce)
	}
	if len(got[0].Keys) != 1 || got[0].Keys[0] != schema.EventKey(schema.Slack, "EvEdit") {
		t.Errorf("keys %v, want [%s]", got[0].Keys, schema.EventKey(schema.Slack, "EvEdit"))
	}
}

// BenchmarkHandle is handle into the real pipeline (fsync per round),
// normalize swapped for a fixed message, 8 callers per CPU, the events of
// one channel (serialised by its lock, so that a checkpoint never goes
// back) and of 16; and replies in 100 threads of one channel (each saves
// the channel's thread list, maxThreads entries, with its message).
func BenchmarkHandle(b *testing.B) {
	for _, c := range []struct {
		channels int64
		threads  int64
	}{{1, 0}, {16, 0}, {1, maxThreads}} {
		channels := c.channels
		name := fmt.Sprintf("channels=%d", channels)
		if c.threads > 0 {
			name += fmt.Sprintf("/threads=%d", c.threads)
		}
		b.Run(name, func(b *testing.B) {
			w := newInWorld(b, "socket")
			now := time.Unix(1700000000, 0)
			w.r.now = func() time.Time { return now }
			ctx := context.Background()
			for c := range channels {
				if err := caughtUp(ctx, w.r, w.pipe, fmt.Sprintf("C0BENCH%02d", c), "1"); err != nil {
					b.Fatal(err)
				}
			}
			w.r.normalize = func(_ context.Context, ev event) (*adapters.Event, error) {
				var pk peek
				json.Unmarshal(ev.Inner, &pk)
				sec, _, _ := parseTS(pk.TS)
				m := testutil.Message(schema.Slack, strings.TrimPrefix(msgID(pk.Channel, pk.TS), "slack_"), time.Unix(sec, 0), "x")
				return &adapters.Event{Message: m}, nil
			}
			var seq atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := seq.Add(1)
					ch := fmt.Sprintf("C0BENCH%02d", i%channels)
					ts := fmt.Sprintf("%d.000100", 1700000000+i)
					inner := msgEvent(ch, "U1", ts, "x")
					if c.threads > 0 {
						var m map[string]any
						json.Unmarshal(inner, &m)
						m["thread_ts"] = fmt.Sprintf("%d.000000", 1700000000-i%c.threads)
						inner, _ = json.Marshal(m)
					}
					if err := w.r.handle(ctx, w.pipe, event{ID: fmt.Sprintf("Ev%d", i), Inner: inner}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// The mode picks the transports: socket is one Source that catches up
// itself; events is the webhook plus the catch-up Source.
func TestInboundWiring(t *testing.T) {
	for _, c := range []struct {
		mode    string
		sources string
		webhook bool
	}{{"socket", "slack/socket", false}, {"events", "slack/replay", true}} {
		p, err := New(Options{Config: Config{Enabled: true, Mode: c.mode, BotToken: "xoxb-1", AppToken: "xapp-1", SigningSecret: "s"}})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range p.Sources {
			names = append(names, s.Name())
			if _, ok := s.(adapters.Starter); !ok {
				t.Errorf("%s: %s is not a Starter", c.mode, s.Name())
			}
			if _, ok := s.(adapters.ErrorReporter); !ok {
				t.Errorf("%s: %s is not an ErrorReporter", c.mode, s.Name())
			}
		}
		if strings.Join(names, ",") != c.sources || (p.Webhook != nil) != c.webhook {
			t.Errorf("%s: sources %v, webhook %v", c.mode, names, p.Webhook != nil)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", c.mode, err)
		}
	}
}

// The active threads saved with the messages: a position saved as a bare
// ts with no thread list (by the code before the list was saved) is read
// as it always was; an unreadable list is named in a warning and the
// channel is still caught up, the list rebuilt by the next message in a
// thread; our own top-level post counts as a thread (people answer the
// agent there), our own edit does not.
func TestThreadsSaved(t *testing.T) {
	w := newInWorld(t, "events")
	var logs strings.Builder
	var logMu sync.Mutex
	w.a.log = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	ctx := context.Background()
	now := time.Unix(1700200100, 0)
	w.r.now = func() time.Time { return now }
	const old, bad = "C0OLDFMT1", "C0BADLIST"
	w.channel(old, "old")
	w.channel(bad, "bad")
	for _, ch := range []string{old, bad} {
		w.post(ch, "1700200004.000100", "", "before the position")
	}
	if err := w.pipe.Deliver(ctx,
		adapters.Event{Checkpoint: &adapters.Checkpoint{Key: checkpointKey(old), Value: "1700200005.000100"}},
		adapters.Event{Checkpoint: &adapters.Checkpoint{Key: checkpointKey(bad), Value: "1700200005.000100"}},
		adapters.Event{Checkpoint: &adapters.Checkpoint{Key: threadsKey(bad), Value: `{"ts": 1`}}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{old, bad} {
		w.post(ch, "1700200006.000100", "", "after the position")
	}
	p := &replayer{r: w.r, limits: defaultReplayLimits}
	before := w.fake.Calls("conversations.replies")
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	want := []string{msgID(bad, "1700200006.000100"), msgID(old, "1700200006.000100")}
	if got := w.ids(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
	for _, ch := range []string{old, bad} {
		if got := w.checkpoint(t, ch); got != "1700200006.000100" {
			t.Errorf("%s: checkpoint %q, want 1700200006.000100 (a bare ts, as before)", ch, got)
		}
	}
	if n := w.fake.Calls("conversations.replies") - before; n != 0 {
		t.Errorf("%d conversations.replies calls with no thread known", n)
	}
	logMu.Lock()
	if s := logs.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, threadsKey(bad)) {
		t.Errorf("no warning naming %s: %q", threadsKey(bad), s)
	}
	logMu.Unlock()
	if err := w.r.handle(ctx, w.pipe, event{ID: "EvTS1", Inner: w.post(bad, "1700200008.000100", "1700200006.000100", "a reply")}); err != nil {
		t.Fatal(err)
	}
	if got := w.savedThreads(t, bad); fmt.Sprint(got) != fmt.Sprint([]activeThread{{"1700200006.000100", "1700200008.000100"}}) {
		t.Errorf("threads %+v after a reply", got)
	}

	// Our own top-level post's echo: a thread; our edit of it: not one.
	mine, _ := json.Marshal(map[string]any{"type": "message", "channel": old, "user": "U0BOT", "bot_id": "B0BOT",
		"ts": "1700200009.000100", "event_ts": "1700200009.000100", "text": "the agent asks"})
	if err := w.r.handle(ctx, w.pipe, event{ID: "EvTS2", Inner: mine}); err != nil {
		t.Fatal(err)
	}
	edit, _ := json.Marshal(map[string]any{"type": "message", "subtype": "message_changed", "channel": old,
		"ts": "1700200010.000100", "event_ts": "1700200010.000100",
		"message":          map[string]any{"type": "message", "user": "U0BOT", "bot_id": "B0BOT", "ts": "1700200009.000100", "text": "the agent asks again"},
		"previous_message": map[string]any{"type": "message", "user": "U0BOT", "bot_id": "B0BOT", "ts": "1700200009.000100", "text": "the agent asks"}})
	if err := w.r.handle(ctx, w.pipe, event{ID: "EvTS3", Inner: edit}); err != nil {
		t.Fatal(err)
	}
	if got := w.savedThreads(t, old); fmt.Sprint(got) != fmt.Sprint([]activeThread{{"1700200009.000100", "1700200009.000100"}}) {
		t.Errorf("threads %+v after our post and its edit, want our post alone", got)
	}
	if w.hasFile(t, msgID(old, "1700200009.000100")) {
		t.Error("our own post was written")
	}
}

// A saved list is read within its bounds: entries that are not threads
// are skipped, and the maxThreads most recent are kept, most recent first.
func TestDecodeThreads(t *testing.T) {
	var in []activeThread
	in = append(in, activeThread{TS: "x", Last: "1700000000.000100"}, activeThread{TS: "1700000000.000100"})
	for i := range maxThreads + 10 {
		ts := fmt.Sprintf("%d.000100", 1700000000+i)
		in = append(in, activeThread{TS: ts, Last: ts})
	}
	v, _ := json.Marshal(in)
	got, err := decodeThreads(string(v))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != maxThreads || got[0].TS != fmt.Sprintf("%d.000100", 1700000000+maxThreads+9) || got[maxThreads-1].TS != "1700000010.000100" {
		t.Errorf("%d threads, first %+v, last %+v", len(got), got[0], got[len(got)-1])
	}
	if _, err := decodeThreads(`"1700000000.000100"`); err == nil || !strings.HasPrefix(err.Error(), "slack: active threads") {
		t.Errorf("a value that is not a list: %v", err)
	}
}

// lockedWriter serialises writes to a log buffer read by the test.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
