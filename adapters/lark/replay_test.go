package lark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// rpWorld is a fake Lark and a mailbox with its ingest pipeline, and a
// receiver on them that counts what it normalises.
type rpWorld struct {
	fake *larkfake.Server
	ws   *wstest.Workspace
	r    *receiver

	mu         sync.Mutex
	normalized map[string]int // message_id → normalize calls
}

var rpPNG = []byte("\x89PNG\r\n\x1a\na forwarded picture's bytes")

func rpNew(t *testing.T) *rpWorld {
	t.Helper()
	fake := larkfake.New(t, larkfake.Options{AppID: testAppID, AppSecret: "secret-" + t.Name()})
	fake.AddUser(larkfake.User{OpenID: "ou_ann", Name: "Ann Lee"})
	fake.AddUser(larkfake.User{OpenID: "ou_bob", Name: "Bob Chen"})
	w := &rpWorld{fake: fake, ws: wstest.New(t, nil), normalized: map[string]int{}}
	w.r = w.receiver(t)
	return w
}

// receiver is a new receiver (a restart) on the same mailbox and fake,
// with small backoffs.
func (w *rpWorld) receiver(t *testing.T) *receiver {
	t.Helper()
	cfg := Config{Enabled: true, AppID: testAppID, AppSecret: confkit.Secret(w.fake.Options().AppSecret), Domain: w.fake.URL(), Mode: "webhook"}
	a, err := newAdapter(cfg, confkit.Limits{MaxArtifactBytes: 1 << 20}, w.ws.DZ, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(a)
	r.replay.limits = defaultReplayLimits
	r.replay.limits.backoff = time.Millisecond
	r.normalize = func(ctx context.Context, ev event) (*adapters.Event, error) {
		var pk peek
		json.Unmarshal(ev.Event, &pk)
		w.mu.Lock()
		w.normalized[pk.Message.MessageID]++
		w.mu.Unlock()
		return a.normalize(ctx, ev)
	}
	return r
}

func (w *rpWorld) normalizedCount(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.normalized[id]
}

// files are the inbound Lark files by message id; two files for one id
// fail the test.
func (w *rpWorld) files(t *testing.T) map[string]*schema.Message {
	t.Helper()
	dir := w.ws.MB.Dir(mailbox.BoxInbound, schema.Lark)
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
		testutil.ValidateInbound(t, e.Name(), data)
		m, err := schema.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if out[m.ID] != nil {
			t.Errorf("two files for %s", m.ID)
		}
		out[m.ID] = m
	}
	return out
}

// ids are the message_ids of the files, sorted.
func (w *rpWorld) ids(t *testing.T) []string {
	var out []string
	for id := range w.files(t) {
		out = append(out, strings.TrimPrefix(id, "lark_"))
	}
	slices.Sort(out)
	return out
}

func (w *rpWorld) checkpoint(t *testing.T, chat string) string {
	t.Helper()
	v, _, err := w.ws.Pipe.Checkpoint(context.Background(), checkpointKey(chat))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// add stores a text message in chat's history, sent at at, and returns it
// as stored.
func (w *rpWorld) add(chat, sender, text string, at time.Time) larkfake.Message {
	m := larkfake.Message{ChatID: chat, Content: rpText(text), SenderID: sender, CreateTime: at}
	m.MessageID = w.fake.AddMessage(chat, m)
	m.MsgType, m.SenderType = "text", "user"
	return m
}

func rpText(s string) string {
	b, _ := json.Marshal(map[string]string{"text": s})
	return string(b)
}

func rpMillis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// rpEvent is the im.message.receive_v1 event Lark sends for m, with every
// field Lark's events carry (union ids, tenant keys, the envelope).
func rpEvent(t *testing.T, m larkfake.Message, chatType string) event {
	t.Helper()
	msg := map[string]any{"message_id": m.MessageID, "chat_id": m.ChatID, "chat_type": chatType, "message_type": m.MsgType,
		"content": m.Content, "create_time": rpMillis(m.CreateTime), "update_time": rpMillis(m.CreateTime)}
	for k, v := range map[string]string{"root_id": m.RootID, "parent_id": m.ParentID, "thread_id": m.ThreadID} {
		if v != "" {
			msg[k] = v
		}
	}
	var ms []any
	for _, x := range m.Mentions {
		ms = append(ms, map[string]any{"key": x.Key, "name": x.Name, "tenant_key": "tenant_fake",
			"id": map[string]any{"open_id": x.ID, "union_id": "on_" + strings.TrimPrefix(x.ID, "ou_"), "user_id": "u_" + x.ID}})
	}
	if ms != nil {
		msg["mentions"] = ms
	}
	body := map[string]any{"message": msg, "sender": map[string]any{"sender_type": "user", "tenant_key": "tenant_fake",
		"sender_id": map[string]any{"open_id": m.SenderID, "union_id": "on_" + strings.TrimPrefix(m.SenderID, "ou_"), "user_id": "u_" + m.SenderID}}}
	data, _ := json.Marshal(map[string]any{"schema": "2.0", "event": body, "header": map[string]any{
		"event_id": "ev_" + m.MessageID, "token": "vtok_secret", "create_time": rpMillis(m.CreateTime.Add(50 * time.Millisecond)),
		"event_type": "im.message.receive_v1", "tenant_key": "tenant_fake", "app_id": testAppID}})
	ev, err := parseEvent(data)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// rpSink is the pipeline, with Deliver failing once failAfter message
// events were delivered (a crash half way), or held while hold is set.
type rpSink struct {
	adapters.Sink
	mu        sync.Mutex
	messages  int
	failAfter int           // 0: never
	holdID    string        // Deliver of this message_id waits for release
	held      chan struct{} // closed when Deliver of holdID begins
	release   chan struct{}
}

var errRPCrash = errors.New("the disk went away")

func (s *rpSink) Deliver(ctx context.Context, evs ...adapters.Event) error {
	for _, ev := range evs {
		if ev.Message == nil {
			continue
		}
		if s.holdID != "" && ev.Message.ID == "lark_"+s.holdID {
			close(s.held)
			select {
			case <-s.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		s.mu.Lock()
		if s.failAfter > 0 && s.messages >= s.failAfter {
			s.mu.Unlock()
			return errRPCrash
		}
		s.messages++
		s.mu.Unlock()
	}
	return s.Sink.Deliver(ctx, evs...)
}

// Messages added while Courier was away are ingested exactly once by a
// pass: one delivered live is not normalised again, the app's own and a
// recalled message are not written, a chat with no position is read from
// the window only, a p2p chat (not in the chat list) met live is caught
// up, and the checkpoint is the newest create_time read.
func TestReplayAwayOnce(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_quiet", Name: "Quiet"})
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_dm", ChatMode: "p2p"})
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	old := w.add("oc_quiet", "ou_ann", "two days ago: before the window", time.Now().Add(-48*time.Hour))
	recent := w.add("oc_quiet", "ou_ann", "an hour ago", time.Now().Add(-time.Hour))
	// The pass at start: the chats have no position; oc_team is empty.
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}

	// Live, before the gap: a message in the group and one in the p2p
	// chat (which the chat list does not show), each moving its chat's
	// checkpoint.
	live := w.add("oc_team", "ou_ann", "live", base)
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, live, "group")); err != nil {
		t.Fatal(err)
	}
	dm := w.add("oc_dm", "ou_bob", "hi bot", base.Add(time.Second))
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, dm, "p2p")); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "oc_dm"); got != rpMillis(dm.CreateTime) {
		t.Fatalf("a live event after a complete pass: checkpoint %q", got)
	}
	w.r.track.Gap()

	// Away: the same second as the live one (Lark's list is
	// second-granular), later ones, the bot's own, a recalled one.
	same := w.add("oc_team", "ou_bob", "same second as live", base.Add(300*time.Millisecond))
	a1 := w.add("oc_team", "ou_ann", "away 1", base.Add(time.Minute))
	a2 := w.add("oc_team", "ou_bob", "away 2", base.Add(2*time.Minute))
	own := w.fake.AddMessage("oc_team", larkfake.Message{Content: rpText("the bot's reply"), SenderID: testAppID, SenderType: "app", CreateTime: base.Add(3 * time.Minute)})
	gone := w.fake.AddMessage("oc_team", larkfake.Message{Content: rpText("recalled"), SenderID: "ou_ann", Deleted: true, CreateTime: base.Add(4 * time.Minute)})
	dmAway := w.add("oc_dm", "ou_bob", "are you there?", base.Add(5*time.Minute))

	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatalf("catchUp: %v", err)
	}
	want := []string{live.MessageID, same.MessageID, a1.MessageID, a2.MessageID, dm.MessageID, dmAway.MessageID, recent.MessageID}
	slices.Sort(want)
	if got := w.ids(t); !slices.Equal(got, want) {
		t.Errorf("files %v,\nwant %v (not %s the old, %s the bot's, %s recalled)", got, want, old.MessageID, own, gone)
	}
	if n := w.normalizedCount(live.MessageID); n != 1 {
		t.Errorf("the live message was normalised %d times, want once (the catch-up skips what the mailbox has)", n)
	}
	if n := w.normalizedCount(own); n != 1 {
		t.Errorf("the bot's own message was normalised %d times, want once (then dropped)", n)
	}
	if n := w.normalizedCount(gone); n != 0 {
		t.Errorf("a recalled message was normalised %d times", n)
	}
	ownTime := rpMillis(base.Add(4 * time.Minute)) // the recalled one is the newest read
	for chat, want := range map[string]string{"oc_team": ownTime, "oc_dm": rpMillis(dmAway.CreateTime), "oc_quiet": rpMillis(recent.CreateTime)} {
		if got := w.checkpoint(t, chat); got != want {
			t.Errorf("checkpoint of %s = %q, want %q (the newest create_time read)", chat, got, want)
		}
	}
	files := w.files(t)
	if m := files["lark_"+dmAway.MessageID]; m == nil || m.Session.Type != schema.Direct || m.Participants.From.Name != "Bob Chen" {
		t.Errorf("the p2p message read back: %+v", m)
	}
	if !w.r.track.AllCaughtUp() {
		t.Error("a pass over every chat did not mark the receiver live")
	}

	// A second pass: nothing new written, nothing normalised again.
	before := len(files)
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	if n := len(w.files(t)); n != before {
		t.Errorf("a second pass wrote %d files more", n-before)
	}
	for _, id := range want {
		if n := w.normalizedCount(id); n != 1 {
			t.Errorf("%s normalised %d times after two passes", id, n)
		}
	}
}

