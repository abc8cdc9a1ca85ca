package lark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/schema"
)

// The Sender's tests drive the real SDK against larkfake: what they assert
// is what the fake received (Sent, Uploads, Calls), as Lark would have.

const sndAppID = "cli_courier_send_test"

var (
	sndPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR a picture's bytes")
	sndPDF = []byte("%PDF-1.4 the quarterly report")
)

// sndEnv is a fake Lark, an adapter on it and its Sender.
type sndEnv struct {
	fake   *larkfake.Server
	a      *Adapter
	s      *sender
	dz     *dropzone.Store
	secret string
}

// sndRoundTrip lets a test see or change a call on the wire.
type sndRoundTrip func(req *http.Request, next http.RoundTripper) (*http.Response, error)

func (f sndRoundTrip) wrap(next http.RoundTripper) http.RoundTripper {
	return sndTransport{f: f, next: next}
}

type sndTransport struct {
	f    sndRoundTrip
	next http.RoundTripper
}

func (t sndTransport) RoundTrip(req *http.Request) (*http.Response, error) { return t.f(req, t.next) }

// sndSetup starts a fake with Ann, Bob (with an email) and the chat
// oc_team, and a Sender on it; hook, when set, sees every call.
func sndSetup(t *testing.T, hook sndRoundTrip) *sndEnv {
	t.Helper()
	secret := "secret-snd-" + strings.ReplaceAll(t.Name(), "/", "-")
	fake := larkfake.New(t, larkfake.Options{AppID: sndAppID, AppSecret: secret})
	fake.AddUser(larkfake.User{OpenID: "ou_ann", UnionID: "on_ann", Name: "Ann Lee", Email: "ann@example.com"})
	fake.AddUser(larkfake.User{OpenID: "ou_bob", Name: "Bob Chen"})
	fake.AddChat(larkfake.Chat{ChatID: "oc_team", Name: "Team"})
	dz, err := dropzone.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dz.Close() })
	var rt http.RoundTripper = http.DefaultTransport
	if hook != nil {
		rt = hook.wrap(rt)
	}
	cfg := Config{Enabled: true, AppID: sndAppID, AppSecret: confkit.Secret(secret), Domain: fake.URL()}
	a, err := newAdapter(cfg, confkit.Limits{MaxArtifactBytes: 20 << 20}, dz, &http.Client{Transport: rt, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &adapters.Provider{}
	a.outbound(p)
	s, ok := p.Sender.(*sender)
	if !ok {
		t.Fatalf("outbound set no Sender (waiting: %q)", p.Waiting)
	}
	return &sndEnv{fake: fake, a: a, s: s, dz: dz, secret: secret}
}

// sndArtifact stores data in the dropzone as an attachment named name.
func (e *sndEnv) sndArtifact(t *testing.T, name string, data []byte) schema.DraftArtifact {
	t.Helper()
	obj, err := e.dz.Put(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return schema.DraftArtifact{ID: obj.ID, Name: name}
}

// sndDraft is a draft as `courier send` queues it, resolved by the
// Resolver.
func sndDraft(t *testing.T, d schema.Draft, parent *adapters.Parent) *schema.Draft {
	t.Helper()
	d.Provider = schema.Lark
	if d.ID == "" {
		d.ID = "lark_out_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	}
	if err := (Resolver{}).Resolve(&d, parent, adapters.ResolveOptions{}, nil); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return &d
}

func sndMD(s string) schema.DraftContent { return schema.DraftContent{Markdown: schema.NullString(s)} }

// TestSendNewMessage: a new message goes by create, its receive_id_type
// from the recipient, Markdown with formatting as a post and plain words
// as text; the receipt names the message Lark made.
func TestSendNewMessage(t *testing.T) {
	for _, c := range []struct {
		to, idType string
		md         string
		msgType    string
		content    func(t *testing.T, c string)
	}{
		{"oc_team", "chat_id", "Ship **today**", "post", func(t *testing.T, c string) {
			var post map[string]struct {
				Content [][]map[string]any `json:"content"`
			}
			if err := json.Unmarshal([]byte(c), &post); err != nil {
				t.Fatalf("post content %s: %v", c, err)
			}
			found := false
			for _, line := range post["zh_cn"].Content {
				for _, el := range line {
					style, _ := json.Marshal(el["style"])
					if el["text"] == "today" && strings.Contains(string(style), `"bold"`) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("post content %s has no bold \"today\"", c)
			}
		}},
		{"ou_ann", "open_id", "just words", "text", sndTextIs("just words")},
		{"on_ann", "union_id", "hi via union", "text", sndTextIs("hi via union")},
		{"ann@example.com", "email", "hi by address", "text", sndTextIs("hi by address")},
	} {
		t.Run(c.idType, func(t *testing.T) {
			e := sndSetup(t, nil)
			d := sndDraft(t, schema.Draft{To: schema.Recipients{c.to}, Content: sndMD(c.md)}, nil)
			r, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
			if err != nil {
				t.Fatal(err)
			}
			sent := e.fake.Sent()
			if len(sent) != 1 {
				t.Fatalf("the fake made %d messages, want 1: %+v", len(sent), sent)
			}
			m := sent[0]
			if m.Route != larkfake.RouteCreate || m.ReceiveIDType != c.idType || m.ReceiveID != c.to || m.MsgType != c.msgType || m.UUID != d.IdempotencyKey {
				t.Errorf("sent %+v; want a create to %s %s, %s, uuid %s", m, c.idType, c.to, c.msgType, d.IdempotencyKey)
			}
			c.content(t, m.Content)
			if r.ProviderMessageID != m.MessageID || r.InboundID != "lark_"+m.MessageID {
				t.Errorf("receipt %+v; want the message %s", r, m.MessageID)
			}
		})
	}
}

func sndTextIs(want string) func(t *testing.T, c string) {
	return func(t *testing.T, c string) {
		t.Helper()
		var v map[string]string
		if err := json.Unmarshal([]byte(c), &v); err != nil || v["text"] != want || len(v) != 1 {
			t.Errorf("content %s; want {\"text\":%q}", c, want)
		}
	}
}

// TestSendTextAndCard: a draft of type text goes as typed (its * stay),
// and content.card goes as an interactive message carrying the card.
func TestSendTextAndCard(t *testing.T) {
	e := sndSetup(t, nil)
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Type: schema.DraftText, Content: schema.DraftContent{Text: "2 * 3 = 6, **not bold**"}}, nil)
	if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	// Plain text that holds a "<" goes as a post of text elements: a
	// text message would read <at user_id="all"> as a mention of all.
	at := "quoting: <at user_id=\"all\">everyone</at>\n\nend"
	d = sndDraft(t, schema.Draft{ID: "lark_out_at", To: schema.Recipients{"oc_team"}, Type: schema.DraftText, Content: schema.DraftContent{Text: schema.NullString(at)}}, nil)
	if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	var post map[string]struct {
		Content [][]map[string]string `json:"content"`
	}
	if m := e.fake.Sent()[1]; m.MsgType != "post" || json.Unmarshal([]byte(m.Content), &post) != nil ||
		len(post["zh_cn"].Content) != 3 || post["zh_cn"].Content[0][0]["tag"] != "text" || post["zh_cn"].Content[0][0]["text"] != "quoting: <at user_id=\"all\">everyone</at>" {
		t.Errorf("text with <at> sent as %s %s; want a post of its three lines as text elements", m.MsgType, m.Content)
	}
	card := map[string]any{"header": map[string]any{"title": map[string]any{"tag": "plain_text", "content": "Deploy?"}},
		"elements": []any{map[string]any{"tag": "markdown", "content": "**prod** at 5pm"}}}
	d = sndDraft(t, schema.Draft{ID: "lark_out_card", To: schema.Recipients{"oc_team"}, Content: schema.DraftContent{Card: card}}, nil)
	if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	d = sndDraft(t, schema.Draft{ID: "lark_out_html", To: schema.Recipients{"oc_team"}, Content: schema.DraftContent{HTML: "<p>Ship <b>today</b></p>"}}, nil)
	if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	sent := slices.Delete(e.fake.Sent(), 1, 2) // the <at> text, checked above
	if len(sent) != 3 {
		t.Fatalf("the fake made %d messages, want 3", len(sent))
	}
	if sent[2].MsgType != "post" || !strings.Contains(sent[2].Content, `"today"`) || !strings.Contains(sent[2].Content, `"bold"`) {
		t.Errorf("HTML draft sent as %s %s; want a post with today in bold", sent[2].MsgType, sent[2].Content)
	}
	sndTextIs("2 * 3 = 6, **not bold**")(t, sent[0].Content)
	if sent[0].MsgType != "text" {
		t.Errorf("text draft sent as %s", sent[0].MsgType)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(sent[1].Content), &got); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(card)
	gotJSON, _ := json.Marshal(got)
	if sent[1].MsgType != "interactive" || string(gotJSON) != string(want) {
		t.Errorf("card sent as %s %s; want interactive %s", sent[1].MsgType, sent[1].Content, want)
	}
}

// sendOne sends d, which must make one message, and returns the receipt
// and that message.
func (e *sndEnv) sendOne(t *testing.T, d *schema.Draft) (adapters.Receipt, larkfake.Sent) {
	t.Helper()
	before := len(e.fake.Sent())
	r, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	sent := e.fake.Sent()[before:]
	if len(sent) != 1 {
		t.Fatalf("the fake made %d messages, want 1", len(sent))
	}
	return r, sent[0]
}

// TestSendReply: a reply answers its parent through the reply API, in
// the parent's thread when it is in one (reply_in_thread, and the fake
// puts it in that thread), plainly when it is not.
func TestSendReply(t *testing.T) {
	e := sndSetup(t, nil)
	plain := e.fake.AddMessage("oc_team", larkfake.Message{SenderID: "ou_ann", Content: `{"text":"top"}`})
	inThread := e.fake.AddMessage("oc_team", larkfake.Message{SenderID: "ou_ann", ThreadID: "omt_launch", Content: `{"text":"in a thread"}`})
	quoted := e.fake.AddMessage("oc_team", larkfake.Message{SenderID: "ou_bob", ParentID: plain, Content: `{"text":"a quoted reply"}`})
	for _, c := range []struct {
		name, parent, thread string
		inThread             bool
		threadID             string // the fake's thread_id of the reply
	}{
		{"plain", plain, "", false, ""},
		{"thread", inThread, "omt_launch", true, "omt_launch"},
		// A quoted reply chain (its thread key is its root) is not a
		// thread: answered plainly, it stays a chain, not made a thread.
		{"quoted chain", quoted, plain, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := &adapters.Parent{Message: &schema.Message{ID: "lark_" + c.parent, Provider: schema.Lark,
				Session: schema.Session{ID: "oc_team", ThreadKey: schema.NullString(c.thread)}}}
			d := schema.Draft{ReplyTo: schema.NullString("lark_" + c.parent), ThreadKey: schema.NullString(c.thread), Content: sndMD("on it")}
			r, m := e.sendOne(t, sndDraft(t, d, parent))
			if m.Route != larkfake.RouteReply || m.ParentID != c.parent || m.ReplyInThread != c.inThread || m.ThreadID != c.threadID || m.ChatID != "oc_team" {
				t.Errorf("sent %+v; want a reply to %s, reply_in_thread %v, in thread %q", m, c.parent, c.inThread, c.threadID)
			}
			if r.ProviderMessageID != m.MessageID || r.InboundID != "lark_"+m.MessageID {
				t.Errorf("receipt %+v; want %s", r, m.MessageID)
			}
		})
	}
}

// TestSendReplyOpensThread: seed 004 §5.2 answers lark_om_abc123 with
// thread_key om_abc123, the parent's own id: the reply opens a thread at
// the parent (reply_in_thread, and the fake makes the parent the root of
// a new thread); a parent already in a thread is answered in it; a
// quoted reply is made the thread's root as Lark does, at the chain's
// root.
func TestSendReplyOpensThread(t *testing.T) {
	e := sndSetup(t, nil)
	top := e.fake.AddMessage("oc_team", larkfake.Message{MessageID: "om_abc123", SenderID: "ou_ann", Content: `{"text":"top"}`})
	inThread := e.fake.AddMessage("oc_team", larkfake.Message{SenderID: "ou_ann", ThreadID: "omt_launch", Content: `{"text":"in a thread"}`})
	root := e.fake.AddMessage("oc_team", larkfake.Message{SenderID: "ou_ann", Content: `{"text":"a root"}`})
	quoted := e.fake.AddMessage("oc_team", larkfake.Message{SenderID: "ou_bob", ParentID: root, RootID: root, Content: `{"text":"a quoted reply"}`})
	for _, c := range []struct {
		name, parent, parentThread string
		wantKey                    string // the draft's thread_key once resolved
		wantThread                 string // the reply's thread_id; "new" for a new one
	}{
		{"top-level", top, "", top, "new"},
		{"in a thread", inThread, "omt_launch", "omt_launch", "omt_launch"},
		{"quoted reply", quoted, root, quoted, "new"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := &adapters.Parent{Message: &schema.Message{ID: "lark_" + c.parent, Provider: schema.Lark,
				Session: schema.Session{ID: "oc_team", ThreadKey: schema.NullString(c.parentThread)}}}
			d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, ReplyTo: schema.NullString("lark_" + c.parent), ThreadKey: schema.NullString(c.parent), Content: sndMD("on it")}, parent)
			if string(d.ThreadKey) != c.wantKey {
				t.Errorf("thread_key resolved to %q, want %q", d.ThreadKey, c.wantKey)
			}
			r, m := e.sendOne(t, d)
			wantThread := m.ThreadID == c.wantThread || (c.wantThread == "new" && strings.HasPrefix(m.ThreadID, "omt_") && m.ThreadID != "omt_launch")
			if m.Route != larkfake.RouteReply || m.ParentID != c.parent || !m.ReplyInThread || !wantThread {
				t.Errorf("sent %+v; want a reply to %s with reply_in_thread, in thread %s", m, c.parent, c.wantThread)
			}
			// The receipt names a thread the draft did not: the one
			// opened, which the archived draft then carries.
			if want := map[bool]string{true: m.ThreadID, false: ""}[c.wantThread == "new"]; r.ThreadKey != want {
				t.Errorf("receipt thread %q, want %q", r.ThreadKey, want)
			}
		})
	}
}

