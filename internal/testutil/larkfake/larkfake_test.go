package larkfake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/larksuite/oapi-sdk-go/v3/event/dispatcher"
	larkcontact "github.com/larksuite/oapi-sdk-go/v3/service/contact/v3"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"

	"github.com/gorilla/websocket"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
)

// quiet drops the SDK's logs: its default logger writes to stdout.
type quiet struct{}

func (quiet) Debug(context.Context, ...any) {}
func (quiet) Info(context.Context, ...any)  {}
func (quiet) Warn(context.Context, ...any)  {}
func (quiet) Error(context.Context, ...any) {}

var _ larkcore.Logger = quiet{}

func newClient(f *larkfake.Server) *lark.Client {
	o := f.Options()
	return lark.NewClient(o.AppID, o.AppSecret, lark.WithOpenBaseUrl(f.URL()), lark.WithLogger(quiet{}),
		lark.WithReqTimeout(10*time.Second))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func textContent(s string) string {
	b, _ := json.Marshal(map[string]string{"text": s})
	return string(b)
}

func create(t *testing.T, c *lark.Client, idType, id, uuid, text string) *larkim.CreateMessageResp {
	t.Helper()
	body := larkim.NewCreateMessageReqBodyBuilder().ReceiveId(id).MsgType("text").Content(textContent(text))
	if uuid != "" {
		body.Uuid(uuid)
	}
	resp, err := c.Im.Message.Create(ctx(t), larkim.NewCreateMessageReqBuilder().ReceiveIdType(idType).Body(body.Build()).Build())
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return resp
}

func TestTenantTokenFetchedOnceAndCached(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	c := newClient(f)
	for i := range 3 {
		resp, err := c.Im.Chat.Get(ctx(t), larkim.NewGetChatReqBuilder().ChatId("oc_team").Build())
		if err != nil || !resp.Success() {
			t.Fatalf("call %d: err %v, resp %+v", i, err, resp)
		}
		if got := *resp.Data.Name; got != "Team" {
			t.Fatalf("chat name %q, want Team", got)
		}
	}
	if n := f.Calls(larkfake.RouteTenantToken); n != 1 {
		t.Errorf("token endpoint called %d times for 3 calls, want 1 (the SDK caches a 2 h token)", n)
	}
}

func TestWrongSecretGetsNoToken(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	c := lark.NewClient(f.Options().AppID, "not-the-secret", lark.WithOpenBaseUrl(f.URL()), lark.WithLogger(quiet{}))
	_, err := c.Im.Chat.Get(ctx(t), larkim.NewGetChatReqBuilder().ChatId("oc_team").Build())
	var ce larkcore.CodeError
	if !errors.As(err, &ce) || ce.Code != larkfake.CodeInvalidAppSecret {
		t.Fatalf("err = %v (%T), want the token endpoint's code %d", err, err, larkfake.CodeInvalidAppSecret)
	}
	if n := f.Calls(larkfake.RouteChat); n != 0 {
		t.Errorf("the chat API was called %d times without a token", n)
	}
}

func TestTokenChecks(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	c := newClient(f)
	get := func(opts ...larkcore.RequestOptionFunc) *larkim.GetChatResp {
		t.Helper()
		resp, err := c.Im.Chat.Get(ctx(t), larkim.NewGetChatReqBuilder().ChatId("oc_team").Build(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := get(); !resp.Success() {
		t.Fatalf("first call: %d %s", resp.Code, resp.Msg)
	}

	t.Run("a token the client made up", func(t *testing.T) {
		resp := get(larkcore.WithTenantAccessToken("t-forged"))
		if resp.Code != larkfake.CodeInvalidToken {
			t.Errorf("code %d, want %d", resp.Code, larkfake.CodeInvalidToken)
		}
	})

	t.Run("expired: the SDK retries once with its cached token", func(t *testing.T) {
		// The SDK retries on 99991663 but reads the same cached token
		// again (core/httptransport.go doRequest): it refreshes only once
		// its cache entry (expire - 3 min) lapses. This pins that, so the
		// adapter knows to renew tokens itself.
		before := f.Calls(larkfake.RouteChat)
		f.ExpireTokens()
		resp := get()
		if resp.Code != larkfake.CodeInvalidToken {
			t.Errorf("code %d, want %d", resp.Code, larkfake.CodeInvalidToken)
		}
		if n := f.Calls(larkfake.RouteChat) - before; n != 2 {
			t.Errorf("%d calls, want 2 (the call and the SDK's one retry)", n)
		}
		if n := f.Tokens(); n != 1 {
			t.Errorf("%d tokens issued, want 1: the SDK did not ask again", n)
		}
	})
}

func TestShortTokensAreRenewedAfterExpiry(t *testing.T) {
	// A TTL under the SDK's 3 min margin is cached for no time: every
	// call fetches the token, so one the fake expired is replaced.
	f := larkfake.New(t, larkfake.Options{TokenTTL: 2 * time.Minute})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	c := newClient(f)
	for i := range 2 {
		resp, err := c.Im.Chat.Get(ctx(t), larkim.NewGetChatReqBuilder().ChatId("oc_team").Build())
		if err != nil || !resp.Success() {
			t.Fatalf("call %d: %v %+v", i, err, resp)
		}
		f.ExpireTokens()
	}
	if n := f.Tokens(); n != 2 {
		t.Errorf("%d tokens issued, want 2", n)
	}
}

func TestCreateDedupesByUUID(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	c := newClient(f)

	first := create(t, c, "chat_id", "oc_team", "draft-1", "hello")
	if !first.Success() {
		t.Fatalf("create: %d %s", first.Code, first.Msg)
	}
	again := create(t, c, "chat_id", "oc_team", "draft-1", "hello")
	if !again.Success() || *again.Data.MessageId != *first.Data.MessageId {
		t.Fatalf("second create with the same uuid answered %+v, want message %s", again.Data, *first.Data.MessageId)
	}
	other := create(t, c, "chat_id", "oc_team", "draft-2", "hello")
	if *other.Data.MessageId == *first.Data.MessageId {
		t.Fatal("another uuid got the same message")
	}
	none := create(t, c, "chat_id", "oc_team", "", "hello")
	if *none.Data.MessageId == *first.Data.MessageId || *none.Data.MessageId == *other.Data.MessageId {
		t.Fatal("a create without uuid was deduped")
	}
	sent := f.Sent()
	if len(sent) != 3 {
		t.Fatalf("%d messages made, want 3: %+v", len(sent), sent)
	}
	if s := sent[0]; s.UUID != "draft-1" || s.ReceiveIDType != "chat_id" || s.ReceiveID != "oc_team" ||
		s.MsgType != "text" || s.Content != textContent("hello") || s.MessageID != *first.Data.MessageId {
		t.Errorf("Sent[0] = %+v", s)
	}
	if n := len(f.Messages("oc_team")); n != 3 {
		t.Errorf("the chat holds %d messages, want 3", n)
	}
	if n := f.Calls(larkfake.RouteCreate); n != 4 {
		t.Errorf("Calls = %d, want 4", n)
	}
}

func TestCreateChecksTheRequest(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	f.AddUser(larkfake.User{OpenID: "ou_alice", UnionID: "on_alice", Email: "alice@example.com", Name: "Alice"})
	c := newClient(f)

	for _, tc := range []struct {
		name, idType, id string
		code             int
	}{
		{"unknown chat", "chat_id", "oc_nope", larkfake.CodeInvalidParam},
		{"unknown user", "open_id", "ou_nope", larkfake.CodeInvalidParam},
		{"bad receive_id_type", "phone", "123", larkfake.CodeFieldValidation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := create(t, c, tc.idType, tc.id, "", "x")
			if resp.Code != tc.code {
				t.Errorf("code %d (%s), want %d", resp.Code, resp.Msg, tc.code)
			}
		})
	}
	t.Run("to a user by email lands in the bot's p2p chat", func(t *testing.T) {
		a := create(t, c, "email", "alice@example.com", "", "hi")
		b := create(t, c, "open_id", "ou_alice", "", "hi again")
		if !a.Success() || !b.Success() {
			t.Fatalf("%+v %+v", a.CodeError, b.CodeError)
		}
		if *a.Data.ChatId != *b.Data.ChatId || *a.Data.ChatId == "oc_team" {
			t.Errorf("chats %s and %s, want one p2p chat", *a.Data.ChatId, *b.Data.ChatId)
		}
		if *a.Data.Sender.SenderType != "app" || *a.Data.Sender.Id != f.Options().AppID {
			t.Errorf("sender %+v, want the app", a.Data.Sender)
		}
	})
	t.Run("content that is not JSON", func(t *testing.T) {
		body := larkim.NewCreateMessageReqBodyBuilder().ReceiveId("oc_team").MsgType("text").Content("plain").Build()
		resp, err := c.Im.Message.Create(ctx(t), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").Body(body).Build())
		if err != nil || resp.Code != larkfake.CodeInvalidParam {
			t.Errorf("err %v, code %d", err, resp.Code)
		}
	})
	if n := len(f.Sent()); n != 2 {
		t.Errorf("%d messages made, want 2 (only the valid ones)", n)
	}
}

func reply(t *testing.T, c *lark.Client, parent, uuid string, inThread bool) *larkim.ReplyMessageResp {
	t.Helper()
	body := larkim.NewReplyMessageReqBodyBuilder().MsgType("text").Content(textContent("re")).Uuid(uuid).ReplyInThread(inThread).Build()
	resp, err := c.Im.Message.Reply(ctx(t), larkim.NewReplyMessageReqBuilder().MessageId(parent).Body(body).Build())
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Success() {
		t.Fatalf("reply: %d %s", resp.Code, resp.Msg)
	}
	return resp
}

func TestReplyThreadsAndDedupes(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	root := f.AddMessage("oc_team", larkfake.Message{SenderID: "ou_alice", Content: textContent("question")})
	c := newClient(f)

	r1 := reply(t, c, root, "r-1", true)
	if *r1.Data.ParentId != root || *r1.Data.RootId != root || r1.Data.ThreadId == nil || *r1.Data.ThreadId == "" {
		t.Fatalf("reply in thread: parent %v root %v thread %v", r1.Data.ParentId, r1.Data.RootId, r1.Data.ThreadId)
	}
	thread := *r1.Data.ThreadId
	if again := reply(t, c, root, "r-1", true); *again.Data.MessageId != *r1.Data.MessageId {
		t.Errorf("the same uuid made message %s, want %s", *again.Data.MessageId, *r1.Data.MessageId)
	}
	// A reply to a message in a thread stays in it, reply_in_thread or not.
	r2 := reply(t, c, *r1.Data.MessageId, "r-2", false)
	if r2.Data.ThreadId == nil || *r2.Data.ThreadId != thread || *r2.Data.RootId != root {
		t.Errorf("reply to a thread message: thread %v root %v, want %s %s", r2.Data.ThreadId, *r2.Data.RootId, thread, root)
	}
	sent := f.Sent()
	if len(sent) != 2 || sent[0].ParentID != root || !sent[0].ReplyInThread || sent[1].ThreadID != thread {
		t.Errorf("Sent = %+v", sent)
	}

	body := larkim.NewReplyMessageReqBodyBuilder().MsgType("text").Content(textContent("x")).Build()
	resp, err := c.Im.Message.Reply(ctx(t), larkim.NewReplyMessageReqBuilder().MessageId("om_nope").Body(body).Build())
	if err != nil || resp.Code != larkfake.CodeInvalidParam {
		t.Errorf("reply to an unknown message: err %v code %d", err, resp.Code)
	}
}

func TestResourceDownload(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	msg := f.AddMessage("oc_team", larkfake.Message{MsgType: "file", Content: `{"file_key":"file_v3_abc","file_name":"報告.pdf"}`})
	content := bytes.Repeat([]byte("%PDF-1.7 fake\n"), 10000)
	f.AddResource(msg, "file_v3_abc", content, "file", "報告.pdf")
	c := newClient(f)

	get := func(key, typ string) *larkim.GetMessageResourceResp {
		t.Helper()
		resp, err := c.Im.MessageResource.Get(ctx(t), larkim.NewGetMessageResourceReqBuilder().MessageId(msg).FileKey(key).Type(typ).Build())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get("file_v3_abc", "file")
	if !resp.Success() {
		t.Fatalf("get: %d %s", resp.Code, resp.Msg)
	}
	got, _ := io.ReadAll(resp.File)
	if !bytes.Equal(got, content) {
		t.Errorf("got %d bytes, want the %d stored", len(got), len(content))
	}
	if resp.FileName != "報告.pdf" {
		t.Errorf("file name %q, want 報告.pdf", resp.FileName)
	}
	if r := get("file_v3_abc", "image"); r.Code != larkfake.CodeResourceNotInMsg {
		t.Errorf("a file asked as an image: code %d, want %d", r.Code, larkfake.CodeResourceNotInMsg)
	}
	if r := get("file_v3_other", "file"); r.Code != larkfake.CodeResourceNotInMsg {
		t.Errorf("a key not in the message: code %d, want %d", r.Code, larkfake.CodeResourceNotInMsg)
	}
}

func TestUploadsAndTheirMessages(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	c := newClient(f)
	png := []byte("\x89PNG\r\n\x1a\nfake image")

	img, err := c.Im.Image.Create(ctx(t), larkim.NewCreateImageReqBuilder().
		Body(larkim.NewCreateImageReqBodyBuilder().ImageType("message").Image(bytes.NewReader(png)).Build()).Build())
	if err != nil || !img.Success() {
		t.Fatalf("image upload: %v %+v", err, img)
	}
	file, err := c.Im.File.Create(ctx(t), larkim.NewCreateFileReqBuilder().
		Body(larkim.NewCreateFileReqBodyBuilder().FileType("pdf").FileName("notes.pdf").File(strings.NewReader("%PDF")).Build()).Build())
	if err != nil || !file.Success() {
		t.Fatalf("file upload: %v %+v", err, file)
	}
	ups := f.Uploads()
	if len(ups) != 2 || !bytes.Equal(ups[0].Content, png) || ups[0].Type != "message" || ups[0].Key != *img.Data.ImageKey ||
		ups[1].FileName != "notes.pdf" || ups[1].Type != "pdf" || string(ups[1].Content) != "%PDF" || ups[1].Key != *file.Data.FileKey {
		t.Fatalf("Uploads = %+v", ups)
	}

	empty, err := c.Im.File.Create(ctx(t), larkim.NewCreateFileReqBuilder().
		Body(larkim.NewCreateFileReqBodyBuilder().FileType("pdf").FileName("empty.pdf").File(strings.NewReader("")).Build()).Build())
	if err != nil || empty.Success() {
		t.Errorf("an empty file was accepted: %v %+v", err, empty)
	}

	// The image message sent with the key serves the image back.
	body := larkim.NewCreateMessageReqBodyBuilder().ReceiveId("oc_team").MsgType("image").
		Content(fmt.Sprintf(`{"image_key":%q}`, *img.Data.ImageKey)).Build()
	sent, err := c.Im.Message.Create(ctx(t), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").Body(body).Build())
	if err != nil || !sent.Success() {
		t.Fatalf("image message: %v %+v", err, sent)
	}
	res, err := c.Im.MessageResource.Get(ctx(t), larkim.NewGetMessageResourceReqBuilder().
		MessageId(*sent.Data.MessageId).FileKey(*img.Data.ImageKey).Type("image").Build())
	if err != nil || !res.Success() {
		t.Fatalf("download: %v %+v", err, res)
	}
	if got, _ := io.ReadAll(res.File); !bytes.Equal(got, png) {
		t.Errorf("downloaded %q", got)
	}

	bad := larkim.NewCreateMessageReqBodyBuilder().ReceiveId("oc_team").MsgType("image").Content(`{"image_key":"img_v3_forged"}`).Build()
	resp, err := c.Im.Message.Create(ctx(t), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").Body(bad).Build())
	if err != nil || resp.Code != larkfake.CodeInvalidParam {
		t.Errorf("an unknown image_key: err %v code %d", err, resp.Code)
	}
}

func TestListPages(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	f.AddChat(larkfake.Chat{ChatID: "oc_other"})
	var want []string
	// Added out of order: the list sorts by create_time.
	for i := 44; i >= 0; i-- {
		id := f.AddMessage("oc_team", larkfake.Message{CreateTime: start.Add(time.Duration(i) * time.Minute), Content: textContent(fmt.Sprint(i))})
		want = append([]string{id}, want...)
		f.AddMessage("oc_other", larkfake.Message{CreateTime: start.Add(time.Duration(i) * time.Minute)})
	}
	c := newClient(f)
	list := func(since time.Time, token string) *larkim.ListMessageResp {
		t.Helper()
		b := larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId("oc_team").
			StartTime(fmt.Sprint(since.Unix())).SortType("ByCreateTimeAsc").PageSize(20)
		if token != "" {
			b.PageToken(token)
		}
		resp, err := c.Im.Message.List(ctx(t), b.Build())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 20 for 45 messages")
		}
		resp := list(start, token)
		if !resp.Success() {
			t.Fatalf("list: %d %s", resp.Code, resp.Msg)
		}
		for _, m := range resp.Data.Items {
			got = append(got, *m.MessageId)
		}
		if !*resp.Data.HasMore {
			break
		}
		token = *resp.Data.PageToken
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("listed %d messages %v,\nwant %d in create_time order %v", len(got), got, len(want), want)
	}

	// start_time is inclusive, in seconds.
	since := list(start.Add(40*time.Minute), "")
	if n := len(since.Data.Items); n != 5 || *since.Data.Items[0].MessageId != want[40] {
		t.Errorf("since minute 40: %d items", n)
	}

	first := list(start, "")
	resp, err := c.Im.Message.List(ctx(t), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId("oc_other").
		PageToken(*first.Data.PageToken).Build())
	if err != nil || resp.Code != larkfake.CodeFieldValidation {
		t.Errorf("a page token used for another chat: err %v code %d", err, resp.Code)
	}
}

func TestFailuresSurfaceAsTheSDKReportsThem(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	c := newClient(f)

	f.Fail(larkfake.RouteCreate, larkfake.Failure{Status: 429, RetryAfter: 7})
	resp := create(t, c, "chat_id", "oc_team", "u", "x")
	if resp.StatusCode != 429 || resp.Code != larkfake.CodeRateLimited || resp.Header.Get("x-ogw-ratelimit-reset") != "7" {
		t.Errorf("429: status %d code %d reset %q", resp.StatusCode, resp.Code, resp.Header.Get("x-ogw-ratelimit-reset"))
	}

	f.Fail(larkfake.RouteCreate, larkfake.Failure{Code: larkfake.CodePermissionDenied, Msg: "Access denied. One of the following scopes is required: [im:message]"})
	resp = create(t, c, "chat_id", "oc_team", "u", "x")
	if resp.Success() || resp.Code != larkfake.CodePermissionDenied || !strings.Contains(resp.Msg, "im:message") {
		t.Errorf("code error: %+v", resp.CodeError)
	}

	f.Fail(larkfake.RouteCreate, larkfake.Failure{Status: 503})
	if _, err := c.Im.Message.Create(ctx(t), larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").
		Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId("oc_team").MsgType("text").Content(textContent("x")).Build()).Build()); err == nil {
		t.Error("a 503 with a text body gave no error")
	}

	if resp := create(t, c, "chat_id", "oc_team", "u", "x"); !resp.Success() {
		t.Errorf("after the failures: %+v", resp.CodeError)
	}
	if len(f.Sent()) != 1 || f.Calls(larkfake.RouteCreate) != 4 {
		t.Errorf("Sent %d, Calls %d; want 1, 4", len(f.Sent()), f.Calls(larkfake.RouteCreate))
	}
}

func TestUserAndChat(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddUser(larkfake.User{OpenID: "ou_alice", UnionID: "on_alice", UserID: "alice01", Name: "Alice 张", Email: "a@example.com"})
	f.AddChat(larkfake.Chat{ChatID: "oc_topic", Name: "Releases", ChatMode: "topic"})
	c := newClient(f)

	u, err := c.Contact.User.Get(ctx(t), larkcontact.NewGetUserReqBuilder().UserId("on_alice").UserIdType("union_id").Build())
	if err != nil || !u.Success() || *u.Data.User.Name != "Alice 张" || *u.Data.User.OpenId != "ou_alice" {
		t.Fatalf("user: %v %+v", err, u)
	}
	u, err = c.Contact.User.Get(ctx(t), larkcontact.NewGetUserReqBuilder().UserId("ou_bob").UserIdType("open_id").Build())
	if err != nil || u.Code != larkfake.CodeNoUserAuthority {
		t.Errorf("unknown user: %v code %d", err, u.Code)
	}
	ch, err := c.Im.Chat.Get(ctx(t), larkim.NewGetChatReqBuilder().ChatId("oc_topic").Build())
	if err != nil || !ch.Success() || *ch.Data.Name != "Releases" || *ch.Data.ChatMode != "topic" {
		t.Fatalf("chat: %v %+v", err, ch)
	}
}

// wsClient starts the SDK's ws client against f, its events going to
// handle; cancel stops it, and done is closed with Start's error in
// *startErr when it returned.
func wsClient(t *testing.T, f *larkfake.Server, handle func(*larkim.P2MessageReceiveV1) error, opts ...larkws.ClientOption) (cancel func(), done <-chan struct{}, startErr *error) {
	t.Helper()
	d := dispatcher.NewEventDispatcher("", "").OnP2MessageReceiveV1(func(_ context.Context, ev *larkim.P2MessageReceiveV1) error {
		return handle(ev)
	})
	o := f.Options()
	opts = append([]larkws.ClientOption{larkws.WithEventHandler(d), larkws.WithDomain(f.URL()), larkws.WithLogger(quiet{})}, opts...)
	cli := larkws.NewClient(o.AppID, o.AppSecret, opts...)
	c, stop := context.WithCancel(context.Background())
	ch := make(chan struct{})
	var err error
	go func() {
		defer close(ch)
		err = cli.Start(c)
	}()
	t.Cleanup(func() {
		stop()
		<-ch
	})
	return stop, ch, &err
}

func recv(t *testing.T, ch <-chan *larkim.P2MessageReceiveV1) *larkim.P2MessageReceiveV1 {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-ctx(t).Done():
		t.Fatal("no event reached the handler")
		return nil
	}
}

func waitAck(t *testing.T, f *larkfake.Server, id string) larkfake.Ack {
	t.Helper()
	select {
	case <-f.Acked(id):
	case <-ctx(t).Done():
		t.Fatalf("event %s never acked", id)
	}
	a, ok := f.Ack(id)
	if !ok {
		t.Fatal("Acked closed but no Ack recorded")
	}
	return a
}

func TestWSEventReachesTheHandlerAndIsAcked(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	events := make(chan *larkim.P2MessageReceiveV1, 10)
	wsClient(t, f, func(ev *larkim.P2MessageReceiveV1) error { events <- ev; return nil })

	body, err := os.ReadFile(filepath.Join("testdata", "receive_v1.group-thread.json"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.SendEvent(ctx(t), body)
	if err != nil {
		t.Fatal(err)
	}
	ev := recv(t, events)
	m := ev.Event.Message
	if ev.EventV2Base.Header.EventID != "ev_fixture_0001" || *m.MessageId != "om_fixture_reply" || *m.RootId != "om_fixture_root" ||
		*m.ThreadId != "omt_fixture_thread" || *m.ChatType != "group" || *m.Content != `{"text":"@_user_1 ship it — 发布"}` ||
		*ev.Event.Sender.SenderId.OpenId != "ou_fixture_alice" || len(m.Mentions) != 1 || *m.Mentions[0].Name != "Courier" {
		t.Errorf("parsed event: header %+v message %+v", ev.EventV2Base.Header, m)
	}
	if a := waitAck(t, f, id); a.Code != 200 || a.BizRT == "" {
		t.Errorf("ack %+v, want code 200 with biz_rt", a)
	}
}

func TestWSCorpusEvents(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "lark", "events")
	files, err := filepath.Glob(filepath.Join(dir, "im.message.receive_v1.*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no receive_v1 events under %s: %v", dir, err)
	}
	f := larkfake.New(t, larkfake.Options{})
	events := make(chan *larkim.P2MessageReceiveV1, 10)
	wsClient(t, f, func(ev *larkim.P2MessageReceiveV1) error { events <- ev; return nil })
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var env struct {
				Schema string          `json:"schema"`
				Event  json.RawMessage `json:"event"`
			}
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			var want struct {
				Message struct {
					MessageID string `json:"message_id"`
					ChatID    string `json:"chat_id"`
					Content   string `json:"content"`
				} `json:"message"`
			}
			if env.Schema == "" {
				// An event body without its envelope: wrap it as Lark
				// delivers it.
				env.Event = body
				body, _ = json.Marshal(map[string]any{"schema": "2.0", "header": map[string]any{
					"event_id": "wrapped", "event_type": "im.message.receive_v1", "create_time": "1641385820771",
					"tenant_key": "t", "app_id": "cli_x"}, "event": json.RawMessage(body)})
			}
			if err := json.Unmarshal(env.Event, &want); err != nil {
				t.Fatal(err)
			}
			id, err := f.SendEvent(ctx(t), body)
			if err != nil {
				t.Fatal(err)
			}
			ev := recv(t, events)
			m := ev.Event.Message
			if *m.MessageId != want.Message.MessageID || *m.ChatId != want.Message.ChatID || *m.Content != want.Message.Content {
				t.Errorf("parsed %s %s %s, want %+v", *m.MessageId, *m.ChatId, *m.Content, want.Message)
			}
			if a := waitAck(t, f, id); a.Code != 200 {
				t.Errorf("ack code %d", a.Code)
			}
		})
	}
}

func TestWSHandlerErrorIsAcked500(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	wsClient(t, f, func(*larkim.P2MessageReceiveV1) error { return errors.New("disk full") })
	body, _ := os.ReadFile(filepath.Join("testdata", "receive_v1.group-thread.json"))
	id, err := f.SendEvent(ctx(t), body)
	if err != nil {
		t.Fatal(err)
	}
	if a := waitAck(t, f, id); a.Code != 500 {
		t.Errorf("ack code %d, want 500 for a failed handler", a.Code)
	}
}

func TestWSPingDropReconnectAndStop(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	events := make(chan *larkim.P2MessageReceiveV1, 10)
	reconnected := make(chan struct{}, 1)
	cancel, done, startErr := wsClient(t, f, func(ev *larkim.P2MessageReceiveV1) error { events <- ev; return nil },
		larkws.WithOnReconnected(func() { reconnected <- struct{}{} }))

	if err := f.WaitConnections(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	// The SDK pings as soon as it is connected; the fake answers a pong.
	if err := f.WaitPings(ctx(t), 1); err != nil {
		t.Fatal(err)
	}

	f.Drop()
	if err := f.WaitConnections(ctx(t), 2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconnected:
	case <-ctx(t).Done():
		t.Fatal("OnReconnected was not called")
	}
	body, _ := os.ReadFile(filepath.Join("testdata", "receive_v1.group-thread.json"))
	id, err := f.SendEvent(ctx(t), body)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, events)
	waitAck(t, f, id)

	cancel()
	select {
	case <-done:
	case <-ctx(t).Done():
		t.Fatal("Start did not return after its ctx was cancelled")
	}
	if *startErr != nil && !errors.Is(*startErr, context.Canceled) {
		t.Errorf("Start returned %v", *startErr)
	}
}

func TestWSBadCredentialsStopTheClient(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	d := dispatcher.NewEventDispatcher("", "")
	cli := larkws.NewClient(f.Options().AppID, "wrong", larkws.WithEventHandler(d), larkws.WithDomain(f.URL()), larkws.WithLogger(quiet{}))
	err := cli.Start(ctx(t))
	var ce *larkws.ClientError
	if !errors.As(err, &ce) || ce.Code != larkfake.CodeInvalidAppSecret {
		t.Fatalf("Start = %v, want a ClientError with code %d", err, larkfake.CodeInvalidAppSecret)
	}
	if n := f.Connections(); n != 0 {
		t.Errorf("%d connections opened with a wrong secret", n)
	}
}

// rawConn opens a ws connection to f as the SDK does (endpoint, then the
// URL it hands out), without the SDK: what the fake puts on the wire is
// checked frame by frame.
func rawConn(t *testing.T, f *larkfake.Server) (*websocket.Conn, map[string]int) {
	t.Helper()
	o := f.Options()
	req, _ := json.Marshal(map[string]string{"AppID": o.AppID, "AppSecret": o.AppSecret})
	resp, err := http.Post(f.URL()+larkws.GenEndpointUri, "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ep struct {
		Code int
		Data struct {
			URL          string
			ClientConfig map[string]int
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ep); err != nil || ep.Code != 0 {
		t.Fatalf("endpoint: %v %+v", err, ep)
	}
	c, _, err := websocket.DefaultDialer.DialContext(ctx(t), ep.Data.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The ticket is one-use, as Lark's.
	if _, r, err := websocket.DefaultDialer.DialContext(ctx(t), ep.Data.URL, nil); err == nil ||
		r == nil || r.Header.Get(larkws.HeaderHandshakeStatus) != "514" {
		t.Errorf("a used ticket: err %v, want a 514 handshake refusal", err)
	}
	return c, ep.Data.ClientConfig
}

func readFrame(t *testing.T, c *websocket.Conn) larkws.Frame {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard, not an assertion
	typ, b, err := c.ReadMessage()
	if err != nil || typ != websocket.BinaryMessage {
		t.Fatalf("read: type %d err %v", typ, err)
	}
	var f larkws.Frame
	if err := f.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestWSFramesOnTheWire(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{PingInterval: 7 * time.Second})
	c, cfg := rawConn(t, f)
	if cfg["PingInterval"] != 7 || cfg["ReconnectCount"] != -1 {
		t.Errorf("ClientConfig %v", cfg)
	}

	ping, _ := larkws.NewPingFrame(33554678).Marshal()
	c.WriteMessage(websocket.BinaryMessage, ping)
	pong := readFrame(t, c)
	var pcfg map[string]int
	if larkws.Headers(pong.Headers).GetString(larkws.HeaderType) != "pong" || pong.Method != int32(larkws.FrameTypeControl) ||
		json.Unmarshal(pong.Payload, &pcfg) != nil || pcfg["PingInterval"] != 7 {
		t.Errorf("pong %+v", pong)
	}

	// A split event: every part carries the message_id, sum and its
	// seq; the parts join to the body.
	body, _ := os.ReadFile(filepath.Join("testdata", "receive_v1.group-thread.json"))
	id, err := f.SendEventSplit(ctx(t), body, 3)
	if err != nil {
		t.Fatal(err)
	}
	var joined []byte
	var last larkws.Frame
	for i := range 3 {
		fr := readFrame(t, c)
		hs := larkws.Headers(fr.Headers)
		if fr.Method != int32(larkws.FrameTypeData) || hs.GetString(larkws.HeaderType) != "event" ||
			hs.GetString(larkws.HeaderMessageID) != id || hs.GetInt(larkws.HeaderSum) != 3 || hs.GetInt(larkws.HeaderSeq) != i ||
			hs.GetString(larkws.HeaderTraceID) == "" {
			t.Errorf("part %d: %+v", i, fr)
		}
		joined = append(joined, fr.Payload...)
		last = fr
	}
	if !bytes.Equal(joined, body) {
		t.Errorf("parts join to %q", joined)
	}
	if _, ok := f.Ack(id); ok {
		t.Fatal("acked before any response")
	}
	// The response the SDK writes: the frame back with biz_rt, payload
	// {"code":200}.
	last.Headers = append(last.Headers, larkws.Header{Key: larkws.HeaderBizRt, Value: "3"})
	last.Payload = []byte(`{"code":200,"headers":null,"data":null}`)
	b, _ := last.Marshal()
	c.WriteMessage(websocket.BinaryMessage, b)
	if a := waitAck(t, f, id); a.Code != 200 || a.BizRT != "3" {
		t.Errorf("ack %+v", a)
	}
}

func TestWSConnectionLimit(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{MaxConnections: 1})
	wsClient(t, f, func(*larkim.P2MessageReceiveV1) error { return nil })
	if err := f.WaitConnections(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	d := dispatcher.NewEventDispatcher("", "")
	o := f.Options()
	second := larkws.NewClient(o.AppID, o.AppSecret, larkws.WithEventHandler(d), larkws.WithDomain(f.URL()), larkws.WithLogger(quiet{}))
	err := second.Start(ctx(t))
	var ce *larkws.ClientError
	if !errors.As(err, &ce) || ce.Code != 514 {
		t.Fatalf("a connection over the limit: Start = %v, want the SDK's final ClientError", err)
	}
	if n := f.Connections(); n != 1 {
		t.Errorf("%d connections accepted, want 1", n)
	}
}

// Clients that connect at once cannot all pass a limit with room for
// one: the limit holds a place for a handshake under way.
func TestWSConnectionLimitAtOnce(t *testing.T) {
	const n = 8
	f := larkfake.New(t, larkfake.Options{MaxConnections: 1})
	o := f.Options()
	c, cancel := context.WithCancel(ctx(t))
	defer cancel()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			d := dispatcher.NewEventDispatcher("", "")
			cli := larkws.NewClient(o.AppID, o.AppSecret, larkws.WithEventHandler(d), larkws.WithDomain(f.URL()), larkws.WithLogger(quiet{}))
			<-start
			errs <- cli.Start(c)
		})
	}
	close(start)
	for range n - 1 {
		select {
		case err := <-errs:
			var ce *larkws.ClientError
			if !errors.As(err, &ce) || ce.Code != 514 {
				t.Fatalf("a connection over the limit: Start = %v, want the SDK's final ClientError", err)
			}
		case <-c.Done():
			t.Fatalf("fewer than %d clients refused (%d connections accepted)", n-1, f.Connections())
		}
	}
	// The one let through may still be in its handshake.
	if err := f.WaitConnections(c, 1); err != nil {
		t.Fatal(err)
	}
	if got := f.Connections(); got != 1 {
		t.Errorf("%d connections accepted, want 1", got)
	}
	if got := f.OpenConnections(); got != 1 {
		t.Errorf("%d connections open, want 1", got)
	}
}

func TestWSClientConfigReachesTheSDK(t *testing.T) {
	// The SDK's own ping interval is 2 min; three pings within the test
	// mean it took the fake's 1 s.
	f := larkfake.New(t, larkfake.Options{PingInterval: time.Second})
	wsClient(t, f, func(*larkim.P2MessageReceiveV1) error { return nil })
	if err := f.WaitPings(ctx(t), 3); err != nil {
		t.Fatal(err)
	}
}

// tokenCache is a larkcore.Cache that can be emptied: the hook the SDK
// offers (lark.WithTokenCache) for renewing a token Lark refused.
type tokenCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *tokenCache) Set(_ context.Context, k, v string, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ttl > 0 {
		c.m[k] = v
	}
	return nil
}

