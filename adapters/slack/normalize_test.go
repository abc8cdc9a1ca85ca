package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/*.json")

// The workspace of the fixtures: who is who, and what each conversation is.
const (
	botUser = "U0BOT00001"
	botID   = "B0BOT00001"
	// pngBytes is the content of the fixtures' file F0DIAGRAM1.
	pngBytes = "\x89PNG\r\n\x1a\nfakeimage!!"
)

// workspace starts a fake Slack that knows the fixtures' users,
// conversations and file.
func workspace(t testing.TB) *slackfake.Server {
	t.Helper()
	s := slackfake.New(t, slackfake.Options{BotUserID: botUser, BotID: botID})
	ann := slackapi.User{ID: "U0ANN0001", Name: "ann", RealName: "Ann Lee"}
	ann.Profile.DisplayName = "Ann"
	ann.Profile.RealName = "Ann Lee"
	bob := slackapi.User{ID: "U0BOB0002", Name: "bob", RealName: "Bob Stone"}
	bob.Profile.RealName = "Bob Stone"
	cat := slackapi.User{ID: "U0CAT0003", Name: "cat"}
	bot := slackapi.User{ID: botUser, Name: "courier", IsBot: true}
	bot.Profile.DisplayName = "Courier"
	for _, u := range []slackapi.User{ann, bob, cat, bot} {
		s.AddUser(u)
	}
	conv := func(id, name string, f func(c *slackapi.Channel)) {
		c := slackapi.Channel{}
		c.ID, c.Name = id, name
		if f != nil {
			f(&c)
		}
		s.AddConversation(c)
	}
	conv("C0GEN0001", "general", func(c *slackapi.Channel) { c.IsMember = true })
	conv("G0PRIV0001", "secret-plans", func(c *slackapi.Channel) { c.IsMember = true })
	conv("D0DM000001", "", func(c *slackapi.Channel) { c.User = "U0ANN0001" })
	conv("G0MPIM0001", "mpdm-ann--bob--cat-1", func(c *slackapi.Channel) { c.IsMpIM = true; c.IsMember = true })
	f := slackapi.File{ID: "F0DIAGRAM1", Name: "diagram.png", Mimetype: "image/png"}
	s.AddFile(f, []byte(pngBytes))
	return s
}

// newTestAdapter returns an adapter on the fake with a fresh dropzone;
// change adjusts its options first.
func newTestAdapter(t testing.TB, s *slackfake.Server, change func(o *Options)) *Adapter {
	t.Helper()
	o := Options{
		Config: Config{Enabled: true, Mode: "socket", BotToken: confkit.Secret(s.Options().BotToken),
			AppToken: confkit.Secret(s.Options().AppToken), APIURL: s.APIURL()},
		Limits:   confkit.Limits{MaxArtifactBytes: 1 << 20, MaxTextBytes: 1 << 20},
		Dropzone: testutil.NewDropzone(t, nil),
	}
	if change != nil {
		change(&o)
	}
	return newAdapter(o)
}

// fixture reads testdata/name.json as the event a transport would hand
// over, with {{FAKE}} standing for the fake's base URL.
func fixture(t testing.TB, name, base string) event {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.ReplaceAll(raw, []byte("{{FAKE}}"), []byte(base))
	var f struct {
		EventID string          `json:"event_id"`
		Channel string          `json:"channel"`
		Event   json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return event{ID: f.EventID, Channel: f.Channel, Inner: f.Event}
}

// goldenText is what a golden file holds for the outcome of normalize:
// the file (received_at fixed, the fake's URL made stable), or a line
// saying that nothing is written, or that the message is the bot's own.
func goldenText(t testing.TB, name, base string, ev *adapters.Event) []byte {
	t.Helper()
	switch {
	case ev == nil:
		return []byte("# writes nothing\n")
	case ev.Self:
		return []byte("# the bot's own: " + ev.Message.ID + "\n")
	}
	m := *ev.Message
	m.ReceivedAt = schema.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	data := testutil.CheckMessage(t, name, &m)
	out := []byte(fmt.Sprintf("# keys: %s; debounce: %v\n", strings.Join(ev.Keys, " "), ev.Debounce))
	return append(out, bytes.ReplaceAll(data, []byte(base), []byte("http://slack.test"))...)
}

// TestGolden normalises each testdata/X.json against the fake workspace
// and compares the outcome with testdata/X.golden.md, as the email
// adapter's golden test does. Run with -update to rewrite them after a
// deliberate change.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no testdata/*.json")
	}
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			ev, err := a.normalize(context.Background(), fixture(t, name, s.URL()))
			if err != nil {
				t.Fatalf("normalize: %v", err)
			}
			got := goldenText(t, name, s.URL(), ev)
			golden := filepath.Join("testdata", name+".golden.md")
			if *updateGolden {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run go test -update if the change is deliberate):\n%s", in, golden, testutil.LineDiff(string(want), string(got)))
			}
		})
	}
}

// normalizeFixture normalises one fixture on a, failing on an error.
func normalizeFixture(t testing.TB, a *Adapter, s *slackfake.Server, name string) *adapters.Event {
	t.Helper()
	ev, err := a.normalize(context.Background(), fixture(t, name, s.URL()))
	if err != nil {
		t.Fatalf("%s: normalize: %v", name, err)
	}
	return ev
}

// TestRules checks each rule on its own, whatever the golden files say.
func TestRules(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	get := func(t *testing.T, name string) *schema.Message {
		t.Helper()
		ev := normalizeFixture(t, a, s, name)
		if ev == nil || ev.Self || ev.Message == nil {
			t.Fatalf("%s: want a message written, got %+v", name, ev)
		}
		testutil.CheckMessage(t, name, ev.Message)
		return ev.Message
	}
	for _, tc := range []struct {
		name                string
		id                  string
		session             schema.Session
		threadRoot, replyTo string
		from                schema.Participant
	}{
		{"channel", "slack_C0GEN0001_1700000100_000100", schema.Session{ID: "C0GEN0001", Type: schema.Group, Name: "general"}, "", "",
			schema.Participant{ID: "U0ANN0001", Name: "Ann", PlatformID: "U0ANN0001"}},
		{"private", "slack_G0PRIV0001_1700000200_000200", schema.Session{ID: "G0PRIV0001", Type: schema.Group, Name: "secret-plans"}, "", "",
			schema.Participant{ID: "U0BOB0002", Name: "Bob Stone", PlatformID: "U0BOB0002"}},
		{"dm", "slack_D0DM000001_1700000300_000300", schema.Session{ID: "D0DM000001", Type: schema.Direct, Name: "Ann"}, "", "",
			schema.Participant{ID: "U0ANN0001", Name: "Ann", PlatformID: "U0ANN0001"}},
		{"group_dm", "slack_G0MPIM0001_1700000400_000400", schema.Session{ID: "G0MPIM0001", Type: schema.Group, Name: "mpdm-ann--bob--cat-1"}, "", "",
			schema.Participant{ID: "U0CAT0003", Name: "cat", PlatformID: "U0CAT0003"}},
		{"thread_reply", "slack_C0GEN0001_1700000500_000500",
			schema.Session{ID: "C0GEN0001", Type: schema.Group, Name: "general", ThreadKey: "1700000100.000100"},
			"slack_C0GEN0001_1700000100_000100", "slack_C0GEN0001_1700000100_000100",
			schema.Participant{ID: "U0BOB0002", Name: "Bob Stone", PlatformID: "U0BOB0002"}},
		{"thread_broadcast", "slack_C0GEN0001_1700000600_000600",
			schema.Session{ID: "C0GEN0001", Type: schema.Group, Name: "general", ThreadKey: "1700000100.000100"},
			"slack_C0GEN0001_1700000100_000100", "slack_C0GEN0001_1700000100_000100",
			schema.Participant{ID: "U0ANN0001", Name: "Ann", PlatformID: "U0ANN0001"}},
		// app_mention has no channel_type: a D channel is a DM by
		// conversations.info.
		{"app_mention_dm_no_type", "slack_D0DM000001_1700001500_001500", schema.Session{ID: "D0DM000001", Type: schema.Direct, Name: "Ann"}, "", "",
			schema.Participant{ID: "U0ANN0001", Name: "Ann", PlatformID: "U0ANN0001"}},
		// History messages name no channel: the transport's Channel.
		{"history_message", "slack_C0GEN0001_1700001400_001400", schema.Session{ID: "C0GEN0001", Type: schema.Group, Name: "general"}, "", "",
			schema.Participant{ID: "U0CAT0003", Name: "cat", PlatformID: "U0CAT0003"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := get(t, tc.name)
			if m.ID != tc.id {
				t.Errorf("id = %s, want %s", m.ID, tc.id)
			}
			if m.Session != tc.session {
				t.Errorf("session = %+v, want %+v", m.Session, tc.session)
			}
			if string(m.ThreadRoot) != tc.threadRoot || string(m.ReplyTo) != tc.replyTo {
				t.Errorf("thread_root, reply_to = %q, %q; want %q, %q", m.ThreadRoot, m.ReplyTo, tc.threadRoot, tc.replyTo)
			}
			if m.Participants.From != tc.from {
				t.Errorf("from = %+v, want %+v", m.Participants.From, tc.from)
			}
		})
	}

	t.Run("timestamp", func(t *testing.T) {
		m := get(t, "channel")
		if want := time.Unix(1700000100, 100_000).UTC(); !m.Timestamp.Equal(want) {
			t.Errorf("timestamp = %v, want %v", m.Timestamp, want)
		}
		if d := time.Since(m.ReceivedAt.Time); d < 0 || d > time.Minute {
			t.Errorf("received_at = %v, not now", m.ReceivedAt)
		}
	})

	t.Run("mentions resolved", func(t *testing.T) {
		m := get(t, "channel")
		for _, want := range []string{"@Bob Stone", "#general", "the spec"} {
			if !strings.Contains(m.Body, want) || !strings.Contains(string(m.Content.Text), want) {
				t.Errorf("body %q or text %q lacks %q", m.Body, m.Content.Text, want)
			}
		}
		if strings.Contains(m.Body, "U0BOB0002") {
			t.Errorf("body %q shows the id instead of the name", m.Body)
		}
		got := m.Metadata.Extra.Other["mentions"]
		if fmt.Sprint(got) != "[U0BOB0002]" {
			t.Errorf("metadata.extra.mentions = %v, want [U0BOB0002]", got)
		}
		want := []schema.Mention{{Type: schema.MentionUser, Target: "U0BOB0002", Name: "Bob Stone"}, {Type: schema.MentionAll, Target: "here"}}
		if fmt.Sprint(m.Participants.Mentions) != fmt.Sprint(want) {
			t.Errorf("participants.mentions = %+v, want %+v", m.Participants.Mentions, want)
		}
	})

	t.Run("edit", func(t *testing.T) {
		m := get(t, "edit")
		if m.ID != "slack_C0GEN0001_1700000900_000900" {
			t.Errorf("id = %s: an edit is a new file with the event's own ts", m.ID)
		}
		if m.Metadata.Extra.Edits != "slack_C0GEN0001_1700000600_000600" {
			t.Errorf("edits = %q", m.Metadata.Extra.Edits)
		}
		if !strings.Contains(m.Body, "monday") || strings.Contains(m.Body, "friday") {
			t.Errorf("body %q: want the new words only", m.Body)
		}
		if m.Session.ThreadKey != "1700000100.000100" {
			t.Errorf("thread_key = %q: an edit belongs where the edited message is", m.Session.ThreadKey)
		}
	})

	t.Run("delete", func(t *testing.T) {
		m := get(t, "delete")
		if m.ID != "slack_C0GEN0001_1700001000_001000" || m.Metadata.Extra.Recalls != "slack_C0GEN0001_1700000500_000500" {
			t.Errorf("id %s, recalls %q", m.ID, m.Metadata.Extra.Recalls)
		}
		data, _ := schema.Encode(m)
		if bytes.Contains(data, []byte("secret words")) {
			t.Errorf("the deleted message's words are in the file:\n%s", data)
		}
		if !strings.Contains(m.Body, "deleted") {
			t.Errorf("body %q does not say the message was deleted", m.Body)
		}
	})

	t.Run("legacy attachments", func(t *testing.T) {
		m := get(t, "bot_attachments")
		for _, want := range []string{"Nightly build", "Build 42 failed", "https://ci.example.com/42", "3 tests failed", "Branch", "main", "@Ann", "ci.example.com"} {
			if !strings.Contains(m.Body, want) {
				t.Errorf("body lacks %q:\n%s", want, m.Body)
			}
		}
		if m.Participants.From.ID != "B0CI000001" || m.Participants.From.Name != "ci" {
			t.Errorf("from = %+v, want the bot B0CI000001 named ci", m.Participants.From)
		}
	})

	for _, name := range []string{"edit_unfurl", "channel_join"} {
		t.Run(name+" writes nothing", func(t *testing.T) {
			if ev := normalizeFixture(t, a, s, name); ev != nil {
				t.Errorf("got %+v, want nothing", ev.Message)
			}
		})
	}
}

// TestMentionAndMessageOneFile: the message and the app_mention of one
// post have one id (so the pipeline writes one file), and each event's
// event_id is a key, so a redelivered edit is dropped too.
func TestMentionAndMessageOneFile(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	m1 := normalizeFixture(t, a, s, "app_mention")
	m2 := normalizeFixture(t, a, s, "app_mention_message")
	if m1 == nil || m2 == nil {
		t.Fatal("want both written")
	}
	if m1.Message.ID != m2.Message.ID || m1.Message.ID != "slack_C0GEN0001_1700000700_000700" {
		t.Errorf("ids %s and %s: want one id", m1.Message.ID, m2.Message.ID)
	}
	if m1.Message.Body != m2.Message.Body {
		t.Errorf("bodies differ:\n%s\n%s", m1.Message.Body, m2.Message.Body)
	}
	for _, ev := range []*adapters.Event{m1, m2} {
		want := mailbox.EventKey(schema.Slack, ev.Message.Metadata.Extra.EventID)
		if len(ev.Keys) != 1 || ev.Keys[0] != want {
			t.Errorf("keys %v, want [%s] (mailbox.EventKey, which the index rebuilds from the file)", ev.Keys, want)
		}
	}
	for name, want := range map[string]bool{"thread_reply": true, "thread_broadcast": true, "channel": false, "dm": false} {
		if ev := normalizeFixture(t, a, s, name); ev.ThreadCorrelation != want {
			t.Errorf("%s: ThreadCorrelation %v, want %v (a reply in a thread answers the thread)", name, ev.ThreadCorrelation, want)
		}
	}
	edit := normalizeFixture(t, a, s, "edit")
	if len(edit.Keys) != 1 || edit.Keys[0] != schema.EventKey(schema.Slack, "Ev0000000012") || edit.Debounce {
		t.Errorf("edit: keys %v debounce %v; want its event key and no debounce", edit.Keys, edit.Debounce)
	}
}

// TestOwnMessages: the bot's own posts, matched by user id or by bot id,
// are marked Self and cost no lookups or downloads.
func TestOwnMessages(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	for _, tc := range []struct{ name, inner string }{
		{"by user id", `{"type":"message","channel":"C0GEN0001","user":"` + botUser + `","text":"hi","ts":"1700002000.000001"}`},
		{"by bot id", `{"type":"message","subtype":"bot_message","channel":"C0GEN0001","bot_id":"` + botID + `","text":"hi","ts":"1700002000.000002"}`},
		{"our edit", `{"type":"message","subtype":"message_changed","channel":"C0GEN0001","ts":"1700002000.000003","message":{"type":"message","user":"` + botUser + `","bot_id":"` + botID + `","text":"new","ts":"1700002000.000001"},"previous_message":{"type":"message","user":"` + botUser + `","text":"old","ts":"1700002000.000001"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Calls("users.info") + s.Calls("conversations.info")
			ev, err := a.normalize(context.Background(), event{ID: "EvSELF", Inner: json.RawMessage(tc.inner)})
			if err != nil {
				t.Fatal(err)
			}
			if ev == nil || !ev.Self || ev.Message == nil || ev.Message.ID == "" {
				t.Fatalf("got %+v, want an event marked Self with the message's id", ev)
			}
			if after := s.Calls("users.info") + s.Calls("conversations.info"); after != before {
				t.Errorf("%d lookups for the bot's own message", after-before)
			}
		})
	}
	// Another bot's message is not our own.
	ev := normalizeFixture(t, a, s, "bot_attachments")
	if ev == nil || ev.Self {
		t.Fatalf("another bot's message: %+v", ev)
	}
}

// TestIgnoreBotsAndAllowList: bots are ingested unless ignore_bots, and
// only the allowed channels are.
func TestIgnoreBotsAndAllowList(t *testing.T) {
	s := workspace(t)
	modern := event{ID: "EvBOT", Inner: json.RawMessage(`{"type":"message","channel":"C0GEN0001","user":"U0OTHERB1","bot_id":"B0OTHER01","bot_profile":{"name":"other-app"},"text":"report ready","ts":"1700003000.000001"}`)}
	for _, tc := range []struct {
		name   string
		change func(o *Options)
		fix    string
		ev     *event
		want   bool
	}{
		{"bot_message, ignore_bots off", nil, "bot_attachments", nil, true},
		{"bot_message, ignore_bots on", func(o *Options) { o.Config.IgnoreBots = true }, "bot_attachments", nil, false},
		{"app bot with a user id, ignore_bots off", nil, "", &modern, true},
		{"app bot with a user id, ignore_bots on", func(o *Options) { o.Config.IgnoreBots = true }, "", &modern, false},
		{"a person, ignore_bots on", func(o *Options) { o.Config.IgnoreBots = true }, "channel", nil, true},
		{"allowed channel", func(o *Options) { o.Config.Channels = []string{"C0GEN0001"} }, "channel", nil, true},
		{"channel not allowed", func(o *Options) { o.Config.Channels = []string{"G0PRIV0001"} }, "channel", nil, false},
		{"DM not allowed", func(o *Options) { o.Config.Channels = []string{"C0GEN0001"} }, "dm", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAdapter(t, s, tc.change)
			var ev *adapters.Event
			if tc.ev != nil {
				var err error
				if ev, err = a.normalize(context.Background(), *tc.ev); err != nil {
					t.Fatal(err)
				}
			} else {
				ev = normalizeFixture(t, a, s, tc.fix)
			}
			if got := ev != nil && !ev.Self; got != tc.want {
				t.Errorf("written = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNotMessages: events that are not messages write nothing, counted
// by reason; a message without a ts, and an event that is not JSON, are
// no error to retry (a retry would not mend them) but Undeliverable: the
// transport sets them aside as dead letters (they wrote nothing and said
// so in the log only, before).
func TestNotMessages(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	for _, inner := range []string{
		`{"type":"file_shared","channel_id":"C0GEN0001","file_id":"F1","event_ts":"1.2"}`,
		`{"type":"reaction_added","user":"U0ANN0001","reaction":"+1","item":{"type":"message","channel":"C0GEN0001","ts":"1700000100.000100"}}`,
		`{"type":"message","subtype":"channel_topic","channel":"C0GEN0001","user":"U0ANN0001","text":"set the topic","ts":"1700004000.000001"}`,
		`{"type":"message","subtype":"message_replied","hidden":true,"channel":"C0GEN0001","ts":"1700004000.000002","message":{"type":"message","user":"U0ANN0001","text":"x","ts":"1700000100.000100"}}`,
	} {
		ev, err := a.normalize(context.Background(), event{ID: "EvX", Inner: json.RawMessage(inner)})
		if err != nil || ev != nil {
			t.Errorf("%s: got %+v, %v; want nothing and no error", inner, ev, err)
		}
	}
	if got, want := a.ignored.Counts(), map[string]uint64{"event_type": 2, "notice": 2}; !maps.Equal(got, want) {
		t.Errorf("ignored %v, want %v", got, want)
	}
	for inner, reason := range map[string]string{
		`{"type":"message","channel":"C0GEN0001","user":"U0ANN0001","text":"no ts"}`: "slack: the event (message) has no ts: it cannot be placed",
		`not json`: "slack: the event is not a JSON object",
	} {
		ev, err := a.normalize(context.Background(), event{ID: "EvX", Inner: json.RawMessage(inner)})
		if got, ok := adapters.UndeliverableReason(err); ev != nil || !ok || !strings.HasPrefix(got, reason) {
			t.Errorf("%s: got %+v, %v; want Undeliverable: %s", inner, ev, err, reason)
		}
	}
	// A field of an unexpected type does not lose the words.
	ev, err := a.normalize(context.Background(), event{ID: "EvY", Inner: json.RawMessage(`{"type":"message","channel":"C0GEN0001","user":"U0ANN0001","text":"words kept","ts":"1700004000.000003","files":"oops","hidden":"no"}`)})
	if err != nil || ev == nil || !strings.Contains(ev.Message.Body, "words kept") {
		t.Errorf("odd field types: got %+v, %v", ev, err)
	}
}

// TestIdentifyFailureRetries: without auth.test the bot's own messages
// cannot be told apart, so the event is retried rather than written.
func TestIdentifyFailureRetries(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	s.Fail("auth.test", slackfake.Failure{Status: 500})
	ev, err := a.normalize(context.Background(), fixture(t, "channel", s.URL()))
	if err == nil || ev != nil || !adapters.IsTemporary(err) {
		t.Fatalf("got %+v, %v; want a temporary error", ev, err)
	}
	if ev := normalizeFixture(t, a, s, "channel"); ev == nil {
		t.Fatal("second try: nothing")
	}
}

// TestProviderRawStripsSecrets: provider_raw keeps the event without any
// token, and is bounded.
func TestProviderRawStripsSecrets(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	inner := `{"type":"message","channel":"D0DM000001","channel_type":"im","user":"U0ANN0001","text":"hi","ts":"1700005000.000001","token":"verif-SECRET1","assistant_thread":{"action_token":"act-SECRET2"},"blocks":[{"type":"x","token":"SECRET3"}]}`
	ev, err := a.normalize(context.Background(), event{ID: "EvR", Inner: json.RawMessage(inner)})
	if err != nil || ev == nil {
		t.Fatal(ev, err)
	}
	data := testutil.CheckMessage(t, "raw", ev.Message)
	if bytes.Contains(data, []byte("SECRET")) {
		t.Errorf("a token reached the file:\n%s", data)
	}
	if ev.Message.Metadata.ProviderRaw["user"] != "U0ANN0001" {
		t.Errorf("provider_raw lost the event: %v", ev.Message.Metadata.ProviderRaw)
	}
	big := fmt.Sprintf(`{"type":"message","channel":"C0GEN0001","user":"U0ANN0001","text":"hi","ts":"1700005000.000002","blocks":[{"type":"section","text":{"type":"mrkdwn","text":%q}}]}`, strings.Repeat("x", 100<<10))
	ev, err = a.normalize(context.Background(), event{ID: "EvR2", Inner: json.RawMessage(big)})
	if err != nil || ev == nil {
		t.Fatal(ev, err)
	}
	raw, _ := json.Marshal(ev.Message.Metadata.ProviderRaw)
	if len(raw) > maxRaw || ev.Message.Metadata.ProviderRaw["ts"] != "1700005000.000002" {
		t.Errorf("provider_raw of a large event: %d bytes, %v", len(raw), ev.Message.Metadata.ProviderRaw["ts"])
	}
}

// TestTextBound: a message longer than max_text_bytes keeps its head in
// the file and the rest in text artifacts, whose contents complete it.
func TestTextBound(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, func(o *Options) { o.Limits.MaxTextBytes = 3000 })
	var words strings.Builder
	for i := 0; words.Len() < 10000; i++ {
		fmt.Fprintf(&words, "word%d ", i)
	}
	inner, _ := json.Marshal(map[string]any{"type": "message", "channel": "C0GEN0001", "user": "U0ANN0001", "text": words.String(), "ts": "1700006000.000001"})
	ev, err := a.normalize(context.Background(), event{ID: "EvT", Inner: inner})
	if err != nil || ev == nil {
		t.Fatal(ev, err)
	}
	m := ev.Message
	testutil.CheckMessage(t, "long", m)
	if n := len(m.Content.Text) + 2*len(m.Content.Markdown); n > 3000 {
		t.Errorf("the file keeps %d bytes of text, over the bound of 3000", n)
	}
	ov := m.Metadata.Extra.Overflow
	if len(ov) != 2 {
		t.Fatalf("overflow = %+v, want content.text and content.markdown", ov)
	}
	for _, o := range ov {
		kept := string(m.Content.Text)
		if o.Field == "content.markdown" {
			kept = string(m.Content.Markdown)
		}
		f, err := a.dz.Open(o.Artifacts[0])
		if err != nil {
			t.Fatal(err)
		}
		var rest bytes.Buffer
		rest.ReadFrom(f)
		f.Close()
		if whole := kept + rest.String(); whole != strings.TrimRight(words.String(), " ") && whole != words.String() {
			t.Errorf("%s: kept + rest is not the whole text (%d + %d bytes of %d)", o.Field, len(kept), rest.Len(), words.Len())
		}
	}
	if !strings.Contains(m.Body, "goes on beyond what its file keeps") {
		t.Errorf("the body does not say where it goes on: ...%s", m.Body[max(0, len(m.Body)-200):])
	}
}

// slackFiles answers every request to a host other than the fake's with
// 404, as Slack answers a file that is gone: the corpus names files on
// files.slack.com, which a test must not reach.
type slackFiles struct{ local http.RoundTripper }

func (s slackFiles) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Hostname() == "127.0.0.1" {
		return s.local.RoundTrip(r)
	}
	return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("not found")), Request: r}, nil
}

// corpusEvents reads a corpus file as the events a transport would hand
// over: an Events API callback or a Socket Mode envelope gives its inner
// event, a bare event or message is itself (a message from history has no
// channel: the transport names it), an export thread gives each message,
// and a block is posted in a message of its own. Frames that carry no
// event (hello, disconnect, url_verification, a slash command) give none.
func corpusEvents(t *testing.T, rel string, data []byte) []event {
	t.Helper()
	const channel = "C0CORPUS01"
	if strings.HasPrefix(rel, "blocks/") {
		inner, _ := json.Marshal(map[string]any{"type": "message", "channel": channel, "user": "U0ANN0001",
			"text": "(the blocks' text)", "ts": "1700009000.000001", "blocks": []json.RawMessage{data}})
		return []event{{ID: "EvBLOCK", Inner: inner}}
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
		var list []json.RawMessage
		if err := json.Unmarshal(data, &list); err != nil {
			t.Fatal(err)
		}
		var evs []event
		for _, m := range list {
			evs = append(evs, event{Channel: channel, Inner: m})
		}
		return evs
	}
	var f struct {
		Type    string          `json:"type"`
		EventID string          `json:"event_id"`
		Event   json.RawMessage `json:"event"`
		Payload *struct {
			EventID string          `json:"event_id"`
			Event   json.RawMessage `json:"event"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	switch {
	case f.Payload != nil && f.Payload.Event != nil:
		return []event{{ID: f.Payload.EventID, Inner: f.Payload.Event}}
	case f.Payload != nil:
		return nil
	case f.Event != nil:
		return []event{{ID: f.EventID, Inner: f.Event, Channel: channel}}
	case f.Type == "hello" || f.Type == "disconnect" || f.Type == "url_verification":
		return nil
	}
	return []event{{Channel: channel, Inner: data}}
}

// corpusNil are the corpus events that write nothing on purpose, each
// for a reason the rules give.
var corpusNil = map[string]string{
	"events-api/message_changed_assistant_thread.bolt-python.json": "Slack titling an assistant thread (assistant_app_thread)",
	"events/file_shared.slack-go.json":                             "file_shared is not a message",
	"messages/channel_join_invited.slack-go.json":                  "channel_join is a notice",
	"schema-superset/MessageRepliedPayload.java-slack-sdk.json":    "message_replied is a notice",
	"schema-superset/MessageChangedPayload.java-slack-sdk.json":    "every field empty: an edit that leaves the words as they were",
}

// corpusDead are the corpus events that cannot be placed, each with what
// its dead letter's reason says (they wrote nothing, and said so in the
// log only, before).
var corpusDead = map[string]string{
	"events-api/event_callback_message.slack-go.json":                   "(app_mention) has no ts", // an app_mention with an event_ts only
	"events/message_changed_in_thread_minimal.bolt-python.json":         "has no ts",               // a minimal edit: no ts or event_ts, no id for its file
	"events/message_deleted_in_thread_minimal.bolt-python.json":         "has no ts",
	"schema-superset/AppMentionPayload.java-slack-sdk.json":             "has no ts", // every field empty
	"schema-superset/MessageBotPayload.java-slack-sdk.json":             "has no ts",
	"schema-superset/MessagePayload.java-slack-sdk.json":                "has no ts",
	"schema-superset/MessageThreadBroadcastPayload.java-slack-sdk.json": "has no ts",
	"schema-superset/MessageDeletedPayload.java-slack-sdk.json":         "names no message",
	"schema-superset/MessageFileSharePayload.java-slack-sdk.json":       "has no ts",
}

// TestCorpus normalises every event and message of the shared corpus
// (COURIER_CORPUS): each one writes a file that validates (Validate and
// the protocol's JSON Schema) with a body, or is one of corpusNil, or is
// Undeliverable as corpusDead says. The
// schema supersets, whose every field is empty, are normalised again with
// a channel and a ts filled in, so that all their fields are read.
func TestCorpus(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "slack")
	s := workspace(t)
	a := newTestAdapter(t, s, func(o *Options) {
		o.HTTPClient = &http.Client{Transport: slackFiles{local: http.DefaultTransport}, Timeout: 10 * time.Second}
	})
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return err
	})
	if len(files) == 0 {
		t.Fatalf("no .json under %s", dir)
	}
	written, nils := 0, 0
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i, ev := range corpusEvents(t, rel, data) {
				got, err := a.normalize(context.Background(), ev)
				dead, isDead := adapters.UndeliverableReason(err)
				if err != nil && !isDead {
					t.Fatalf("event %d: %v", i, err)
				}
				reason, wantNil := corpusNil[rel]
				switch want := corpusDead[rel]; {
				case isDead && want != "" && strings.Contains(dead, want):
					nils++
				case isDead || want != "":
					t.Errorf("event %d: %+v, %q; want it Undeliverable: %q", i, got, dead, want)
				case got == nil && wantNil:
					nils++
				case got == nil:
					t.Errorf("event %d writes nothing", i)
				case wantNil:
					t.Errorf("event %d writes %s; want nothing (%s)", i, got.Message.ID, reason)
				case got.Self:
					t.Errorf("event %d taken for the bot's own", i)
				default:
					written++
					testutil.CheckMessage(t, rel, got.Message)
					if strings.TrimSpace(got.Message.Body) == "" {
						t.Errorf("event %d: empty body", i)
					}
				}
				if strings.HasPrefix(rel, "schema-superset/") && !strings.Contains(reason, "notice") {
					var v map[string]any
					json.Unmarshal(ev.Inner, &v)
					v["channel"], v["ts"], v["user"], v["deleted_ts"] = "C0CORPUS01", "1700009100.000001", "U0ANN0001", "1700009000.000001"
					if m, ok := v["message"].(map[string]any); ok {
						m["ts"], m["text"] = "1700009000.000001", "changed"
					}
					filled, _ := json.Marshal(v)
					got, err := a.normalize(context.Background(), event{ID: ev.ID, Inner: filled})
					if err != nil || got == nil || got.Self {
						t.Fatalf("filled in: %+v, %v", got, err)
					}
					testutil.CheckMessage(t, rel+" (filled in)", got.Message)
					if strings.TrimSpace(got.Message.Body) == "" {
						t.Errorf("filled in: empty body")
					}
				}
			}
		})
	}
	t.Logf("corpus: %d files, %d messages written, %d events that write nothing or are set aside", len(files), written, nils)
}

// BenchmarkNormalize is one channel message with a mention, a link and
// rich_text blocks, the names cached (the steady state: Slack's answers
// are what a cold cache costs, and the fake's say nothing of Slack's).
func BenchmarkNormalize(b *testing.B) {
	s := workspace(b)
	a := newTestAdapter(b, s, nil)
	ev := fixture(b, "thread_broadcast", s.URL())
	if _, err := a.normalize(context.Background(), ev); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.normalize(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNormalizeFile adds a 1 MiB file fetched from the fake and
// stored in the dropzone (fsync included).
func BenchmarkNormalizeFile(b *testing.B) {
	s := workspace(b)
	a := newTestAdapter(b, s, func(o *Options) { o.Limits.MaxArtifactBytes = 2 << 20 })
	content := bytes.Repeat([]byte("0123456789abcdef"), 64<<10)
	f := s.AddFile(slackapi.File{ID: "F0BENCH001", Name: "b.bin", Mimetype: "application/octet-stream"}, content)
	inner, _ := json.Marshal(map[string]any{"type": "message", "subtype": "file_share", "channel": "C0GEN0001", "user": "U0ANN0001",
		"text": "file", "ts": "1700009900.000001", "files": []map[string]any{{"id": f.ID, "name": f.Name, "mimetype": f.Mimetype,
			"url_private_download": f.URLPrivateDownload}}})
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if _, err := a.normalize(context.Background(), event{ID: "EvBF", Inner: inner}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPipelineOneFile runs normalize's events through the real ingest
// pipeline into a mailbox: the message and the app_mention of one post
// make one file, a redelivered edit (same event_id) writes nothing more,
// the bot's own post writes nothing, and every file written validates.
func TestPipelineOneFile(t *testing.T) {
	w := wstest.New(t, nil)
	mb, dz, p := w.MB, w.DZ, w.Pipe
	s := workspace(t)
	a := newTestAdapter(t, s, func(o *Options) { o.Dropzone = dz })
	own := event{ID: "EvOWN", Inner: json.RawMessage(`{"type":"message","channel":"C0GEN0001","user":"` + botUser + `","text":"our reply","ts":"1700009500.000001"}`)}
	evs := []event{fixture(t, "app_mention", s.URL()), fixture(t, "app_mention_message", s.URL()),
		fixture(t, "edit", s.URL()), fixture(t, "edit", s.URL()), own, fixture(t, "file_share", s.URL())}
	for _, e := range evs {
		ev, err := a.normalize(context.Background(), e)
		if err != nil || ev == nil {
			t.Fatalf("%s: %+v, %v", e.ID, ev, err)
		}
		if err := p.Deliver(context.Background(), *ev); err != nil {
			t.Fatal(err)
		}
	}
	dir := mb.Dir(mailbox.BoxInbound, schema.Slack)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		testutil.ValidateInbound(t, e.Name(), data)
	}
	// The mention and its message are one file, the edit once.
	if len(names) != 3 {
		t.Fatalf("files %v, want 3", names)
	}
	for _, id := range []string{"slack_C0GEN0001_1700000700_000700", "slack_C0GEN0001_1700000800_000800", "slack_C0GEN0001_1700000900_000900"} {
		found := false
		for _, n := range names {
			found = found || strings.Contains(n, id)
		}
		if !found {
			t.Errorf("no file for %s in %v", id, names)
		}
	}
}

// TestSameWords: an edit writes a file only when the words changed: the
// text, the blocks (by value) or the files; a preview added does not.
func TestSameWords(t *testing.T) {
	msg := func(s string) *message {
		var m message
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return &m
	}
	base := `{"text":"hi","blocks":[{"type":"rich_text","block_id":"a","elements":[]}],"files":[{"id":"F1"}]}`
	for _, tc := range []struct {
		cur  string
		same bool
	}{
		{base, true},
		{`{"files":[{"id":"F1"}],"blocks":[{"elements":[],"block_id":"a","type":"rich_text"}],"text":"hi"}`, true}, // key order
		{`{"text":"hi","blocks":[{"type":"rich_text","block_id":"a","elements":[]}],"files":[{"id":"F1"}],"attachments":[{"from_url":"https://x.example"}],"reply_count":3}`, true},
		{`{"text":"hi!","blocks":[{"type":"rich_text","block_id":"a","elements":[]}],"files":[{"id":"F1"}]}`, false},
		{`{"text":"hi","blocks":[{"type":"rich_text","block_id":"b","elements":[]}],"files":[{"id":"F1"}]}`, false},
		{`{"text":"hi","blocks":[{"type":"rich_text","block_id":"a","elements":[]}],"files":[]}`, false},
		{`{"text":"hi","blocks":[{"type":"rich_text","block_id":"a","elements":[]}],"files":[{"id":"F2"}]}`, false},
	} {
		if got := sameWords(msg(base), msg(tc.cur)); got != tc.same {
			t.Errorf("sameWords(%s) = %v, want %v", tc.cur, got, tc.same)
		}
	}
	if !sameWords(msg(`{"text":"a"}`), msg(`{"text":"a","blocks":[]}`)) || !sameWords(msg(`{"text":"a","blocks":null}`), msg(`{"text":"a"}`)) {
		t.Error("no blocks, null and [] differ")
	}
}

func TestTSTime(t *testing.T) {
	for ts, want := range map[string]string{
		"1355517523.000005":  "2012-12-14T20:38:43.000005Z",
		"1355517523":         "2012-12-14T20:38:43Z",
		"1355517523.5":       "2012-12-14T20:38:43.5Z",
		"123.420":            "1970-01-01T00:02:03.42Z",
		"1355517523.0000059": "2012-12-14T20:38:43.000005Z",
	} {
		got, ok := tsTime(ts)
		if !ok || schema.NewTime(got).Format() != want {
			t.Errorf("tsTime(%q) = %v, %v; want %s", ts, got, ok, want)
		}
	}
	for _, ts := range []string{"", "abc", "-1.0", "1.-5", "99999999999999999999.1", "1.x"} {
		if _, ok := tsTime(ts); ok {
			t.Errorf("tsTime(%q) accepted", ts)
		}
	}
}