// sndGate is an engine gate that records what the fake had received
// when the Sender passed it.
type sndGate struct {
	e                *sndEnv
	entered          int
	creates, uploads int
}

func (g *sndGate) Enter(context.Context) error {
	g.entered++
	g.creates = g.e.fake.Calls(larkfake.RouteCreate) + g.e.fake.Calls(larkfake.RouteReply)
	g.uploads = len(g.e.fake.Uploads())
	return nil
}

// TestSendAttachments: an image and a PDF are uploaded (im/v1/images,
// im/v1/files with file_type pdf and the name) before the gate, and land
// as image and file messages answering the same parent, in its thread,
// each with the draft's uuid and its own suffix.
func TestSendAttachments(t *testing.T) {
	e := sndSetup(t, nil)
	parentID := e.fake.AddMessage("oc_team", larkfake.Message{SenderID: "ou_ann", ThreadID: "omt_q3", Content: `{"text":"send the report"}`})
	parent := &adapters.Parent{Message: &schema.Message{ID: "lark_" + parentID, Provider: schema.Lark, Session: schema.Session{ID: "oc_team", ThreadKey: "omt_q3"}}}
	d := sndDraft(t, schema.Draft{ReplyTo: schema.NullString("lark_" + parentID), ThreadKey: "omt_q3", Content: sndMD("Here it is."),
		Artifacts: []schema.DraftArtifact{e.sndArtifact(t, "chart.png", sndPNG), e.sndArtifact(t, "report.pdf", sndPDF)}}, parent)
	g := &sndGate{e: e}
	var progress []schema.RecipientResult
	at := &adapters.Attempt{Draft: d, Gate: g, Progress: func(_ context.Context, r ...schema.RecipientResult) error {
		progress = append(progress, r...)
		return nil
	}}
	r, err := e.s.Send(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	if g.entered != 1 || g.creates != 0 || g.uploads != 2 {
		t.Errorf("at the gate: entered %d times, %d messages sent, %d uploads; want once, after both uploads and before any message", g.entered, g.creates, g.uploads)
	}
	ups := e.fake.Uploads()
	if len(ups) != 2 || ups[0].Route != larkfake.RouteImageUpload || ups[0].Type != "message" || string(ups[0].Content) != string(sndPNG) ||
		ups[1].Route != larkfake.RouteFileUpload || ups[1].Type != "pdf" || ups[1].FileName != "report.pdf" || string(ups[1].Content) != string(sndPDF) {
		t.Fatalf("uploads %+v; want the image, then report.pdf as pdf", ups)
	}
	sent := e.fake.Sent()
	if len(sent) != 3 {
		t.Fatalf("the fake made %d messages, want 3", len(sent))
	}
	wantTypes := []string{"text", "image", "file"}
	wantUUIDs := []string{d.IdempotencyKey, d.IdempotencyKey + "-1", d.IdempotencyKey + "-2"}
	for i, m := range sent {
		if m.Route != larkfake.RouteReply || m.ParentID != parentID || m.ThreadID != "omt_q3" || !m.ReplyInThread || m.MsgType != wantTypes[i] || m.UUID != wantUUIDs[i] {
			t.Errorf("message %d: %+v; want a %s reply in omt_q3 to %s, uuid %s", i, m, wantTypes[i], parentID, wantUUIDs[i])
		}
	}
	if !strings.Contains(sent[1].Content, ups[0].Key) || !strings.Contains(sent[2].Content, ups[1].Key) {
		t.Errorf("messages %s, %s do not name the uploads %s, %s", sent[1].Content, sent[2].Content, ups[0].Key, ups[1].Key)
	}
	if r.ProviderMessageID != sent[0].MessageID || len(r.Recipients) != 3 {
		t.Errorf("receipt %+v; want the text's id %s and 3 steps", r, sent[0].MessageID)
	}
	// The steps before the last are recorded as they go.
	if len(progress) != 2 || string(progress[0].Reply) != sent[0].MessageID || string(progress[1].Reply) != sent[1].MessageID {
		t.Errorf("progress %+v; want the text and the image as they were posted", progress)
	}
}

// TestSendAttachmentsToChat: the files of a new message go to the same
// chat as its words.
func TestSendAttachmentsToChat(t *testing.T) {
	e := sndSetup(t, nil)
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Artifacts: []schema.DraftArtifact{e.sndArtifact(t, "notes.txt", []byte("plain notes"))}}, nil)
	r, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	sent, ups := e.fake.Sent(), e.fake.Uploads()
	if len(ups) != 1 || ups[0].Type != "stream" || ups[0].FileName != "notes.txt" {
		t.Fatalf("uploads %+v; want notes.txt as stream", ups)
	}
	if len(sent) != 1 || sent[0].Route != larkfake.RouteCreate || sent[0].ReceiveID != "oc_team" || sent[0].MsgType != "file" || sent[0].UUID != d.IdempotencyKey+"-1" {
		t.Fatalf("sent %+v; want one file message to oc_team", sent)
	}
	if r.ProviderMessageID != sent[0].MessageID {
		t.Errorf("receipt %+v; want %s", r, sent[0].MessageID)
	}
}

