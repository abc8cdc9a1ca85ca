package slack

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/outbound"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

const (
	botToken = "xoxb-fake-bot"
	general  = "C0GENERAL"
	ann      = "U0ANN0001"
	bob      = "U0BOB0001"
)

// rig is the Sender against a fake Slack, through the real slack-go client.
type rig struct {
	fake *slackfake.Server
	send adapters.Sender
	dz   *dropzone.Store
	// before, when set, sees each request before it goes to the fake
	// (to make the n-th call of a method fail).
	before func(r *http.Request)
}

func newRig(t *testing.T, limits confkit.Limits) *rig {
	t.Helper()
	dz, err := dropzone.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dz.Close() })
	return newRigIn(t, limits, dz)
}

func newRigIn(t *testing.T, limits confkit.Limits, dz *dropzone.Store) *rig {
	t.Helper()
	fake := slackfake.New(t, slackfake.Options{BotToken: botToken})
	var ch slackapi.Channel
	ch.ID, ch.Name, ch.IsMember = general, "general", true
	fake.AddConversation(ch)
	fake.AddUser(slackapi.User{ID: ann, Name: "ann"})
	fake.AddUser(slackapi.User{ID: bob, Name: "bob"})
	r := &rig{fake: fake, dz: dz}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: roundTripper(func(req *http.Request) (*http.Response, error) {
		if r.before != nil {
			r.before(req)
		}
		return http.DefaultTransport.RoundTrip(req)
	})}
	p, err := New(Options{Config: Config{Enabled: true, Mode: "events", BotToken: botToken, APIURL: fake.APIURL()},
		Limits: limits, Dropzone: dz, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	if p.Sender == nil {
		t.Fatalf("no Sender: %s", p.Waiting)
	}
	r.send = p.Sender
	return r
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// failNth makes the n-th call (from 1) of method fail as f says.
func (r *rig) failNth(method string, n int, f slackfake.Failure) {
	var calls atomic.Int32
	r.before = func(req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/"+method) && int(calls.Add(1)) == n {
			r.fake.Fail(method, f)
		}
	}
}

func draft(to string, body string) *schema.Draft {
	return &schema.Draft{ID: "slack_out_0123456789abcdef0123456789abcdef", Provider: schema.Slack, To: schema.Recipients{to},
		IdempotencyKey: "3f0c1a9e-6a43-4a8e-9c1e-2f7d7d1b9a11", CreatedAt: schema.TimePtr(time.Now()), Body: body}
}

func (r *rig) put(t *testing.T, content []byte) string {
	t.Helper()
	o, err := r.dz.Put(bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func noToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), botToken) {
		t.Errorf("error quotes the token: %v", err)
	}
}

var ctx = context.Background()

func TestSendTopLevel(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	d := draft(general, "Deploy **done** for <b>A & B</b>: see [the log](https://ci.example/run/7).\n\n- one\n- two\n\n```\ngo test ./...\n```\n")
	rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) != 1 {
		t.Fatalf("%d posts, want 1", len(posts))
	}
	p := posts[0]
	if p.Channel != general || p.ThreadTS != "" || !p.Mrkdwn {
		t.Errorf("posted to %s thread %q mrkdwn %v, want %s, no thread, mrkdwn on", p.Channel, p.ThreadTS, p.Mrkdwn, general)
	}
	// Slack reads <, > and & as markup: text from the draft is escaped.
	if strings.Contains(p.Text, "<b>") || !strings.Contains(p.Text, "&lt;b&gt;A &amp; B&lt;/b&gt;") {
		t.Errorf("text not escaped for Slack: %q", p.Text)
	}
	checkConverted(t, p.Text)
	if !strings.Contains(p.Raw.Get("metadata"), d.IdempotencyKey) {
		t.Errorf("metadata %q does not carry the idempotency key", p.Raw.Get("metadata"))
	}
	want := adapters.Receipt{ProviderMessageID: p.TS, Channel: general, InboundID: threading.SlackID(general, p.TS)}
	if rc.ProviderMessageID != want.ProviderMessageID || rc.Channel != want.Channel || rc.InboundID != want.InboundID {
		t.Errorf("receipt %+v, want %+v", rc, want)
	}
	if len(rc.Recipients) != 1 || string(rc.Recipients[0].Reply) != p.TS {
		t.Errorf("receipt steps %+v, want the post's ts", rc.Recipients)
	}
}

