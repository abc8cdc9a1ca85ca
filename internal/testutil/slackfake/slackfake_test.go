package slackfake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
)

// client is slack-go's Web API client pointed at the fake, with token as
// its bot token.
func client(s *slackfake.Server, token string) *slack.Client {
	return slack.New(token, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(s.Options().AppToken))
}

func bot(s *slackfake.Server) *slack.Client { return client(s, s.Options().BotToken) }

// slackErr is the Slack error code err carries, "" when none.
func slackErr(err error) string {
	var e slack.SlackErrorResponse
	if errors.As(err, &e) {
		return e.Err
	}
	return ""
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func channel(id, name string, member bool) slack.Channel {
	var c slack.Channel
	c.ID, c.Name, c.IsMember = id, name, member
	return c
}

func msg(ts, user, text string) slack.Message {
	var m slack.Message
	m.Type, m.Timestamp, m.User, m.Text = "message", ts, user, text
	return m
}

func reply(ts, thread, user, text string) slack.Message {
	m := msg(ts, user, text)
	m.ThreadTimestamp = thread
	return m
}

func TestAuth(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{TeamID: "T0TEAM", BotUserID: "U0ME", BotID: "B0ME"})
	ctx := ctxT(t)
	r, err := bot(s).AuthTestContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.TeamID != "T0TEAM" || r.UserID != "U0ME" || r.BotID != "B0ME" {
		t.Errorf("auth.test = team %q user %q bot %q, want T0TEAM U0ME B0ME", r.TeamID, r.UserID, r.BotID)
	}
	for _, tc := range []struct{ name, token, want string }{
		{"missing", "", "not_authed"},
		{"wrong", "xoxb-not-ours", "invalid_auth"},
		{"app token for a bot method", s.Options().AppToken, "not_allowed_token_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client(s, tc.token).AuthTestContext(ctx)
			if got := slackErr(err); got != tc.want {
				t.Errorf("auth.test with %s token: %v, want %s", tc.name, err, tc.want)
			}
		})
	}
	// apps.connections.open takes the app token only.
	if _, _, err := bot(s).StartSocketModeContext(ctx); err != nil {
		t.Errorf("apps.connections.open with the app token: %v", err)
	}
	wrongApp := slack.New(s.Options().BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(s.Options().BotToken))
	if _, _, err := wrongApp.StartSocketModeContext(ctx); slackErr(err) != "not_allowed_token_type" {
		t.Errorf("apps.connections.open with the bot token: %v, want not_allowed_token_type", err)
	}
	s.RevokeTokens()
	if _, err := bot(s).AuthTestContext(ctx); slackErr(err) != "token_revoked" {
		t.Errorf("auth.test after RevokeTokens: %v, want token_revoked", err)
	}
	if _, _, err := bot(s).StartSocketModeContext(ctx); slackErr(err) != "token_revoked" {
		t.Errorf("apps.connections.open after RevokeTokens: %v, want token_revoked", err)
	}
	if got := s.Calls("auth.test"); got != 5 {
		t.Errorf("Calls(auth.test) = %d, want 5", got)
	}
}

func TestUsersAndConversations(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	api := bot(s)
	s.AddUser(slack.User{ID: "U0ALICE", Name: "alice", RealName: "Alice Liddell"})
	s.AddConversation(channel("C0GENERAL", "general", true))
	s.AddConversation(channel("C0OTHER", "other", false))
	s.AddConversation(channel("G0SECRET", "secret", false))
	dm := channel("D0ALICE", "", false)
	dm.User = "U0ALICE"
	s.AddConversation(dm)

	u, err := api.GetUserInfoContext(ctx, "U0ALICE")
	if err != nil || u.Name != "alice" || u.RealName != "Alice Liddell" || u.TeamID != "T0FAKE" {
		t.Errorf("users.info U0ALICE = %+v, %v", u, err)
	}
	if _, err := api.GetUserInfoContext(ctx, "U0NOBODY"); slackErr(err) != "user_not_found" {
		t.Errorf("users.info of an unknown user: %v, want user_not_found", err)
	}
	for _, tc := range []struct {
		id, want      string
		im, private   bool
		name, errCode string
	}{
		{id: "C0GENERAL", name: "general"},
		{id: "C0OTHER", name: "other"}, // public: visible without being in it
		{id: "D0ALICE", im: true},
		{id: "G0SECRET", errCode: "channel_not_found"}, // private, the bot not in it
		{id: "C0NOPE", errCode: "channel_not_found"},
	} {
		c, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: tc.id})
		if tc.errCode != "" {
			if slackErr(err) != tc.errCode {
				t.Errorf("conversations.info %s: %v, want %s", tc.id, err, tc.errCode)
			}
			continue
		}
		if err != nil || c.ID != tc.id || c.Name != tc.name || c.IsIM != tc.im {
			t.Errorf("conversations.info %s = id %q name %q im %v, %v", tc.id, c.ID, c.Name, c.IsIM, err)
		}
	}
}