// TestSendRetryAfterLostAnswer: the create reaches Lark but its answer is
// lost (a timeout, a crash before the receipt): the next attempt sends
// the same uuid, and Lark makes one message, whose id the receipt names.
func TestSendRetryAfterLostAnswer(t *testing.T) {
	var mu sync.Mutex
	lose := 1
	e := sndSetup(t, func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && req.Method == http.MethodPost && req.URL.Path == "/open-apis/im/v1/messages" && lose > 0 {
			lose--
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil, context.DeadlineExceeded
		}
		return resp, err
	})
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD("once only")}, nil)
	_, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err == nil || !adapters.IsTemporary(err) || adapters.IsPermanent(err) {
		t.Fatalf("lost answer: %v; want a temporary error", err)
	}
	r, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	sent := e.fake.Sent()
	if len(sent) != 1 || e.fake.Calls(larkfake.RouteCreate) != 2 {
		t.Fatalf("the fake made %d messages from %d calls; want 1 from 2", len(sent), e.fake.Calls(larkfake.RouteCreate))
	}
	if r.ProviderMessageID != sent[0].MessageID {
		t.Errorf("receipt %s; want the one message %s", r.ProviderMessageID, sent[0].MessageID)
	}
}

// TestSendPartial: the text went and the file's message failed: the
// error is a PartialError holding the text, and the next attempt (given
// it in Accepted) posts only the file, with its own uuid.
func TestSendPartial(t *testing.T) {
	var e *sndEnv
	var mu sync.Mutex
	creates := 0
	e = sndSetup(t, func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && req.Method == http.MethodPost && req.URL.Path == "/open-apis/im/v1/messages" {
			if creates++; creates == 1 {
				// The next create (the file's) is rate limited.
				e.fake.Fail(larkfake.RouteCreate, larkfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 3})
			}
		}
		return resp, err
	})
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"ou_bob"}, Content: sndMD("the report:"), Artifacts: []schema.DraftArtifact{e.sndArtifact(t, "r.pdf", sndPDF)}}, nil)
	_, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	var pe *adapters.PartialError
	if !errors.As(err, &pe) || len(pe.Accepted) != 1 || !adapters.IsTemporary(err) {
		t.Fatalf("first attempt: %v; want a temporary PartialError with the text", err)
	}
	if ra, ok := adapters.RetryAfter(err); !ok || ra != 3*time.Second {
		t.Errorf("retry after %v, %v; want 3s", ra, ok)
	}
	r, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d, Accepted: pe.Accepted})
	if err != nil {
		t.Fatal(err)
	}
	sent := e.fake.Sent()
	if len(sent) != 2 || sent[0].MsgType != "text" || sent[0].UUID != d.IdempotencyKey || sent[1].MsgType != "file" || sent[1].UUID != d.IdempotencyKey+"-1" {
		t.Fatalf("sent %+v; want the text once, then the file once", sent)
	}
	if r.ProviderMessageID != sent[0].MessageID || len(r.Recipients) != 1 || string(r.Recipients[0].Reply) != sent[1].MessageID {
		t.Errorf("receipt %+v; want the text's id and the file as this attempt's step", r)
	}
}