// checkConverted asserts the Markdown became mrkdwn: bold *x*, links
// <url|label>, bullets, the code fence kept.
func checkConverted(t *testing.T, text string) {
	t.Helper()
	for _, want := range []string{"*done*", "<https://ci.example/run/7|the log>", "• one\n• two", "```\ngo test ./...\n```"} {
		if !strings.Contains(text, want) {
			t.Errorf("mrkdwn %q lacks %q", text, want)
		}
	}
	if strings.Contains(text, "**") || strings.Contains(text, "](") {
		t.Errorf("Markdown left in %q", text)
	}
}

func TestSendPlainText(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	d := draft(general, "")
	d.Type, d.Content.Text = schema.DraftText, "2 * 3 = 6 and snake_case_name"
	if _, err := r.send.Send(ctx, &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	p := r.fake.Posts()[0]
	if p.Mrkdwn || p.Text != "2 * 3 = 6 and snake_case_name" {
		t.Errorf("plain text posted as %q mrkdwn %v, want as typed with mrkdwn off", p.Text, p.Mrkdwn)
	}
}

// A reply lands in the parent's thread: the Resolver picks the thread and
// the Sender posts in it, whether the parent is top-level or a reply.
func TestSendReplyInThread(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	root, reply := "1690000000.000100", "1690000000.000200"
	r.fake.AddMessage(general, slackapi.Message{Msg: slackapi.Msg{Type: "message", User: ann, Text: "deploy?", Timestamp: root}})
	r.fake.AddMessage(general, slackapi.Message{Msg: slackapi.Msg{Type: "message", User: bob, Text: "+1", Timestamp: reply, ThreadTimestamp: root}})
	for _, c := range []struct {
		name   string
		parent *schema.Message
	}{
		{"parent top-level", inbound(general, root, "")},
		{"parent a reply", inbound(general, reply, root)},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &schema.Draft{ID: "slack_out_1", Provider: schema.Slack, ReplyTo: schema.NullString(c.parent.ID),
				ThreadKey: c.parent.Session.ThreadKey, // what `courier send` inherits
				CreatedAt: schema.TimePtr(time.Now()), Body: "on it\n"}
			if err := (Resolver{}).Resolve(d, &adapters.Parent{Message: c.parent}, adapters.ResolveOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			n := len(r.fake.Posts())
			rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: d})
			if err != nil {
				t.Fatal(err)
			}
			p := r.fake.Posts()[n]
			if p.Channel != general || p.ThreadTS != root {
				t.Errorf("posted to %s thread %q, want %s thread %s", p.Channel, p.ThreadTS, general, root)
			}
			if rc.InboundID != threading.SlackID(general, p.TS) || rc.ProviderMessageID != p.TS {
				t.Errorf("receipt %+v for ts %s", rc, p.TS)
			}
		})
	}
}

func TestSendDM(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: draft(ann, "hello\n")})
	if err != nil {
		t.Fatal(err)
	}
	p := r.fake.Posts()[0]
	if !strings.HasPrefix(p.Channel, "D") || r.fake.Calls("conversations.open") != 1 {
		t.Errorf("posted to %s after %d conversations.open, want a D… opened once", p.Channel, r.fake.Calls("conversations.open"))
	}
	// The receipt names the DM, where the ts lives, not the user.
	if rc.Channel != p.Channel || rc.InboundID != threading.SlackID(p.Channel, p.TS) {
		t.Errorf("receipt %+v, want channel %s", rc, p.Channel)
	}
	// Two users: their group DM.
	d := draft(ann, "hello both\n")
	d.To = schema.Recipients{ann, bob}
	if _, err := r.send.Send(ctx, &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	if g := r.fake.Posts()[1].Channel; !strings.HasPrefix(g, "G") {
		t.Errorf("group DM posted to %s, want a G…", g)
	}
}