func (c *tokenCache) Get(_ context.Context, k string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k], nil
}

// renewing empties the cache when Lark refuses a token, so the SDK's one
// retry fetches a new one.
type renewing struct {
	cache *tokenCache
	next  http.RoundTripper
}

func (r renewing) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		return resp, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var ce struct{ Code int }
	if json.Unmarshal(b, &ce) == nil && (ce.Code == larkfake.CodeInvalidToken || ce.Code == larkfake.CodeMissingToken) {
		r.cache.mu.Lock()
		clear(r.cache.m)
		r.cache.mu.Unlock()
	}
	return resp, nil
}

func TestExpiredTokenRenewedThroughTheSDKRetry(t *testing.T) {
	// lark.WithTokenCache replaces the SDK's process-wide token cache
	// (larkcore.NewCache sets a package variable): every client made
	// after it, in this test binary, uses this cache. It is a correct
	// cache, keyed as the SDK keys it, so the other tests do not mind.
	cache := &tokenCache{m: map[string]string{}}
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	o := f.Options()
	c := lark.NewClient(o.AppID, o.AppSecret, lark.WithOpenBaseUrl(f.URL()), lark.WithLogger(quiet{}),
		lark.WithTokenCache(cache), lark.WithHttpClient(&http.Client{Transport: renewing{cache, http.DefaultTransport}}))
	get := func() *larkim.GetChatResp {
		t.Helper()
		resp, err := c.Im.Chat.Get(ctx(t), larkim.NewGetChatReqBuilder().ChatId("oc_team").Build())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := get(); !resp.Success() {
		t.Fatalf("first call: %+v", resp.CodeError)
	}
	f.ExpireTokens()
	before := f.Calls(larkfake.RouteChat)
	if resp := get(); !resp.Success() {
		t.Fatalf("after expiry: %d %s", resp.Code, resp.Msg)
	}
	if n := f.Calls(larkfake.RouteChat) - before; n != 2 {
		t.Errorf("%d calls, want 2: refused, then retried with the new token", n)
	}
	if n := f.Tokens(); n != 2 {
		t.Errorf("%d tokens issued, want 2", n)
	}
}

func TestOversizedBodyRefused(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	big, _ := json.Marshal(map[string]string{"receive_id": "oc_team", "msg_type": "text",
		"content": textContent(strings.Repeat("x", 2<<20))})
	resp, err := http.Post(f.URL()+"/open-apis/im/v1/messages?receive_id_type=chat_id", "application/json", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
	// Under the bound but over Lark's 150 KB for text: Lark's code.
	c := newClient(f)
	if r := create(t, c, "chat_id", "oc_team", "", strings.Repeat("y", 200<<10)); r.Code != larkfake.CodeContentTooLong {
		t.Errorf("a 200 KB text: code %d, want %d", r.Code, larkfake.CodeContentTooLong)
	}
	if n := len(f.Sent()); n != 0 {
		t.Errorf("%d messages made from oversized requests", n)
	}
}

func TestWSDropAsSoonAsTheClientIsReady(t *testing.T) {
	// The SDK counts itself connected once it reads the 101, which can
	// be before the fake has registered the connection: a Drop then must
	// still cut it.
	f := larkfake.New(t, larkfake.Options{})
	ready := make(chan struct{}, 1)
	wsClient(t, f, func(*larkim.P2MessageReceiveV1) error { return nil }, larkws.WithOnReady(func() { ready <- struct{}{} }))
	select {
	case <-ready:
	case <-ctx(t).Done():
		t.Fatal("never ready")
	}
	f.Drop()
	if err := f.WaitConnections(ctx(t), 2); err != nil {
		t.Fatalf("the client did not reconnect, so the Drop missed its connection: %v", err)
	}
}

// The chat list pages through the group chats as the SDK reads it, and
// lists no p2p chat (a tenant token does not).
func TestChatListPages(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("oc_group%d", i)
		f.AddChat(larkfake.Chat{ChatID: id, Name: "G" + fmt.Sprint(i), ChatMode: []string{"group", "topic"}[i%2]})
		want = append(want, id)
	}
	f.AddChat(larkfake.Chat{ChatID: "oc_p2p", ChatMode: "p2p"})
	c := newClient(f)
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 2 for 5 chats")
		}
		b := larkim.NewListChatReqBuilder().PageSize(2)
		if token != "" {
			b.PageToken(token)
		}
		resp, err := c.Im.Chat.List(ctx(t), b.Build())
		if err != nil || !resp.Success() {
			t.Fatalf("chats: %v %+v", err, resp)
		}
		for _, it := range resp.Data.Items {
			got = append(got, *it.ChatId)
			if *it.ChatMode == "" || *it.Name == "" {
				t.Errorf("chat %s without its mode or name", *it.ChatId)
			}
		}
		if !*resp.Data.HasMore {
			break
		}
		token = *resp.Data.PageToken
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("listed %v, want %v (no p2p chat)", got, want)
	}
	resp, err := c.Im.Chat.List(ctx(t), larkim.NewListChatReqBuilder().PageSize(101).Build())
	if err != nil || resp.Code != larkfake.CodeFieldValidation {
		t.Errorf("page_size 101: err %v code %d", err, resp.Code)
	}
}