// TestSendUploadFails: an upload that fails posts nothing: the words wait
// with their files, and the error is temporary, not partial.
func TestSendUploadFails(t *testing.T) {
	e := sndSetup(t, nil)
	e.fake.Fail(larkfake.RouteFileUpload, larkfake.Failure{Status: http.StatusBadGateway})
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD("see attached"), Artifacts: []schema.DraftArtifact{e.sndArtifact(t, "r.pdf", sndPDF)}}, nil)
	_, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	var pe *adapters.PartialError
	if err == nil || errors.As(err, &pe) || !adapters.IsTemporary(err) || !strings.Contains(err.Error(), "502") {
		t.Fatalf("upload 502: %v; want a temporary error naming HTTP 502, not a partial one", err)
	}
	if n := len(e.fake.Sent()); n != 0 {
		t.Errorf("the fake made %d messages; want none", n)
	}
}

// TestSendErrors: Lark's answers classified: rate limits and 5xx
// temporary (with the wait Lark named), invalid ids and permissions
// permanent with Lark's code; nothing sent.
func TestSendErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		to        string
		fail      *larkfake.Failure
		permanent bool
		retry     time.Duration
		says      string
	}{
		{name: "rate limited", to: "oc_team", fail: &larkfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 7}, retry: 7 * time.Second, says: "99991400"},
		{name: "gateway 503", to: "oc_team", fail: &larkfake.Failure{Status: http.StatusServiceUnavailable}, says: "HTTP 503"},
		{name: "unknown chat", to: "oc_nowhere", permanent: true, says: "code 230001"},
		{name: "no scope", to: "oc_team", fail: &larkfake.Failure{Status: http.StatusBadRequest, Code: 99991672, Msg: "Access denied. One of the following scopes is required: [im:message:send_as_bot]"}, permanent: true, says: "code 99991672"},
		{name: "bot not in chat", to: "oc_team", fail: &larkfake.Failure{Status: http.StatusBadRequest, Code: 230002, Msg: "Bot/User can NOT be out of the chat."}, permanent: true, says: "code 230002"},
		{name: "unknown code", to: "oc_team", fail: &larkfake.Failure{Status: http.StatusInternalServerError, Code: 1234567, Msg: "internal"}, says: "code 1234567"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := sndSetup(t, nil)
			if c.fail != nil {
				e.fake.Fail(larkfake.RouteCreate, *c.fail)
			}
			d := sndDraft(t, schema.Draft{To: schema.Recipients{c.to}, Content: sndMD("hello")}, nil)
			_, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
			if err == nil {
				t.Fatal("no error")
			}
			if adapters.IsPermanent(err) != c.permanent || !strings.HasPrefix(err.Error(), "lark: ") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v: permanent %v; want permanent %v, starting lark: and naming %q", err, adapters.IsPermanent(err), c.permanent, c.says)
			}
			if ra, ok := adapters.RetryAfter(err); ra != c.retry || ok != (c.retry > 0) {
				t.Errorf("retry after %v, %v; want %v", ra, ok, c.retry)
			}
			if n := len(e.fake.Sent()); n != 0 {
				t.Errorf("the fake made %d messages; want none", n)
			}
		})
	}
}