func TestSendAttachment(t *testing.T) {
	r := newRig(t, confkit.Limits{MaxArtifactBytes: 1 << 20})
	root := "1690000000.000100"
	r.fake.AddMessage(general, slackapi.Message{Msg: slackapi.Msg{Type: "message", User: ann, Text: "numbers?", Timestamp: root}})
	content := make([]byte, 300<<10+7)
	rand.Read(content)
	small := []byte("a,b\n1,2\n")
	d := draft(general, "attached\n")
	d.ThreadKey = schema.NullString(root)
	d.Artifacts = []schema.DraftArtifact{{ID: r.put(t, content), Name: "../report\u202e.bin"}, {ID: r.put(t, small), Name: "t.csv"}}
	var gateAt []int // posts and uploads when the gate was entered
	gate := gateFunc(func(context.Context) error {
		gateAt = append(gateAt, len(r.fake.Posts()), r.fake.Calls("files.getUploadURLExternal"), len(r.fake.Uploads()))
		return nil
	})
	rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: d, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	// Uploaded first (invisible), then the gate, then the post and the share.
	if fmt.Sprint(gateAt) != "[0 2 0]" {
		t.Errorf("at the gate: posts, upload URLs, shares = %v, want [0 2 0]", gateAt)
	}
	ups := r.fake.Uploads()
	if len(ups) != 2 {
		t.Fatalf("%d uploads, want 2", len(ups))
	}
	for i, want := range [][]byte{content, small} {
		if !bytes.Equal(ups[i].Content, want) {
			t.Errorf("upload %d: %d bytes differ from the artifact's %d", i, len(ups[i].Content), len(want))
		}
		if ups[i].ChannelID != general || ups[i].ThreadTS != root {
			t.Errorf("upload %d shared to %s thread %q, want %s %s", i, ups[i].ChannelID, ups[i].ThreadTS, general, root)
		}
	}
	if ups[0].Filename != dropzone.SanitizeName("../report\u202e.bin") || ups[1].Filename != "t.csv" {
		t.Errorf("file names %q %q", ups[0].Filename, ups[1].Filename)
	}
	p := r.fake.Posts()[0]
	if rc.ProviderMessageID != p.TS || len(rc.Recipients) != 2 || string(rc.Recipients[1].Reply) != ups[0].FileID+","+ups[1].FileID {
		t.Errorf("receipt %+v", rc)
	}

	// Over the limit: refused before anything is sent.
	big := draft(general, "too big\n")
	big.Artifacts = []schema.DraftArtifact{{ID: r.put(t, make([]byte, 1<<20+1)), Name: "big.bin"}}
	calls := r.fake.Calls("files.getUploadURLExternal")
	_, err = r.send.Send(ctx, &adapters.Attempt{Draft: big})
	if !adapters.IsPermanent(err) || !strings.Contains(err.Error(), "artifacts[0]") || !strings.Contains(err.Error(), "max_artifact_bytes") {
		t.Errorf("artifact over the limit: %v", err)
	}
	if r.fake.Calls("files.getUploadURLExternal") != calls || len(r.fake.Posts()) != 1 {
		t.Error("an artifact over the limit reached Slack")
	}
}

type gateFunc func(ctx context.Context) error

func (f gateFunc) Enter(ctx context.Context) error { return f(ctx) }

func TestSendRateLimited(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	r.fake.Fail("chat.postMessage", slackfake.Failure{Status: 429, RetryAfter: 7})
	_, err := r.send.Send(ctx, &adapters.Attempt{Draft: draft(general, "hi\n")})
	if ra, ok := adapters.RetryAfter(err); !adapters.IsTemporary(err) || adapters.IsPermanent(err) || !ok || ra != 7*time.Second {
		t.Errorf("429: %v (retry after %v %v), want temporary after 7s", err, ra, ok)
	}
	// A 404 or 403 is not Slack's way to say no (it answers 200 with
	// ok:false): a wrong api_url or a proxy, which the operator fixes.
	for _, f := range []slackfake.Failure{{Error: "ratelimited"}, {Status: 503}, {Error: "internal_error"}, {Status: 404}, {Status: 403}} {
		r.fake.Fail("chat.postMessage", f)
		_, err := r.send.Send(ctx, &adapters.Attempt{Draft: draft(general, "hi\n")})
		if err == nil || adapters.IsPermanent(err) {
			t.Errorf("%+v: %v, want temporary", f, err)
		}
		noToken(t, err)
	}
	if n := len(r.fake.Posts()); n != 0 {
		t.Errorf("%d posts through failures", n)
	}
	r.fake.Fail("chat.postMessage", slackfake.Failure{Status: 400})
	if _, err := r.send.Send(ctx, &adapters.Attempt{Draft: draft(general, "hi\n")}); !adapters.IsPermanent(err) {
		t.Errorf("HTTP 400: %v, want permanent (the request itself is wrong)", err)
	}
	// The network: Slack unreachable.
	p, _ := New(Options{Config: Config{Enabled: true, BotToken: botToken, APIURL: "http://127.0.0.1:1/api/"}})
	_, err = p.Sender.Send(ctx, &adapters.Attempt{Draft: draft(general, "hi\n")})
	if err == nil || adapters.IsPermanent(err) || !strings.HasPrefix(err.Error(), "slack: chat.postMessage") {
		t.Errorf("connection refused: %v, want temporary naming the method", err)
	}
	noToken(t, err)
}

