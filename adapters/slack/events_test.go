package slack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
)

// sign returns Slack's v0 signature headers for body at ts.
func sign(secret string, ts time.Time, body []byte) http.Header {
	h := http.Header{}
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:", stamp)
	mac.Write(body)
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	h.Set("Content-Type", "application/json")
	return h
}

// post sends body to the webhook with headers and returns the status and
// the response body.
func post(t *testing.T, h http.Handler, method string, hdr http.Header, body []byte) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "/webhook/slack", bytes.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// Every request is verified before anything is read from it: each bad
// signature gets 401 and writes nothing; the valid one writes its file.
func TestWebhookSignature(t *testing.T) {
	w := newInWorld(t, "events")
	h := w.r.webhook(w.pipe)
	now := time.Now()
	body := callback("EvSIG1", msgEvent("C0SIGNED1", "U0ANN", "1700000100.000100", "signed"))
	good := sign(inSecret, now, body)
	for _, c := range []struct {
		name string
		hdr  http.Header
		body []byte
	}{
		{"no headers", http.Header{}, body},
		{"no signature", http.Header{"X-Slack-Request-Timestamp": good["X-Slack-Request-Timestamp"]}, body},
		{"no timestamp", http.Header{"X-Slack-Signature": good["X-Slack-Signature"]}, body},
		{"stale 6 min", sign(inSecret, now.Add(-6*time.Minute), body), body},
		{"future 6 min", sign(inSecret, now.Add(6*time.Minute), body), body},
		{"wrong secret", sign("another-secret", now, body), body},
		{"body tampered", good, bytes.Replace(body, []byte("signed"), []byte("forged"), 1)},
		{"not v0", http.Header{"X-Slack-Request-Timestamp": good["X-Slack-Request-Timestamp"],
			"X-Slack-Signature": {strings.Replace(good.Get("X-Slack-Signature"), "v0=", "v1=", 1)}}, body},
	} {
		code, resp := post(t, h, http.MethodPost, c.hdr, c.body)
		if code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", c.name, code)
		}
		if strings.Contains(resp, "signed") || strings.Contains(resp, "forged") || strings.Contains(resp, "U0ANN") {
			t.Errorf("%s: the response quotes the request: %q", c.name, resp)
		}
		if n := len(w.files(t)); n != 0 {
			t.Fatalf("%s: %d files written", c.name, n)
		}
	}
	// Within the window both ways (4 min off) is accepted.
	for i, off := range []time.Duration{-4 * time.Minute, 4 * time.Minute} {
		b := callback(fmt.Sprintf("EvSIGok%d", i), msgEvent("C0SIGNED1", "U0ANN", fmt.Sprintf("17000002%02d.000100", i), "ok"))
		if code, _ := post(t, h, http.MethodPost, sign(inSecret, now.Add(off), b), b); code != http.StatusOK {
			t.Errorf("timestamp %v off: status %d, want 200", off, code)
		}
	}
	if code, _ := post(t, h, http.MethodPost, good, body); code != http.StatusOK {
		t.Fatalf("valid: status %d, want 200", code)
	}
	if !w.hasFile(t, msgID("C0SIGNED1", "1700000100.000100")) {
		t.Errorf("valid request: no file; files %v", w.ids(t))
	}
	if n := len(w.files(t)); n != 3 {
		t.Errorf("%d files, want 3", n)
	}
}