// TestSendSecretsNotInErrors: an answer that quotes the tenant token and
// the app secret (a server may echo what it was sent) reaches the error
// without them; the call still names Lark's code.
func TestSendSecretsNotInErrors(t *testing.T) {
	e := sndSetup(t, nil)
	tok, err := e.a.tenantToken(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Fail(larkfake.RouteCreate, larkfake.Failure{Status: http.StatusBadRequest, Code: 230001, Msg: "bad request with " + tok + " and " + e.secret})
	e.fake.Fail(larkfake.RouteCreate, larkfake.Failure{Status: http.StatusBadRequest, Code: 1, Msg: "token " + tok + ", secret " + e.secret})
	for range 2 {
		d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD("x")}, nil)
		_, err = e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
		if err == nil || strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), e.secret) || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("error %v; want it without the token and the secret, [redacted] in their place", err)
		}
	}
}

// TestSendTokenRenewed: a tenant token Lark stopped taking is fetched
// again once, and the message goes.
func TestSendTokenRenewed(t *testing.T) {
	e := sndSetup(t, nil)
	if _, err := e.a.tenantToken(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	e.fake.ExpireTokens()
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD("still here")}, nil)
	if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	if n, tokens := len(e.fake.Sent()), e.fake.Tokens(); n != 1 || tokens != 2 {
		t.Errorf("%d messages with %d tokens; want 1 with 2", n, tokens)
	}
}