func TestSendPermanent(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	for _, code := range []string{"channel_not_found", "not_in_channel", "is_archived", "invalid_auth", "token_revoked",
		"account_inactive", "msg_too_long", "no_text", "restricted_action"} {
		r.fake.Fail("chat.postMessage", slackfake.Failure{Error: code})
		_, err := r.send.Send(ctx, &adapters.Attempt{Draft: draft(general, "hi\n")})
		if !adapters.IsPermanent(err) || !strings.Contains(err.Error(), code) || !strings.HasPrefix(err.Error(), "slack: ") {
			t.Errorf("%s: %v, want permanent naming it", code, err)
		}
		noToken(t, err)
	}
	// Found by the fake itself: an archived channel.
	var arch slackapi.Channel
	arch.ID, arch.IsMember, arch.IsArchived = "C0ARCHIVE", true, true
	r.fake.AddConversation(arch)
	if _, err := r.send.Send(ctx, &adapters.Attempt{Draft: draft("C0ARCHIVE", "hi\n")}); !adapters.IsPermanent(err) || !strings.Contains(err.Error(), "is_archived") {
		t.Errorf("archived channel: %v", err)
	}
	if _, err := r.send.Send(ctx, &adapters.Attempt{Draft: draft("U0NOBODY1", "hi\n")}); !adapters.IsPermanent(err) || !strings.Contains(err.Error(), "conversations.open: user_not_found") {
		t.Errorf("unknown user: %v", err)
	}
	if n := len(r.fake.Posts()); n != 0 {
		t.Errorf("%d posts", n)
	}
}

