package lark

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// whWorld is a webhook-mode provider against a fake Lark (names,
// resources, tokens), writing through the real ingest pipeline.
type whWorld struct {
	fake  *larkfake.Server
	ws    *wstest.Workspace
	a     *Adapter
	r     *receiver
	wh    *webhook
	sink  *whSink
	h     http.Handler
	clock *testutil.Clock
	log   *whLog
	token string // verification_token, "" for none
	key   string // encrypt_key, "" for none
}

var whImage = []byte("\x89PNG\r\n\x1a\nthe webhook's picture")

// whNew makes a world whose app has the given verification_token and
// encrypt_key (either may be empty).
func whNew(t *testing.T, token, key string) *whWorld {
	t.Helper()
	fake := larkfake.New(t, larkfake.Options{AppSecret: "whAppSecret-" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	fake.AddUser(larkfake.User{OpenID: "ou_ann", Name: "Ann Lee"})
	fake.AddChat(larkfake.Chat{ChatID: "oc_wh", Name: "Webhooks"})
	ws := wstest.New(t, nil)
	lg := &whLog{}
	o := fake.Options()
	cfg := Config{Enabled: true, Mode: "webhook", AppID: o.AppID, AppSecret: confkit.Secret(o.AppSecret), Domain: fake.URL(),
		VerificationToken: confkit.Secret(token), EncryptKey: confkit.Secret(key)}
	a, err := newAdapter(cfg, confkit.Limits{MaxArtifactBytes: 1 << 20}, ws.DZ, nil, slog.New(slog.NewTextHandler(lg, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver(a)
	wh := newWebhook(r).(*webhook)
	clock := &testutil.Clock{T: time.Now()}
	wh.now = clock.Now
	sink := &whSink{Sink: ws.Pipe}
	return &whWorld{fake: fake, ws: ws, a: a, r: r, wh: wh, sink: sink, h: wh.Handler(sink), clock: clock, log: lg, token: token, key: key}
}

// whLog is a log the test reads.
type whLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *whLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *whLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// whSink is the pipeline, with failures and a hold on demand, counting
// the messages it was given.
type whSink struct {
	adapters.Sink
	mu       sync.Mutex
	fail     error         // returned by Deliver while set
	failOnce error         // returned by the next Deliver only
	hold     chan struct{} // Deliver waits for it to close (or ctx) while set
	entered  chan struct{} // gets a value as a held Deliver starts
	messages []string
}

func (s *whSink) Deliver(ctx context.Context, evs ...adapters.Event) error {
	s.mu.Lock()
	fail, hold, entered := s.fail, s.hold, s.entered
	if s.failOnce != nil {
		fail, s.failOnce = s.failOnce, nil
	}
	s.mu.Unlock()
	if hold != nil {
		if entered != nil {
			entered <- struct{}{}
		}
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail
	}
	if err := s.Sink.Deliver(ctx, evs...); err != nil {
		return err
	}
	s.mu.Lock()
	for _, ev := range evs {
		if ev.Message != nil {
			s.messages = append(s.messages, ev.Message.ID)
		}
	}
	s.mu.Unlock()
	return nil
}

func (s *whSink) delivered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.messages...)
}

// files returns the Lark files of the mailbox by message id, each checked
// against the protocol's schema.
func (w *whWorld) files(t *testing.T) map[string]*schema.Message {
	t.Helper()
	dir := w.ws.MB.Dir(mailbox.BoxInbound, schema.Lark)
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
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
		if _, dup := out[m.ID]; dup {
			t.Errorf("two files for %s", m.ID)
		}
		out[m.ID] = m
	}
	return out
}

func (w *whWorld) ids(t *testing.T) []string {
	t.Helper()
	var out []string
	for id := range w.files(t) {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// whMsg is a text message event (im.message.receive_v1, schema 2.0) from
// Ann in oc_wh, carrying token.
func whMsg(token, messageID, text string) []byte {
	return whMsgAt(token, messageID, text, 1700000000000)
}

// whMsgAt is whMsg created at ms (Lark's create_time).
func whMsgAt(token, messageID, text string, ms int64) []byte {
	c, _ := json.Marshal(map[string]string{"text": text})
	return whEnvelope(token, "ev_"+messageID, "im.message.receive_v1", map[string]any{
		"message": map[string]any{"message_id": messageID, "chat_id": "oc_wh", "chat_type": "group", "message_type": "text",
			"content": string(c), "create_time": strconv.FormatInt(ms, 10)},
		"sender": map[string]any{"sender_id": map[string]string{"open_id": "ou_ann"}, "sender_type": "user"},
	})
}

// whEnvelope is a schema 2.0 event; a token of "-" leaves the header
// without one.
func whEnvelope(token, eventID, eventType string, inner any) []byte {
	h := map[string]any{"event_id": eventID, "event_type": eventType, "create_time": "1700000000001", "tenant_key": "tenant_fake", "app_id": "cli_other"}
	if token != "-" {
		h["token"] = token
	}
	b, err := json.Marshal(map[string]any{"schema": "2.0", "header": h, "event": inner})
	if err != nil {
		panic(err)
	}
	return b
}

// whChallenge is a url_verification body.
func whChallenge(token, challenge string) []byte {
	b, _ := json.Marshal(map[string]string{"challenge": challenge, "token": token, "type": "url_verification"})
	return b
}

// whPKCS7 pads b as Lark does.
func whPKCS7(b []byte) []byte {
	n := aes.BlockSize - len(b)%aes.BlockSize
	return append(append([]byte(nil), b...), bytes.Repeat([]byte{byte(n)}, n)...)
}

// whBadPad pads b to whole blocks with padding whose last byte is right
// and whose others are not (b, less the padding the last byte names, is
// still b: only a full check refuses it).
func whBadPad(b []byte) []byte {
	b = append([]byte(nil), b...)
	for aes.BlockSize-len(b)%aes.BlockSize < 2 {
		b = append(b, ' ')
	}
	n := aes.BlockSize - len(b)%aes.BlockSize
	pad := bytes.Repeat([]byte{byte(n)}, n)
	pad[0] = byte(n - 1)
	return append(b, pad...)
}

// whCBC encrypts the already padded data with key and iv (random when
// nil): the bytes of an "encrypt" before base64.
func whCBC(key string, iv, data []byte) []byte {
	k := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err)
	}
	if iv == nil {
		iv = make([]byte, aes.BlockSize)
		_, _ = rand.Read(iv)
	}
	out := append([]byte(nil), iv[:aes.BlockSize]...)
	ct := make([]byte, len(data))
	cipher.NewCBCEncrypter(block, iv[:aes.BlockSize]).CryptBlocks(ct, data)
	return append(out, ct...)
}

// whSeal is the body Lark sends for plain under key: {"encrypt": ...}.
func whSeal(key string, plain []byte) []byte {
	return whWrap(whCBC(key, nil, whPKCS7(plain)))
}

// whWrap puts raw encrypted bytes into a body.
func whWrap(enc []byte) []byte {
	b, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(enc)})
	return b
}