// More than a page (50) of messages are read page by page; bounded to
// two pages a chat, a pass stops with chatsync.ErrIncomplete having saved the
// newest read, and the next goes on from there: all of them once.
func TestReplayPaging(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_busy", Name: "Busy"})
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	first := w.add("oc_busy", "ou_ann", "before the gap", base)
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, first, "group")); err != nil {
		t.Fatal(err)
	}
	if err := caughtUp(ctx, w.r, w.ws.Pipe, "oc_busy", first.CreateTime.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	w.r.track.Gap()
	var msgs []larkfake.Message
	for i := range 130 {
		msgs = append(msgs, w.add("oc_busy", "ou_bob", fmt.Sprintf("message %d", i), base.Add(time.Duration(i+1)*time.Second)))
	}
	w.r.replay.limits.perChat = 2
	calls := w.fake.Calls(larkfake.RouteList)
	err := w.r.pass(ctx, w.ws.Pipe)
	if !errors.Is(err, chatsync.ErrIncomplete) {
		t.Fatalf("a pass over 131 messages at 2 pages of 50: %v, want chatsync.ErrIncomplete", err)
	}
	if n := w.fake.Calls(larkfake.RouteList) - calls; n != 3 {
		t.Errorf("%d list calls, want 3 (the bound, and the look for threads before the position)", n)
	}
	// The first page holds the message of the position's second again.
	if got, want := w.checkpoint(t, "oc_busy"), rpMillis(msgs[98].CreateTime); got != want {
		t.Errorf("checkpoint after the bounded pass %s, want %s (the newest of the 100 read)", got, want)
	}
	if n := len(w.files(t)); n != 100 {
		t.Errorf("%d files after the bounded pass, want 100", n)
	}
	if w.r.track.AllCaughtUp() {
		t.Error("a pass stopped at its bounds marked the receiver live")
	}
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatalf("the second pass: %v", err)
	}
	if n := len(w.files(t)); n != 131 {
		t.Errorf("%d files, want 131", n)
	}
	for _, m := range msgs {
		if n := w.normalizedCount(m.MessageID); n != 1 {
			t.Errorf("%s normalised %d times", m.MessageID, n)
		}
	}
	if got, want := w.checkpoint(t, "oc_busy"), rpMillis(msgs[129].CreateTime); got != want {
		t.Errorf("checkpoint %s, want the newest %s", got, want)
	}
	if !w.r.track.AllCaughtUp() {
		t.Error("the pass that finished did not mark the receiver live")
	}
}