// missing_scope names the scope Slack says is needed (the fake has no
// scopes: Slack's answer is written here as Slack sends it).
func TestSendMissingScope(t *testing.T) {
	hc := &http.Client{Transport: roundTripper(func(req *http.Request) (*http.Response, error) {
		body := `{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"channels:history,users:read"}`
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
	})}
	p, err := New(Options{Config: Config{Enabled: true, BotToken: botToken, APIURL: "http://127.0.0.1:1/api/"}, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Sender.Send(ctx, &adapters.Attempt{Draft: draft(general, "hi\n")})
	if !adapters.IsPermanent(err) || !strings.Contains(err.Error(), "missing_scope") || !strings.Contains(err.Error(), "needs the scope chat:write") {
		t.Errorf("missing scope: %v", err)
	}
}

// A draft dropped straight into outbound/ is checked again: nothing it
// holds that Slack cannot take reaches Slack.
func TestSendRefusesBadDrafts(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	cases := map[string]func(d *schema.Draft){
		"no recipient":       func(d *schema.Draft) { d.To = nil },
		"a name, not an id":  func(d *schema.Draft) { d.To = schema.Recipients{"#general"} },
		"two channels":       func(d *schema.Draft) { d.To = schema.Recipients{general, "C0OTHER01"} },
		"cc":                 func(d *schema.Draft) { d.Cc = schema.Recipients{ann} },
		"thread_key not ts":  func(d *schema.Draft) { d.ThreadKey = "1690000000.000100&channel=C0OTHER01" },
		"card":               func(d *schema.Draft) { d.Type, d.Content.Card = schema.DraftCard, map[string]any{"blocks": []any{}} },
		"nothing to post":    func(d *schema.Draft) { d.Body = " \n\n" },
		"artifact not an id": func(d *schema.Draft) { d.Artifacts = []schema.DraftArtifact{{ID: "../../etc/passwd", Name: "x"}} },
	}
	for name, mutate := range cases {
		d := draft(general, "hi\n")
		mutate(d)
		_, err := r.send.Send(ctx, &adapters.Attempt{Draft: d})
		if !adapters.IsPermanent(err) || !strings.HasPrefix(err.Error(), "slack: ") {
			t.Errorf("%s: %v, want a permanent error", name, err)
		}
	}
	for _, m := range []string{"chat.postMessage", "files.getUploadURLExternal", "conversations.open"} {
		if n := r.fake.Calls(m); n != 0 {
			t.Errorf("%s called %d times", m, n)
		}
	}
}

func TestSplit(t *testing.T) {
	para := strings.Repeat("word ", 199) + "end." // 999 runes
	long := strings.Join([]string{para, para, para, para, para, para, para, para, para}, "\n\n")
	parts := split(long, maxPostRunes, true)
	if len(parts) != 3 {
		t.Fatalf("%d parts, want 3", len(parts))
	}
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > maxPostRunes {
			t.Errorf("part %d: %d runes", i, n)
		}
		if !strings.HasSuffix(p, "end.") || !strings.HasPrefix(p, "word") {
			t.Errorf("part %d not cut at a paragraph: %q…%q", i, p[:10], p[len(p)-10:])
		}
	}
	if strings.Join(parts, "\n\n") != long {
		t.Error("the parts do not make the text again")
	}
	// No break anywhere, and multi-byte: cut on rune boundaries.
	cjk := strings.Repeat("长", 9000)
	parts = split(cjk, maxPostRunes, false)
	if strings.Join(parts, "") != cjk || len(parts) != 3 {
		t.Errorf("%d parts, rejoined equal %v", len(parts), strings.Join(parts, "") == cjk)
	}
	for _, p := range parts {
		if !utf8.ValidString(p) || utf8.RuneCountInString(p) > maxPostRunes {
			t.Errorf("part of %d runes, valid %v", utf8.RuneCountInString(p), utf8.ValidString(p))
		}
	}
	// A code block cut in two is closed and opened again.
	code := "```\n" + strings.Repeat("x := 1\n", 1000) + "```"
	parts = split(code, maxPostRunes, true)
	for i, p := range parts {
		if strings.Count(p, "```")%2 != 0 || !strings.HasPrefix(p, "```") || !strings.HasSuffix(p, "```") {
			t.Errorf("part %d of the code block is not fenced: %q…%q", i, p[:8], p[len(p)-8:])
		}
	}
	// A link is never cut.
	link := strings.Repeat("a", 3980) + " <https://example.com/" + strings.Repeat("p", 40) + "|label> tail"
	parts = split(link, maxPostRunes, true)
	if len(parts) != 2 || !strings.HasPrefix(parts[1], "<https://") {
		t.Errorf("link cut: %d parts, second starts %q", len(parts), parts[len(parts)-1][:min(12, len(parts[len(parts)-1]))])
	}
}

// A long draft is several posts in order, in the same thread.
func TestSendLongText(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	root := "1690000000.000100"
	r.fake.AddMessage(general, slackapi.Message{Msg: slackapi.Msg{Type: "message", User: ann, Text: "report?", Timestamp: root}})
	var paras []string
	for i := range 12 {
		paras = append(paras, fmt.Sprintf("Section %d. ", i)+strings.Repeat("lorem ipsum ", 80))
	}
	d := draft(general, strings.Join(paras, "\n\n")+"\n")
	d.ThreadKey = schema.NullString(root)
	rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) != 3 {
		t.Fatalf("%d posts, want 3", len(posts))
	}
	var all strings.Builder
	for i, p := range posts {
		if p.ThreadTS != root || utf8.RuneCountInString(p.Text) > maxPostRunes {
			t.Errorf("post %d: thread %q, %d runes", i, p.ThreadTS, utf8.RuneCountInString(p.Text))
		}
		all.WriteString(p.Text + "\n\n")
	}
	for i := range paras {
		if !strings.Contains(all.String(), fmt.Sprintf("Section %d. ", i)) {
			t.Errorf("section %d lost", i)
		}
	}
	if strings.Index(all.String(), "Section 11.") < strings.Index(all.String(), "Section 0.") {
		t.Error("posts out of order")
	}
	if rc.ProviderMessageID != posts[0].TS || len(rc.Recipients) != 3 {
		t.Errorf("receipt %+v, want the first post's ts and 3 steps", rc)
	}
}

