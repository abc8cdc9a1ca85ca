package main

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
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// The app the events under adapters/lark/testdata were written for.
const larkAppID = "cli_courier_test"

const (
	larkVerificationToken = "vtok-serve-test-4a1b"
	larkEncryptKey        = "ekey-serve-test-9c2d"
)

// newLarkFake is a fake Lark with the people, chats and resources the
// events under adapters/lark/testdata name.
func newLarkFake(t *testing.T) *larkfake.Server {
	t.Helper()
	fake := larkfake.New(t, larkfake.Options{AppID: larkAppID, AppSecret: "secret-" + strconv.FormatInt(time.Now().UnixNano(), 36), PingInterval: time.Second})
	fake.AddUser(larkfake.User{OpenID: "ou_ann", Name: "Ann Lee"})
	fake.AddUser(larkfake.User{OpenID: "ou_bob", Name: "Bob Chen"})
	fake.AddChat(larkfake.Chat{ChatID: "oc_chat", Name: "Launch"})
	png := []byte("\x89PNG\r\n\x1a\nnot a real picture, but its bytes must come through")
	fake.AddResource("om_image", "img_v3_key1", png, "image", "")
	fake.AddResource("om_file", "file_v3_key1", []byte("%PDF-1.4 the report"), "file", "report.pdf")
	fake.AddResource("om_post_image", "img_v3_chart", png, "image", "")
	fake.AddResource("om_audio", "file_v3_audio", []byte("OggS\x00\x02 voice bytes"), "file", "")
	fake.AddResource("om_media", "file_v3_video", []byte("\x00\x00\x00\x18ftypmp42 video bytes"), "file", "clip.mp4")
	return fake
}