// A crash half way through a pass (the Sink fails after three messages):
// the checkpoint has not moved past the first message not written; a new
// receiver on the same mailbox catches up with nothing lost and nothing
// twice, normalising only what is missing.
func TestReplayCrashMidPass(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	start := w.add("oc_team", "ou_ann", "seen", base)
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, start, "group")); err != nil {
		t.Fatal(err)
	}
	if err := caughtUp(ctx, w.r, w.ws.Pipe, "oc_team", start.CreateTime.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	saved := w.checkpoint(t, "oc_team")
	w.r.track.Gap()
	want := []string{start.MessageID}
	for i := range 8 {
		want = append(want, w.add("oc_team", "ou_bob", fmt.Sprintf("away %d", i), base.Add(time.Duration(i+1)*time.Second)).MessageID)
	}
	slices.Sort(want)

	crash := &rpSink{Sink: w.ws.Pipe, failAfter: 3}
	if err := w.r.pass(ctx, crash); !errors.Is(err, errRPCrash) {
		t.Fatalf("catchUp with a failing Sink: %v, want its error", err)
	}
	// The position stays before the first message not delivered (the
	// fourth of the gap): everything before it is durable.
	if got, want := w.checkpoint(t, "oc_team"), strconv.FormatInt(base.Add(4*time.Second).UnixMilli()-1, 10); got != want || got <= saved {
		t.Fatalf("checkpoint %s after a pass failed half way, want %s (just before the first message lost)", got, want)
	}
	if n := len(w.files(t)); n != 4 {
		t.Fatalf("%d files after the crash, want 4 (the first and three of the gap)", n)
	}

	w.normalized = map[string]int{}
	r2 := w.receiver(t)
	if err := r2.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatalf("catchUp after the restart: %v", err)
	}
	if got := w.ids(t); !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	normalized := 0
	for _, id := range want {
		normalized += w.normalizedCount(id)
	}
	if normalized != 5 {
		t.Errorf("the restarted receiver normalised %d messages, want the 5 missing", normalized)
	}
	if got, want := w.checkpoint(t, "oc_team"), rpMillis(base.Add(8*time.Second)); got != want {
		t.Errorf("checkpoint %s, want %s", got, want)
	}
}

// A live event that arrives while the pass is still reading other chats
// does not move its chat's checkpoint past the gap (a crash then would
// lose the gap); once the pass reads the chat, the checkpoint is the
// newer of the two.
func TestReplayLiveDuringPass(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_a", Name: "A"})
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_b", Name: "B"})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, chat := range []string{"oc_a", "oc_b"} {
		m := w.add(chat, "ou_ann", "before", base)
		if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, m, "group")); err != nil {
			t.Fatal(err)
		}
		if err := caughtUp(ctx, w.r, w.ws.Pipe, chat, m.CreateTime.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	saved := w.checkpoint(t, "oc_b")
	w.r.track.Gap() // the connection dropped
	inA := w.add("oc_a", "ou_ann", "gap in A", base.Add(time.Second))
	gapB := w.add("oc_b", "ou_bob", "gap in B", base.Add(2*time.Second))
	liveB := w.add("oc_b", "ou_bob", "live in B", base.Add(3*time.Second))

	sink := &rpSink{Sink: w.ws.Pipe, holdID: inA.MessageID, held: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- w.r.pass(ctx, sink) }()
	<-sink.held // the pass is reading oc_a
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, liveB, "group")); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "oc_b"); got != saved {
		t.Errorf("a live event during the pass moved oc_b's checkpoint to %s, past its gap (want %s)", got, saved)
	}
	close(sink.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := w.checkpoint(t, "oc_b"), rpMillis(liveB.CreateTime); got != want {
		t.Errorf("oc_b's checkpoint after the pass %s, want %s", got, want)
	}
	if !w.files(t)["lark_"+gapB.MessageID].Timestamp.Time.Equal(gapB.CreateTime) {
		t.Error("the gap's message of oc_b not written")
	}
	if n := w.normalizedCount(liveB.MessageID); n != 1 {
		t.Errorf("the live message normalised %d times", n)
	}
	// Live from now on: the next live event moves the checkpoint itself.
	next := w.add("oc_b", "ou_bob", "after", base.Add(4*time.Second))
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, next, "group")); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "oc_b"); got != rpMillis(next.CreateTime) {
		t.Errorf("a live event after the pass: checkpoint %s", got)
	}
}

// A message read from the list makes the same file as its live event,
// but for provider_raw and the event id: a text with a mention in a
// thread, a post with an image, a reply outside a thread, a p2p message.
func TestReplayListItemIsTheEvent(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_dm", ChatMode: "p2p"})
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	root := w.add("oc_team", "ou_ann", "root", at)
	post := `{"title":"Plan","content":[[{"tag":"text","text":"see "},{"tag":"a","href":"https://example.com","text":"this"}],[{"tag":"img","image_key":"img_v3_plan"}]]}`
	cases := []struct {
		m        larkfake.Message
		chatType string
	}{
		{larkfake.Message{ChatID: "oc_team", Content: rpText("@_user_1 please look"), SenderID: "ou_ann", ParentID: root.MessageID, ThreadID: "omt_1",
			Mentions: []larkfake.Mention{{Key: "@_user_1", ID: "ou_bob", IDType: "open_id", Name: "Bob"}}}, "group"},
		{larkfake.Message{ChatID: "oc_team", MsgType: "post", Content: post, SenderID: "ou_bob"}, "group"},
		{larkfake.Message{ChatID: "oc_team", Content: rpText("a quoted reply"), SenderID: "ou_bob", ParentID: root.MessageID}, "group"},
		{larkfake.Message{ChatID: "oc_dm", Content: rpText("just us"), SenderID: "ou_bob"}, "p2p"},
	}
	for i, c := range cases {
		c.m.CreateTime = at.Add(time.Duration(i+1) * time.Second)
		c.m.MessageID = w.fake.AddMessage(c.m.ChatID, c.m)
		if c.m.MsgType == "" {
			c.m.MsgType = "text"
		}
		stored := w.fake.Messages(c.m.ChatID)
		c.m.RootID = stored[len(stored)-1].RootID
		if c.m.MsgType == "post" {
			w.fake.AddResource(c.m.MessageID, "img_v3_plan", rpPNG, "image", "")
		}
		var data struct {
			Items []histItem `json:"items"`
		}
		container := "container_id_type=chat&container_id=" + c.m.ChatID
		if c.m.ThreadID != "" {
			container = "container_id_type=thread&container_id=" + c.m.ThreadID // a reply in a thread is listed there
		}
		if err := w.r.a.apiGet(ctx, "/open-apis/im/v1/messages?"+container+"&sort_type=ByCreateTimeDesc&page_size=1", &data); err != nil {
			t.Fatal(err)
		}
		if len(data.Items) != 1 || data.Items[0].MessageID != c.m.MessageID {
			t.Fatalf("list: %+v", data.Items)
		}
		fromList, err := w.r.a.normalize(ctx, data.Items[0].event(c.m.ChatID, c.chatType))
		if err != nil {
			t.Fatal(err)
		}
		fromEvent, err := w.r.a.normalize(ctx, rpEvent(t, c.m, c.chatType))
		if err != nil {
			t.Fatal(err)
		}
		if fromList.Message.Metadata.ProviderRaw == nil {
			t.Errorf("%s: the list's message has no provider_raw", c.m.MessageID)
		}
		if len(fromList.Message.Artifacts) != len(fromEvent.Message.Artifacts) || (c.m.MsgType == "post" && len(fromList.Message.Artifacts) != 1) {
			t.Errorf("%s: artifacts %d from the list, %d from the event", c.m.MessageID, len(fromList.Message.Artifacts), len(fromEvent.Message.Artifacts))
		}
		got, want := rpComparable(t, fromList), rpComparable(t, fromEvent)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the file from the list differs from the event's:\n%s", c.m.MessageID, testutil.LineDiff(string(want), string(got)))
		}
	}
}

// rpComparable is the file of ev without what differs by source.
func rpComparable(t *testing.T, ev *adapters.Event) []byte {
	t.Helper()
	m := *ev.Message
	m.ReceivedAt = schema.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m.Metadata.ProviderRaw = nil
	m.Metadata.Extra.EventID = ""
	return testutil.CheckMessage(t, m.ID, &m)
}