// A retry after a partial success never posts again what was posted:
// the steps done come back to the engine in a PartialError, and the next
// attempt, which carries them in Accepted, does only the rest.
func TestSendResumesAfterPartialFailure(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	d := draft(general, strings.Repeat("lorem ipsum ", 500)+"\n") // two posts
	d.Artifacts = []schema.DraftArtifact{{ID: r.put(t, []byte("a,b\n")), Name: "t.csv"}}
	r.failNth("chat.postMessage", 2, slackfake.Failure{Status: 500})
	_, err := r.send.Send(ctx, &adapters.Attempt{Draft: d})
	var pe *adapters.PartialError
	if !errors.As(err, &pe) || len(pe.Accepted) != 1 || adapters.IsPermanent(err) {
		t.Fatalf("second post failed: %v, want a temporary PartialError with the first post", err)
	}
	accepted := pe.Accepted
	first := r.fake.Posts()[0]
	if string(accepted[0].Reply) != first.TS {
		t.Errorf("accepted %+v, want the first post's ts %s", accepted[0], first.TS)
	}
	if len(r.fake.Uploads()) != 0 {
		t.Error("files shared before the text was all posted")
	}
	// Next attempt: the share fails for good after the second post.
	r.before = nil
	r.fake.Fail("files.completeUploadExternal", slackfake.Failure{Error: "not_in_channel"})
	_, err = r.send.Send(ctx, &adapters.Attempt{Draft: d, Accepted: accepted})
	if !errors.As(err, &pe) || len(pe.Accepted) != 1 || !adapters.IsPermanent(err) {
		t.Fatalf("share refused: %v, want a permanent PartialError with the second post", err)
	}
	accepted = append(accepted, pe.Accepted...)
	// And once more, as if the draft had been put back in the queue.
	rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: d, Accepted: accepted})
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) != 2 || len(r.fake.Uploads()) != 1 {
		t.Fatalf("%d posts and %d uploads, want each part once: 2 and 1", len(posts), len(r.fake.Uploads()))
	}
	if !strings.HasPrefix(posts[0].Text, "lorem") || posts[0].TS >= posts[1].TS {
		t.Error("posts out of order")
	}
	if rc.ProviderMessageID != first.TS || rc.InboundID != threading.SlackID(general, first.TS) || len(rc.Recipients) != 1 {
		t.Errorf("receipt %+v, want the first post's ts and only the share as new", rc)
	}
}