func TestWebhookRequests(t *testing.T) {
	w := newInWorld(t, "events")
	h := w.r.webhook(w.pipe)
	now := time.Now()

	if code, _ := post(t, h, http.MethodGet, http.Header{}, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", code)
	}
	big := append([]byte(`{"type":"event_callback","x":"`), bytes.Repeat([]byte("a"), maxWebhookBody)...)
	big = append(big, `"}`...)
	if code, _ := post(t, h, http.MethodPost, sign(inSecret, now, big), big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("body over 1 MiB: status %d, want 413", code)
	}

	uv := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	code, resp := post(t, h, http.MethodPost, sign(inSecret, now, uv), uv)
	var got struct{ Challenge string }
	if code != http.StatusOK || json.Unmarshal([]byte(resp), &got) != nil || got.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("url_verification: %d %q", code, resp)
	}
	if code, _ := post(t, h, http.MethodPost, http.Header{}, uv); code != http.StatusUnauthorized {
		t.Errorf("unsigned url_verification: status %d, want 401", code)
	}
	html := []byte(`{"type":"url_verification","challenge":"<script>alert(1)</script>"}`)
	if code, resp := post(t, h, http.MethodPost, sign(inSecret, now, html), html); code != http.StatusBadRequest || strings.Contains(resp, "script") {
		t.Errorf("a challenge that is not Slack's: %d %q, want 400 without it", code, resp)
	}

	for _, b := range [][]byte{
		[]byte(`{"type":"app_rate_limited","team_id":"T0FAKE","minute_rate_limited":1518467820,"api_app_id":"A0FAKE"}`),
		callback("EvFS1", json.RawMessage(`{"type":"file_shared","file_id":"F1","user_id":"U0ANN","channel_id":"C0SIGNED1","event_ts":"1700000300.000100"}`)),
	} {
		if code, _ := post(t, h, http.MethodPost, sign(inSecret, now, b), b); code != http.StatusOK {
			t.Errorf("%.40s: status %d, want 200", b, code)
		}
	}
	bad := []byte(`{"type":"event_callback","event_id":"EvX","event":"not an object"}`)
	if code, _ := post(t, h, http.MethodPost, sign(inSecret, now, bad), bad); code != http.StatusBadRequest {
		t.Errorf("event_callback without an event object: status %d, want 400", code)
	}
	if n := len(w.files(t)); n != 0 {
		t.Errorf("%d files written by requests with no message", n)
	}
}

// A redelivery (X-Slack-Retry-Num) of a stored event writes nothing; one
// that arrives while the first try is still storing waits for it instead
// of storing a second time.
func TestWebhookRedelivery(t *testing.T) {
	w := newInWorld(t, "events")
	sink := &countingSink{Sink: w.pipe, entered: make(chan struct{}, 4), hold: make(chan struct{})}
	h := w.r.webhook(sink)
	body := callback("EvRE1", msgEvent("C0RETRY01", "U0ANN", "1700000400.000100", "once"))
	hdr := sign(inSecret, time.Now(), body)

	var wg sync.WaitGroup
	codes := make([]int, 2)
	wg.Go(func() { codes[0], _ = post(t, h, http.MethodPost, hdr, body) })
	<-sink.entered // the first try is storing
	retry := hdr.Clone()
	retry.Set("X-Slack-Retry-Num", "1")
	retry.Set("X-Slack-Retry-Reason", "http_timeout")
	wg.Go(func() { codes[1], _ = post(t, h, http.MethodPost, retry, body) })
	// The retry joins the first: it must not reach Deliver.
	testutil.WaitFor(t, 5*time.Second, "the retry to wait on the first try", func() bool {
		return w.r.flights.Waiters("EvRE1") == 1
	})
	close(sink.hold)
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Errorf("statuses %v, want 200 200", codes)
	}
	select {
	case <-sink.entered:
		t.Error("the in-flight retry delivered a second time")
	default:
	}
	// A later retry: answered 200 from the dedupe, nothing delivered.
	retry.Set("X-Slack-Retry-Num", "2")
	if code, _ := post(t, h, http.MethodPost, retry, body); code != http.StatusOK {
		t.Errorf("second retry: status %d", code)
	}
	if n := len(sink.delivered()); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
	if ids := w.ids(t); len(ids) != 1 || ids[0] != msgID("C0RETRY01", "1700000400.000100") {
		t.Errorf("files %v, want the one message", ids)
	}
}