// rpForward adds a merge_forward to oc_team with two children: a text
// from Ann, an image from Bob, downloadable under the merge_forward's
// message_id as Lark serves it (not the child's).
func rpForward(t *testing.T, w *rpWorld, at time.Time) (mf larkfake.Message, kids []string) {
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	mf = larkfake.Message{ChatID: "oc_team", MsgType: "merge_forward", Content: `{"content":"Merged and Forwarded Message"}`, SenderID: "ou_ann", CreateTime: at}
	mf.MessageID = w.fake.AddMessage("oc_team", mf)
	a := w.fake.AddMessage("oc_other", larkfake.Message{UpperMessageID: mf.MessageID, Content: rpText("first child"), SenderID: "ou_ann", CreateTime: at.Add(-2 * time.Hour)})
	b := w.fake.AddMessage("oc_other", larkfake.Message{UpperMessageID: mf.MessageID, MsgType: "image", Content: `{"image_key":"img_v3_fw"}`, SenderID: "ou_bob", CreateTime: at.Add(-time.Hour)})
	w.fake.AddResource(mf.MessageID, "img_v3_fw", rpPNG, "image", "")
	return mf, []string{a, b}
}

// A merge_forward shows its forwarded messages as an email forward does
// (the title, each sender's name and time, then the content, in order),
// the image of one stored as an artifact; the catch-up reads it the same.
func TestReplayMergeForward(t *testing.T) {
	w := rpNew(t)
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_other"})
	ctx := context.Background()
	at := time.Now().Add(-3 * time.Hour).UTC().Truncate(time.Second)
	mf, _ := rpForward(t, w, at)
	date := func(d time.Duration) string { return "Date: " + at.Add(d).Format("2006-01-02 15:04:05 UTC") }
	out, err := w.r.a.normalize(ctx, rpEvent(t, mf, "group"))
	if err != nil {
		t.Fatal(err)
	}
	m := out.Message
	testutil.CheckMessage(t, "merge_forward", m)
	text := string(m.Content.Text)
	for _, want := range []string{forwardTitle, "From: Ann Lee", date(-2 * time.Hour), "first child", "From: Bob Chen", date(-time.Hour), "[image]"} {
		if !strings.Contains(text, want) {
			t.Errorf("content.text lacks %q:\n%s", want, text)
		}
	}
	if strings.Index(text, "first child") > strings.Index(text, "Bob Chen") || strings.Contains(text, "Merged and Forwarded") {
		t.Errorf("the children out of order, or the placeholder kept:\n%s", text)
	}
	if !strings.HasPrefix(m.Body, forwardTitle+"\n") || !strings.Contains(m.Body, "From: Ann Lee\\\nDate:") || !strings.Contains(m.Body, "first child") {
		t.Errorf("the body (Markdown) does not show the forward:\n%s", m.Body)
	}
	if len(m.Artifacts) != 1 || m.Artifacts[0].Type != schema.ArtifactImage {
		t.Fatalf("artifacts %+v, want the child's image", m.Artifacts)
	}
	fh, err := w.ws.DZ.Open(m.Artifacts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(fh)
	fh.Close()
	if !bytes.Equal(got, rpPNG) {
		t.Errorf("stored %q, want the child's image", got)
	}
	if m.Type != schema.TypeMixed || m.Metadata.Extra.Other["merge_forward"] != nil {
		t.Errorf("type %q, note %v", m.Type, m.Metadata.Extra.Other["merge_forward"])
	}

	// Through the catch-up: one file, the same forward.
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	f := w.files(t)["lark_"+mf.MessageID]
	if f == nil || !strings.Contains(string(f.Content.Text), "first child") || len(f.Artifacts) != 1 {
		t.Errorf("the merge_forward read back: %+v", f)
	}
}

// A forward Lark will not show (no permission: 230027) is written with a
// note; a failure that may pass (a 500, a resource's 500) is an error, so
// that Lark redelivers; more than maxForwarded children are cut with a
// note.
func TestReplayMergeForwardFailures(t *testing.T) {
	w := rpNew(t)
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_other"})
	ctx := context.Background()
	mf, _ := rpForward(t, w, time.Now().Add(-time.Hour))
	ev := rpEvent(t, mf, "group")

	w.fake.Fail(larkfake.RouteGet, larkfake.Failure{Status: 400, Code: 230027, Msg: "Lack of necessary permissions"})
	out, err := w.r.a.normalize(ctx, ev)
	if err != nil {
		t.Fatalf("no permission: %v, want the message written with a note", err)
	}
	note, _ := out.Message.Metadata.Extra.Other["merge_forward"].(string)
	if !strings.Contains(note, "230027") || !strings.Contains(string(out.Message.Content.Text), "[merged and forwarded messages]") {
		t.Errorf("no permission: note %q, text %q", note, out.Message.Content.Text)
	}
	testutil.CheckMessage(t, "no permission", out.Message)

	w.fake.Fail(larkfake.RouteGet, larkfake.Failure{Status: 500})
	if _, err := w.r.a.normalize(ctx, ev); err == nil || !adapters.IsTemporary(err) || !strings.HasPrefix(err.Error(), "lark: ") {
		t.Errorf("a 500 on get: %v, want a temporary error", err)
	}
	w.fake.Fail(larkfake.RouteResource, larkfake.Failure{Status: 503})
	if _, err := w.r.a.normalize(ctx, ev); err == nil {
		t.Error("a 503 on the child's image: no error")
	}

	// A file Lark serves under the child's own id is fetched there; one
	// it serves under neither is noted, the message written.
	fw := larkfake.Message{ChatID: "oc_other", MsgType: "merge_forward", Content: "{}", SenderID: "ou_ann", CreateTime: time.Now()}
	fw.MessageID = w.fake.AddMessage("oc_other", fw)
	own := w.fake.AddMessage("oc_other", larkfake.Message{UpperMessageID: fw.MessageID, MsgType: "file", Content: `{"file_key":"file_v3_own","file_name":"own.pdf"}`, SenderID: "ou_bob"})
	w.fake.AddMessage("oc_other", larkfake.Message{UpperMessageID: fw.MessageID, MsgType: "image", Content: `{"image_key":"img_v3_nowhere"}`, SenderID: "ou_bob"})
	w.fake.AddResource(own, "file_v3_own", []byte("%PDF-1.4 own"), "file", "own.pdf")
	out, err = w.r.a.normalize(ctx, rpEvent(t, fw, "group"))
	if err != nil {
		t.Fatal(err)
	}
	if arts := out.Message.Artifacts; len(arts) != 1 || arts[0].Name != "own.pdf" {
		t.Errorf("artifacts %+v, want own.pdf from the child's id", arts)
	}
	if res := fmt.Sprint(out.Message.Metadata.Extra.Other["resources"]); !strings.Contains(res, "img_v3_nowhere") || !strings.Contains(res, "234003") {
		t.Errorf("the image Lark does not serve is not noted: %s", res)
	}
	testutil.CheckMessage(t, "forward with a missing file", out.Message)

	big := larkfake.Message{ChatID: "oc_other", MsgType: "merge_forward", Content: "{}", SenderID: "ou_ann", CreateTime: time.Now()}
	big.MessageID = w.fake.AddMessage("oc_other", big)
	for i := range maxForwarded + 5 {
		w.fake.AddMessage("oc_other", larkfake.Message{UpperMessageID: big.MessageID, Content: rpText(fmt.Sprintf("child %d", i)), SenderID: "ou_bob"})
	}
	out, err = w.r.a.normalize(ctx, rpEvent(t, big, "group"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out.Message.Content.Text), "From: "); n != maxForwarded {
		t.Errorf("%d children shown, want %d", n, maxForwarded)
	}
	if note := fmt.Sprint(out.Message.Metadata.Extra.Other["merge_forward"]); !strings.Contains(note, "5 forwarded messages not shown") {
		t.Errorf("note %q", note)
	}
	if n := w.fake.Calls(larkfake.RouteUser); n > 2 {
		t.Errorf("%d name lookups for two senders: not cached", n)
	}
}

// A chat Lark will not let the app read (230002) is skipped, not fatal; a
// 429 is waited out; an expired token is renewed; a chat whose reading
// keeps failing (429s past the retries, a gateway's 502s) is an error,
// its checkpoint unmoved, the pass not complete.
func TestReplayChatErrors(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var want []string
	for _, chat := range []string{"oc_1", "oc_2", "oc_3"} {
		w.fake.AddChat(larkfake.Chat{ChatID: chat, Name: chat})
		want = append(want, w.add(chat, "ou_ann", "in "+chat, base).MessageID)
	}
	if _, err := w.r.a.tenantToken(ctx, false); err != nil {
		t.Fatal(err)
	}
	w.fake.ExpireTokens() // the cached token is refused: renewed once
	w.fake.Fail(larkfake.RouteChats, larkfake.Failure{Status: 429})
	w.fake.Fail(larkfake.RouteList, larkfake.Failure{Status: 400, Code: 230002, Msg: "Bot is not in the chat"})
	w.fake.Fail(larkfake.RouteList, larkfake.Failure{Status: 429})
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatalf("catchUp: %v, want the refused chat skipped", err)
	}
	if got := w.ids(t); !slices.Equal(got, want[1:]) {
		t.Errorf("files %v, want %v (oc_1 refused)", got, want[1:])
	}
	if !w.r.track.AllCaughtUp() {
		t.Error("a pass that skipped a refused chat is not complete")
	}

	// The chat list refused (a missing scope): the chats the receiver
	// knows (met live, or listed before) are still caught up, and the
	// pass says why it is not complete.
	w.r.track.Gap()
	late := w.add("oc_1", "ou_bob", "after the refusal", base.Add(time.Minute))
	w.fake.Fail(larkfake.RouteChats, larkfake.Failure{Status: 400, Code: 99991672, Msg: "Access denied. One of the following scopes is required: [im:chat:readonly]"})
	err := w.r.pass(ctx, w.ws.Pipe)
	if err == nil || !strings.Contains(err.Error(), "list the chats") || !strings.Contains(err.Error(), "im:chat:readonly") {
		t.Errorf("the chat list refused: %v, want an error naming the list and the scope", err)
	}
	if w.files(t)["lark_"+late.MessageID] == nil {
		t.Error("a chat the receiver knows was not caught up without the list")
	}
	if w.r.track.AllCaughtUp() {
		t.Error("a pass without the chat list marked the receiver live")
	}

	w2 := rpNew(t)
	w2.fake.AddChat(larkfake.Chat{ChatID: "oc_down", Name: "down"})
	w2.add("oc_down", "ou_ann", "unreachable", base)
	w2.fake.Fail(larkfake.RouteList, larkfake.Failure{Status: 429, Times: w2.r.replay.limits.retries + 1})
	err = w2.r.pass(ctx, w2.ws.Pipe)
	if err == nil || !strings.HasPrefix(err.Error(), "lark: ") || !strings.Contains(err.Error(), "oc_down") {
		t.Errorf("a chat always failing: %v, want an error naming it", err)
	}
	if n := w2.fake.Calls(larkfake.RouteList); n != w2.r.replay.limits.retries+1 {
		t.Errorf("%d list calls, want %d (retries bounded)", n, w2.r.replay.limits.retries+1)
	}
	if w2.checkpoint(t, "oc_down") != "" || w2.r.track.AllCaughtUp() {
		t.Error("a failed chat moved its checkpoint or completed the pass")
	}
	// A gateway's 503 (not Lark's JSON) is tried once more.
	w2.fake.Fail(larkfake.RouteList, larkfake.Failure{Status: 503})
	if err := w2.r.pass(ctx, w2.ws.Pipe); err != nil || len(w2.files(t)) != 1 {
		t.Errorf("the next pass: %v, %d files", err, len(w2.files(t)))
	}
	w2.fake.Fail(larkfake.RouteList, larkfake.Failure{Status: 502, Times: 10})
	before := w2.fake.Calls(larkfake.RouteList)
	if err := w2.r.pass(ctx, w2.ws.Pipe); err == nil {
		t.Error("a gateway failing: no error")
	}
	if n := w2.fake.Calls(larkfake.RouteList) - before; n != 2 {
		t.Errorf("%d calls through a failing gateway, want 2", n)
	}
}