// larkWorkspace is a workspace whose config enables Lark against fake in
// mode (ws or webhook), the secrets in files as an operator keeps them.
func larkWorkspace(t *testing.T, fake *larkfake.Server, mode, web string) string {
	t.Helper()
	ws := newWorkspace(t)
	secrets := t.TempDir()
	o := fake.Options()
	for name, v := range map[string]string{"app": o.AppSecret, "token": larkVerificationToken, "key": larkEncryptKey} {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
  debounce: {window_ms: 0}
  adapters:
    email: {enabled: false}
    lark:
      enabled: true
      mode: %s
      domain: %s
      app_id: %s
      app_secret_file: %s
      verification_token_file: %s
      encrypt_key_file: %s
`, web, mode, fake.URL(), o.AppID, filepath.Join(secrets, "app"), filepath.Join(secrets, "token"), filepath.Join(secrets, "key")))
	return ws
}

// larkEvent is an im.message.receive_v1 envelope of a text message.
func larkEvent(eventID, messageID, chatID, chatType, sender string, created time.Time, text, threadID, rootID string) json.RawMessage {
	content, _ := json.Marshal(map[string]string{"text": text})
	msg := map[string]any{"message_id": messageID, "chat_id": chatID, "chat_type": chatType, "message_type": "text",
		"content": string(content), "create_time": strconv.FormatInt(created.UnixMilli(), 10)}
	if threadID != "" {
		msg["thread_id"], msg["root_id"], msg["parent_id"] = threadID, rootID, rootID
	}
	b, _ := json.Marshal(map[string]any{"schema": "2.0",
		"header": map[string]any{"event_id": eventID, "event_type": "im.message.receive_v1", "create_time": strconv.FormatInt(created.UnixMilli(), 10),
			"token": larkVerificationToken, "app_id": larkAppID, "tenant_key": "tenant_fake"},
		"event": map[string]any{"message": msg, "sender": map[string]any{"sender_id": map[string]any{"open_id": sender}, "sender_type": "user", "tenant_key": "tenant_fake"}}})
	return b
}

// larkEventFiles are the events every transport must deliver: the
// adapter's own fixtures (one per content shape) and, with COURIER_CORPUS,
// the corpus's real ones. The key is the file name.
func larkEventFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	paths, _ := filepath.Glob("../../adapters/lark/testdata/*.json")
	if dir := os.Getenv("COURIER_CORPUS"); dir != "" {
		more, _ := filepath.Glob(filepath.Join(dir, "chat/lark/events/*.json"))
		paths = append(paths, more...)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = withToken(t, b)
	}
	if len(out) < 10 {
		t.Fatalf("only %d events found", len(out))
	}
	return out
}

// withToken sets the envelope's verification token to the configured one,
// as Lark sends it with every event of the app; a bare event body is
// wrapped in an envelope first.
func withToken(t *testing.T, b []byte) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	h, ok := v["header"].(map[string]any)
	if !ok {
		v = map[string]any{"schema": "2.0", "header": map[string]any{"event_id": "wrapped-" + fmt.Sprint(len(b)), "event_type": "im.message.receive_v1", "app_id": larkAppID}, "event": v}
		h = v["header"].(map[string]any)
	}
	h["token"] = larkVerificationToken
	out, _ := json.Marshal(v)
	return out
}

// eventMessageID is the message an event is about ("" for none).
func eventMessageID(b []byte) string {
	var v struct {
		Event struct {
			Message struct {
				MessageID string `json:"message_id"`
			} `json:"message"`
			MessageID string `json:"message_id"`
		} `json:"event"`
	}
	json.Unmarshal(b, &v)
	if v.Event.Message.MessageID != "" {
		return threading.LarkID(v.Event.Message.MessageID)
	}
	if v.Event.MessageID != "" {
		return threading.LarkID(v.Event.MessageID) + "_recall"
	}
	return ""
}

func larkFiles(t *testing.T, ws string) map[string]*schema.Message {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound/lark/*.md"))
	out := map[string]*schema.Message{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := schema.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if out[m.ID] != nil {
			t.Errorf("%s written twice", m.ID)
		}
		out[m.ID] = m
	}
	return out
}

func larkHealth(t *testing.T, s *testutil.Serve) string {
	t.Helper()
	var rep struct {
		Adapters map[string]struct{ Status string }
	}
	resp, err := http.Get(s.Health)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&rep)
	return rep.Adapters["lark"].Status
}

// checkLarkDelivered checks that every event wrote its one valid file,
// and the app's own message none.
func checkLarkDelivered(t *testing.T, ws string, events map[string][]byte) {
	t.Helper()
	files := larkFiles(t, ws)
	for name, b := range events {
		id := eventMessageID(b)
		m := files[id]
		if strings.HasPrefix(name, "own.") {
			if m != nil {
				t.Errorf("%s: the app's own message was written", name)
			}
			continue
		}
		if m == nil {
			t.Errorf("%s: no file %s", name, id)
			continue
		}
		testutil.CheckMessage(t, name, m)
	}
}

// The Lark loop on the real service over the long connection: every
// fixture and corpus event becomes a valid file before it is acked (the
// app's own message none), a redelivery writes nothing, an agent's reply
// lands in the thread with a uuid, /health says connected, doctor passes.
func TestServeLarkWS(t *testing.T) {
	fake := newLarkFake(t)
	web := testutil.FreeAddr(t)
	ws := larkWorkspace(t, fake, "ws", web)
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	events := larkEventFiles(t)
	for name, b := range events {
		id, err := fake.SendEvent(ctx, b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, s.Log())
		}
		select {
		case <-fake.Acked(id):
		case <-ctx.Done():
			t.Fatalf("%s was not acked\n%s", name, s.Log())
		}
		if a, _ := fake.Ack(id); a.Code != 200 {
			t.Errorf("%s: acked with %d", name, a.Code)
		}
		// Acked means durable: the file is there now.
		if mid := eventMessageID(b); !strings.HasPrefix(name, "own.") && larkFiles(t, ws)[mid] == nil {
			t.Errorf("%s: acked before %s was written", name, mid)
		}
	}
	checkLarkDelivered(t, ws, events)
	n := len(larkFiles(t, ws))
	// Lark redelivers an event it thinks was lost, under a new frame:
	// nothing more is written.
	id, _ := fake.SendEvent(ctx, events["thread_reply.json"])
	<-fake.Acked(id)
	if got := len(larkFiles(t, ws)); got != n {
		t.Errorf("a redelivery: %d files, want %d", got, n)
	}

	// An agent answers the message in the thread (which Lark has).
	fake.AddMessage("oc_chat", larkfake.Message{MessageID: "om_root", ChatID: "oc_chat", Content: `{"text":"the root"}`, SenderID: "ou_bob", ThreadID: "omt_thread1"})
	fake.AddMessage("oc_chat", larkfake.Message{MessageID: "om_thread_reply", ChatID: "oc_chat", Content: `{"text":"a reply"}`, SenderID: "ou_ann",
		ThreadID: "omt_thread1", RootID: "om_root", ParentID: "om_root"})
	parent := "lark_om_thread_reply"
	draft := filepath.Join(t.TempDir(), "reply.md")
	os.WriteFile(draft, []byte("---\nreply_to: "+parent+"\ncorrelation_id: task-9\n---\nOn it: **rolling back** now.\n"), 0o600)
	if _, e, code := cli(t, ws, "", "send", draft); code != 0 {
		t.Fatalf("send: %d %s", code, e)
	}
	if !testutil.Poll(20*time.Second, func() bool { return len(fake.Sent()) == 1 }) {
		t.Fatalf("the reply was not sent\n%s", s.Log())
	}
	sent := fake.Sent()[0]
	if sent.Route != larkfake.RouteReply || sent.ParentID != "om_thread_reply" || !sent.ReplyInThread || sent.UUID == "" || sent.MsgType != "post" || !strings.Contains(sent.Content, "rolling back") {
		t.Errorf("sent %+v", sent)
	}
	testutil.WaitFor(t, 10*time.Second, "the draft archived", func() bool { return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 1 })
	archived, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive/lark/*.md"))
	if len(archived) != 1 {
		t.Fatalf("archived drafts %v", archived)
	}
	if b, _ := os.ReadFile(archived[0]); !strings.Contains(string(b), sent.MessageID) {
		t.Errorf("the archived draft does not record %s:\n%s", sent.MessageID, b)
	}

	if st := larkHealth(t, s); st != "connected" {
		t.Errorf("/health lark = %q", st)
	}
	for _, secret := range []string{fake.Options().AppSecret, larkEncryptKey, larkVerificationToken} {
		if strings.Contains(s.Log(), secret) {
			t.Errorf("a secret in the log")
		}
	}
	if out, e, code := cli(t, ws, "", "doctor"); code != 0 || !strings.Contains(out+e, "tenant token") {
		t.Errorf("doctor: %d\n%s%s", code, out, e)
	}
	s.Stop(t)
}

// larkEncrypt encrypts body as Lark encrypts a callback: AES-256-CBC, the
// key the SHA-256 of encrypt_key, a random IV before the ciphertext,
// PKCS#7 padding, base64.
func larkEncrypt(t *testing.T, key string, body []byte) []byte {
	t.Helper()
	k := sha256.Sum256([]byte(key))
	block, err := aes.NewCipher(k[:])
	if err != nil {
		t.Fatal(err)
	}
	pad := aes.BlockSize - len(body)%aes.BlockSize
	plain := append(append([]byte{}, body...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, aes.BlockSize+len(plain))
	rand.Read(out[:aes.BlockSize])
	cipher.NewCBCEncrypter(block, out[:aes.BlockSize]).CryptBlocks(out[aes.BlockSize:], plain)
	b, _ := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(out)})
	return b
}

// larkSign is X-Lark-Signature: the hex SHA-256 of timestamp, nonce,
// encrypt_key and the body.
func larkSign(ts, nonce, key string, body []byte) string {
	h := sha256.New()
	io.WriteString(h, ts+nonce+key)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// Webhooks on the real service: /webhook/lark answers the encrypted
// challenge, delivers every fixture and corpus event (encrypted and
// signed, as Lark sends them) to a valid file before its 200, and refuses
// a forged, stale or wrongly tokened request with 401 writing nothing.
func TestServeLarkWebhook(t *testing.T) {
	fake := newLarkFake(t)
	web := testutil.FreeAddr(t)
	ws := larkWorkspace(t, fake, "webhook", web)
	s := startServe(t, ws, web)
	url := "http://" + web + "/webhook/lark"
	post := func(body []byte, ts time.Time, sign func(ts, nonce string, body []byte) string) (int, string) {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		tss, nonce := strconv.FormatInt(ts.Unix(), 10), "nonce-"+strconv.FormatInt(ts.UnixNano(), 36)
		req.Header.Set("X-Lark-Request-Timestamp", tss)
		req.Header.Set("X-Lark-Request-Nonce", nonce)
		if sign != nil {
			req.Header.Set("X-Lark-Signature", sign(tss, nonce, body))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := func(ts, nonce string, body []byte) string { return larkSign(ts, nonce, larkEncryptKey, body) }

	challenge := larkEncrypt(t, larkEncryptKey, []byte(`{"challenge":"ajls384kdjx98XX","token":"`+larkVerificationToken+`","type":"url_verification"}`))
	if code, body := post(challenge, time.Now(), good); code != 200 || !strings.Contains(body, `"ajls384kdjx98XX"`) {
		t.Errorf("url_verification: %d %q", code, body)
	}
	ev := larkEvent("ev_hook_1", "om_hook_1", "oc_chat", "group", "ou_ann", time.Now(), "hello over a webhook", "", "")
	var wrongToken map[string]any
	json.Unmarshal(ev, &wrongToken)
	wrongToken["header"].(map[string]any)["token"] = "not-the-token"
	wt, _ := json.Marshal(wrongToken)
	enc := larkEncrypt(t, larkEncryptKey, ev)
	for _, tc := range []struct {
		name string
		body []byte
		ts   time.Time
		sign func(ts, nonce string, body []byte) string
	}{
		{"unsigned", enc, time.Now(), nil},
		{"signed with another key", enc, time.Now(), func(ts, nonce string, body []byte) string { return larkSign(ts, nonce, "another-key", body) }},
		{"stale", enc, time.Now().Add(-6 * time.Minute), good},
		{"plaintext although a key is set", ev, time.Now(), good},
		{"wrong verification token", larkEncrypt(t, larkEncryptKey, wt), time.Now(), good},
		{"encrypted with another key", larkEncrypt(t, "another-key", ev), time.Now(), good},
	} {
		if code, _ := post(tc.body, tc.ts, tc.sign); code != http.StatusUnauthorized && code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 401 (or 400 for a body that does not decrypt)", tc.name, code)
		}
	}
	if n := len(larkFiles(t, ws)); n != 0 {
		t.Fatalf("%d files after refused requests", n)
	}

	events := larkEventFiles(t)
	events["hook.json"] = ev
	for name, b := range events {
		if code, body := post(larkEncrypt(t, larkEncryptKey, b), time.Now(), good); code != 200 {
			t.Fatalf("%s: %d %q\n%s", name, code, body, s.Log())
		}
		if mid := eventMessageID(b); !strings.HasPrefix(name, "own.") && larkFiles(t, ws)[mid] == nil {
			t.Errorf("%s: 200 before %s was written", name, mid)
		}
	}
	checkLarkDelivered(t, ws, events)
	n := len(larkFiles(t, ws))
	if code, _ := post(larkEncrypt(t, larkEncryptKey, ev), time.Now(), good); code != 200 {
		t.Errorf("a redelivery: %d", code)
	}
	if got := len(larkFiles(t, ws)); got != n {
		t.Errorf("a redelivery: %d files, want %d", got, n)
	}
	s.Stop(t)
}

// kill -9 during a burst over the long connection: Lark redelivers what
// was not acked (the test sends it again, as Lark's timer would), the
// catch-up reads the history on each restart, and every message ends up in
// exactly one file.
func TestCrashDuringLarkBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts the service")
	}
	fake := newLarkFake(t)
	web := testutil.FreeAddr(t)
	ws := larkWorkspace(t, fake, "ws", web)
	const n, kills = 300, 3
	s := startServe(t, ws, web)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	inbound := filepath.Join(ws, ".monoco/mailbox/inbound/lark")
	start := time.Now().Add(-time.Minute)

	// Lark sends an event again while its client has not acked it 200
	// (after 15 s, 5 min, 1 h and 6 h); redeliver stands in for that
	// timer, a second after the last try. It is how an event whose
	// handling a kill cut short comes back: the chat's checkpoint may have
	// moved past it with later events, which were durable first, so the
	// catch-up need not read it again.
	type pending struct {
		body   []byte
		frames []string
		last   time.Time
	}
	var mu sync.Mutex
	var sent []*pending
	ackedOnce := func(p *pending) bool {
		for _, f := range p.frames {
			if a, ok := fake.Ack(f); ok && a.Code == 200 {
				return true
			}
		}
		return false
	}
	redeliver := func() (all bool) {
		mu.Lock()
		defer mu.Unlock()
		all = len(sent) == n
		for _, p := range sent {
			if ackedOnce(p) {
				continue
			}
			all = false
			if time.Since(p.last) < time.Second {
				continue
			}
			sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
			frame, err := fake.SendEvent(sctx, p.body)
			scancel()
			if err != nil {
				return false // no connection now: the next call tries again
			}
			p.frames, p.last = append(p.frames, frame), time.Now()
		}
		return all
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			at := start.Add(time.Duration(i) * time.Millisecond)
			mid := fmt.Sprintf("om_burst_%04d", i)
			text := fmt.Sprintf("message %d", i)
			content, _ := json.Marshal(map[string]string{"text": text})
			// In the chat's history first, as on Lark.
			fake.AddMessage("oc_chat", larkfake.Message{MessageID: mid, ChatID: "oc_chat", Content: string(content), CreateTime: at, SenderID: "ou_ann"})
			b := larkEvent(fmt.Sprintf("ev_burst_%04d", i), mid, "oc_chat", "group", "ou_ann", at, text, "", "")
			// A write to a connection the kill just cut fails: sent
			// again to the next one, as Lark would.
			frame, err := fake.SendEvent(ctx, b)
			for err != nil && ctx.Err() == nil {
				frame, err = fake.SendEvent(ctx, b)
			}
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			sent = append(sent, &pending{body: b, frames: []string{frame}, last: time.Now()})
			mu.Unlock()
		}
		done <- nil
	}()
	for k := 1; k <= kills; k++ {
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%d files", k*n/4), func() bool {
			redeliver()
			files, _ := filepath.Glob(filepath.Join(inbound, "*.md"))
			return len(files) >= k*n/4
		})
		s.Kill()
		if files, _ := filepath.Glob(filepath.Join(inbound, "*.md")); len(files) >= n {
			t.Fatalf("kill %d came after every event was in", k)
		}
		s = startServe(t, ws, web)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !testutil.Poll(60*time.Second, redeliver) {
		t.Fatalf("not every event was acked 200 in a minute of redeliveries\n%s", s.Log())
	}
	testutil.WaitFor(t, 60*time.Second, "every message in", func() bool {
		files, _ := filepath.Glob(filepath.Join(inbound, "*.md"))
		return len(files) >= n
	})
	s.Stop(t)
	files := larkFiles(t, ws)
	for i := 0; i < n; i++ {
		if files[fmt.Sprintf("lark_om_burst_%04d", i)] == nil {
			t.Errorf("message %d lost", i)
		}
	}
	if len(files) != n {
		t.Errorf("%d files, want %d", len(files), n)
	}
	if ids := countIDs(t, ws); len(ids) != n {
		t.Errorf("index lists %d, want %d", len(ids), n)
	}
}