// whSign returns Lark's signature headers for body at ts under key.
func whSign(key string, ts time.Time, body []byte) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	nonce := fmt.Sprintf("n%d", ts.UnixNano()%100000)
	sum := sha256.Sum256([]byte(stamp + nonce + key + string(body)))
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set(headerTimestamp, stamp)
	h.Set(headerNonce, nonce)
	h.Set(headerSignature, hex.EncodeToString(sum[:]))
	return h
}

// whJSON is the headers of an unsigned request.
func whJSON() http.Header {
	return http.Header{"Content-Type": {"application/json; charset=utf-8"}}
}

// post sends body to the handler and returns the status and response.
func (w *whWorld) post(t *testing.T, method string, hdr http.Header, body []byte) (int, string) {
	t.Helper()
	return whDo(w.h, method, hdr, body)
}

func whDo(h http.Handler, method string, hdr http.Header, body []byte) (int, string) {
	req := httptest.NewRequest(method, "/webhook/lark", bytes.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// sealed is body encrypted and signed as Lark sends it now.
func (w *whWorld) sealed(body []byte) (http.Header, []byte) {
	b := whSeal(w.key, body)
	return whSign(w.key, w.clock.Now(), b), b
}

// secrets are every value the world must never show.
func (w *whWorld) secrets() []string {
	s := []string{w.fake.Options().AppSecret}
	if w.token != "" {
		s = append(s, w.token)
	}
	if w.key != "" {
		s = append(s, w.key)
	}
	w.a.tok.mu.Lock()
	if w.a.tok.token != "" {
		s = append(s, w.a.tok.token)
	}
	w.a.tok.mu.Unlock()
	return s
}

// noSecrets fails when a secret shows in s.
func (w *whWorld) noSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range w.secrets() {
		if strings.Contains(s, sec) {
			t.Errorf("%s shows a secret (%.6s…)", what, sec)
		}
	}
}

func whChallengeOf(t *testing.T, resp string) string {
	t.Helper()
	var got struct {
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal([]byte(resp), &got); err != nil {
		t.Errorf("response %q is not JSON: %v", resp, err)
	}
	return got.Challenge
}

// url_verification, plain and encrypted, is answered only with the
// verification token; nothing is written.
func TestWebhookChallenge(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		w := whNew(t, "whTokPlain", "")
		code, resp := w.post(t, http.MethodPost, whJSON(), whChallenge("whTokPlain", "c0ffee-1b6a-401f"))
		if code != http.StatusOK || whChallengeOf(t, resp) != "c0ffee-1b6a-401f" {
			t.Errorf("challenge: %d %q", code, resp)
		}
		for name, b := range map[string][]byte{
			"wrong token": whChallenge("whTokOther", "c0ffee-1b6a-401f"),
			"no token":    []byte(`{"challenge":"c0ffee-1b6a-401f","type":"url_verification"}`),
		} {
			if code, resp := w.post(t, http.MethodPost, whJSON(), b); code != http.StatusUnauthorized || strings.Contains(resp, "c0ffee") {
				t.Errorf("%s: %d %q, want 401 without the challenge", name, code, resp)
			}
		}
		if code, resp := w.post(t, http.MethodPost, whJSON(), whChallenge("whTokPlain", "<script>x</script>")); code != http.StatusBadRequest || strings.Contains(resp, "script") {
			t.Errorf("a challenge not of Lark's shape: %d %q, want 400 without it", code, resp)
		}
		if ids := w.ids(t); len(ids) != 0 {
			t.Errorf("files written: %v", ids)
		}
	})
	t.Run("encrypted", func(t *testing.T) {
		w := whNew(t, "whTokEnc", "whKeyEnc")
		// Lark does not sign url_verification: the key and the token are
		// its proof.
		code, resp := w.post(t, http.MethodPost, whJSON(), whSeal(w.key, whChallenge(w.token, "enc-challenge-1")))
		if code != http.StatusOK || whChallengeOf(t, resp) != "enc-challenge-1" {
			t.Errorf("encrypted challenge: %d %q", code, resp)
		}
		hdr, b := w.sealed(whChallenge(w.token, "enc-challenge-2"))
		if code, resp := w.post(t, http.MethodPost, hdr, b); code != http.StatusOK || whChallengeOf(t, resp) != "enc-challenge-2" {
			t.Errorf("signed encrypted challenge: %d %q", code, resp)
		}
		for name, c := range map[string]struct {
			hdr  http.Header
			body []byte
			want int
		}{
			"wrong token":         {whJSON(), whSeal(w.key, whChallenge("whTokOther", "enc-x")), http.StatusUnauthorized},
			"plaintext":           {whJSON(), whChallenge(w.token, "enc-x"), http.StatusUnauthorized},
			"other key":           {whJSON(), whSeal("whKeyOther", whChallenge(w.token, "enc-x")), http.StatusBadRequest},
			"signed with another": {whSign("whKeyOther", w.clock.Now(), b), b, http.StatusUnauthorized},
			"signature 6 min old": {whSign(w.key, w.clock.Now().Add(-6*time.Minute), b), b, http.StatusUnauthorized},
		} {
			if code, resp := w.post(t, http.MethodPost, c.hdr, c.body); code != c.want || strings.Contains(resp, "enc-") {
				t.Errorf("%s: %d %q, want %d without the challenge", name, code, resp, c.want)
			}
		}
		if ids := w.ids(t); len(ids) != 0 {
			t.Errorf("files written: %v", ids)
		}
	})
	t.Run("key only", func(t *testing.T) {
		w := whNew(t, "", "whKeyOnly")
		if code, resp := w.post(t, http.MethodPost, whJSON(), whSeal(w.key, whChallenge("", "k-only"))); code != http.StatusOK || whChallengeOf(t, resp) != "k-only" {
			t.Errorf("challenge with a key and no token configured: %d %q", code, resp)
		}
	})
	t.Run("nothing configured", func(t *testing.T) {
		w := whNew(t, "", "")
		if code, _ := w.post(t, http.MethodPost, whJSON(), whChallenge("", "none")); code != http.StatusUnauthorized {
			t.Errorf("no token and no key: %d, want 401 (nothing unverified accepted)", code)
		}
	})
}