// The webhook mode's Source: a pass at start, one after a webhook
// failure, none after ctx ends; FetchOnce passes until everything is in.
func TestReplaySource(t *testing.T) {
	w := rpNew(t)
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	first := w.add("oc_team", "ou_ann", "while down", base)
	src := newReplaySource(w.r).(*replaySource)
	src.c.AfterFailure, src.c.Interval = time.Millisecond, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, w.ws.Pipe) }()
	testutil.WaitFor(t, 10*time.Second, "the pass at start", func() bool { return len(w.files(t)) == 1 })
	if w.files(t)["lark_"+first.MessageID] == nil {
		t.Fatal("the message posted while down is not in")
	}
	later := w.add("oc_team", "ou_bob", "a webhook delivery failed", base.Add(time.Minute))
	w.r.catchUp.Failed()
	testutil.WaitFor(t, 10*time.Second, "the pass after the failure", func() bool { return w.files(t)["lark_"+later.MessageID] != nil })
	// One gap as the failure is told, one as the pass it asks for begins.
	if g := w.r.track.Gaps(); g != 2 {
		t.Errorf("%d gaps after a webhook failure, want 2: live events could move a checkpoint past it", g)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v, want nil once ctx is done", err)
	}

	w2 := rpNew(t)
	w2.fake.AddChat(larkfake.Chat{ChatID: "oc_big", Name: "Big"})
	for i := range 120 {
		w2.add("oc_big", "ou_ann", fmt.Sprint(i), base.Add(time.Duration(i)*time.Second))
	}
	w2.r.replay.limits.perChat = 1
	f := newReplaySource(w2.r).(adapters.Fetcher)
	if err := f.FetchOnce(context.Background(), w2.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	if n := len(w2.files(t)); n != 120 {
		t.Errorf("FetchOnce wrote %d files, want 120", n)
	}
}