// TestSendRefusesBadDrafts: what Lark cannot take is refused before any
// call, permanently, naming what is wrong.
func TestSendRefusesBadDrafts(t *testing.T) {
	e := sndSetup(t, nil)
	big := e.sndArtifact(t, "empty.bin", nil)
	for _, c := range []struct {
		name string
		d    schema.Draft
		says string
	}{
		{"cc", schema.Draft{To: schema.Recipients{"oc_team"}, Cc: schema.Recipients{"ou_bob"}, Content: sndMD("x")}, "cc"},
		{"two chats", schema.Draft{To: schema.Recipients{"oc_team", "oc_other"}, Content: sndMD("x")}, "one chat or person"},
		{"message as recipient", schema.Draft{To: schema.Recipients{"om_abc"}, Content: sndMD("x")}, "reply_to: lark_om_abc"},
		{"not an id", schema.Draft{To: schema.Recipients{"#general"}, Content: sndMD("x")}, "not a Lark chat"},
		{"reply to another provider", schema.Draft{To: schema.Recipients{"oc_team"}, ReplyTo: "slack_C1_1_2", Content: sndMD("x")}, "not a Lark message"},
		{"thread without reply", schema.Draft{To: schema.Recipients{"oc_team"}, ThreadKey: "omt_x", Content: sndMD("x")}, "reply_to"},
		{"empty", schema.Draft{To: schema.Recipients{"oc_team"}}, "no text and no attachment"},
		{"empty file", schema.Draft{To: schema.Recipients{"oc_team"}, Artifacts: []schema.DraftArtifact{big}}, "empty"},
		{"missing file", schema.Draft{To: schema.Recipients{"oc_team"}, Artifacts: []schema.DraftArtifact{{ID: "sha256:" + strings.Repeat("0", 64), Name: "gone.pdf"}}}, "gone.pdf"},
		{"far too long", schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD(strings.Repeat("**bold** words\n\n", 25000))}, "more than 30 Lark messages"},
		{"beyond any split", schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD(strings.Repeat("words\n\n", 700000))}, "more than 30 Lark messages hold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.d.ID, c.d.Provider, c.d.IdempotencyKey = "lark_out_bad", schema.Lark, "0f3c6a2e-5d4b-4c1a-9e8f-7a6b5c4d3e2f"
			_, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: &c.d})
			if err == nil || !adapters.IsPermanent(err) || !strings.HasPrefix(err.Error(), "lark: ") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v; want a permanent error starting lark: and naming %q", err, c.says)
			}
		})
	}
	if n := e.fake.Calls(larkfake.RouteCreate) + e.fake.Calls(larkfake.RouteReply) + len(e.fake.Uploads()); n != 0 {
		t.Errorf("%d calls made for drafts refused; want none", n)
	}
}

// TestSendKeyDerived: a draft queued without an idempotency key (dropped
// into outbound/ by hand) still sends the same uuid on every attempt,
// derived from its id.
func TestSendKeyDerived(t *testing.T) {
	e := sndSetup(t, nil)
	d := &schema.Draft{ID: "lark_out_by_hand", Provider: schema.Lark, To: schema.Recipients{"oc_team"}, Content: sndMD("hi")}
	for range 2 {
		if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
			t.Fatal(err)
		}
	}
	sent := e.fake.Sent()
	if len(sent) != 1 || len(sent[0].UUID) != 36 {
		t.Fatalf("sent %+v; want one message with a uuid", sent)
	}
	other := &schema.Draft{ID: "lark_out_other", Provider: schema.Lark, To: schema.Recipients{"oc_team"}, Content: sndMD("hi")}
	if idempotencyKey(other) == sent[0].UUID {
		t.Error("two drafts derived the same uuid")
	}
}

// TestSendWaitsWithoutCredentials: a provider without app_secret has no
// Sender, and says why.
func TestSendWaitsWithoutCredentials(t *testing.T) {
	a, err := newAdapter(Config{Enabled: true, AppID: sndAppID}, confkit.Limits{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &adapters.Provider{}
	a.outbound(p)
	if p.Sender != nil || !strings.Contains(p.Waiting, "app_secret") {
		t.Errorf("sender %v, waiting %q; want none, naming app_secret", p.Sender, p.Waiting)
	}
}

// TestSendAnswerBounded: an answer far too long is read no further
// than maxAnswer, and the call fails as temporary (the uuid makes the
// retry safe even if Lark took the message).
func TestSendAnswerBounded(t *testing.T) {
	var read sndCounter
	e := sndSetup(t, func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && req.URL.Path == "/open-apis/im/v1/messages" {
			resp.Body.Close()
			// 64 MiB: without the bound, all of it would be read.
			resp.Body = io.NopCloser(io.TeeReader(io.LimitReader(sndEndless{}, 64<<20), &read))
		}
		return resp, err
	})
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD("hi")}, nil)
	_, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err == nil || !adapters.IsTemporary(err) || adapters.IsPermanent(err) || !strings.HasPrefix(err.Error(), "lark: ") {
		t.Fatalf("endless answer: %v; want a temporary lark: error", err)
	}
	if n := read.n.Load(); n > 2*maxAnswer {
		t.Errorf("read %d bytes of the answer; want at most about %d", n, maxAnswer)
	}
}

type sndEndless struct{}