// An event that cannot be made durable in time is answered 503 (Slack
// retries), never 200; the retry stores it once.
func TestWebhookNotStoredInTime(t *testing.T) {
	w := newInWorld(t, "events")
	w.r.hook.Budget = 50 * time.Millisecond
	sink := &countingSink{Sink: w.pipe, hold: make(chan struct{})}
	h := w.r.webhook(sink)
	body := callback("EvSLOW1", msgEvent("C0SLOW001", "U0ANN", "1700000500.000100", "slow disk"))
	if code, resp := post(t, h, http.MethodPost, sign(inSecret, time.Now(), body), body); code != http.StatusServiceUnavailable {
		t.Fatalf("store held: status %d %q, want 503", code, resp)
	}
	if n := len(w.files(t)); n != 0 {
		t.Fatalf("%d files after a 503", n)
	}
	if h := w.a.health.Health(); h.Status != adapters.StatusError || h.LastError == "" {
		t.Errorf("health %+v, want an error", h)
	}
	close(sink.hold)
	w.r.hook.Budget = webhookTimeout // Slack's deadline again
	if code, _ := post(t, h, http.MethodPost, sign(inSecret, time.Now(), body), body); code != http.StatusOK {
		t.Fatalf("retry: status %d, want 200", code)
	}
	if !w.hasFile(t, msgID("C0SLOW001", "1700000500.000100")) {
		t.Errorf("retry: no file")
	}
	// Sink failures are 503 too.
	sink.fail = fmt.Errorf("ingest: disk full")
	body2 := callback("EvSLOW2", msgEvent("C0SLOW001", "U0ANN", "1700000501.000100", "disk full"))
	if code, resp := post(t, h, http.MethodPost, sign(inSecret, time.Now(), body2), body2); code != http.StatusServiceUnavailable || strings.Contains(resp, "disk full") {
		t.Errorf("store failed: %d %q, want 503 without the cause", code, resp)
	}
}

// Every Events API body of the corpus, signed and posted, is answered as
// Slack expects, and each event normalize makes a message of is a file.
func TestWebhookCorpus(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "slack", "events-api")
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus events in %s: %v", dir, err)
	}
	w := newInWorld(t, "events")
	h := w.r.webhook(w.sink)
	want := map[string]bool{}
	dead := 0
	contents := map[string][]byte{}
	stored := 0 // artifacts checked byte for byte
	defer func() {
		if len(contents) == 0 || stored == 0 {
			t.Errorf("the corpus files: %d hosted, %d stored and checked; want some of each", len(contents), stored)
		}
	}()
	for i, p := range paths {
		name := filepath.Base(p)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// The corpus reuses event ids across unrelated samples ("Ev111");
		// Slack's are unique, and the dedupe by event id would rightly
		// drop the second. Each sample gets its own.
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := obj["event_id"]; ok {
			obj["event_id"], _ = json.Marshal(fmt.Sprintf("EvCORPUS%02d", i))
		}
		body, _ := json.Marshal(obj)
		body = hostFiles(t, w.fake, body, contents)
		var env envelope
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		code, resp := post(t, h, http.MethodPost, sign(inSecret, time.Now(), body), body)
		if env.Type == "url_verification" {
			if code != http.StatusOK || !strings.Contains(resp, env.Challenge) {
				t.Errorf("%s: challenge not answered: %d %q", name, code, resp)
			}
			continue
		}
		// What the transport must have done follows normalize's own
		// answer: a file for a message, 200 and a dead letter for what
		// cannot be placed, 200 and nothing for the rest, 503 (Slack
		// retries) when normalize fails.
		out, nerr := w.a.normalize(context.Background(), event{ID: env.EventID, Inner: env.Event})
		_, isDead := adapters.UndeliverableReason(nerr)
		switch {
		case isDead && code == http.StatusOK:
			dead++
		case nerr != nil:
			t.Errorf("%s: normalize fails (%v), status %d", name, nerr, code)
			continue
		case code != http.StatusOK:
			t.Errorf("%s: status %d %q, want 200", name, code, resp)
			continue
		case out != nil && out.Message != nil && !out.Self:
			want[out.Message.ID] = true
			if !w.hasFile(t, out.Message.ID) {
				t.Errorf("%s: no file for %s", name, out.Message.ID)
			}
			stored += checkArtifacts(t, w, name, out.Message.ID, contents)
		}
		// Slack's retry of the same body: nothing more.
		hdr := sign(inSecret, time.Now(), body)
		hdr.Set("X-Slack-Retry-Num", "1")
		before := len(w.files(t))
		if code, _ := post(t, h, http.MethodPost, hdr, body); code != http.StatusOK || len(w.files(t)) != before {
			t.Errorf("%s: retry status %d, files %d then %d", name, code, before, len(w.files(t)))
		}
	}
	files := w.files(t)
	if len(files) != len(want) || len(want) == 0 {
		t.Errorf("%d files, want %d (%v)", len(files), len(want), w.ids(t))
	}
	if n := len(w.deadLetters(t)); n != dead {
		t.Errorf("%d dead letters, want %d", n, dead)
	}
	for id := range files {
		if !want[id] {
			t.Errorf("unexpected file %s", id)
		}
	}
}