func TestHistoryPaging(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	s.AddConversation(channel("C0GENERAL", "general", true))
	s.AddConversation(channel("C0OTHER", "other", false))
	// Ten top-level messages, two replies to the third and one reply sent
	// to the channel too (in history), added out of order.
	var want []string
	for _, i := range []int{5, 1, 9, 3, 7, 2, 10, 4, 8, 6} {
		ts := fmt.Sprintf("1700000%03d.000100", i)
		s.AddMessage("C0GENERAL", msg(ts, "U0ALICE", fmt.Sprint("m", i)))
	}
	parent := "1700000003.000100"
	s.AddMessage("C0GENERAL", reply("1700000003.000200", parent, "U0BOB", "r1"))
	s.AddMessage("C0GENERAL", reply("1700000011.000100", parent, "U0ALICE", "r2"))
	b := reply("1700000011.000200", parent, "U0BOB", "r3 broadcast")
	b.SubType = "thread_broadcast"
	s.AddMessage("C0GENERAL", b)
	want = append(want, "1700000011.000200")
	for i := 10; i >= 1; i-- {
		want = append(want, fmt.Sprintf("1700000%03d.000100", i))
	}

	// Three a page, newest first, following the cursor.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("conversations.history pages without end")
		}
		h, err := bot(s).GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C0GENERAL", Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Messages) > 3 {
			t.Fatalf("page of %d messages, limit 3", len(h.Messages))
		}
		for _, m := range h.Messages {
			got = append(got, m.Timestamp)
			if m.Timestamp == parent && (m.ReplyCount != 3 || m.LatestReply != "1700000011.000200" || m.ThreadTimestamp != parent) {
				t.Errorf("thread parent in history: reply_count %d latest_reply %q thread_ts %q, want 3 1700000011.000200 %s",
					m.ReplyCount, m.LatestReply, m.ThreadTimestamp, parent)
			}
		}
		if !h.HasMore {
			if h.ResponseMetaData.NextCursor != "" {
				t.Errorf("last page has a next_cursor %q", h.ResponseMetaData.NextCursor)
			}
			break
		}
		cursor = h.ResponseMetaData.NextCursor
	}
	if !slices.Equal(got, want) {
		t.Errorf("history by pages of 3:\n got %v\nwant %v", got, want)
	}

	for _, tc := range []struct {
		name      string
		p         slack.GetConversationHistoryParameters
		want      []string
		wantError string
	}{
		{name: "oldest and latest exclusive", p: slack.GetConversationHistoryParameters{Oldest: "1700000003.000100", Latest: "1700000006.000100"},
			want: []string{"1700000005.000100", "1700000004.000100"}},
		{name: "inclusive", p: slack.GetConversationHistoryParameters{Oldest: "1700000003.000100", Latest: "1700000005.000100", Inclusive: true},
			want: []string{"1700000005.000100", "1700000004.000100", "1700000003.000100"}},
		{name: "since oldest", p: slack.GetConversationHistoryParameters{Oldest: "1700000009.000100"},
			want: []string{"1700000011.000200", "1700000010.000100"}},
		{name: "bound of seconds", p: slack.GetConversationHistoryParameters{Oldest: "1700000009"},
			want: []string{"1700000011.000200", "1700000010.000100", "1700000009.000100"}},
		{name: "bound with a short fraction", p: slack.GetConversationHistoryParameters{Oldest: "1700000009.0001"},
			want: []string{"1700000011.000200", "1700000010.000100"}},
		{name: "bad cursor", p: slack.GetConversationHistoryParameters{Cursor: "!!"}, wantError: "invalid_cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.ChannelID = "C0GENERAL"
			h, err := bot(s).GetConversationHistoryContext(ctx, &tc.p)
			if tc.wantError != "" {
				if slackErr(err) != tc.wantError {
					t.Errorf("error %v, want %s", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range h.Messages {
				got = append(got, m.Timestamp)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := bot(s).GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C0OTHER"}); slackErr(err) != "not_in_channel" {
		t.Errorf("history of a public channel the bot is not in: %v, want not_in_channel", err)
	}
	if _, err := bot(s).GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C0NONE"}); slackErr(err) != "channel_not_found" {
		t.Errorf("history of an unknown channel: %v, want channel_not_found", err)
	}
}

func TestReplies(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	s.AddConversation(channel("C0GENERAL", "general", true))
	parent := "1700000001.000100"
	s.AddMessage("C0GENERAL", msg(parent, "U0ALICE", "question"))
	s.AddMessage("C0GENERAL", msg("1700000002.000100", "U0ALICE", "unrelated"))
	s.AddMessage("C0GENERAL", reply("1700000004.000100", parent, "U0BOB", "second"))
	s.AddMessage("C0GENERAL", reply("1700000003.000100", parent, "U0BOB", "first"))
	s.AddMessage("C0GENERAL", reply("1700000005.000100", parent, "U0ALICE", "third"))
	want := []string{parent, "1700000003.000100", "1700000004.000100", "1700000005.000100"}

	for _, ts := range []string{parent, "1700000004.000100"} { // the parent's ts, or a reply's
		msgs, more, _, err := bot(s).GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0GENERAL", Timestamp: ts})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.Timestamp)
		}
		if more || !slices.Equal(got, want) {
			t.Errorf("replies of %s = %v (has_more %v), want %v", ts, got, more, want)
		}
		if msgs[0].ReplyCount != 3 {
			t.Errorf("thread parent's reply_count = %d, want 3", msgs[0].ReplyCount)
		}
	}
	// Two a page: the parent on the first page only.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("conversations.replies pages without end")
		}
		msgs, more, next, err := bot(s).GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0GENERAL", Timestamp: parent, Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, m.Timestamp)
		}
		if !more {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("replies by pages of 2 = %v, want %v", got, want)
	}
	if _, _, _, err := bot(s).GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0GENERAL", Timestamp: "1700000009.000100"}); slackErr(err) != "thread_not_found" {
		t.Errorf("replies of no message: %v, want thread_not_found", err)
	}
}