func (sndEndless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

type sndCounter struct{ n atomic.Int64 }

func (c *sndCounter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// TestSendCorpusReplies: a reply to each corpus event, normalised as the
// receiver does, lands in Lark as a reply to that very message in its
// chat (a quoted reply chain answered plainly); an event whose ids were
// redacted into something that is not an id is refused at resolve time,
// never sent to a mangled id.
func TestSendCorpusReplies(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "lark", "events")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Fatalf("no events in %s", dir)
	}
	e := sndSetup(t, nil)
	replied := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := parseEvent(data)
		if err != nil {
			t.Fatal(err)
		}
		var b body
		if err := json.Unmarshal(ev.Event, &b); err != nil {
			t.Fatal(err)
		}
		m := b.Message
		out, err := e.a.normalize(context.Background(), ev)
		if err != nil || out == nil || out.Message == nil {
			t.Fatalf("%s: normalize: %v, %v", filepath.Base(f), out, err)
		}
		parent := &adapters.Parent{Message: out.Message}
		d := schema.Draft{ID: "lark_out_corpus", Provider: schema.Lark, ReplyTo: schema.NullString(out.Message.ID),
			ThreadKey: out.Message.Session.ThreadKey, Content: sndMD("Thanks, on it.")}
		err = (Resolver{}).Resolve(&d, parent, adapters.ResolveOptions{}, nil)
		if !receiveRE.MatchString(m.ChatID) || !omRE.MatchString(m.MessageID) {
			if err == nil {
				t.Errorf("%s: chat %q, message %q are not Lark ids, and the reply resolved to %v", filepath.Base(f), m.ChatID, m.MessageID, d.To)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Resolve: %v", filepath.Base(f), err)
		}
		e.fake.AddChat(larkfake.Chat{ChatID: m.ChatID, ChatMode: map[string]string{"p2p": "p2p"}[m.ChatType]})
		e.fake.AddMessage(m.ChatID, larkfake.Message{MessageID: m.MessageID, RootID: m.RootID, ParentID: m.ParentID, ThreadID: m.ThreadID, SenderID: "ou_ann"})
		before := len(e.fake.Sent())
		if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: &d}); err != nil {
			t.Fatalf("%s: Send: %v", filepath.Base(f), err)
		}
		sent := e.fake.Sent()[before:]
		if len(sent) != 1 || sent[0].Route != larkfake.RouteReply || sent[0].ParentID != m.MessageID || sent[0].ChatID != m.ChatID ||
			sent[0].ReplyInThread != (m.ThreadID != "") || sent[0].ThreadID != m.ThreadID {
			t.Errorf("%s: sent %+v; want one reply to %s in %s, in thread %q", filepath.Base(f), sent, m.MessageID, m.ChatID, m.ThreadID)
		}
		replied++
	}
	if replied < 2 {
		t.Errorf("only %d corpus events were answered; want the p2p and the thread reply at least", replied)
	}
}

// TestSendFileKinds: an attachment goes as what its bytes and name say
// it is: an image (sniffed, whatever its name) as an image, one over
// Lark's 10 MB for images as a file, a .opus as a voice message, an .mp4
// as a video, a .docx with file_type doc.
func TestSendFileKinds(t *testing.T) {
	bigPNG := append(slices.Clone(sndPNG), make([]byte, maxImageUpload)...)
	for _, c := range []struct {
		name            string
		data            []byte
		route, fileType string
		msgType         string
	}{
		{"photo.bin", sndPNG, larkfake.RouteImageUpload, "message", "image"},
		{"huge.png", bigPNG, larkfake.RouteFileUpload, "stream", "file"},
		{"voice.opus", []byte("OggS\x00\x02 opus bytes"), larkfake.RouteFileUpload, "opus", "audio"},
		{"clip.mp4", []byte("\x00\x00\x00\x18ftypmp42 video"), larkfake.RouteFileUpload, "mp4", "media"},
		{"plan.docx", []byte("PK\x03\x04 a document"), larkfake.RouteFileUpload, "doc", "file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := sndSetup(t, nil)
			d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Artifacts: []schema.DraftArtifact{e.sndArtifact(t, c.name, c.data)}}, nil)
			if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
				t.Fatal(err)
			}
			ups, sent := e.fake.Uploads(), e.fake.Sent()
			if len(ups) != 1 || ups[0].Route != c.route || ups[0].Type != c.fileType || len(ups[0].Content) != len(c.data) {
				t.Fatalf("uploads %+v; want %s as %s", ups, c.route, c.fileType)
			}
			if len(sent) != 1 || sent[0].MsgType != c.msgType || !strings.Contains(sent[0].Content, ups[0].Key) {
				t.Errorf("sent %+v; want one %s message naming %s", sent, c.msgType, ups[0].Key)
			}
		})
	}
}

