package lark

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/*.json")

const testAppID = "cli_courier_test"

var (
	imageBytes = []byte("\x89PNG\r\n\x1a\nnot a real picture, but its bytes must come through")
	fileBytes  = []byte("%PDF-1.4 the report")
)

// fakeLark is the fake workspace every golden event is read against: Ann
// sends, Bob is mentioned, the image and the file are downloadable.
func fakeLark(t *testing.T) *larkfake.Server {
	t.Helper()
	s := larkfake.New(t, larkfake.Options{AppID: testAppID, AppSecret: "secret-" + t.Name()})
	s.AddUser(larkfake.User{OpenID: "ou_ann", Name: "Ann Lee"})
	s.AddUser(larkfake.User{OpenID: "ou_bob", Name: "Bob Chen"})
	s.AddChat(larkfake.Chat{ChatID: "oc_chat", Name: "Launch"})
	s.AddResource("om_image", "img_v3_key1", imageBytes, "image", "")
	s.AddResource("om_file", "file_v3_key1", fileBytes, "file", "report.pdf")
	s.AddResource("om_post_image", "img_v3_chart", imageBytes, "image", "")
	s.AddResource("om_audio", "file_v3_audio", []byte("OggS\x00\x02 voice bytes"), "file", "")
	s.AddResource("om_media", "file_v3_video", []byte("\x00\x00\x00\x18ftypmp42 video bytes"), "file", "clip.mp4")
	return s
}

func testAdapter(t *testing.T, base, secret string) (*Adapter, *dropzone.Store) {
	t.Helper()
	dz, err := dropzone.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dz.Close() })
	cfg := Config{AppID: testAppID, AppSecret: confkit.Secret(secret), Domain: base}
	a, err := newAdapter(cfg, confkit.Limits{MaxArtifactBytes: 1 << 20}, dz, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, dz
}

// TestDomain: the domain is feishu, lark or a base URL; anything else is
// a config error naming the key, not a token sent somewhere odd.
func TestDomain(t *testing.T) {
	for in, want := range map[string]string{"": "https://open.feishu.cn", "Feishu": "https://open.feishu.cn",
		"lark": "https://open.larksuite.com", "http://127.0.0.1:8080/": "http://127.0.0.1:8080"} {
		if got, err := baseURL(in); err != nil || got != want {
			t.Errorf("baseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"larksuite", "ftp://open.feishu.cn", "https://user:pw@open.feishu.cn", "https://open.feishu.cn/open-apis", "https://h/?x=1"} {
		if got, err := baseURL(in); err == nil || !strings.Contains(err.Error(), "courier.adapters.lark.domain") || strings.Contains(err.Error(), "pw") {
			t.Errorf("baseURL(%q) = %q, %v; want an error naming courier.adapters.lark.domain", in, got, err)
		}
	}
}

func readEvent(t *testing.T, path string) event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := parseEvent(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ev
}

// goldenText is the outcome of normalize as a golden file holds it:
// received_at fixed, the fake's URL made stable.
func goldenText(t *testing.T, name, base string, ev *adapters.Event) []byte {
	t.Helper()
	switch {
	case ev == nil:
		return []byte("# writes nothing\n")
	case ev.Self:
		return []byte("# the app's own: " + ev.Message.ID + "\n")
	}
	m := *ev.Message
	m.ReceivedAt = schema.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	data := testutil.CheckMessage(t, name, &m)
	out := fmt.Appendf(nil, "# keys: %s; debounce: %v; thread_correlation: %v\n", strings.Join(ev.Keys, " "), ev.Debounce, ev.ThreadCorrelation)
	return append(out, bytes.ReplaceAll(data, []byte(base), []byte("http://lark.test"))...)
}

// TestGolden normalises each testdata/X.json through the fake and compares
// the file with testdata/X.golden.md (go test -update rewrites them).
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	if len(files) < 10 {
		t.Fatalf("only %d golden events in testdata", len(files))
	}
	for _, in := range files {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			s := fakeLark(t)
			a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
			ev, err := a.normalize(context.Background(), readEvent(t, in))
			if err != nil {
				t.Fatalf("normalize: %v", err)
			}
			got := goldenText(t, name, s.URL(), ev)
			if bytes.Contains(got, []byte("vtok_secret")) {
				t.Errorf("the envelope's verification token reached the file:\n%s", got)
			}
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
			if !bytes.Equal(want, got) {
				t.Errorf("%s differs from %s (go test -update if deliberate):\n%s", in, golden, testutil.LineDiff(string(want), string(got)))
			}
		})
	}
}

// TestRules checks the rules on their own, whatever the golden files say.
func TestRules(t *testing.T) {
	s := fakeLark(t)
	a, dz := testAdapter(t, s.URL(), s.Options().AppSecret)
	ctx := context.Background()
	norm := func(name string) *adapters.Event {
		t.Helper()
		ev, err := a.normalize(ctx, readEvent(t, filepath.Join("testdata", name+".json")))
		if err != nil || ev == nil {
			t.Fatalf("%s: %v, %v", name, ev, err)
		}
		return ev
	}

	ev := norm("text_mention")
	m := ev.Message
	if m.ID != "lark_om_text_mention" || m.Session.ID != "oc_chat" || m.Session.Type != schema.Group {
		t.Errorf("text: id %q session %q %q", m.ID, m.Session.ID, m.Session.Type)
	}
	if m.Participants.From.ID != "ou_ann" || m.Participants.From.Name != "Ann Lee" {
		t.Errorf("text: from %+v, want ou_ann named Ann Lee (contact v3)", m.Participants.From)
	}
	var user, all bool
	for _, x := range m.Participants.Mentions {
		user = user || x.Type == schema.MentionUser && x.Target == "ou_bob" && x.Name == "Bob"
		all = all || x.Type == schema.MentionAll
	}
	if !user || !all {
		t.Errorf("text: mentions %+v, want ou_bob and all", m.Participants.Mentions)
	}
	if !m.Timestamp.Time.Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("text: timestamp %v, want create_time", m.Timestamp.Time)
	}
	if len(ev.Keys) != 1 || ev.Keys[0] != "event:lark:ev_text_mention" || !ev.Debounce || ev.ThreadCorrelation {
		t.Errorf("text: keys %v debounce %v thread %v", ev.Keys, ev.Debounce, ev.ThreadCorrelation)
	}

	img := norm("image").Message
	if len(img.Artifacts) != 1 {
		t.Fatalf("image: artifacts %+v", img.Artifacts)
	}
	var got []byte
	fh, err := dz.Open(img.Artifacts[0].ID)
	if err == nil {
		got, err = io.ReadAll(fh)
		fh.Close()
	}
	if err != nil || !bytes.Equal(got, imageBytes) {
		t.Errorf("image: stored %q, %v; want the fake's bytes", got, err)
	}
	f := norm("file").Message
	if len(f.Artifacts) != 1 || f.Artifacts[0].Name != "report.pdf" || f.Artifacts[0].Size != int64(len(fileBytes)) {
		t.Errorf("file: artifacts %+v", f.Artifacts)
	}

	if u := norm("unknown").Message; !strings.Contains(string(u.Content.Text), "hologram") || u.Metadata.ProviderRaw == nil {
		t.Errorf("unknown type dropped: %+v", u.Content)
	}

	rc := norm("recall")
	if rc.Message.ID != "lark_om_text_mention_recall" || rc.Message.Metadata.Extra.Recalls != "lark_om_text_mention" || rc.Debounce {
		t.Errorf("recall: id %q recalls %q debounce %v", rc.Message.ID, rc.Message.Metadata.Extra.Recalls, rc.Debounce)
	}
	pi := norm("post_image").Message
	if len(pi.Artifacts) != 1 || pi.Artifacts[0].Type != schema.ArtifactImage || !strings.Contains(fmt.Sprint(pi.Metadata.Extra.Other["resources"]), "img_v3_missing") {
		t.Errorf("post with images: artifacts %+v, extra %v; want the chart stored and the missing one noted", pi.Artifacts, pi.Metadata.Extra.Other)
	}
	if pi.Type != schema.TypeMixed {
		t.Errorf("post with words and an image: type %q, want mixed", pi.Type)
	}
	// A card is filed as one (the protocol's type card), with its
	// readable text and Markdown.
	if c := norm("interactive").Message; c.Type != schema.TypeCard || c.Content.Text != "Deploy\nBuild 42 passed" || !strings.Contains(string(c.Content.Markdown), "**Deploy**") {
		t.Errorf("interactive: type %q text %q markdown %q; want a card with its words", c.Type, c.Content.Text, c.Content.Markdown)
	}
	bad := norm("malformed").Message
	if bad.Metadata.Extra.Other["parse_error"] == nil || bad.Metadata.ProviderRaw == nil || bad.Metadata.Extra.Other["create_time_unparsed"] != "not a time" ||
		!bad.Timestamp.Time.Equal(time.UnixMilli(1700000000100)) {
		t.Errorf("malformed content: extra %v, raw kept %v", bad.Metadata.Extra.Other, bad.Metadata.ProviderRaw != nil)
	}
	if own := norm("own"); !own.Self {
		t.Errorf("own message not Self")
	}
	th := norm("thread_reply")
	if string(th.Message.Session.ThreadKey) != "omt_thread1" || string(th.Message.ThreadRoot) != "lark_om_root" ||
		string(th.Message.ReplyTo) != "lark_om_parent" || !th.ThreadCorrelation {
		t.Errorf("thread reply: key %q root %q reply_to %q correlation %v", th.Message.Session.ThreadKey, th.Message.ThreadRoot, th.Message.ReplyTo, th.ThreadCorrelation)
	}
	// The name was looked up once for all these messages from Ann.
	if n := s.Calls(larkfake.RouteUser); n > 2 {
		t.Errorf("contact v3 called %d times for two users: names not cached", n)
	}
}

// TestWritesNothing: an event that is not a message writes nothing and
// is counted; a message event without its ids is not retried either, but
// Undeliverable, with a reason naming what is missing: the transport sets
// it aside as a dead letter (it wrote nothing and said so in the log
// only, before).
func TestWritesNothing(t *testing.T) {
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	for name, body := range map[string]string{
		"contact event": `{"schema":"2.0","header":{"event_id":"e1","event_type":"contact.user.created_v3"},"event":{"object":{"open_id":"ou_x"}}}`,
	} {
		ev, err := parseEvent([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out, err := a.normalize(context.Background(), ev); out != nil || err != nil {
			t.Errorf("%s: %+v, %v; want nothing written and no retry", name, out, err)
		}
	}
	if got := a.ignored.Counts(); got["event_type"] != 1 || len(got) != 1 {
		t.Errorf("ignored %v, want event_type: 1", got)
	}
	for name, tc := range map[string]struct{ body, reason string }{
		"no message_id":  {`{"schema":"2.0","header":{"event_id":"e2","event_type":"im.message.receive_v1"},"event":{"message":{"chat_id":"oc_chat","message_type":"text","content":"{\"text\":\"x\"}"}}}`, "without a message_id"},
		"no chat_id":     {`{"schema":"2.0","header":{"event_id":"e3","event_type":"im.message.receive_v1"},"event":{"message":{"message_id":"om_1","message_type":"text","content":"{\"text\":\"x\"}"}}}`, "without a chat_id"},
		"recall no id":   {`{"schema":"2.0","header":{"event_id":"e4","event_type":"im.message.recalled_v1"},"event":{"chat_id":"oc_chat"}}`, "names no message"},
		"event a string": {`{"schema":"2.0","header":{"event_id":"e5","event_type":"im.message.receive_v1"},"event":"om_1"}`, "is not readable"},
	} {
		ev, err := parseEvent([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := a.normalize(context.Background(), ev)
		if reason, ok := adapters.UndeliverableReason(err); out != nil || !ok || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: %+v, %v; want Undeliverable, %q", name, out, err, tc.reason)
		}
	}
	if _, err := parseEvent([]byte("{not json")); err == nil || !strings.HasPrefix(err.Error(), "lark: ") {
		t.Errorf("parseEvent of a body that is not JSON: %v", err)
	}
}

// TestResourceFailures: a failure that may pass fails the event (retried);
// a resource Lark will never serve leaves the message written without it.
func TestResourceFailures(t *testing.T) {
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	ctx := context.Background()
	s.Fail(larkfake.RouteResource, larkfake.Failure{Status: 500})
	if ev, err := a.normalize(ctx, readEvent(t, "testdata/image.json")); err == nil {
		t.Fatalf("a 500 on the download: got %+v, want an error to retry", ev.Message.Artifacts)
	} else if !adapters.IsTemporary(err) {
		t.Errorf("a 500 on the download: %v is not temporary", err)
	}

	// The file key is not in the message (Lark's 234003): permanent.
	ev := readEvent(t, "testdata/image.json")
	ev.Event = json.RawMessage(strings.Replace(string(ev.Event), "img_v3_key1", "img_v3_gone", 1))
	out, err := a.normalize(ctx, ev)
	if err != nil {
		t.Fatalf("a resource not in the message: %v, want the message written without it", err)
	}
	if len(out.Message.Artifacts) != 0 || !strings.Contains(fmt.Sprint(out.Message.Metadata.Extra.Other["resources"]), "234003") {
		t.Errorf("missing resource: artifacts %+v extra %v", out.Message.Artifacts, out.Message.Metadata.Extra.Other)
	}
	testutil.CheckMessage(t, "missing resource", out.Message)

	// Over the artifact limit: permanent, said so.
	a.limits.MaxArtifactBytes = 8
	out, err = a.normalize(ctx, readEvent(t, "testdata/image.json"))
	if err != nil || len(out.Message.Artifacts) != 0 || !strings.Contains(fmt.Sprint(out.Message.Metadata.Extra.Other["resources"]), "max_artifact_bytes") {
		t.Errorf("too large: %v, %+v", err, out)
	}
}

// TestExpiredTokenRefetchedOnce: a token Lark refuses (99991663) is fetched
// again once, and the download then succeeds.
func TestExpiredTokenRefetchedOnce(t *testing.T) {
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	ctx := context.Background()
	if _, err := a.tenantToken(ctx, false); err != nil {
		t.Fatal(err)
	}
	s.ExpireTokens() // the cached token is now refused
	before := s.Calls(larkfake.RouteTenantToken)
	ev, err := a.normalize(ctx, readEvent(t, "testdata/image.json"))
	if err != nil || len(ev.Message.Artifacts) != 1 {
		t.Fatalf("after expiry: %v, %+v", err, ev)
	}
	if n := s.Calls(larkfake.RouteTenantToken) - before; n != 1 {
		t.Errorf("token fetched %d times after it expired, want once", n)
	}
	// A token refused however often it is renewed: one refetch, then an
	// error, not a loop.
	s.Fail(larkfake.RouteResource, larkfake.Failure{Status: 400, Code: 99991663, Msg: "invalid access token", Times: 10})
	before = s.Calls(larkfake.RouteResource)
	if _, err := a.normalize(ctx, readEvent(t, "testdata/file.json")); err == nil {
		t.Error("a token always refused: no error")
	}
	if n := s.Calls(larkfake.RouteResource) - before; n != 2 {
		t.Errorf("download tried %d times with a refused token, want 2 (the refetch once)", n)
	}
}

// TestTokenNeverToForeignHost: a download redirected elsewhere is not
// followed, and a key shaped like a path or a URL stays on the base host.
func TestTokenNeverToForeignHost(t *testing.T) {
	var foreign atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreign.Add(1)
		w.Write([]byte("stolen"))
	}))
	defer evil.Close()
	var auths atomic.Int32
	base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/tenant_access_token/internal"):
			w.Write([]byte(`{"code":0,"tenant_access_token":"t-secret-token","expire":7200}`))
		case strings.Contains(r.URL.Path, "/resources/"):
			if r.Header.Get("Authorization") == "Bearer t-secret-token" {
				auths.Add(1)
			}
			http.Redirect(w, r, evil.URL+"/steal", http.StatusFound)
		default:
			w.Write([]byte(`{"code":41050,"msg":"no user authority error"}`))
		}
	}))
	defer base.Close()
	a, _ := testAdapter(t, base.URL, "s3cret")
	ev := readEvent(t, "testdata/image.json")
	ev.Event = json.RawMessage(strings.Replace(string(ev.Event), "img_v3_key1", `//`+strings.TrimPrefix(evil.URL, "http://")+`/x`, 1))
	out, err := a.normalize(context.Background(), ev)
	if err != nil {
		t.Fatalf("normalize: %v", err)
	}
	if foreign.Load() != 0 {
		t.Errorf("%d requests reached the foreign host", foreign.Load())
	}
	if auths.Load() == 0 {
		t.Error("the download never reached the base host")
	}
	reason := fmt.Sprint(out.Message.Metadata.Extra.Other["resources"])
	if !strings.Contains(reason, "not followed") {
		t.Errorf("reason %q does not say the redirect was refused", reason)
	}
	data := testutil.CheckMessage(t, "redirected", out.Message)
	if bytes.Contains(data, []byte("t-secret-token")) || bytes.Contains(data, []byte("s3cret")) {
		t.Error("a secret reached the message file")
	}
	// The name lookup failed (41050): the id is the name.
	if out.Message.Participants.From.Name != "ou_ann" {
		t.Errorf("from %+v: a failed lookup falls back to the id", out.Message.Participants.From)
	}
}

// TestCorpus: every event of the corpus normalises to a valid message.
func TestCorpus(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "lark", "events")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Fatalf("no events in %s", dir)
	}
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	for _, f := range files {
		ev, err := a.normalize(context.Background(), readEvent(t, f))
		if err != nil || ev == nil || ev.Message == nil {
			t.Errorf("%s: %v, %v", filepath.Base(f), ev, err)
			continue
		}
		testutil.CheckMessage(t, filepath.Base(f), ev.Message)
	}
}

// TestLongTextOverflows: text over courier.limits.max_text_bytes is cut,
// and the rest is an artifact, so that the file plus its rest is the
// whole message.
func TestLongTextOverflows(t *testing.T) {
	s := fakeLark(t)
	a, dz := testAdapter(t, s.URL(), s.Options().AppSecret)
	a.limits.MaxTextBytes = 4096
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "line %d é\n", i)
	}
	long := strings.TrimRight(b.String(), "\n")
	content, _ := json.Marshal(map[string]string{"text": long})
	quoted, _ := json.Marshal(string(content))
	ev := readEvent(t, "testdata/thread_reply.json")
	ev.Event = json.RawMessage(strings.Replace(string(ev.Event), `"{\"text\":\"a reply\"}"`, string(quoted), 1))
	out, err := a.normalize(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	m := out.Message
	testutil.CheckMessage(t, "long", m)
	if n := len(m.Content.Text) + 2*len(m.Content.Markdown); n > 4096 {
		t.Errorf("text and Markdown take %d bytes, over 4096", n)
	}
	var rest []byte
	for _, o := range m.Metadata.Extra.Overflow {
		if o.Field != "content.text" {
			continue
		}
		fh, err := dz.Open(o.Artifacts[0])
		if err != nil {
			t.Fatal(err)
		}
		rest, _ = io.ReadAll(fh)
		fh.Close()
	}
	if string(m.Content.Text)+string(rest) != long {
		t.Errorf("content.text (%d bytes) and its rest (%d) are not the message (%d)", len(m.Content.Text), len(rest), len(long))
	}
	if !strings.Contains(m.Body, "markdown-rest.md") {
		t.Errorf("the body does not say where it goes on")
	}
	if m.Type != schema.TypeText {
		t.Errorf("type %q: the overflow artifacts made it look like a file", m.Type)
	}
}

// TestReferenceCases runs the normalize cases another project's tests hold
// (larksuite/node-sdk, in the corpus) through normalize, as a conformance
// table: every case makes a valid file, and what the case expects of ids,
// chat type, sender, @all, mentions and thread fields holds in Courier's
// terms. Its text and resource shapes are that library's, not compared.
func TestReferenceCases(t *testing.T) {
	path := filepath.Join(testutil.CorpusDir(t), "chat", "lark", "normalizer-reference-cases", "normalize.cases.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Test  string `json:"test"`
			Calls []struct {
				Function string            `json:"function"`
				Args     []json.RawMessage `json:"args"`
			} `json:"calls"`
			Expectations []struct {
				Actual struct {
					Ref string `json:"$ref"`
				} `json:"actual"`
				Matcher  string `json:"matcher"`
				Expected []any  `json:"expected"`
			} `json:"expectations"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	checked := 0
	for _, c := range file.Cases {
		if len(c.Calls) != 1 || c.Calls[0].Function != "normalize" || len(c.Calls[0].Args) == 0 {
			continue
		}
		ev := event{Event: c.Calls[0].Args[0]}
		ev.Header.EventType = "im.message.receive_v1"
		out, err := a.normalize(context.Background(), ev)
		if err != nil || out == nil || out.Message == nil {
			t.Errorf("%s: %v, %v", c.Test, out, err)
			continue
		}
		m := out.Message
		testutil.CheckMessage(t, c.Test, m)
		hasAll := false
		for _, x := range m.Participants.Mentions {
			hasAll = hasAll || x.Type == schema.MentionAll
		}
		for _, e := range c.Expectations {
			_, field, _ := strings.Cut(e.Actual.Ref, ".")
			if e.Matcher != "toBe" || len(e.Expected) != 1 {
				continue
			}
			want := fmt.Sprint(e.Expected[0])
			var got string
			switch field {
			case "messageId", "rootId", "replyToMessageId":
				got = map[string]string{"messageId": m.ID, "rootId": string(m.ThreadRoot), "replyToMessageId": string(m.ReplyTo)}[field]
				want = "lark_" + want
			case "chatId":
				got = m.Session.ID
			case "chatType":
				got, want = string(m.Session.Type), map[string]string{"group": "group", "p2p": "direct"}[want]
			case "senderId":
				got = m.Participants.From.ID
			case "mentionAll":
				got = fmt.Sprint(hasAll)
			case "mentions.0.openId":
				if len(m.Participants.Mentions) > 0 {
					got = m.Participants.Mentions[0].Target
				}
			case "threadId":
				got = string(m.Session.ThreadKey)
			default:
				continue // that library's shapes (content, resources, raw, ...)
			}
			checked++
			if got != want {
				t.Errorf("%s: %s = %q, want %q", c.Test, field, got, want)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d expectations checked: the cases' shape changed?", checked)
	}
}