func TestPostMessage(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	api := bot(s)
	s.AddUser(slack.User{ID: "U0ALICE", Name: "alice"})
	s.AddConversation(channel("C0GENERAL", "general", true))
	s.AddConversation(channel("C0OTHER", "other", false))
	s.AddConversation(channel("G0SECRET", "secret", false))
	archived := channel("C0OLD", "old", true)
	archived.IsArchived = true
	s.AddConversation(archived)
	s.AddMessage("C0GENERAL", msg("1700000500.000100", "U0ALICE", "hello"))

	ch, ts1, err := api.PostMessageContext(ctx, "C0GENERAL", slack.MsgOptionText("top", false))
	if err != nil || ch != "C0GENERAL" {
		t.Fatalf("post: %q, %v", ch, err)
	}
	if ts1 <= "1700000500.000100" {
		t.Errorf("post's ts %s not after the channel's last message", ts1)
	}
	_, ts2, err := api.PostMessageContext(ctx, "C0GENERAL", slack.MsgOptionText("in thread", false),
		slack.MsgOptionTS("1700000500.000100"), slack.MsgOptionBroadcast(), slack.MsgOptionDisableMarkdown(),
		slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", "*in* thread", false, false), nil, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if ts2 <= ts1 {
		t.Errorf("second post's ts %s not after the first's %s", ts2, ts1)
	}
	posts := s.Posts()
	if len(posts) != 2 {
		t.Fatalf("Posts() = %d posts, want 2", len(posts))
	}
	p := posts[1]
	if p.Channel != "C0GENERAL" || p.Text != "in thread" || p.ThreadTS != "1700000500.000100" || !p.ReplyBroadcast ||
		p.Mrkdwn || p.TS != ts2 || !bytes.Contains(p.Blocks, []byte(`"*in* thread"`)) || p.Raw.Get("token") != "" {
		t.Errorf("Posts()[1] = %+v", p)
	}
	if !posts[0].Mrkdwn || posts[0].ThreadTS != "" || posts[0].Blocks != nil {
		t.Errorf("Posts()[0] = %+v", posts[0])
	}
	// The reply is in the thread and, broadcast, in the channel.
	msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0GENERAL", Timestamp: "1700000500.000100"})
	if err != nil || len(msgs) != 2 || msgs[1].Timestamp != ts2 || msgs[1].BotID != "B0BOT" || msgs[1].User != "U0BOT" {
		t.Errorf("thread after the reply: %+v, %v", msgs, err)
	}
	h, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C0GENERAL"})
	if err != nil || len(h.Messages) != 3 || h.Messages[0].Timestamp != ts2 || h.Messages[0].SubType != "thread_broadcast" {
		t.Errorf("history after the posts: %+v, %v", h, err)
	}

	// To a user: the bot's DM with them, the same conversations.open gives.
	ch, _, err = api.PostMessageContext(ctx, "U0ALICE", slack.MsgOptionText("hi", false))
	if err != nil || !strings.HasPrefix(ch, "D") {
		t.Fatalf("post to a user: channel %q, %v", ch, err)
	}
	dm, _, already, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{"U0ALICE"}})
	if err != nil || dm.ID != ch || !already {
		t.Errorf("conversations.open after the post = %+v already %v, %v; want %s already open", dm, already, err, ch)
	}

	for _, tc := range []struct {
		name, channel string
		opts          []slack.MsgOption
		want          string
	}{
		{"unknown channel", "C0NONE", nil, "channel_not_found"},
		{"public channel the bot is not in", "C0OTHER", nil, "not_in_channel"},
		{"private channel the bot is not in", "G0SECRET", nil, "channel_not_found"},
		{"archived", "C0OLD", nil, "is_archived"},
		{"unknown user", "U0NOBODY", nil, "channel_not_found"},
		{"no text", "C0GENERAL", []slack.MsgOption{slack.MsgOptionText("", false)}, "no_text"},
		{"thread of no message", "C0GENERAL", []slack.MsgOption{slack.MsgOptionTS("1700000999.000100")}, "thread_not_found"},
		{"malformed thread_ts", "C0GENERAL", []slack.MsgOption{slack.MsgOptionTS("12")}, "invalid_thread_ts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]slack.MsgOption{slack.MsgOptionText("x", false)}, tc.opts...)
			if tc.name == "no text" {
				opts = tc.opts
			}
			_, _, err := api.PostMessageContext(ctx, tc.channel, opts...)
			if slackErr(err) != tc.want {
				t.Errorf("post: %v, want %s", err, tc.want)
			}
		})
	}
	if n := len(s.Posts()); n != 3 {
		t.Errorf("Posts() after the refused posts = %d, want 3", n)
	}
}

func TestOpenConversation(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	api := bot(s)
	s.AddUser(slack.User{ID: "U0ALICE", Name: "alice"})
	s.AddUser(slack.User{ID: "U0BOB", Name: "bob"})
	a1, _, already, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{"U0ALICE"}})
	if err != nil || !strings.HasPrefix(a1.ID, "D") || already {
		t.Fatalf("open with alice = %+v already %v, %v", a1, already, err)
	}
	b, _, _, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{"U0BOB"}, ReturnIM: true})
	if err != nil || b.ID == a1.ID || !b.IsIM || b.User != "U0BOB" {
		t.Errorf("open with bob = %+v, %v; want another IM, with bob", b, err)
	}
	a2, _, already, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{"U0ALICE"}})
	if err != nil || a2.ID != a1.ID || !already {
		t.Errorf("open with alice again = %+v already %v, %v; want %s already open", a2, already, err, a1.ID)
	}
	if _, _, _, err := api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{"U0NOBODY"}}); slackErr(err) != "user_not_found" {
		t.Errorf("open with an unknown user: %v, want user_not_found", err)
	}
	if _, _, err := api.PostMessageContext(ctx, a1.ID, slack.MsgOptionText("hi", false)); err != nil {
		t.Errorf("post to the DM opened: %v", err)
	}
}