// get of a merge_forward answers it and its children (every level), which
// are in no chat's history.
func TestMergeForwardChildren(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	f.AddChat(larkfake.Chat{ChatID: "oc_team"})
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	mf := f.AddMessage("oc_team", larkfake.Message{MsgType: "merge_forward", Content: `{"content":"Merged and Forwarded Message"}`, CreateTime: at})
	a := f.AddMessage("oc_team", larkfake.Message{UpperMessageID: mf, Content: textContent("first"), SenderID: "ou_a", CreateTime: at.Add(-time.Hour)})
	inner := f.AddMessage("oc_team", larkfake.Message{UpperMessageID: mf, MsgType: "merge_forward", Content: "{}", CreateTime: at.Add(-time.Hour)})
	deep := f.AddMessage("oc_team", larkfake.Message{UpperMessageID: inner, Content: textContent("deep"), CreateTime: at.Add(-2 * time.Hour)})
	c := newClient(f)
	resp, err := c.Im.Message.Get(ctx(t), larkim.NewGetMessageReqBuilder().MessageId(mf).Build())
	if err != nil || !resp.Success() {
		t.Fatalf("get: %v %+v", err, resp)
	}
	var got []string
	for _, it := range resp.Data.Items {
		up := ""
		if it.UpperMessageId != nil {
			up = *it.UpperMessageId
		}
		got = append(got, *it.MessageId+"<"+up)
	}
	if want := []string{mf + "<", a + "<" + mf, inner + "<" + mf, deep + "<" + inner}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("get items %v, want %v", got, want)
	}
	if *resp.Data.Items[1].Body.Content != textContent("first") || *resp.Data.Items[1].Sender.Id != "ou_a" {
		t.Errorf("child: %+v", resp.Data.Items[1])
	}
	list, err := c.Im.Message.List(ctx(t), larkim.NewListMessageReqBuilder().ContainerIdType("chat").ContainerId("oc_team").Build())
	if err != nil || len(list.Data.Items) != 1 || *list.Data.Items[0].MessageId != mf {
		t.Errorf("the chat's history lists %d items, want the merge_forward alone", len(list.Data.Items))
	}
	if h := f.Messages("oc_team"); len(h) != 1 {
		t.Errorf("Messages: %d, want the merge_forward alone", len(h))
	}
}