// The webhook mode's Source with app keys Lark refuses: Start and Run
// fail naming the keys, marked adapters.Refused (the service starts
// without the Source and tries it again later, the webhook served
// meanwhile), /health says why, and the secret is in neither.
func TestReplaySourceRefused(t *testing.T) {
	w := rpNew(t)
	cfg := Config{Enabled: true, AppID: testAppID, AppSecret: confkit.Secret("not-the-secret-0002"), Domain: w.fake.URL(), Mode: "webhook"}
	a, err := newAdapter(cfg, confkit.Limits{}, w.ws.DZ, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := newReplaySource(newReceiver(a)).(*replaySource)
	err = src.Start(context.Background())
	if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "app_id and app_secret") {
		t.Errorf("Start: %v, want a refusal naming app_id and app_secret", err)
	}
	if h := a.health.Health(); h.Status != adapters.StatusError || !strings.Contains(h.LastError, "tenant token refused") {
		t.Errorf("health %+v", h)
	}
	done := make(chan error, 1)
	go func() { done <- src.Run(context.Background(), w.ws.Pipe) }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run went on with refused credentials")
	}
	if !adapters.IsRefused(err) || !strings.Contains(err.Error(), "app_id and app_secret") {
		t.Errorf("Run: %v, want a refusal naming app_id and app_secret", err)
	}
	if strings.Contains(err.Error()+a.health.Health().LastError, "not-the-secret-0002") {
		t.Error("the secret is in an error")
	}
	// Lark out of reach is no refusal: Start warns, the passes retry.
	w.fake.Fail(larkfake.RouteTenantToken, larkfake.Failure{Status: 503})
	if err := newReplaySource(w.receiver(t)).(*replaySource).Start(context.Background()); err != nil {
		t.Errorf("Start with Lark answering 503: %v", err)
	}
}

// FetchOnce gives up after chatsync.MaxFetchPasses passes that each
// stopped at their bounds, saying so as Lark's own error: the text
// `courier fetch` prints.
func TestReplayFetchOnceBound(t *testing.T) {
	w := rpNew(t)
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_huge", Name: "Huge"})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range chatsync.MaxFetchPasses + 10 {
		w.add("oc_huge", "ou_ann", fmt.Sprint(i), base.Add(time.Duration(i)*time.Second))
	}
	// A page of two a pass: the message of the position's second, and
	// one more.
	w.r.replay.limits.perChat, w.r.replay.limits.pageSize = 1, 2
	f := newReplaySource(w.r).(adapters.Fetcher)
	err := f.FetchOnce(context.Background(), w.ws.Pipe)
	if err == nil || err.Error() != "lark: catch-up stopped at its bounds; more to read" {
		t.Errorf("FetchOnce over more than %d passes: %v", chatsync.MaxFetchPasses, err)
	}
}

// A group's history lists a thread's root, not its replies: a reply
// posted during the gap in a thread seen live, and the replies of a
// thread started during the gap, are read from the thread; a topic chat
// lists them itself. A thread with more replies than a pass reads of it
// costs a bounded number of calls.
func TestReplayThreads(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_topics", Name: "Topics", ChatMode: "topic"})
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	root1 := larkfake.Message{ChatID: "oc_team", Content: rpText("a thread"), SenderID: "ou_ann", ThreadID: "omt_one", CreateTime: base}
	root1.MessageID = w.fake.AddMessage("oc_team", root1)
	root1.MsgType = "text"
	// Live: the thread's root, then a message after it (the position
	// moves past the root, which the next pass's history then omits).
	after := w.add("oc_team", "ou_ann", "later", base.Add(2*time.Second))
	for _, m := range []larkfake.Message{root1, after} {
		if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, m, "group")); err != nil {
			t.Fatal(err)
		}
	}
	w.r.track.Gap()
	reply := func(chat, parent string, i int) string {
		return w.fake.AddMessage(chat, larkfake.Message{ParentID: parent, Content: rpText(fmt.Sprint("reply ", i)), SenderID: "ou_bob", CreateTime: base.Add(time.Duration(i) * time.Second)})
	}
	want := []string{root1.MessageID, after.MessageID, reply("oc_team", root1.MessageID, 3)}
	root2 := w.fake.AddMessage("oc_team", larkfake.Message{Content: rpText("a new thread"), SenderID: "ou_bob", ThreadID: "omt_two", CreateTime: base.Add(4 * time.Second)})
	want = append(want, root2, reply("oc_team", root2, 5), reply("oc_team", root2, 6))
	troot := w.fake.AddMessage("oc_topics", larkfake.Message{Content: rpText("a topic"), SenderID: "ou_ann", ThreadID: "omt_topic", CreateTime: base.Add(7 * time.Second)})
	want = append(want, troot, reply("oc_topics", troot, 8))
	slices.Sort(want)
	calls := w.fake.Calls(larkfake.RouteList)
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	if got := w.ids(t); !slices.Equal(got, want) {
		t.Errorf("files %v,\nwant %v", got, want)
	}
	// oc_team: its history, the look for threads before its position
	// (once per process), its two threads; oc_topics: its history.
	if n := w.fake.Calls(larkfake.RouteList) - calls; n != 5 {
		t.Errorf("%d list calls, want 5", n)
	}
	if got, want := w.checkpoint(t, "oc_team"), rpMillis(base.Add(6*time.Second)); got != want {
		t.Errorf("checkpoint %s, want %s (the newest reply)", got, want)
	}

	// A thread filled during a gap: one pass reads threadPages pages of
	// it, no more.
	w.r.track.Gap()
	for i := range 10 {
		reply("oc_team", root2, 10+i)
	}
	w.r.replay.limits.pageSize, w.r.replay.limits.threadPages = 2, 2
	calls = w.fake.Calls(larkfake.RouteList)
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	// oc_team's history (1 page), thread one (1 page), thread two (2),
	// oc_topics (1).
	if n := w.fake.Calls(larkfake.RouteList) - calls; n != 5 {
		t.Errorf("%d list calls, want 5 (two pages of the full thread)", n)
	}
	if n := len(w.files(t)); n != len(want)+4 {
		t.Errorf("%d files, want %d: the newest 4 replies of the thread", n, len(want)+4)
	}
}