func TestUsersConversations(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("C0CHAN%02d", i)
		s.AddConversation(channel(id, id, i != 3)) // not in C0CHAN03
		if i != 3 {
			want = append(want, id)
		}
	}
	s.AddConversation(channel("G0PRIV", "priv", true))
	s.AddConversation(channel("D0DM", "", false))
	var got []string
	params := &slack.GetConversationsForUserParameters{Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("users.conversations pages without end")
		}
		chs, next, err := bot(s).GetConversationsForUserContext(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chs {
			got = append(got, c.ID)
		}
		if next == "" {
			break
		}
		params.Cursor = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("users.conversations (public channels by default) by pages of 2 = %v, want %v", got, want)
	}
	chs, _, err := bot(s).GetConversationsForUserContext(ctx, &slack.GetConversationsForUserParameters{Types: []string{"private_channel", "im"}})
	var ids []string
	for _, c := range chs {
		ids = append(ids, c.ID)
	}
	if err != nil || !slices.Equal(ids, []string{"D0DM", "G0PRIV"}) {
		t.Errorf("users.conversations private_channel,im = %v, %v", ids, err)
	}
}

func TestUploadFile(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	api := bot(s)
	s.AddConversation(channel("C0GENERAL", "general", true))
	s.AddMessage("C0GENERAL", msg("1700000001.000100", "U0ALICE", "send me the report"))
	content := bytes.Repeat([]byte("report line\n"), 1000)
	f, err := api.UploadFileContext(ctx, slack.UploadFileParameters{
		Filename: "report.txt", Title: "The report", Reader: bytes.NewReader(content), FileSize: len(content),
		Channel: "C0GENERAL", ThreadTimestamp: "1700000001.000100", InitialComment: "here it is",
	})
	if err != nil {
		t.Fatal(err)
	}
	ups := s.Uploads()
	if len(ups) != 1 {
		t.Fatalf("Uploads() = %d, want 1", len(ups))
	}
	u := ups[0]
	if u.FileID != f.ID || u.Filename != "report.txt" || u.Title != "The report" || !bytes.Equal(u.Content, content) ||
		u.ChannelID != "C0GENERAL" || u.ThreadTS != "1700000001.000100" || u.InitialComment != "here it is" {
		t.Errorf("Uploads()[0] = %+v (content %d bytes)", u, len(u.Content))
	}
	// The share is a message of the thread, and the file downloads.
	msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0GENERAL", Timestamp: "1700000001.000100"})
	if err != nil || len(msgs) != 2 || len(msgs[1].Files) != 1 || msgs[1].Text != "here it is" {
		t.Fatalf("thread after the upload: %+v, %v", msgs, err)
	}
	var got bytes.Buffer
	if err := api.GetFileContext(ctx, msgs[1].Files[0].URLPrivateDownload, &got); err != nil || !bytes.Equal(got.Bytes(), content) {
		t.Errorf("download of the upload: %d bytes, %v", got.Len(), err)
	}

	// The upload's length is checked; an unknown file does not complete.
	r, err := api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: "a.txt", FileSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	err = api.UploadToURL(ctx, slack.UploadToURLParameters{UploadURL: r.UploadURL, Filename: "a.txt", Content: "short"})
	var code slack.StatusCodeError
	if !errors.As(err, &code) || code.Code != http.StatusBadRequest {
		t.Errorf("upload of 5 bytes for 10: %v, want HTTP 400", err)
	}
	_, err = api.CompleteUploadExternalContext(ctx, slack.CompleteUploadExternalParameters{Files: []slack.FileSummary{{ID: r.FileID}}, Channel: "C0GENERAL"})
	if slackErr(err) != "file_not_found" {
		t.Errorf("complete of a file not uploaded: %v, want file_not_found", err)
	}
	_, err = api.CompleteUploadExternalContext(ctx, slack.CompleteUploadExternalParameters{Files: []slack.FileSummary{{ID: "F0NONE"}}, Channel: "C0GENERAL"})
	if slackErr(err) != "file_not_found" {
		t.Errorf("complete of an unknown file: %v, want file_not_found", err)
	}
	if len(s.Uploads()) != 1 {
		t.Errorf("Uploads() after the failures = %d, want 1", len(s.Uploads()))
	}
}