// The chat container lists a thread's root, not its replies (they are in
// the thread container), except in a topic chat.
func TestListThreadRepliesInTheThread(t *testing.T) {
	f := larkfake.New(t, larkfake.Options{})
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	ids := func(resp *larkim.ListMessageResp) (out []string) {
		for _, m := range resp.Data.Items {
			out = append(out, *m.MessageId)
		}
		return out
	}
	c := newClient(f)
	list := func(ctype, id string) []string {
		t.Helper()
		resp, err := c.Im.Message.List(ctx(t), larkim.NewListMessageReqBuilder().ContainerIdType(ctype).ContainerId(id).Build())
		if err != nil || !resp.Success() {
			t.Fatalf("list %s %s: %v %+v", ctype, id, err, resp)
		}
		return ids(resp)
	}
	for _, mode := range []string{"group", "topic"} {
		chat := "oc_" + mode
		f.AddChat(larkfake.Chat{ChatID: chat, ChatMode: mode})
		thread := "omt_" + mode
		root := f.AddMessage(chat, larkfake.Message{ThreadID: thread, CreateTime: at})
		reply := f.AddMessage(chat, larkfake.Message{ParentID: root, CreateTime: at.Add(time.Second)})
		plain := f.AddMessage(chat, larkfake.Message{CreateTime: at.Add(2 * time.Second)})
		want := []string{root, plain}
		if mode == "topic" {
			want = []string{root, reply, plain}
		}
		if got := list("chat", chat); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s chat: listed %v, want %v", mode, got, want)
		}
		if got := list("thread", thread); strings.Join(got, ",") != root+","+reply {
			t.Errorf("%s thread: listed %v, want the root and its reply", mode, got)
		}
	}
}