// Each real event of the corpus whose ids Lark would answer (the redacted
// ones have none) is put in the fake's history; read back through the
// list it makes the same file as the event, but for provider_raw and the
// event id.
func TestReplayCorpusEventsFromTheList(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "lark", "events")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	ctx := context.Background()
	checked := 0
	for _, f := range files {
		w := rpNew(t)
		ev := readEvent(t, f)
		var b body
		if err := json.Unmarshal(ev.Event, &b); err != nil {
			t.Fatal(err)
		}
		m := b.Message
		if !ids.MatchString(m.ChatID) || !ids.MatchString(m.MessageID) || !ids.MatchString(b.Sender.SenderID.OpenID) {
			continue // redacted
		}
		mode := map[string]string{"p2p": "p2p"}[m.ChatType]
		w.fake.AddChat(larkfake.Chat{ChatID: m.ChatID, Name: "Corpus", ChatMode: mode})
		ms, _ := strconv.ParseInt(m.CreateTime, 10, 64)
		fm := larkfake.Message{MessageID: m.MessageID, RootID: m.RootID, ParentID: m.ParentID, ThreadID: m.ThreadID,
			MsgType: m.MessageType, Content: m.Content, CreateTime: time.UnixMilli(ms), SenderID: b.Sender.SenderID.OpenID, SenderType: b.Sender.SenderType}
		for _, x := range m.Mentions {
			fm.Mentions = append(fm.Mentions, larkfake.Mention{Key: x.Key, ID: x.ID.OpenID, IDType: "open_id", Name: x.Name})
		}
		w.fake.AddMessage(m.ChatID, fm)
		var data struct {
			Items []histItem `json:"items"`
		}
		if err := w.r.a.apiGet(ctx, fmt.Sprintf("/open-apis/im/v1/messages?container_id_type=chat&container_id=%s&start_time=%d&sort_type=ByCreateTimeAsc", m.ChatID, ms/1000), &data); err != nil {
			t.Fatal(err)
		}
		if len(data.Items) != 1 {
			t.Fatalf("%s: listed %d items", filepath.Base(f), len(data.Items))
		}
		fromList, err := w.r.a.normalize(ctx, data.Items[0].event(m.ChatID, eventChatType(mode)))
		if err != nil {
			t.Fatal(err)
		}
		fromEvent, err := w.r.a.normalize(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rpComparable(t, fromList), rpComparable(t, fromEvent); !bytes.Equal(got, want) {
			t.Errorf("%s: the file from the list differs from the event's:\n%s", filepath.Base(f), testutil.LineDiff(string(want), string(got)))
		}
		checked++
	}
	if checked < 2 {
		t.Errorf("only %d corpus events compared", checked)
	}
}

// The chat list is bounded per pass: the next pass lists on from where the
// last stopped (not from the start), skipping the chats done; the round's
// last pass marks the receiver live. A gap during a round starts it anew:
// the chats it had done are read again.
func TestReplayChatListResumes(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var chats []string
	for i := range 5 {
		id := fmt.Sprintf("oc_c%d", i)
		w.fake.AddChat(larkfake.Chat{ChatID: id, Name: id})
		w.add(id, "ou_ann", "in "+id, base)
		chats = append(chats, id)
	}
	w.r.replay.limits.chatPages, w.r.replay.limits.chatPageSize = 1, 2
	for pass, wantFiles := range []int{2, 4} {
		if err := w.r.pass(ctx, w.ws.Pipe); !errors.Is(err, chatsync.ErrIncomplete) {
			t.Fatalf("pass %d: %v, want chatsync.ErrIncomplete", pass, err)
		}
		if n := len(w.files(t)); n != wantFiles {
			t.Errorf("pass %d: %d files, want %d", pass, n, wantFiles)
		}
	}
	lists := w.fake.Calls(larkfake.RouteList)
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatalf("the round's last pass: %v", err)
	}
	if n := len(w.files(t)); n != 5 || !w.r.track.AllCaughtUp() {
		t.Errorf("after the round: %d files, live %v", n, w.r.track.AllCaughtUp())
	}
	if n := w.fake.Calls(larkfake.RouteChats); n != 3 {
		t.Errorf("%d chat list calls for 3 passes, want 3 (each goes on from the last)", n)
	}
	if n := w.fake.Calls(larkfake.RouteList) - lists; n != 1 {
		t.Errorf("the last pass read %d chats' histories, want 1 (the others were done)", n)
	}

	// A gap during a round: the next pass starts a new round.
	if err := w.r.pass(ctx, w.ws.Pipe); !errors.Is(err, chatsync.ErrIncomplete) {
		t.Fatalf("a new round's first pass: %v", err)
	}
	w.r.track.Gap()
	late := w.add(chats[0], "ou_bob", "after the gap", base.Add(time.Minute))
	if err := w.r.pass(ctx, w.ws.Pipe); !errors.Is(err, chatsync.ErrIncomplete) {
		t.Fatalf("after the gap: %v", err)
	}
	if w.files(t)["lark_"+late.MessageID] == nil {
		t.Error("a chat done before the gap was not read again after it")
	}
}

// A message whose resource (or forward) Lark keeps failing to serve does
// not hold its chat up: the messages after it are written at once, the
// position stays before it while it is retried, and after
// maxItemFailures passes it is written without what failed, noted.
func TestReplayPoisonMessage(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	w.r.track.Gap()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	first := w.add("oc_team", "ou_ann", "before", base)
	img := w.fake.AddMessage("oc_team", larkfake.Message{MsgType: "image", Content: `{"image_key":"img_v3_flaky"}`, SenderID: "ou_ann", CreateTime: base.Add(time.Second)})
	w.fake.AddResource(img, "img_v3_flaky", rpPNG, "image", "")
	fw := w.fake.AddMessage("oc_team", larkfake.Message{MsgType: "merge_forward", Content: "{}", SenderID: "ou_bob", CreateTime: base.Add(2 * time.Second)})
	last := w.add("oc_team", "ou_bob", "after", base.Add(3*time.Second))
	w.fake.Fail(larkfake.RouteResource, larkfake.Failure{Status: 500, Times: 1000})
	w.fake.Fail(larkfake.RouteGet, larkfake.Failure{Status: 503, Times: 1000})
	for pass := range maxItemFailures {
		if err := w.r.pass(ctx, w.ws.Pipe); err == nil || !strings.Contains(err.Error(), "oc_team") {
			t.Fatalf("pass %d: %v, want the chat's error", pass, err)
		}
		files := w.files(t)
		if files["lark_"+first.MessageID] == nil || files["lark_"+last.MessageID] == nil || files["lark_"+img] != nil || files["lark_"+fw] != nil {
			t.Fatalf("pass %d: files %v, want the two others only", pass, w.ids(t))
		}
		if got, want := w.checkpoint(t, "oc_team"), strconv.FormatInt(base.Add(time.Second).UnixMilli()-1, 10); got != want {
			t.Errorf("pass %d: checkpoint %s, want %s (before the failing message)", pass, got, want)
		}
	}
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatalf("the last try: %v", err)
	}
	files := w.files(t)
	m := files["lark_"+img]
	if m == nil || len(m.Artifacts) != 0 || !strings.Contains(fmt.Sprint(m.Metadata.Extra.Other["resources"]), "still failing after the catch-up's tries") {
		t.Errorf("the image message after the last try: %+v", m)
	}
	if f := files["lark_"+fw]; f == nil || !strings.Contains(fmt.Sprint(f.Metadata.Extra.Other["merge_forward"]), "after the catch-up's tries") {
		t.Errorf("the forward after the last try: %+v", f)
	}
	if got := w.checkpoint(t, "oc_team"); got != rpMillis(last.CreateTime) {
		t.Errorf("checkpoint %s, want the newest %s", got, rpMillis(last.CreateTime))
	}
	if !w.r.track.AllCaughtUp() {
		t.Error("the pass that wrote everything did not complete")
	}
}