func TestFileDownload(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	content := []byte("%PDF-1.4 not really\n")
	f := s.AddFile(slack.File{Name: "scan.pdf", Mimetype: "application/pdf"}, content)
	if f.ID == "" || f.Size != len(content) || !strings.HasPrefix(f.URLPrivateDownload, s.URL()+"/") || !strings.HasPrefix(f.URLPrivate, s.URL()+"/") {
		t.Fatalf("AddFile = %+v", f)
	}
	for _, u := range []string{f.URLPrivate, f.URLPrivateDownload} {
		var got bytes.Buffer
		if err := bot(s).GetFileContext(ctx, u, &got); err != nil || !bytes.Equal(got.Bytes(), content) {
			t.Errorf("GetFile %s with the bot token: %q, %v", u, got.Bytes(), err)
		}
	}
	// Another token is sent to the sign-in page, which slack-go spots.
	var got bytes.Buffer
	if err := client(s, "xoxb-other").GetFileContext(ctx, f.URLPrivateDownload, &got); err == nil || !strings.Contains(err.Error(), "sign-in") {
		t.Errorf("GetFile with another token: %v (%d bytes), want the sign-in redirect spotted", err, got.Len())
	}
	// A file the token's scopes do not reach: the sign-in page with 200,
	// which slack-go hands over as the file's content.
	s.RestrictFile(f.ID)
	got.Reset()
	if err := bot(s).GetFileContext(ctx, f.URLPrivateDownload, &got); err != nil || !bytes.HasPrefix(got.Bytes(), []byte("<!DOCTYPE html")) {
		t.Errorf("GetFile of a restricted file: %q, %v; want the HTML page, no error", got.Bytes(), err)
	}
	// A plain client without a token ends on an HTML page answered 200.
	resp, err := http.Get(f.URLPrivateDownload)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || bytes.Contains(body, content) {
		t.Errorf("GET without a token: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

func TestFailures(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	api := bot(s)
	s.AddConversation(channel("C0GENERAL", "general", true))
	post := func() error {
		_, _, err := api.PostMessageContext(ctx, "C0GENERAL", slack.MsgOptionText("x", false))
		return err
	}

	s.Fail("chat.postMessage", slackfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 7})
	var rl *slack.RateLimitedError
	if err := post(); !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Errorf("post after Fail 429: %v, want RateLimitedError of 7s", err)
	}
	s.Fail("chat.postMessage", slackfake.Failure{Status: http.StatusInternalServerError, Times: 2})
	for i := range 2 {
		var code slack.StatusCodeError
		if err := post(); !errors.As(err, &code) || code.Code != 500 {
			t.Errorf("post %d after Fail 500 ×2: %v, want StatusCodeError 500", i, err)
		}
	}
	for _, code := range []string{"channel_not_found", "not_in_channel", "invalid_auth", "ratelimited"} {
		s.Fail("chat.postMessage", slackfake.Failure{Error: code})
		if err := post(); slackErr(err) != code {
			t.Errorf("post after Fail %s: %v", code, err)
		}
	}
	if err := post(); err != nil {
		t.Errorf("post after the failures: %v", err)
	}
	if got, posted := s.Calls("chat.postMessage"), len(s.Posts()); got != 8 || posted != 1 {
		t.Errorf("Calls = %d, Posts = %d, want 8 and 1", got, posted)
	}
	// The file transfers fail on demand too.
	f := s.AddFile(slack.File{Name: "a.txt"}, []byte("abc"))
	s.Fail(slackfake.FileDownload, slackfake.Failure{Status: http.StatusServiceUnavailable})
	var buf bytes.Buffer
	var code slack.StatusCodeError
	if err := api.GetFileContext(ctx, f.URLPrivateDownload, &buf); !errors.As(err, &code) || code.Code != 503 || buf.Len() != 0 {
		t.Errorf("download after Fail(FileDownload, 503): %v, %q", err, buf.Bytes())
	}
	if err := api.GetFileContext(ctx, f.URLPrivateDownload, &buf); err != nil || buf.String() != "abc" {
		t.Errorf("download after the failure: %v, %q", err, buf.Bytes())
	}
	s.Fail(slackfake.FileUpload, slackfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 2})
	_, err := api.UploadFileContext(ctx, slack.UploadFileParameters{Filename: "b.txt", Content: "bcd", FileSize: 3, Channel: "C0GENERAL"})
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second || len(s.Uploads()) != 0 {
		t.Errorf("upload after Fail(FileUpload, 429): %v, %d uploads", err, len(s.Uploads()))
	}
	if s.Calls(slackfake.FileDownload) != 2 || s.Calls(slackfake.FileUpload) != 1 {
		t.Errorf("Calls: %d downloads, %d uploads; want 2 and 1", s.Calls(slackfake.FileDownload), s.Calls(slackfake.FileUpload))
	}
	// A failure is the method's alone.
	s.Fail("users.info", slackfake.Failure{Error: "ratelimited"})
	if _, err := api.AuthTestContext(ctx); err != nil {
		t.Errorf("auth.test with a failure queued for users.info: %v", err)
	}
}

func TestRequests(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	post := func(method, ct, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.APIURL()+method, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	form := "application/x-www-form-urlencoded"
	if _, v := post("chat.nonsense", form, "token=xoxb-fake-bot"); v["ok"] != false || v["error"] != "unknown_method" {
		t.Errorf("unknown method: %v", v)
	}
	if _, v := post("auth.test", form, "token=xoxb-fake-bot"); v["ok"] != true {
		t.Errorf("auth.test with the token in the form: %v", v)
	}
	// Slack takes a JSON call's token from its header only.
	if _, v := post("auth.test", "application/json", `{"token":"xoxb-fake-bot"}`); v["error"] != "not_authed" {
		t.Errorf("auth.test with the token in a JSON body: %v, want not_authed", v)
	}
	big := "token=xoxb-fake-bot&text=" + strings.Repeat("a", 2<<20)
	if status, _ := post("chat.postMessage", form, big); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 2 MiB request: HTTP %d, want 413", status)
	}
}

// socketClient runs slack-go's Socket Mode client against s until the test
// ends; its Events and what Run returned are the test's to read.
type socketClient struct {
	*socketmode.Client
	done chan struct{} // closed when Run returned
	err  error         // what Run returned, once done
}