// The commit gate: nothing shows in Slack before the Sender is let past
// it, and a send that is never let past posts nothing.
func TestSendWaitsAtGate(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	d := draft(general, "hi\n")
	d.Artifacts = []schema.DraftArtifact{{ID: r.put(t, []byte("x")), Name: "x.txt"}}
	cctx, cancel := context.WithCancel(ctx)
	entered := make(chan struct{})
	gate := gateFunc(func(ctx context.Context) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	errc := make(chan error, 1)
	go func() {
		_, err := r.send.Send(cctx, &adapters.Attempt{Draft: d, Gate: gate})
		errc <- err
	}()
	select {
	case <-entered:
	case err := <-errc:
		t.Fatalf("the send ended (%v) without entering the gate; %d posts", err, len(r.fake.Posts()))
	}
	cancel()
	err := <-errc
	if err == nil || adapters.IsPermanent(err) {
		t.Errorf("held at the gate: %v, want a temporary error", err)
	}
	if len(r.fake.Posts()) != 0 || len(r.fake.Uploads()) != 0 {
		t.Errorf("%d posts, %d shares before the gate let the send in", len(r.fake.Posts()), len(r.fake.Uploads()))
	}
}

// observer tells the test when the engine filed a draft.
type observer struct {
	sent   chan schema.Provider
	mu     sync.Mutex
	failed int
}

func (o *observer) Sent(p schema.Provider, _ time.Duration) { o.sent <- p }
func (o *observer) Failed(schema.Provider, bool) {
	o.mu.Lock()
	o.failed++
	o.mu.Unlock()
}

// The outbound engine with the Slack Sender, against the fake: a draft
// queued in a mailbox is posted (its second part after a 503), its file
// shared, and filed in archive/ with the first post's ts and its inbound
// id; every part once.
func TestEngineDeliversToSlack(t *testing.T) {
	mb, r := newMailboxRig(t)
	d := draft(general, strings.Repeat("lorem ipsum ", 500)+"\n") // two posts
	d.Artifacts = []schema.DraftArtifact{{ID: r.put(t, []byte("a,b\n1,2\n")), Name: "t.csv"}}
	if err := (Resolver{}).Resolve(d, nil, adapters.ResolveOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.Queue(ctx, d); err != nil {
		t.Fatal(err)
	}
	r.failNth("chat.postMessage", 2, slackfake.Failure{Status: 503})
	obs := &observer{sent: make(chan schema.Provider, 1)}
	startEngine(t, mb, r, obs)
	select {
	case <-obs.sent:
	case <-time.After(30 * time.Second):
		t.Fatal("not sent in 30 s")
	}
	got, _, err := mb.Draft(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) != 2 || len(r.fake.Uploads()) != 1 {
		t.Fatalf("%d posts and %d uploads, want 2 and 1", len(posts), len(r.fake.Uploads()))
	}
	del := got.Delivery
	if del == nil || del.Status != schema.DeliverySent || del.ProviderMessageID != posts[0].TS || del.Channel != general {
		t.Fatalf("delivery %+v, want sent with provider_message_id %s in %s", del, posts[0].TS, general)
	}
	if got.InboundID != threading.SlackID(general, posts[0].TS) {
		t.Errorf("inbound_id %q, want %s", got.InboundID, threading.SlackID(general, posts[0].TS))
	}
	if len(del.Recipients) != 3 {
		t.Errorf("delivery steps %+v, want the 2 posts and the share", del.Recipients)
	}
	ent, err := mb.Get(ctx, d.ID)
	if err != nil || ent.Status != mailbox.StatusSent {
		t.Errorf("index: %+v %v", ent, err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.failed != 1 {
		t.Errorf("%d failed attempts, want the one 503", obs.failed)
	}
}

// A dropzone object damaged on disk (its bytes are not its id) is never
// shared, and nothing of the draft is posted.
func TestSendDamagedArtifact(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	id := r.put(t, []byte("the numbers, as computed\n"))
	path, err := r.dz.Abs(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("the numbers, as tampered\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	d := draft(general, "attached\n")
	d.Artifacts = []schema.DraftArtifact{{ID: id, Name: "n.txt"}}
	_, err = r.send.Send(ctx, &adapters.Attempt{Draft: d})
	if !adapters.IsPermanent(err) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "artifacts[0]") {
		t.Errorf("damaged artifact: %v", err)
	}
	if len(r.fake.Uploads()) != 0 || len(r.fake.Posts()) != 0 {
		t.Errorf("%d shares and %d posts of a draft with a damaged file", len(r.fake.Uploads()), len(r.fake.Posts()))
	}
}

// newMailboxRig is a temp mailbox and the Sender against a fake Slack,
// reading the mailbox's dropzone.
func newMailboxRig(t *testing.T) (*mailbox.Mailbox, *rig) {
	t.Helper()
	w := wstest.Mailbox(t)
	return w.MB, newRigIn(t, confkit.Limits{}, w.DZ)
}

func startEngine(t *testing.T, mb *mailbox.Mailbox, r *rig, obs outbound.Observer) {
	t.Helper()
	eng := outbound.New(mb, &outbound.Options{Senders: map[schema.Provider]adapters.Sender{schema.Slack: r.send},
		Dropzone: r.dz, BackoffBase: 10 * time.Millisecond, Observer: obs})
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(ctx) })
}

// What a crash does to a Slack draft, the engine's contract with this
// Sender: a crash once the post is recorded (the engine's MarkAccepted)
// files the draft at the next start without posting it again; a crash
// between the post and that record posts it once more, the one duplicate
// the commit gate allows, and files the second post.
func TestEngineCrashAfterPost(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprintf("recorded=%v", recorded), func(t *testing.T) {
			mb, r := newMailboxRig(t)
			d := draft(general, "hello\n")
			if _, err := mb.Queue(ctx, d); err != nil {
				t.Fatal(err)
			}
			// The engine that dies: it claimed the draft and the Sender
			// posted it; then it recorded the receipt, or did not.
			if _, ok, err := mb.ClaimDelivery(ctx, d.ID, "dead-process", time.Now(), time.Hour); err != nil || !ok {
				t.Fatal(ok, err)
			}
			rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: d})
			if err != nil {
				t.Fatal(err)
			}
			if recorded {
				if err := mb.MarkAccepted(ctx, d.ID, mailbox.Receipt{ProviderMessageID: rc.ProviderMessageID, Channel: rc.Channel,
					InboundID: rc.InboundID, Recipients: rc.Recipients, At: time.Now()}); err != nil {
					t.Fatal(err)
				}
			}
			startEngine(t, mb, r, nil)
			testutil.WaitFor(t, 30*time.Second, "the draft filed in archive/", func() bool {
				e, err := mb.Get(ctx, d.ID)
				return err == nil && e.Status == mailbox.StatusSent
			})
			posts := r.fake.Posts()
			want := 1
			if !recorded {
				want = 2
			}
			if len(posts) != want {
				t.Fatalf("%d posts, want %d", len(posts), want)
			}
			got, _, err := mb.Draft(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			last := posts[len(posts)-1].TS
			if got.Delivery.ProviderMessageID != last || got.InboundID != threading.SlackID(general, last) {
				t.Errorf("filed with %s (%s), want the post %s", got.Delivery.ProviderMessageID, got.InboundID, last)
			}
		})
	}
}