// After a restart the receiver has no memory of the threads: a reply
// posted during the downtime in a thread whose root is before the chat's
// position is found by looking at the roots in the window before it.
func TestReplayThreadsAfterRestart(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	root := larkfake.Message{ChatID: "oc_team", Content: rpText("a thread"), SenderID: "ou_ann", ThreadID: "omt_long", CreateTime: base}
	root.MessageID = w.fake.AddMessage("oc_team", root)
	root.MsgType = "text"
	later := w.add("oc_team", "ou_ann", "later", base.Add(time.Hour))
	for _, m := range []larkfake.Message{root, later} {
		if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, m, "group")); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.checkpoint(t, "oc_team"); got != rpMillis(later.CreateTime) {
		t.Fatalf("checkpoint %s, want the live message's", got)
	}
	// Down; a reply in the thread meanwhile; a new receiver.
	reply := w.fake.AddMessage("oc_team", larkfake.Message{ParentID: root.MessageID, Content: rpText("while down"), SenderID: "ou_bob", CreateTime: base.Add(2 * time.Hour)})
	r2 := w.receiver(t)
	if err := r2.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	if w.files(t)["lark_"+reply] == nil {
		t.Error("the reply posted while down in a thread older than the position was not read")
	}
	if got := w.checkpoint(t, "oc_team"); got != rpMillis(base.Add(2*time.Hour)) {
		t.Errorf("checkpoint %s, want the reply's", got)
	}
}

// Lark lists no p2p chat to a tenant token: the p2p chats met are saved,
// so that after a restart a message sent in one while Courier was down is
// read, though the chat has not spoken since.
func TestReplayP2PAfterRestart(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_dm", ChatMode: "p2p"})
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	hi := w.add("oc_dm", "ou_bob", "hi", base)
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, hi, "p2p")); err != nil {
		t.Fatal(err)
	}
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	down := w.add("oc_dm", "ou_bob", "sent while Courier was down", base.Add(time.Minute))
	r2 := w.receiver(t)
	if err := r2.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	m := w.files(t)["lark_"+down.MessageID]
	if m == nil || m.Session.Type != schema.Direct {
		t.Errorf("the p2p message sent while down: %+v", m)
	}
	var saved []string
	v, _, _ := w.ws.Pipe.Checkpoint(ctx, p2pKey)
	if json.Unmarshal([]byte(v), &saved) != nil || !slices.Equal(saved, []string{"oc_dm"}) {
		t.Errorf("p2p chats saved %q, want [oc_dm]", v)
	}
}

// A pass stopped at a chat's bound saves the newest of the history it
// read, not a newer thread reply: the history between is unread.
func TestReplayBoundedChatWithThread(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	w.r.track.Gap()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	root := w.fake.AddMessage("oc_team", larkfake.Message{Content: rpText("root"), SenderID: "ou_ann", ThreadID: "omt_t", CreateTime: base})
	var all []string
	all = append(all, root)
	for i := range 5 {
		all = append(all, w.add("oc_team", "ou_ann", fmt.Sprint(i), base.Add(time.Duration(i+1)*time.Second)).MessageID)
	}
	late := w.fake.AddMessage("oc_team", larkfake.Message{ParentID: root, Content: rpText("late reply"), SenderID: "ou_bob", CreateTime: base.Add(time.Minute)})
	all = append(all, late)
	slices.Sort(all)
	w.r.replay.limits.perChat, w.r.replay.limits.pageSize = 1, 2
	if err := w.r.pass(ctx, w.ws.Pipe); !errors.Is(err, chatsync.ErrIncomplete) {
		t.Fatalf("bounded pass: %v", err)
	}
	if got, want := w.checkpoint(t, "oc_team"), rpMillis(base.Add(time.Second)); got != want {
		t.Errorf("checkpoint %s after a bounded pass, want %s (the newest of the history read, not the thread's reply)", got, want)
	}
	for range 5 {
		if err := w.r.pass(ctx, w.ws.Pipe); err == nil {
			break
		}
	}
	if got := w.ids(t); !slices.Equal(got, all) {
		t.Errorf("files %v, want %v", got, all)
	}
}

// rpP2PSink is the pipeline, with the saved list of p2p chats unreadable
// while fail is set.
type rpP2PSink struct {
	adapters.Sink
	fail bool
}

func (s *rpP2PSink) Checkpoint(ctx context.Context, key string) (string, bool, error) {
	if s.fail && key == p2pKey {
		return "", false, errRPCrash
	}
	return s.Sink.Checkpoint(ctx, key)
}

// A pass that could not read the saved list of p2p chats does not save a
// list of its own over it: the p2p chats met before the restart stay
// saved, and the one met since is added once the list is read.
func TestReplayP2PSavedListUnreadable(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_dm", ChatMode: "p2p"})
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_dm2", ChatMode: "p2p"})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, w.add("oc_dm", "ou_bob", "hi", base), "p2p")); err != nil {
		t.Fatal(err)
	}
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	r2 := w.receiver(t)
	if err := r2.handle(ctx, w.ws.Pipe, rpEvent(t, w.add("oc_dm2", "ou_ann", "hello", base.Add(time.Second)), "p2p")); err != nil {
		t.Fatal(err)
	}
	sink := &rpP2PSink{Sink: w.ws.Pipe, fail: true}
	if err := r2.pass(ctx, sink); err == nil || !errors.Is(err, errRPCrash) {
		t.Fatalf("a pass with the p2p list unreadable: %v, want its error", err)
	}
	sink.fail = false
	if err := r2.pass(ctx, sink); err != nil {
		t.Fatal(err)
	}
	var saved []string
	v, _, _ := w.ws.Pipe.Checkpoint(ctx, p2pKey)
	if json.Unmarshal([]byte(v), &saved) != nil || !slices.Equal(saved, []string{"oc_dm", "oc_dm2"}) {
		t.Errorf("p2p chats saved %q, want [oc_dm oc_dm2]", v)
	}
}

// A permission doctor fails on makes the running adapter degraded on
// /health once its source starts, naming it (issue 19, item 6); granted,
// the adapter is connected.
func TestMissingPermissionDegraded(t *testing.T) {
	w := rpNew(t)
	w.fake.Fail(larkfake.RouteChats, larkfake.Failure{Status: 400, Code: 99991672, Msg: "Access denied. One of the following scopes is required: [im:chat:readonly]"})
	if err := newReplaySource(w.r).(*replaySource).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.r.a.health.Set(adapters.StatusConnected, "")
	if h := w.r.a.health.Health(); h.Status != adapters.StatusDegraded || !strings.Contains(h.Detail, "im:chat:readonly") {
		t.Errorf("a permission missing: %+v", h)
	}
	r2 := w.receiver(t)
	if err := newReplaySource(r2).(*replaySource).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r2.a.health.Set(adapters.StatusConnected, "")
	if h := r2.a.health.Health(); h.Status != adapters.StatusConnected {
		t.Errorf("every permission granted: %+v", h)
	}
}