func runSocket(t *testing.T, s *slackfake.Server, appToken string, opts ...socketmode.Option) *socketClient {
	t.Helper()
	api := slack.New(s.Options().BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(appToken))
	c := &socketClient{Client: socketmode.New(api, opts...), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		c.err = c.RunContext(ctx)
		close(c.done)
	}()
	t.Cleanup(func() {
		cancel()
		// Run stops once its events are taken: drain them.
		for {
			select {
			case <-c.done:
				return
			case <-c.Events:
			}
		}
	})
	return c
}

// next returns the next event of one of the types, skipping others.
func (c *socketClient) next(t *testing.T, types ...socketmode.EventType) socketmode.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case e := <-c.Events:
			if slices.Contains(types, e.Type) {
				return e
			}
		case <-c.done:
			t.Fatalf("socket mode client stopped waiting for %v: %v", types, c.err)
		case <-timeout:
			t.Fatalf("no %v event", types)
		}
	}
}

// eventPayload is an Events API callback: the corpus's with
// COURIER_CORPUS, else the fixture.
func eventPayload(t *testing.T) (payload json.RawMessage, text string) {
	path := filepath.Join("testdata", "events_api_message.json")
	if dir := os.Getenv("COURIER_CORPUS"); dir != "" {
		b, err := os.ReadFile(filepath.Join(testutil.CorpusDir(t), "chat", "slack", "socket-mode", "events_api_message_envelope.python-slack-sdk.json"))
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		return env.Payload, "<@U111> Hi here!"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, "Is the release out?"
}

func TestSocketModeEvent(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{PingInterval: 50 * time.Millisecond})
	ctx := ctxT(t)
	c := runSocket(t, s, s.Options().AppToken)
	c.next(t, socketmode.EventTypeConnected)
	c.next(t, socketmode.EventTypeHello)

	payload, text := eventPayload(t)
	id, err := s.SendEvent(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	e := c.next(t, socketmode.EventTypeEventsAPI)
	if e.Request == nil || e.Request.EnvelopeID != id || e.Request.RetryAttempt != 0 || e.Request.AcceptsResponsePayload {
		t.Fatalf("envelope = %+v, want id %s, retry_attempt 0", e.Request, id)
	}
	ev, ok := e.Data.(slackevents.EventsAPIEvent)
	if !ok || ev.Type != slackevents.CallbackEvent {
		t.Fatalf("events_api data = %T %+v", e.Data, e.Data)
	}
	m, ok := ev.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || m.Text != text {
		t.Fatalf("inner event = %T %+v, want a message %q", ev.InnerEvent.Data, ev.InnerEvent.Data, text)
	}
	if got := s.Unacked(); !slices.Equal(got, []string{id}) {
		t.Errorf("Unacked() before the ack = %v, want [%s]", got, id)
	}
	// Not acked: Slack sends it again.
	if err := s.Redeliver(ctx, id); err != nil {
		t.Fatal(err)
	}
	e = c.next(t, socketmode.EventTypeEventsAPI)
	if e.Request.EnvelopeID != id || e.Request.RetryAttempt != 1 || e.Request.RetryReason != "timeout" {
		t.Errorf("redelivery = %+v, want id %s, retry 1 timeout", e.Request, id)
	}
	if err := c.Ack(*e.Request); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Acked(id):
	case <-ctx.Done():
		t.Fatal("ack not seen")
	}
	if got := s.Unacked(); len(got) != 0 {
		t.Errorf("Unacked() after the ack = %v", got)
	}

	// Other envelope types go through as their types.
	cmd := []byte(`{"command":"/ask","text":"status","user_id":"U0ALICE","channel_id":"C0GENERAL"}`)
	if _, err := s.SendEnvelope(ctx, "slash_commands", cmd); err != nil {
		t.Fatal(err)
	}
	e = c.next(t, socketmode.EventTypeSlashCommand)
	if sc, ok := e.Data.(slack.SlashCommand); !ok || sc.Command != "/ask" || !e.Request.AcceptsResponsePayload {
		t.Errorf("slash command = %+v", e.Data)
	}
	if _, err := s.SendEvent(ctx, []byte(`not json`)); err == nil {
		t.Error("SendEvent took a payload that is not JSON")
	}
	if s.Connections() != 1 {
		t.Errorf("Connections() = %d, want 1", s.Connections())
	}
}

// TestSocketModeReconnects drives the client through each way a
// connection ends; after each it reconnects and still gets events.
func TestSocketModeReconnects(t *testing.T) {
	// The client's ping interval is a hundred of the server's, so that a
	// loaded machine does not make it give up on a live connection.
	s := slackfake.New(t, slackfake.Options{PingInterval: 10 * time.Millisecond})
	ctx := ctxT(t)
	c := runSocket(t, s, s.Options().AppToken, socketmode.OptionPingInterval(time.Second))
	c.next(t, socketmode.EventTypeHello)
	payload, _ := eventPayload(t)
	check := func(n int) {
		t.Helper()
		if err := s.WaitConnections(ctx, n); err != nil {
			t.Fatal(err)
		}
		c.next(t, socketmode.EventTypeHello)
		id, err := s.SendEvent(ctx, payload)
		if err != nil {
			t.Fatal(err)
		}
		e := c.next(t, socketmode.EventTypeEventsAPI)
		if e.Request.EnvelopeID != id {
			t.Errorf("envelope %s after reconnection %d, want %s", e.Request.EnvelopeID, n, id)
		}
		c.Ack(*e.Request)
		select {
		case <-s.Acked(id):
		case <-ctx.Done():
			t.Fatalf("no ack after reconnection %d", n)
		}
	}

	// Pings keep a connection: two and a half of the client's ping
	// intervals pass with the one connection.
	testutil.WaitFor(t, 20*time.Second, "250 pongs", func() bool { return s.Pongs() >= 250 })
	if s.Connections() != 1 {
		t.Fatalf("Connections() = %d after 250 pings, want 1", s.Connections())
	}

	s.Disconnect("refresh_requested")
	check(2)
	s.Drop()
	check(3)
	s.Disconnect("warning")
	check(4)

	// A silent connection: the client gives up on it after its ping
	// interval and opens another, which is pinged.
	s.SilencePings(true)
	check(5)
}