// New in webhook mode mounts this handler: the provider answers a
// challenge with its token and refuses one without.
func TestWebhookFromNew(t *testing.T) {
	p, err := New(Options{Config: Config{Enabled: true, Mode: "webhook", AppID: "cli_wh_new", AppSecret: "whAppSecretNew",
		Domain: "http://127.0.0.1:1", VerificationToken: "whTokNew", EncryptKey: "whKeyNew"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Webhook == nil {
		t.Fatal("webhook mode without a Webhook")
	}
	h := p.Webhook.Handler(&whNullSink{})
	if code, resp := whDo(h, http.MethodPost, whJSON(), whSeal("whKeyNew", whChallenge("whTokNew", "from-new"))); code != http.StatusOK || whChallengeOf(t, resp) != "from-new" {
		t.Errorf("challenge: %d %q", code, resp)
	}
	if code, _ := whDo(h, http.MethodPost, whJSON(), whSeal("whKeyNew", whChallenge("whTokOther", "from-new"))); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
}

// A signed, encrypted message event is written through the pipeline,
// with its sender's and chat's names and its image fetched from Lark.
func TestWebhookSignedEventWritten(t *testing.T) {
	w := whNew(t, "whTokOK", "whKeyOK")
	hdr, body := w.sealed(whMsg(w.token, "om_wh_text", "hello from the webhook"))
	code, resp := w.post(t, http.MethodPost, hdr, body)
	if code != http.StatusOK || resp != `{"msg":"success"}` {
		t.Fatalf("signed event: %d %q", code, resp)
	}
	m := w.files(t)["lark_om_wh_text"]
	if m == nil {
		t.Fatalf("no file for om_wh_text; files %v", w.ids(t))
	}
	if got := string(m.Content.Text); !strings.Contains(got, "hello from the webhook") {
		t.Errorf("text %q", got)
	}
	if m.Participants.From.Name != "Ann Lee" || m.Session.Name != "Webhooks" || m.Session.ID != "oc_wh" {
		t.Errorf("from %+v, session %+v: want Ann Lee in Webhooks (oc_wh)", m.Participants.From, m.Session)
	}

	w.fake.AddResource("om_wh_image", "img_wh_1", whImage, "image", "")
	c, _ := json.Marshal(map[string]string{"image_key": "img_wh_1"})
	img := whEnvelope(w.token, "ev_wh_image", "im.message.receive_v1", map[string]any{
		"message": map[string]any{"message_id": "om_wh_image", "chat_id": "oc_wh", "chat_type": "group", "message_type": "image",
			"content": string(c), "create_time": "1700000001000"},
		"sender": map[string]any{"sender_id": map[string]string{"open_id": "ou_ann"}, "sender_type": "user"},
	})
	hdr, body = w.sealed(img)
	if code, resp := w.post(t, http.MethodPost, hdr, body); code != http.StatusOK {
		t.Fatalf("image event: %d %q", code, resp)
	}
	m = w.files(t)["lark_om_wh_image"]
	if m == nil || len(m.Artifacts) != 1 {
		t.Fatalf("image message: %+v, want one artifact", m)
	}
	f, err := w.ws.DZ.Open(m.Artifacts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := io.ReadAll(f); !bytes.Equal(got, whImage) {
		t.Errorf("the stored image is %q, want Lark's bytes", got)
	}
	if len(w.files(t)) != 2 {
		t.Errorf("files %v, want the two messages", w.ids(t))
	}
}

// Every bad request gets its status and writes nothing; the responses
// never quote the request or a secret. The same world then accepts the
// good request, so "nothing written" is not for want of a pipeline.
func TestWebhookRefused(t *testing.T) {
	w := whNew(t, "whTokBad", "whKeyBad")
	now := w.clock.Now()
	event := whMsg(w.token, "om_wh_refused", "forged words")
	sealed := whSeal(w.key, event)
	good := whSign(w.key, now, sealed)
	raw := func(b []byte) []byte { // the decoded encrypt of a sealed body
		var e struct{ Encrypt string }
		_ = json.Unmarshal(b, &e)
		d, _ := base64.StdEncoding.DecodeString(e.Encrypt)
		return d
	}
	signed := func(b []byte) (http.Header, []byte) { return whSign(w.key, now, b), b }
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	big := append([]byte(`{"encrypt":"`), bytes.Repeat([]byte("A"), webhookMaxBody)...)
	big = append(big, `"}`...)
	zeroPadded := append(append([]byte(nil), event...), make([]byte, aes.BlockSize-len(event)%aes.BlockSize)...)
	schema1, _ := json.Marshal(map[string]any{"uuid": "u1", "token": "whTokOther", "ts": "1700000000.1", "type": "event_callback",
		"event": map[string]any{"type": "message", "text": "forged words"}})

	type tc struct {
		name   string
		method string
		hdr    http.Header
		body   []byte
		want   int
		says   string // in the response, when set
	}
	cases := []tc{
		{name: "GET", method: http.MethodGet, hdr: good, body: sealed, want: http.StatusMethodNotAllowed},
		{name: "over 1 MiB", hdr: whSign(w.key, now, big), body: big, want: http.StatusRequestEntityTooLarge},
		{name: "not JSON type", hdr: with(good, "Content-Type", "text/plain"), body: sealed, want: http.StatusUnsupportedMediaType},
		{name: "not JSON", hdr: whSign(w.key, now, []byte("encrypt=x")), body: []byte("encrypt=x"), want: http.StatusBadRequest},
		{name: "plaintext while a key is set", hdr: whSign(w.key, now, event), body: event, want: http.StatusUnauthorized, says: "plaintext"},
		{name: "no signature", hdr: whJSON(), body: sealed, want: http.StatusUnauthorized, says: "not signed"},
		{name: "signature of another body", hdr: whSign(w.key, now, whSeal(w.key, event)), body: sealed, want: http.StatusUnauthorized},
		{name: "signed with another key", hdr: whSign("whKeyOther", now, sealed), body: sealed, want: http.StatusUnauthorized},
		{name: "body changed after signing", hdr: good, body: bytes.Replace(sealed, []byte(`"}`), []byte(`" }`), 1), want: http.StatusUnauthorized},
		{name: "signature not hex", hdr: with(good, headerSignature, "zz"+good.Get(headerSignature)[2:]), body: sealed, want: http.StatusUnauthorized},
		{name: "no timestamp", hdr: with(good, headerTimestamp, ""), body: sealed, want: http.StatusUnauthorized},
		{name: "timestamp changed", hdr: with(good, headerTimestamp, strconv.FormatInt(now.Unix()+1, 10)), body: sealed, want: http.StatusUnauthorized},
		{name: "6 min old", hdr: whSign(w.key, now.Add(-6*time.Minute), sealed), body: sealed, want: http.StatusUnauthorized, says: "5 minutes"},
		{name: "6 min ahead", hdr: whSign(w.key, now.Add(6*time.Minute), sealed), body: sealed, want: http.StatusUnauthorized, says: "5 minutes"},
		{name: "timestamp not a number", hdr: func() http.Header {
			h := whJSON()
			sum := sha256.Sum256([]byte("soon" + "n1" + w.key + string(sealed)))
			h.Set(headerTimestamp, "soon")
			h.Set(headerNonce, "n1")
			h.Set(headerSignature, hex.EncodeToString(sum[:]))
			return h
		}(), body: sealed, want: http.StatusUnauthorized},
	}
	// Signed requests whose content is wrong.
	for _, c := range []struct {
		name string
		body []byte
		want int
		says string
	}{
		{"wrong token on an event", whSeal(w.key, whMsg("whTokOther", "om_wh_refused", "forged words")), http.StatusUnauthorized, "token"},
		{"no token on an event", whSeal(w.key, whMsg("-", "om_wh_refused", "forged words")), http.StatusUnauthorized, "token"},
		{"token at the top of a 2.0 event", whSeal(w.key, bytes.Replace(whMsg("-", "om_wh_refused", "forged words"), []byte(`{"event"`), []byte(`{"token":"whTokBad","event"`), 1)), http.StatusUnauthorized, "token"},
		{"schema 1.0, wrong token", whSeal(w.key, schema1), http.StatusUnauthorized, "token"},
		{"wrong token on a challenge", whSeal(w.key, whChallenge("whTokOther", "bad-c")), http.StatusUnauthorized, "token"},
		{"bad padding", whWrap(whCBC(w.key, nil, zeroPadded)), http.StatusBadRequest, "padding"},
		{"padding bytes that disagree", whWrap(whCBC(w.key, nil, whBadPad(event))), http.StatusBadRequest, "padding"},
		{"wrong key", whSeal("whKeyOther", event), http.StatusBadRequest, "another key"},
		{"truncated ciphertext", whWrap(raw(sealed)[:len(raw(sealed))-5]), http.StatusBadRequest, "whole AES blocks"},
		{"IV only", whWrap(raw(sealed)[:aes.BlockSize]), http.StatusBadRequest, "too short"},
		{"not base64", []byte(`{"encrypt":"not*base64"}`), http.StatusBadRequest, "base64"},
		{"encrypt not a string", []byte(`{"encrypt":12}`), http.StatusBadRequest, ""},
		{"decrypts to words", whSeal(w.key, []byte("hello world")), http.StatusBadRequest, "not JSON"},
	} {
		h, b := signed(c.body)
		cases = append(cases, tc{name: c.name, hdr: h, body: b, want: c.want, says: c.says})
	}
	for _, c := range cases {
		method := c.method
		if method == "" {
			method = http.MethodPost
		}
		code, resp := w.post(t, method, c.hdr, c.body)
		if code != c.want {
			t.Errorf("%s: status %d %q, want %d", c.name, code, resp, c.want)
		}
		if !strings.HasPrefix(resp, "lark: ") || !strings.Contains(resp, c.says) {
			t.Errorf("%s: response %q, want a reason starting lark: and saying %q", c.name, resp, c.says)
		}
		if strings.Contains(resp, "forged") || strings.Contains(resp, "om_wh_refused") || strings.Contains(resp, "bad-c") {
			t.Errorf("%s: the response quotes the request: %q", c.name, resp)
		}
		w.noSecrets(t, c.name+": the response", resp)
		if ids := w.ids(t); len(ids) != 0 {
			t.Fatalf("%s: files written: %v", c.name, ids)
		}
	}
	if d := w.sink.delivered(); len(d) != 0 {
		t.Errorf("refused requests reached the Sink: %v", d)
	}
	// Within the window both ways (4 min off) is accepted, and so is
	// the good request.
	for i, off := range []time.Duration{-4 * time.Minute, 4 * time.Minute} {
		b := whSeal(w.key, whMsg(w.token, fmt.Sprintf("om_wh_skew%d", i), "in time"))
		if code, resp := w.post(t, http.MethodPost, whSign(w.key, now.Add(off), b), b); code != http.StatusOK {
			t.Errorf("timestamp %v off: %d %q, want 200", off, code, resp)
		}
	}
	if code, resp := w.post(t, http.MethodPost, good, sealed); code != http.StatusOK {
		t.Fatalf("the good request: %d %q", code, resp)
	}
	if ids := w.ids(t); strings.Join(ids, " ") != "lark_om_wh_refused lark_om_wh_skew0 lark_om_wh_skew1" {
		t.Errorf("files %v, want the three good ones", ids)
	}
	w.noSecrets(t, "the log", w.log.String())
}

// An unsigned body that does not decrypt gets one answer whatever the
// reason: an endpoint telling bad padding from bad JSON would be a
// padding oracle for any captured ciphertext.
func TestWebhookNoPaddingOracle(t *testing.T) {
	w := whNew(t, "whTokOracle", "whKeyOracle")
	event := whMsg(w.token, "om_wh_oracle", "secret words")
	zeroPadded := append(append([]byte(nil), event...), make([]byte, aes.BlockSize-len(event)%aes.BlockSize)...)
	var answers []string
	for _, b := range [][]byte{
		whWrap(whCBC(w.key, nil, zeroPadded)),       // bad padding
		whSeal(w.key, []byte("not json at all")),    // good padding, not JSON
		whSeal("whKeyOther", event),                 // another key
		whWrap(whCBC(w.key, nil, make([]byte, 32))), // padding byte 0
	} {
		code, resp := w.post(t, http.MethodPost, whJSON(), b)
		if code != http.StatusBadRequest {
			t.Errorf("unsigned undecryptable body: %d, want 400", code)
		}
		answers = append(answers, resp)
	}
	for _, a := range answers[1:] {
		if a != answers[0] {
			t.Errorf("unsigned bodies that do not decrypt are told apart: %q vs %q", answers[0], a)
		}
	}
}

// With a verification token and no encrypt key, events come in plain and
// the token on each is what is checked.
func TestWebhookTokenOnly(t *testing.T) {
	w := whNew(t, "whTokOnly", "")
	if code, resp := w.post(t, http.MethodPost, whJSON(), whMsg(w.token, "om_wh_plain", "plain hello")); code != http.StatusOK {
		t.Fatalf("plain event with its token: %d %q", code, resp)
	}
	schema1 := func(token string) []byte {
		b, _ := json.Marshal(map[string]any{"uuid": "u1", "token": token, "ts": "1700000000.1", "type": "event_callback",
			"event": map[string]any{"type": "message", "text": "v1 words"}})
		return b
	}
	for _, c := range []struct {
		name string
		body []byte
		want int
	}{
		{"wrong token", whMsg("whTokOther", "om_wh_plain2", "x"), http.StatusUnauthorized},
		{"no token", whMsg("-", "om_wh_plain2", "x"), http.StatusUnauthorized},
		{"schema 1.0, wrong token", schema1("whTokOther"), http.StatusUnauthorized},
		{"an event body alone (no token)", []byte(`{"message":{"message_id":"om_wh_plain2","chat_id":"oc_wh","message_type":"text","content":"{\"text\":\"x\"}"}}`), http.StatusUnauthorized},
		{"encrypted, no key configured", whSeal("whKeyAny", whMsg(w.token, "om_wh_plain2", "x")), http.StatusBadRequest},
		{"schema 1.0 with its token (not a message)", schema1(w.token), http.StatusOK},
	} {
		code, resp := w.post(t, http.MethodPost, whJSON(), c.body)
		if code != c.want {
			t.Errorf("%s: %d %q, want %d", c.name, code, resp, c.want)
		}
		w.noSecrets(t, c.name, resp)
	}
	if ids := w.ids(t); len(ids) != 1 || ids[0] != "lark_om_wh_plain" {
		t.Errorf("files %v, want the one good message", ids)
	}
}

// Events that are not messages (and the app's own) are acknowledged and
// write nothing.
func TestWebhookNotAMessage(t *testing.T) {
	w := whNew(t, "whTokNone", "whKeyNone")
	own := whEnvelope(w.token, "ev_wh_own", "im.message.receive_v1", map[string]any{
		"message": map[string]any{"message_id": "om_wh_own", "chat_id": "oc_wh", "chat_type": "group", "message_type": "text",
			"content": `{"text":"mine"}`, "create_time": "1700000000000"},
		"sender": map[string]any{"sender_id": map[string]string{"open_id": w.a.cfg.AppID}, "sender_type": "app"},
	})
	for name, b := range map[string][]byte{
		"bot added": whEnvelope(w.token, "ev_wh_added", "im.chat.member.bot.added_v1", map[string]any{"chat_id": "oc_wh"}),
		"reaction":  whEnvelope(w.token, "ev_wh_react", "im.message.reaction.created_v1", map[string]any{"message_id": "om_x"}),
		"own":       own,
	} {
		hdr, body := w.sealed(b)
		if code, resp := w.post(t, http.MethodPost, hdr, body); code != http.StatusOK {
			t.Errorf("%s: %d %q, want 200", name, code, resp)
		}
	}
	if ids := w.ids(t); len(ids) != 0 {
		t.Errorf("files %v, want none", ids)
	}
}

// A redelivery of a message (Lark's, with the same message_id) writes it
// once: one that arrives while the first try is storing waits for it,
// one that arrives after is answered from the dedupe.
func TestWebhookRedelivery(t *testing.T) {
	w := whNew(t, "whTokRe", "whKeyRe")
	w.wh.hook.Budget = time.Minute // the held first try must not time out
	hold := make(chan struct{})
	w.sink.mu.Lock()
	w.sink.hold, w.sink.entered = hold, make(chan struct{}, 4)
	w.sink.mu.Unlock()

	first := whMsg(w.token, "om_wh_again", "once only")
	// Lark's redelivery: the same message, a new request (and here a new
	// event id too: the message_id is what is deduped).
	again := bytes.Replace(first, []byte(`"ev_om_wh_again"`), []byte(`"ev_om_wh_again_2"`), 1)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	hdr1, b1 := w.sealed(first)
	wg.Go(func() { codes[0], _ = whDo(w.h, http.MethodPost, hdr1, b1) })
	<-w.sink.entered // the first try is storing
	hdr2, b2 := w.sealed(again)
	wg.Go(func() { codes[1], _ = whDo(w.h, http.MethodPost, hdr2, b2) })
	testutil.WaitFor(t, 5*time.Second, "the redelivery to wait on the first try", func() bool {
		return w.wh.flights.Waiters("m:om_wh_again") == 1
	})
	close(hold)
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Errorf("statuses %v, want 200 200", codes)
	}
	select {
	case <-w.sink.entered:
		t.Error("the redelivery in flight reached the Sink too")
	default:
	}
	// A later redelivery: 200 from the dedupe, nothing delivered.
	hdr3, b3 := w.sealed(again)
	if code, resp := w.post(t, http.MethodPost, hdr3, b3); code != http.StatusOK {
		t.Errorf("later redelivery: %d %q", code, resp)
	}
	if d := w.sink.delivered(); len(d) != 1 {
		t.Errorf("deliveries %v, want one", d)
	}
	if ids := w.ids(t); len(ids) != 1 || ids[0] != "lark_om_wh_again" {
		t.Errorf("files %v, want the one message", ids)
	}
	if n := w.wh.flights.Len(); n != 0 {
		t.Errorf("%d flights left after the requests ended", n)
	}
}

// A redelivery waiting on a first try that fails does not take its
// failure for its own: it tries itself, and stores the message once.
func TestWebhookRedeliveryAfterFailedTry(t *testing.T) {
	w := whNew(t, "whTokRe2", "whKeyRe2")
	w.wh.hook.Budget = time.Minute
	hold := make(chan struct{})
	w.sink.mu.Lock()
	w.sink.hold, w.sink.entered, w.sink.failOnce = hold, make(chan struct{}, 4), fmt.Errorf("ingest: disk full")
	w.sink.mu.Unlock()
	msg := whMsg(w.token, "om_wh_retry", "second time lucky")
	var wg sync.WaitGroup
	codes := make([]int, 2)
	hdr1, b1 := w.sealed(msg)
	wg.Go(func() { codes[0], _ = whDo(w.h, http.MethodPost, hdr1, b1) })
	<-w.sink.entered
	hdr2, b2 := w.sealed(msg)
	wg.Go(func() { codes[1], _ = whDo(w.h, http.MethodPost, hdr2, b2) })
	testutil.WaitFor(t, 5*time.Second, "the redelivery to wait on the first try", func() bool {
		return w.wh.flights.Waiters("m:om_wh_retry") == 1
	})
	close(hold)
	wg.Wait()
	if codes[0] != http.StatusInternalServerError || codes[1] != http.StatusOK {
		t.Errorf("statuses %v, want 500 for the failed try and 200 for the redelivery", codes)
	}
	if d := w.sink.delivered(); len(d) != 1 {
		t.Errorf("deliveries %v, want one", d)
	}
	if ids := w.ids(t); len(ids) != 1 || ids[0] != "lark_om_wh_retry" {
		t.Errorf("files %v, want the message once", ids)
	}
}

// An event the Sink fails to store is answered 500 (Lark retries) and
// one that outlasts the budget 503; each writes nothing, says so on
// health, signals the catch-up, and the retry writes it once.
func TestWebhookNotStored(t *testing.T) {
	w := whNew(t, "whTokFail", "whKeyFail")
	w.sink.mu.Lock()
	w.sink.fail = fmt.Errorf("ingest: disk full")
	w.sink.mu.Unlock()
	hdr, body := w.sealed(whMsg(w.token, "om_wh_fail", "after a failure"))
	code, resp := w.post(t, http.MethodPost, hdr, body)
	if code != http.StatusInternalServerError || strings.Contains(resp, "disk full") {
		t.Fatalf("Sink error: %d %q, want 500 without the cause", code, resp)
	}
	if ids := w.ids(t); len(ids) != 0 {
		t.Fatalf("files after a 500: %v", ids)
	}
	// CatchUp.Failed marks a gap as it asks for a pass: nothing else
	// here does.
	if g := w.r.track.Gaps(); g != 1 {
		t.Errorf("%d gaps: a failure did not signal the catch-up (CatchUp.Failed)", g)
	}
	if h := w.a.health.Health(); h.Status != adapters.StatusError || !strings.Contains(h.LastError, "disk full") {
		t.Errorf("health %+v, want the error", h)
	}
	w.sink.mu.Lock()
	w.sink.fail = nil
	w.sink.mu.Unlock()
	hdr, body = w.sealed(whMsg(w.token, "om_wh_fail", "after a failure"))
	if code, resp := w.post(t, http.MethodPost, hdr, body); code != http.StatusOK {
		t.Fatalf("retry: %d %q", code, resp)
	}

	// Held past the budget: 503, and the signal again (the channel holds
	// one value, and a second failure does not block on it).
	w.wh.hook.Budget = 20 * time.Millisecond
	hold := make(chan struct{})
	w.sink.mu.Lock()
	w.sink.hold = hold
	w.sink.mu.Unlock()
	w.r.catchUp.Failed() // a pass asked for already: the failure must not block
	hdr, body = w.sealed(whMsg(w.token, "om_wh_slow", "slow disk"))
	if code, resp := w.post(t, http.MethodPost, hdr, body); code != http.StatusServiceUnavailable {
		t.Fatalf("held past the budget: %d %q, want 503", code, resp)
	}
	if g := w.r.track.Gaps(); g != 3 {
		t.Errorf("%d gaps, want 3: the failure past the budget did not signal the catch-up", g)
	}
	if ids := w.ids(t); len(ids) != 1 {
		t.Fatalf("files after a 503: %v, want only the first message", ids)
	}
	close(hold)
	w.sink.mu.Lock()
	w.sink.hold = nil
	w.sink.mu.Unlock()
	w.wh.hook.Budget = webhookBudget
	for range 2 {
		hdr, body = w.sealed(whMsg(w.token, "om_wh_slow", "slow disk"))
		if code, resp := w.post(t, http.MethodPost, hdr, body); code != http.StatusOK {
			t.Fatalf("retry after 503: %d %q", code, resp)
		}
	}
	if ids := w.ids(t); strings.Join(ids, " ") != "lark_om_wh_fail lark_om_wh_slow" {
		t.Errorf("files %v, want each message once", ids)
	}
	if d := w.sink.delivered(); len(d) != 2 {
		t.Errorf("deliveries %v, want one per message", d)
	}
	w.noSecrets(t, "the log", w.log.String())
}

// A failure to store marks a gap: a later event of the chat, stored, does
// not move the chat's checkpoint past the one that failed, which the
// catch-up would then never read again.
func TestWebhookFailureHoldsCheckpoint(t *testing.T) {
	w := whNew(t, "whTokGap", "whKeyGap")
	ctx := context.Background()
	if err := caughtUp(ctx, w.r, w.sink, "oc_wh", 0); err != nil {
		t.Fatal(err)
	}
	checkpoint := func() string {
		t.Helper()
		v, _, err := w.ws.Pipe.Checkpoint(ctx, checkpointKey("oc_wh"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	post := func(id string, ms int64) int {
		hdr, body := w.sealed(whMsgAt(w.token, id, "words of "+id, ms))
		code, _ := w.post(t, http.MethodPost, hdr, body)
		return code
	}
	if code := post("om_wh_gap1", 1700000001000); code != http.StatusOK || checkpoint() != "1700000001000" {
		t.Fatalf("caught up: %d, checkpoint %q; want 200 and the message's create_time", code, checkpoint())
	}
	w.sink.mu.Lock()
	w.sink.fail = fmt.Errorf("ingest: disk full")
	w.sink.mu.Unlock()
	if code := post("om_wh_gap2", 1700000002000); code != http.StatusInternalServerError {
		t.Fatalf("failed store: %d", code)
	}
	w.sink.mu.Lock()
	w.sink.fail = nil
	w.sink.mu.Unlock()
	if code := post("om_wh_gap3", 1700000003000); code != http.StatusOK {
		t.Fatalf("later message: %d", code)
	}
	if got := checkpoint(); got != "1700000001000" {
		t.Errorf("checkpoint %q after a failure, want it held at 1700000001000 until the catch-up", got)
	}
	if ids := w.ids(t); strings.Join(ids, " ") != "lark_om_wh_gap1 lark_om_wh_gap3" {
		t.Errorf("files %v", ids)
	}
}

// Refused requests are logged at most once a minute, with a count of
// those not logged, and neither the log nor a response shows a secret or
// the request.
func TestWebhookRefusalLogPaced(t *testing.T) {
	w := whNew(t, "whTokLog", "whKeyLog")
	b := whSeal(w.key, whMsg("whTokOther", "om_wh_log", "log words"))
	for range 3 {
		if code, _ := w.post(t, http.MethodPost, whSign(w.key, w.clock.Now(), b), b); code != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d", code)
		}
	}
	if n := strings.Count(w.log.String(), "webhook request refused"); n != 1 {
		t.Errorf("%d log lines for 3 refusals within a minute, want 1:\n%s", n, w.log.String())
	}
	w.clock.Advance(61 * time.Second)
	if code, _ := w.post(t, http.MethodPost, whSign(w.key, w.clock.Now(), b), b); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	log := w.log.String()
	if n := strings.Count(log, "webhook request refused"); n != 2 || !strings.Contains(log, "refused_since_last_logged=2") || !strings.Contains(log, "verification token") {
		t.Errorf("after a minute: want a second line counting the 2 not logged, with the reason:\n%s", log)
	}
	if strings.Contains(log, "log words") || strings.Contains(log, "om_wh_log") {
		t.Errorf("the log quotes the request:\n%s", log)
	}
	w.noSecrets(t, "the log", log)
}

// The corpus: its challenge is answered, each encrypted body decrypts to
// its plaintext with its key (and the SDK's own is answered as the SDK
// answers it), and each event, encrypted and signed, is stored.
func TestWebhookCorpus(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "lark")
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	var ch struct{ Challenge, Token string }
	chBody := read(filepath.Join(dir, "challenge", "url_verification.redacted.nonebot.json"))
	if err := json.Unmarshal(chBody, &ch); err != nil || ch.Challenge == "" {
		t.Fatalf("corpus challenge: %v", err)
	}
	w := whNew(t, ch.Token, "")
	if code, resp := w.post(t, http.MethodPost, whJSON(), chBody); code != http.StatusOK || whChallengeOf(t, resp) != ch.Challenge {
		t.Errorf("corpus challenge: %d %q", code, resp)
	}

	var vec struct {
		Key       string `json:"encrypt_key"`
		Encrypt   string `json:"encrypt"`
		Plaintext string `json:"expected_plaintext"`
	}
	if err := json.Unmarshal(read(filepath.Join(dir, "encrypted", "doc-vector.test-key.hello-world.json")), &vec); err != nil {
		t.Fatal(err)
	}
	k := sha256.Sum256([]byte(vec.Key))
	if got, err := decryptWebhook(vec.Encrypt, &k); err != nil || string(got) != vec.Plaintext {
		t.Errorf("Lark's documented vector: %q, %v; want %q", got, err, vec.Plaintext)
	}
	other := sha256.Sum256([]byte(vec.Key + "x"))
	if got, err := decryptWebhook(vec.Encrypt, &other); err == nil {
		t.Errorf("the vector decrypts with another key, to %q", got)
	}

	// The SDK's test body (testdata: its ciphertext; the corpus: its
	// plaintext), a 2.0 event that also says url_verification: answered
	// as a challenge, with the header's token, as the SDK does.
	var sdk struct {
		Key     string `json:"encrypt_key"`
		Token   string `json:"verification_token"`
		Encrypt string `json:"encrypt"`
	}
	if err := json.Unmarshal(read(filepath.Join("testdata", "webhook", "oapi-sdk-go.encrypted.json")), &sdk); err != nil {
		t.Fatal(err)
	}
	k = sha256.Sum256([]byte(sdk.Key))
	got, err := decryptWebhook(sdk.Encrypt, &k)
	if err != nil {
		t.Fatalf("the SDK's body: %v", err)
	}
	var gotV, wantV any
	if json.Unmarshal(got, &gotV) != nil || json.Unmarshal(read(filepath.Join(dir, "encrypted", "oapi-sdk-go.decrypted-plaintext.json")), &wantV) != nil ||
		!whEqualJSON(gotV, wantV) {
		t.Errorf("the SDK's body decrypts to %s, not the corpus plaintext", got)
	}
	ws := whNew(t, sdk.Token, sdk.Key)
	body := whWrap(func() []byte { d, _ := base64.StdEncoding.DecodeString(sdk.Encrypt); return d }())
	if code, resp := ws.post(t, http.MethodPost, whSign(sdk.Key, ws.clock.Now(), body), body); code != http.StatusOK || whChallengeOf(t, resp) != "1212" {
		t.Errorf("the SDK's body: %d %q, want the challenge 1212", code, resp)
	}
	if ids := ws.ids(t); len(ids) != 0 {
		t.Errorf("the SDK's body wrote %v", ids)
	}

	// Every corpus event, encrypted and signed, to an app with a key
	// (its tokens are the corpus's own, so none is configured).
	paths, _ := filepath.Glob(filepath.Join(dir, "events", "*.json"))
	if len(paths) == 0 {
		t.Fatalf("no corpus events in %s", dir)
	}
	we := whNew(t, "", "whKeyCorpus")
	want := map[string]bool{}
	for _, p := range paths {
		ev := read(p)
		var pk struct {
			Event *peek `json:"event"`
			peek
		}
		_ = json.Unmarshal(ev, &pk)
		id := pk.Message.MessageID
		if pk.Event != nil {
			id = pk.Event.Message.MessageID
		}
		if id := threading.LarkID(id); id != "" {
			want[id] = true
		}
		hdr, body := we.sealed(ev)
		if code, resp := we.post(t, http.MethodPost, hdr, body); code != http.StatusOK {
			t.Errorf("%s: %d %q", filepath.Base(p), code, resp)
		}
	}
	files := we.files(t)
	if len(want) == 0 || len(files) != len(want) {
		t.Errorf("files %v, want one for each of %v", we.ids(t), want)
	}
	for id := range want {
		if files[id] == nil {
			t.Errorf("no file for %s (files %v)", id, we.ids(t))
		}
	}
}

func whEqualJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// FuzzWebhookDecrypt: the decrypt path never panics, accepts a ciphertext
// only when it is exactly the encryption of its plaintext with the key
// (the padding checked entirely), gives back what was encrypted with the
// key, and no body the fuzzer makes reaches the Sink unless it decrypts.
func FuzzWebhookDecrypt(f *testing.F) {
	const key = "whKeyFuzz"
	k := sha256.Sum256([]byte(key))
	f.Add(whCBC(key, make([]byte, 16), whPKCS7([]byte(`{"a":1}`))), []byte(`{"type":"url_verification"}`))
	f.Add(whCBC(key, make([]byte, 16), make([]byte, 32)), []byte(""))
	f.Add(whCBC("other", make([]byte, 16), whPKCS7([]byte(`{}`))), []byte("{}"))
	f.Add([]byte("short"), []byte("x"))
	f.Add(bytes.Repeat([]byte{16}, 48), bytes.Repeat([]byte{16}, 16))

	a, err := newAdapter(Config{EncryptKey: confkit.Secret(key), VerificationToken: "whTokFuzz"}, confkit.Limits{}, nil, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	r := newReceiver(a)
	var mu sync.Mutex
	var handled [][]byte
	r.normalize = func(_ context.Context, ev event) (*adapters.Event, error) {
		mu.Lock()
		handled = append(handled, ev.Event)
		mu.Unlock()
		return nil, nil
	}
	h := newWebhook(r).Handler(&whNullSink{})

	f.Fuzz(func(t *testing.T, data, plain []byte) {
		enc := base64.StdEncoding.EncodeToString(data)
		out, err := decryptWebhook(enc, &k)
		if err == nil {
			if len(data) < 32 {
				t.Fatalf("accepted %d bytes", len(data))
			}
			if again := whCBC(key, data[:16], whPKCS7(out)); !bytes.Equal(again, data) {
				t.Fatalf("accepted a ciphertext that is not the encryption of its plaintext: %x", data)
			}
		}
		iv := make([]byte, 16)
		copy(iv, data)
		if got, err := decryptWebhook(base64.StdEncoding.EncodeToString(whCBC(key, iv, whPKCS7(plain))), &k); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("encrypted with the key: %q, %v; want %q", got, err, plain)
		}
		if got, err := decryptWebhook(base64.StdEncoding.EncodeToString(whCBC("whKeyOther", iv, whPKCS7(plain))), &k); err == nil && bytes.Equal(got, plain) && len(plain) > 0 {
			t.Fatalf("a body encrypted with another key decrypted to its plaintext %q", plain)
		}

		mu.Lock()
		handled = nil
		mu.Unlock()
		body := whWrap(data)
		code, _ := whDo(h, http.MethodPost, whSign(key, time.Now(), body), body)
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		if err != nil && (code != http.StatusBadRequest || n != 0) {
			t.Fatalf("a body that does not decrypt: %d, %d handled; want 400 and none", code, n)
		}
		if code == http.StatusOK && err != nil {
			t.Fatalf("accepted a body that does not decrypt")
		}
	})
}

// whNullSink stores nothing and has seen nothing.
type whNullSink struct{}

func (*whNullSink) Deliver(context.Context, ...adapters.Event) error { return nil }
func (*whNullSink) Checkpoint(context.Context, string) (string, bool, error) {
	return "", false, nil
}
func (*whNullSink) Seen(context.Context, string) (bool, error) { return false, nil }