// TestSendLongSplit: words Lark would refuse in one message go in
// several, in order, each within Lark's bounds, cut between paragraphs,
// a code block cut in two closed and opened again, each with a uuid of
// its own; a retry after the first part posts only the rest.
func TestSendLongSplit(t *testing.T) {
	e := sndSetup(t, nil)
	var md strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&md, "Paragraph %d has **bold** words.\n\n", i)
		if i == 700 {
			md.WriteString("```go\n")
			for j := range 800 {
				fmt.Fprintf(&md, "x := %d // code line\n", j)
			}
			md.WriteString("```\n\n")
		}
	}
	d := sndDraft(t, schema.Draft{To: schema.Recipients{"oc_team"}, Content: sndMD(md.String())}, nil)
	r, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	sent := e.fake.Sent()
	if len(sent) < 3 {
		t.Fatalf("%d messages; want the draft in several", len(sent))
	}
	var all strings.Builder
	codeParts := 0
	for i, m := range sent {
		want := d.IdempotencyKey
		if i > 0 {
			want = fmt.Sprintf("%s-t%d", d.IdempotencyKey, i+1)
		}
		if m.MsgType != "post" || len(m.Content) > maxRichContent || m.UUID != want {
			t.Errorf("part %d: %s of %d bytes, uuid %s; want a post within %d, uuid %s", i, m.MsgType, len(m.Content), m.UUID, maxRichContent, want)
		}
		if strings.Contains(m.Content, `"code_block"`) {
			codeParts++
		}
		all.WriteString(m.Content)
	}
	if codeParts < 2 {
		t.Errorf("the code block is in %d parts; want it cut, each part a code block", codeParts)
	}
	// Every paragraph and code line, once, in order.
	text := all.String()
	at := 0
	for i := range 1500 {
		j := strings.Index(text[at:], fmt.Sprintf("Paragraph %d has ", i))
		if j < 0 {
			t.Fatalf("paragraph %d is missing or out of order", i)
		}
		at += j
	}
	if n := strings.Count(text, "// code line"); n != 800 {
		t.Errorf("%d code lines sent; want 800", n)
	}
	if r.ProviderMessageID != sent[0].MessageID || len(r.Recipients) != len(sent) {
		t.Errorf("receipt %+v; want the first part's id and every part", r)
	}
	// Given the first part as done, a retry posts the others only.
	e2 := sndSetup(t, nil)
	if _, err := e2.s.Send(context.Background(), &adapters.Attempt{Draft: d, Accepted: r.Recipients[:1]}); err != nil {
		t.Fatal(err)
	}
	if got := e2.fake.Sent(); len(got) != len(sent)-1 || got[0].UUID != sent[1].UUID {
		t.Errorf("retry sent %d parts starting with uuid %s; want %d starting with %s", len(got), got[0].UUID, len(sent)-1, sent[1].UUID)
	}
	// Plain text over Lark's 150 KB goes as two texts.
	long := strings.Repeat("a line of plain words\n", 8000)
	d = sndDraft(t, schema.Draft{ID: "lark_out_long_text", To: schema.Recipients{"oc_team"}, Type: schema.DraftText, Content: schema.DraftContent{Text: schema.NullString(long)}}, nil)
	before := len(e.fake.Sent())
	if _, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	for _, m := range e.fake.Sent()[before:] {
		var v map[string]string
		if err := json.Unmarshal([]byte(m.Content), &v); err != nil || m.MsgType != "text" {
			t.Fatalf("%s %s: %v", m.MsgType, m.Content[:100], err)
		}
		joined.WriteString(v["text"])
	}
	if n := len(e.fake.Sent()) - before; n != 2 || joined.String() != long {
		t.Errorf("%d texts, rejoined equal %v; want 2 that rejoin to the draft", n, joined.String() == long)
	}
}

// TestSendSDKPlumbing: the SDK's log lines reach the adapter's log with
// the token and the secret cut out, and its HTTP client sends nothing to
// another host than the configured one.
func TestSendSDKPlumbing(t *testing.T) {
	e := sndSetup(t, nil)
	tok, err := e.a.tenantToken(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	e.a.log = slog.New(slog.NewTextHandler(&sndSyncWriter{w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := sdkLogger{a: e.a}
	l.Warn(context.Background(), "request failed, token ", tok, " secret ", e.secret)
	l.Debug(context.Background(), "req:", "Bearer "+tok)
	if out := buf.String(); strings.Contains(out, tok) || strings.Contains(out, e.secret) || strings.Count(out, "[redacted]") != 3 {
		t.Errorf("log %q; want the token and the secret redacted", out)
	}
	h := &sdkHTTP{a: e.a, c: untimed(e.a.apiClient())}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/open-apis/im/v1/messages", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if _, err := h.Do(req); err == nil || !strings.Contains(err.Error(), "another host") {
		t.Errorf("a call to another host: %v; want it refused", err)
	}
}

type sndSyncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *sndSyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestSendConcurrent: drafts sent at once share the client and the token
// without a race, each its own message; a rate limit on one call is that
// call's alone (each call records its own answer).
func TestSendConcurrent(t *testing.T) {
	e := sndSetup(t, nil)
	e.fake.Fail(larkfake.RouteCreate, larkfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 9})
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		d := sndDraft(t, schema.Draft{ID: fmt.Sprintf("lark_out_c%d", i), To: schema.Recipients{"oc_team"}, Content: sndMD(fmt.Sprintf("message %d", i))}, nil)
		go func() {
			_, err := e.s.Send(context.Background(), &adapters.Attempt{Draft: d})
			errs <- err
		}()
	}
	limited := 0
	for range n {
		err := <-errs
		switch ra, _ := adapters.RetryAfter(err); {
		case err == nil:
		case ra == 9*time.Second:
			limited++
		default:
			t.Errorf("send: %v", err)
		}
	}
	sent := e.fake.Sent()
	uuids := map[string]bool{}
	for _, m := range sent {
		uuids[m.UUID] = true
	}
	if limited != 1 || len(sent) != n-1 || len(uuids) != n-1 {
		t.Errorf("%d rate limited, %d sent with %d uuids; want 1, %d, %d", limited, len(sent), len(uuids), n-1, n-1)
	}
}