func TestSocketModeRefused(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{PingInterval: 50 * time.Millisecond})
	c := runSocket(t, s, "xapp-wrong")
	select {
	case <-c.done:
		if c.err == nil || c.err.Error() != "invalid_auth" {
			t.Errorf("Run with a wrong app token: %v, want invalid_auth", c.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run with a wrong app token did not stop")
	}

	// Revoked while connected: the reconnection is refused for good.
	c = runSocket(t, s, s.Options().AppToken)
	c.next(t, socketmode.EventTypeHello)
	s.RevokeTokens()
	s.Drop()
	for {
		select {
		case <-c.done:
			if c.err == nil || c.err.Error() != "token_revoked" {
				t.Errorf("Run after RevokeTokens: %v, want token_revoked", c.err)
			}
			if s.Connections() != 1 {
				t.Errorf("Connections() = %d, want 1", s.Connections())
			}
			return
		case <-c.Events:
		case <-time.After(20 * time.Second):
			t.Fatal("Run after RevokeTokens did not stop")
		}
	}
}

// A ticket opens one connection.
func TestSocketTicketOnce(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	_, u, err := bot(s).StartSocketModeContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	if pu.Scheme != "ws" || pu.Path != "/link/" || pu.Query().Get("ticket") == "" {
		t.Errorf("apps.connections.open url = %s", u)
	}
	for i, want := range []bool{true, false} {
		err := dialOnce(ctx, u)
		if (err == nil) != want {
			t.Errorf("dial %d with the ticket: %v, want success %v", i+1, err, want)
		}
	}
}

func dialOnce(ctx context.Context, u string) error {
	c, resp, err := websocket.DefaultDialer.DialContext(ctx, u, nil)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("HTTP %d, want 401: %w", resp.StatusCode, err)
		}
		return err
	}
	return c.Close()
}

// TestSocketFrames checks the frames themselves, with a bare websocket
// client: hello first, pings, the envelope's fields, and acks of 20 KiB
// or more ignored as Slack ignores them.
func TestSocketFrames(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{PingInterval: 10 * time.Millisecond})
	ctx := ctxT(t)

	// Nothing connected: SendEvent waits only as long as its context.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.SendEvent(gone, []byte(`{"type":"event_callback"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("SendEvent with no connection and a done context: %v", err)
	}

	_, u, err := bot(s).StartSocketModeContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	pinged := make(chan struct{}, 1)
	ws.SetPingHandler(func(string) error {
		select {
		case pinged <- struct{}{}:
		default:
		}
		return nil
	})
	frames := make(chan map[string]json.RawMessage)
	go func() {
		defer close(frames)
		for {
			var f map[string]json.RawMessage
			if err := ws.ReadJSON(&f); err != nil {
				return
			}
			frames <- f
		}
	}()
	next := func() map[string]json.RawMessage {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("connection closed")
			}
			return f
		case <-ctx.Done():
			t.Fatal("no frame")
		}
		return nil
	}
	hello := next()
	if string(hello["type"]) != `"hello"` || string(hello["num_connections"]) != "1" || !bytes.Contains(hello["connection_info"], []byte(`"app_id"`)) {
		t.Errorf("first frame = %s, want hello", mustMarshal(hello))
	}
	select {
	case <-pinged:
	case <-ctx.Done():
		t.Fatal("no ping")
	}

	payload := json.RawMessage(`{"type":"event_callback","event_id":"Ev1","event":{"type":"message","text":"x"}}`)
	id1, err := s.SendEvent(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	env := next()
	for k, want := range map[string]string{"envelope_id": `"` + id1 + `"`, "type": `"events_api"`, "accepts_response_payload": "false",
		"retry_attempt": "0", "retry_reason": `""`, "payload": string(payload)} {
		if string(env[k]) != want {
			t.Errorf("envelope %s = %s, want %s", k, env[k], want)
		}
	}
	id2, err := s.SendEvent(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	next()
	big := fmt.Sprintf(`{"envelope_id":%q,"payload":{"text":%q}}`, id1, strings.Repeat("a", 20*1024))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(big)); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteJSON(map[string]string{"envelope_id": id2}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Acked(id2):
	case <-ctx.Done():
		t.Fatal("ack not seen")
	}
	if got := s.Unacked(); !slices.Equal(got, []string{id1}) {
		t.Errorf("Unacked() after an ack of 20 KiB and a good one = %v, want [%s]", got, id1)
	}
}