// BenchmarkSend is one reply posted in a thread through slack-go against
// the fake: the Sender's own cost (conversion, the request, the receipt)
// plus the fake's, over loopback HTTP.
func BenchmarkSend(b *testing.B) {
	fake := slackfake.New(b, slackfake.Options{BotToken: botToken})
	var ch slackapi.Channel
	ch.ID, ch.IsMember = general, true
	fake.AddConversation(ch)
	root := "1690000000.000100"
	fake.AddMessage(general, slackapi.Message{Msg: slackapi.Msg{Type: "message", User: ann, Text: "status?", Timestamp: root}})
	p, err := New(Options{Config: Config{Enabled: true, Mode: "events", BotToken: botToken, APIURL: fake.APIURL()}})
	if err != nil {
		b.Fatal(err)
	}
	d := draft(general, "Deploy **done**: see [the log](https://ci.example/run/7).\n\n- tests pass\n- `make release` ran\n")
	d.ThreadKey = schema.NullString(root)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Sender.Send(ctx, &adapters.Attempt{Draft: d}); err != nil {
			b.Fatal(err)
		}
	}
	if len(fake.Posts()) < b.N {
		b.Fatalf("%d posts for %d sends", len(fake.Posts()), b.N)
	}
}

// FuzzSplit: whatever the text, every piece fits, none is empty, valid
// UTF-8 stays valid, and the pieces hold the text's characters in order
// (white space at the cuts and the fences added to close a code block
// aside).
func FuzzSplit(f *testing.F) {
	f.Add("para one\n\npara two with <https://x.example|a link> and ```code\nmore```", 20, true)
	f.Add(strings.Repeat("长 ", 40), 13, false)
	f.Add("```\n"+strings.Repeat("x\n", 60)+"```", 25, true)
	f.Fuzz(func(t *testing.T, s string, max int, mrkdwn bool) {
		if max < 12 || max > 200 || len(s) > 4000 {
			t.Skip()
		}
		parts := split(s, max, mrkdwn)
		squash := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, "```", "")), "") }
		var all strings.Builder
		for i, p := range parts {
			if n := utf8.RuneCountInString(p); n > max || strings.TrimSpace(p) == "" {
				t.Fatalf("piece %d of %d runes (max %d): %q", i, n, max, p)
			}
			if utf8.ValidString(s) && !utf8.ValidString(p) {
				t.Fatalf("piece %d is not UTF-8: %q", i, p)
			}
			all.WriteString(p)
		}
		if got, want := squash(all.String()), squash(s); got != want {
			t.Fatalf("pieces hold %q, the text %q", got, want)
		}
	})
}

// Each part is recorded through Attempt.Progress as soon as it is posted:
// a crash in the middle of a long draft (here: the process gone after the
// first part, whatever Send would have returned) repeats no part already
// posted, since the next attempt finds them in Accepted.
func TestSendRecordsEachStep(t *testing.T) {
	r := newRig(t, confkit.Limits{})
	var paras []string
	for i := range 12 {
		paras = append(paras, fmt.Sprintf("Section %d. ", i)+strings.Repeat("lorem ipsum ", 80))
	}
	d := draft(general, strings.Join(paras, "\n\n")+"\n") // three posts
	var recorded []schema.RecipientResult
	cctx, crash := context.WithCancel(ctx)
	r.send.Send(cctx, &adapters.Attempt{Draft: d, Progress: func(_ context.Context, reached ...schema.RecipientResult) error {
		recorded = append(recorded, reached...)
		crash() // the process dies before the next part
		return nil
	}})
	if len(recorded) != 1 || len(r.fake.Posts()) != 1 {
		t.Fatalf("recorded %d steps, %d posts, want the first of each", len(recorded), len(r.fake.Posts()))
	}
	rc, err := r.send.Send(ctx, &adapters.Attempt{Draft: d, Accepted: recorded})
	if err != nil {
		t.Fatal(err)
	}
	posts := r.fake.Posts()
	if len(posts) != 3 {
		t.Fatalf("%d posts after the restart, want 3 (none twice)", len(posts))
	}
	if rc.ProviderMessageID != posts[0].TS {
		t.Errorf("receipt names %s, want the first post's ts %s", rc.ProviderMessageID, posts[0].TS)
	}
}