// TestCorpusEnvelopes sends every Events API callback of the corpus; the
// client gets each as its event type and acks it.
func TestCorpusEnvelopes(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "slack", "events-api")
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no events in %s: %v", dir, err)
	}
	s := slackfake.New(t, slackfake.Options{PingInterval: 50 * time.Millisecond})
	ctx := ctxT(t)
	c := runSocket(t, s, s.Options().AppToken)
	c.next(t, socketmode.EventTypeHello)
	sent := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var cb struct {
			Type  string `json:"type"`
			Event struct {
				Type string `json:"type"`
			} `json:"event"`
		}
		if err := json.Unmarshal(b, &cb); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if cb.Type != "event_callback" {
			continue // url_verification comes over HTTP only
		}
		id, err := s.SendEvent(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		e := c.next(t, socketmode.EventTypeEventsAPI, socketmode.EventTypeErrorBadMessage)
		if e.Type != socketmode.EventTypeEventsAPI {
			t.Errorf("%s: slack-go could not read the envelope: %+v", filepath.Base(p), e.Data)
			continue
		}
		ev := e.Data.(slackevents.EventsAPIEvent)
		if ev.InnerEvent.Type != cb.Event.Type || e.Request.EnvelopeID != id {
			t.Errorf("%s: inner event %q envelope %s, want %q %s", filepath.Base(p), ev.InnerEvent.Type, e.Request.EnvelopeID, cb.Event.Type, id)
		}
		c.Ack(*e.Request)
		select {
		case <-s.Acked(id):
		case <-ctx.Done():
			t.Fatalf("%s: no ack", filepath.Base(p))
		}
		sent++
	}
	if sent < 5 {
		t.Errorf("%d corpus events sent, want the corpus's (at least 5)", sent)
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// BenchmarkPostMessage is a reply posted through slack-go to a thread
// that grows: the fake's cost per post under the outbound benchmark.
func BenchmarkPostMessage(b *testing.B) {
	s := slackfake.New(b, slackfake.Options{})
	s.AddConversation(channel("C0GENERAL", "general", true))
	s.AddMessage("C0GENERAL", msg("1700000001.000100", "U0ALICE", "question"))
	api := bot(s)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := api.PostMessageContext(ctx, "C0GENERAL", slack.MsgOptionText("an answer", false), slack.MsgOptionTS("1700000001.000100")); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRawMessages: a message added as JSON comes back with every field,
// those slack-go does not know too.
func TestRawMessages(t *testing.T) {
	s := slackfake.New(t, slackfake.Options{})
	s.AddConversation(channel("C0GENERAL", "general", true))
	s.AddRawMessage("C0GENERAL", []byte(`{"type":"message","user":"U0ALICE","ts":"1700000001.000100","text":"hi","x_unknown":{"kept":[1,2]}}`))
	resp, err := http.PostForm(s.APIURL()+"conversations.history", url.Values{"token": {s.Options().BotToken}, "channel": {"C0GENERAL"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		OK       bool                         `json:"ok"`
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || !h.OK || len(h.Messages) != 1 {
		t.Fatalf("history = %+v, %v", h, err)
	}
	if got := string(h.Messages[0]["x_unknown"]); got != `{"kept":[1,2]}` {
		t.Errorf("x_unknown = %s, want it as added", got)
	}
}

// TestCorpusMessages stores the corpus's messages as they are and reads
// them back through slack-go: each in history, a thread through replies.
func TestCorpusMessages(t *testing.T) {
	root := filepath.Join(testutil.CorpusDir(t), "chat", "slack")
	s := slackfake.New(t, slackfake.Options{})
	ctx := ctxT(t)
	paths, _ := filepath.Glob(filepath.Join(root, "messages", "*.json"))
	more, _ := filepath.Glob(filepath.Join(root, "export-messages", "*.json"))
	paths = append(paths, more...)
	if len(paths) < 10 {
		t.Fatalf("%d corpus messages, want the corpus's", len(paths))
	}
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Each file has a channel of its own: some share a ts.
		id := fmt.Sprintf("C0CORPUS%02d", i)
		s.AddConversation(channel(id, id, true))
		var msgs []json.RawMessage
		if json.Unmarshal(b, &msgs) != nil {
			msgs = []json.RawMessage{b}
		}
		var want []slack.Message
		for _, raw := range msgs {
			s.AddRawMessage(id, raw)
			var m slack.Message
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			want = append(want, m)
		}
		name := filepath.Base(p)
		h, err := bot(s).GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: id})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var inHistory []string
		for _, m := range want {
			if m.ThreadTimestamp == "" || m.ThreadTimestamp == m.Timestamp || m.SubType == "thread_broadcast" {
				inHistory = append([]string{m.Timestamp}, inHistory...) // newest first
			}
		}
		var got []string
		for j, m := range h.Messages {
			got = append(got, m.Timestamp)
			if w := want[slices.IndexFunc(want, func(x slack.Message) bool { return x.Timestamp == m.Timestamp })]; m.Text != w.Text || m.SubType != w.SubType || m.User != w.User {
				t.Errorf("%s: history message %d = %q/%q/%q, want %q/%q/%q", name, j, m.Text, m.SubType, m.User, w.Text, w.SubType, w.User)
			}
		}
		if !slices.Equal(got, inHistory) {
			t.Errorf("%s: history %v, want %v", name, got, inHistory)
		}
		// A reply's thread: the whole thread when its parent is there,
		// the reply alone when not.
		for _, m := range want {
			if m.ThreadTimestamp == "" || m.ThreadTimestamp == m.Timestamp {
				continue
			}
			r, _, _, err := bot(s).GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: id, Timestamp: m.Timestamp})
			if err != nil {
				t.Fatalf("%s: replies: %v", name, err)
			}
			n := 1
			if slices.ContainsFunc(want, func(x slack.Message) bool { return x.Timestamp == m.ThreadTimestamp }) {
				n = len(want)
			}
			if len(r) != n || !slices.ContainsFunc(r, func(x slack.Message) bool { return x.Timestamp == m.Timestamp }) {
				t.Errorf("%s: replies of %s = %d messages, want %d with it", name, m.Timestamp, len(r), n)
			}
		}
	}
}
