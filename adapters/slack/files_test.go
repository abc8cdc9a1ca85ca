package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
	"github.com/monoco/courier/schema"
)

func TestTokenHost(t *testing.T) {
	a := &Adapter{apiURL: "http://127.0.0.1:8080/api/"}
	for raw, want := range map[string]bool{
		"https://files.slack.com/files-pri/T1-F1/x.png": true,
		"https://slack.com/files-pri/T1-F1/x.png":       true,
		"https://acme.enterprise.slack.com/x":           true,
		"https://files.slack-gov.com/x":                 true,
		"https://FILES.SLACK.COM./x":                    true,
		"http://files.slack.com/x":                      false, // the token in clear
		"https://evil.example/x":                        false,
		"https://slack.com.evil.example/x":              false,
		"https://evilslack.com/x":                       false,
		"https://user:pw@files.slack.com/x":             false,
		"http://127.0.0.1:8080/files-pri/x":             true, // api_url's host
		"http://127.0.0.1:8081/files-pri/x":             false,
		"https://127.0.0.1:8080/files-pri/x":            false,
		"ftp://files.slack.com/x":                       false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.tokenHost(u); got != want {
			t.Errorf("tokenHost(%s) = %v, want %v", raw, got, want)
		}
	}
}

// recorder is a server that must never see the token; it records every
// request it gets.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
	hits atomic.Int64
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		r.mu.Lock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
		if h != nil {
			h(w, req)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte(pngBytes))
	}))
	t.Cleanup(r.Close)
	return r
}

// front is the api_url host of a test: a proxy to the fake's Web API and
// its files, plus routes of the test's own at /files-pri/custom/ (a redirect, a
// flaky file, an HTML page), so that they are on a host that may receive
// the token.
func front(t *testing.T, s *slackfake.Server, custom http.HandlerFunc) *httptest.Server {
	target, _ := url.Parse(s.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/files-pri/custom/") {
			if r.Header.Get("Authorization") != "Bearer "+s.Options().BotToken {
				http.Error(w, "no token", http.StatusUnauthorized)
				return
			}
			custom(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// fileEvent is a file_share event whose one file is at u.
func fileEvent(id, ts, u, mimetype string, size int) event {
	name := "../../etc/x\u202egnp.png"
	if mimetype == "application/pdf" {
		name = "../../etc/report\u202efdp.exe.pdf"
	}
	inner, _ := json.Marshal(map[string]any{
		"type": "message", "subtype": "file_share", "channel": "C0GEN0001", "channel_type": "channel",
		"user": "U0ANN0001", "text": "see the file", "ts": ts,
		"files": []map[string]any{{"id": "F0TEST0001", "name": name, "mimetype": mimetype, "mode": "hosted",
			"size": size, "url_private_download": u}},
	})
	return event{ID: id, Inner: inner}
}

// logBuffer is a logger whose output a test reads.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&syncWriter{w: &b}, &slog.HandlerOptions{Level: slog.LevelDebug})), &b
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestFileNeverToForeignHost: an event that names a file elsewhere gets no
// request from Courier at all (the token least of all); the message is
// written without the file, saying why.
func TestFileNeverToForeignHost(t *testing.T) {
	s := workspace(t)
	evil := newRecorder(t, nil)
	log, logs := logBuffer()
	a := newTestAdapter(t, s, func(o *Options) { o.Logger = log })
	for i, u := range []string{evil.URL + "/files-pri/T0FAKE-F1/x.png", "https://slack.com.evil.example/x.png", "javascript:alert(1)", "//evil.example/x"} {
		ev, err := a.normalize(context.Background(), fileEvent(fmt.Sprintf("EvE%d", i), fmt.Sprintf("1700007000.00000%d", i), u, "image/png", 19))
		if err != nil || ev == nil {
			t.Fatalf("%s: %+v, %v", u, ev, err)
		}
		m := ev.Message
		testutil.CheckMessage(t, u, m)
		if len(m.Artifacts) != 0 {
			t.Errorf("%s: artifacts %+v", u, m.Artifacts)
		}
		if m.Metadata.Extra.Other["files_not_stored"] == nil || !strings.Contains(m.Body, "Not stored") {
			t.Errorf("%s: the file left out is not said: extra %v body %q", u, m.Metadata.Extra.Other, m.Body)
		}
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("the foreign host got %d requests (Authorization %q)", n, evil.auth)
	}
	if strings.Contains(logs.String(), s.Options().BotToken) {
		t.Errorf("the token is in the log:\n%s", logs)
	}
}

// TestFileRedirectToForeignHost: a file URL on an allowed host that
// redirects elsewhere is not followed: the other host sees no request
// (and never the token).
func TestFileRedirectToForeignHost(t *testing.T) {
	s := workspace(t)
	evil := newRecorder(t, nil)
	fr := front(t, s, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, evil.URL+"/stolen.png", http.StatusFound)
	})
	a := newTestAdapter(t, s, func(o *Options) { o.Config.APIURL = fr.URL + "/api/" })
	ev, err := a.normalize(context.Background(), fileEvent("EvRD", "1700007100.000001", fr.URL+"/files-pri/custom/x.png", "image/png", 19))
	if err != nil || ev == nil {
		t.Fatalf("%+v, %v", ev, err)
	}
	if len(ev.Message.Artifacts) != 0 {
		t.Errorf("artifacts %+v", ev.Message.Artifacts)
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("the redirect was followed: %d requests, Authorization %q", n, evil.auth)
	}
	if !strings.Contains(fmt.Sprint(ev.Message.Metadata.Extra.Other["files_not_stored"]), "not Slack's") {
		t.Errorf("reason: %v", ev.Message.Metadata.Extra.Other["files_not_stored"])
	}
}

// TestFileDownload: a file on the fake is fetched with the token (the
// fake serves it to the bot token only), stored under its content's hash
// with a sanitised name and its type from the mimetype.
func TestFileDownload(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	content := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: streamed, not one read
	f := s.AddFile(slackapi.File{ID: "F0BIGPDF01", Name: "report.pdf", Mimetype: "application/pdf"}, content)
	a.limits.MaxArtifactBytes = int64(len(content))
	ev, err := a.normalize(context.Background(), fileEvent("EvDL", "1700007200.000001", f.URLPrivateDownload, "application/pdf", len(content)))
	if err != nil || ev == nil {
		t.Fatalf("%+v, %v", ev, err)
	}
	m := ev.Message
	testutil.CheckMessage(t, "download", m)
	if len(m.Artifacts) != 1 {
		t.Fatalf("artifacts %+v, want one", m.Artifacts)
	}
	art := m.Artifacts[0]
	if art.Size != int64(len(content)) || art.Type != schema.ArtifactDocument || art.MimeType != "application/pdf" {
		t.Errorf("artifact %+v", art)
	}
	if strings.ContainsAny(art.Name, "/\u202e") || strings.Contains(art.Name, "..") {
		t.Errorf("name %q not sanitised", art.Name)
	}
	r, err := a.dz.Open(art.ID)
	if err != nil {
		t.Fatalf("the artifact is not durable in the dropzone: %v", err)
	}
	var got bytes.Buffer
	got.ReadFrom(r)
	r.Close()
	if !bytes.Equal(got.Bytes(), content) {
		t.Errorf("stored %d bytes, not the file's %d", got.Len(), len(content))
	}
	if m.Type != schema.TypeMixed {
		t.Errorf("type %s, want mixed (words and a file)", m.Type)
	}
}

// TestFileHTMLPage: Slack answers 200 with an HTML page when the app may
// not read a file; slack-go would store the page. The message is written
// without the artifact, the reason on /health and in the log, never the
// token.
func TestFileHTMLPage(t *testing.T) {
	s := workspace(t)
	page := "<!DOCTYPE html><html><head><title>Sign in | Slack</title></head><body>sign in</body></html>"
	fr := front(t, s, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/files-pri/custom/typed.png": // labelled as HTML
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		case "/files-pri/custom/sniffed.png": // labelled as the file, but a page
			w.Header().Set("Content-Type", "image/png")
		}
		w.Write([]byte(page))
	})
	for _, tc := range []struct{ name, url string }{
		{"Content-Type text/html", fr.URL + "/files-pri/custom/typed.png"},
		{"content starts like HTML", fr.URL + "/files-pri/custom/sniffed.png"},
		// The fake's own answer to a request it does not authorise:
		// a redirect to its sign-in page, answered 200.
		{"sign-in redirect", s.URL() + "/files-pri/T0FAKE-F0NOTOKEN1/download/x.png?redir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, logs := logBuffer()
			a := newTestAdapter(t, s, func(o *Options) { o.Config.APIURL = fr.URL + "/api/"; o.Logger = log })
			u := tc.url
			if tc.name == "sign-in redirect" {
				// A file whose download needs another token: the
				// adapter's is wrong for the fake's file host.
				f := s.AddFile(slackapi.File{ID: "F0NOTOKEN1", Name: "x.png", Mimetype: "image/png"}, []byte(pngBytes))
				a = newTestAdapter(t, s, func(o *Options) { o.Logger = log })
				a.cfg.BotToken = "xoxb-wrong"
				a.self = &Identity{UserID: botUser, BotID: botID}
				u = f.URLPrivateDownload
			}
			ev, err := a.normalize(context.Background(), fileEvent("EvH", "1700007300.000001", u, "image/png", 19))
			if err != nil || ev == nil {
				t.Fatalf("%+v, %v", ev, err)
			}
			if len(ev.Message.Artifacts) != 0 {
				t.Errorf("the HTML page was stored as the file: %+v", ev.Message.Artifacts)
			}
			h := a.health.Health()
			if !strings.Contains(h.LastError, "HTML page") {
				t.Errorf("health %+v: want the HTML page reported", h)
			}
			if !strings.Contains(logs.String(), "HTML page") {
				t.Errorf("log does not say it:\n%s", logs)
			}
			for _, where := range []string{logs.String(), h.LastError, fmt.Sprint(ev.Message.Metadata.Extra.Other)} {
				if strings.Contains(where, "xoxb-") {
					t.Errorf("a token leaked: %s", where)
				}
			}
		})
	}
}

// TestFileSharedPage: an HTML file someone shared (Slack labels a
// file.htm text/plain) is stored: only a page where the file was expected
// is taken for Slack's sign-in page.
func TestFileSharedPage(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	page := []byte("<!DOCTYPE html>\n<html><meta charset='utf-8'><p>notes</p></html>\n")
	f := s.AddFile(slackapi.File{ID: "F0PAGE0001", Name: "file.htm", Mimetype: "text/plain"}, page)
	inner, _ := json.Marshal(map[string]any{"type": "message", "subtype": "file_share", "channel": "C0GEN0001", "user": "U0ANN0001",
		"text": "my notes", "ts": "1700007350.000001", "files": []map[string]any{{"id": f.ID, "name": "file.htm", "mimetype": "text/plain",
			"filetype": "text", "url_private_download": f.URLPrivateDownload}}})
	ev, err := a.normalize(context.Background(), event{ID: "EvP", Inner: inner})
	if err != nil || ev == nil {
		t.Fatal(ev, err)
	}
	if len(ev.Message.Artifacts) != 1 || ev.Message.Artifacts[0].Size != int64(len(page)) {
		t.Errorf("the shared page was not stored: %+v %v", ev.Message.Artifacts, ev.Message.Metadata.Extra.Other)
	}
	if h := a.health.Health(); h.LastError != "" {
		t.Errorf("health %+v", h)
	}
}

// TestFileFailures: what may pass (5xx, 429, a cut connection) fails the
// event so that Slack sends it again; what will not (404, too large)
// writes the message without the file.
func TestFileFailures(t *testing.T) {
	s := workspace(t)
	var fail atomic.Int64
	fr := front(t, s, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/files-pri/custom/flaky.png":
			if fail.Add(-1) >= 0 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
		case "/files-pri/custom/limited.png":
			if fail.Add(-1) >= 0 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
		case "/files-pri/custom/cut.png":
			if fail.Add(-1) >= 0 {
				w.Header().Set("Content-Length", "1000")
				w.Write([]byte(pngBytes)) // then the handler returns: the body is cut short
				return
			}
		case "/files-pri/custom/gone.png":
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte(pngBytes))
	})
	a := newTestAdapter(t, s, func(o *Options) { o.Config.APIURL = fr.URL + "/api/" })
	for i, path := range []string{"flaky", "limited", "cut"} {
		t.Run(path, func(t *testing.T) {
			fail.Store(1)
			ev := fileEvent("EvF", fmt.Sprintf("1700007400.00000%d", i), fr.URL+"/files-pri/custom/"+path+".png", "image/png", 19)
			got, err := a.normalize(context.Background(), ev)
			if err == nil || got != nil || !adapters.IsTemporary(err) {
				t.Fatalf("first try: %+v, %v; want a temporary error", got, err)
			}
			if strings.Contains(err.Error(), "xoxb-") {
				t.Errorf("token in the error: %v", err)
			}
			got, err = a.normalize(context.Background(), ev)
			if err != nil || got == nil || len(got.Message.Artifacts) != 1 {
				t.Fatalf("retry: %+v, %v; want the file stored", got, err)
			}
		})
	}
	t.Run("404", func(t *testing.T) {
		got, err := a.normalize(context.Background(), fileEvent("EvG", "1700007500.000001", fr.URL+"/files-pri/custom/gone.png", "image/png", 19))
		if err != nil || got == nil || len(got.Message.Artifacts) != 0 || !strings.Contains(got.Message.Body, "404") {
			t.Fatalf("%+v, %v; want the message without the file, saying why", got, err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		small := newTestAdapter(t, s, func(o *Options) { o.Config.APIURL = fr.URL + "/api/"; o.Limits.MaxArtifactBytes = 10 })
		// The event's size says so, or lies (0): either way the
		// file is not stored, and nothing of it stays in the dropzone.
		for i, size := range []int{19, 0} {
			got, err := small.normalize(context.Background(), fileEvent("EvL", fmt.Sprintf("1700007600.00000%d", i), fr.URL+"/files-pri/custom/ok.png", "image/png", size))
			if err != nil || got == nil || len(got.Message.Artifacts) != 0 {
				t.Fatalf("size %d: %+v, %v", size, got, err)
			}
			if !strings.Contains(fmt.Sprint(got.Message.Metadata.Extra.Other["files_not_stored"]), "max_artifact_bytes") {
				t.Errorf("size %d: reason %v", size, got.Message.Metadata.Extra.Other)
			}
		}
		if small.dz.Has("sha256:0397d84f29f8cda52311da3bc25188a6ec7340eaebf32e421e5cad6477a6a84d") {
			t.Error("the file over the limit is in the dropzone")
		}
	})
	t.Run("at most maxFiles", func(t *testing.T) {
		var files []map[string]any
		for i := 0; i < maxFiles+5; i++ {
			files = append(files, map[string]any{"id": fmt.Sprintf("F%09d", i), "name": fmt.Sprintf("f%d.png", i), "mimetype": "image/png",
				"url_private": fmt.Sprintf("%s/files-pri/custom/ok%d.png", fr.URL, i)})
		}
		inner, _ := json.Marshal(map[string]any{"type": "message", "subtype": "file_share", "channel": "C0GEN0001", "user": "U0ANN0001",
			"text": "many", "ts": "1700007700.000001", "files": files})
		got, err := a.normalize(context.Background(), event{ID: "EvM", Inner: inner})
		if err != nil || got == nil {
			t.Fatal(got, err)
		}
		if len(got.Message.Artifacts) != maxFiles {
			t.Errorf("%d artifacts, want %d", len(got.Message.Artifacts), maxFiles)
		}
		if !strings.Contains(fmt.Sprint(got.Message.Metadata.Extra.Other["files_not_stored"]), "5 more files") {
			t.Errorf("the files left out are not said: %v", got.Message.Metadata.Extra.Other["files_not_stored"])
		}
	})
}

// TestFileFake: the fake's own file host, as slack-go's users meet it: a
// file the app's scopes do not reach answers the sign-in page with 200
// to the bot token itself; a 503 is retried and then stored.
func TestFileFake(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	f := s.AddFile(slackapi.File{ID: "F0SECRET01", Name: "secret.png", Mimetype: "image/png"}, []byte(pngBytes))
	s.RestrictFile(f.ID)
	ev, err := a.normalize(context.Background(), fileEvent("EvS1", "1700007800.000001", f.URLPrivateDownload, "image/png", 19))
	if err != nil || ev == nil {
		t.Fatal(ev, err)
	}
	if len(ev.Message.Artifacts) != 0 || !strings.Contains(a.health.Health().LastError, "HTML page") {
		t.Errorf("restricted file: artifacts %+v, health %+v", ev.Message.Artifacts, a.health.Health())
	}
	if !strings.Contains(ev.Message.Body, "see the file") {
		t.Errorf("the message's words are lost: %q", ev.Message.Body)
	}

	g := s.AddFile(slackapi.File{ID: "F0FLAKY001", Name: "flaky.png", Mimetype: "image/png"}, []byte(pngBytes))
	s.Fail(slackfake.FileDownload, slackfake.Failure{Status: http.StatusServiceUnavailable})
	e := fileEvent("EvS2", "1700007800.000002", g.URLPrivateDownload, "image/png", 19)
	if got, err := a.normalize(context.Background(), e); err == nil || got != nil || !adapters.IsTemporary(err) {
		t.Fatalf("503: %+v, %v; want a temporary error", got, err)
	}
	got, err := a.normalize(context.Background(), e)
	if err != nil || got == nil || len(got.Message.Artifacts) != 1 {
		t.Fatalf("retry: %+v, %v", got, err)
	}
	if n := s.Calls(slackfake.FileDownload); n < 3 {
		t.Errorf("%d downloads, want the three tries", n)
	}
}

// TestFileNeverAnAPICall: a url_private on Slack's own host that names an
// API method (or reaches one through a dot segment or an escaped slash) is
// not fetched: with the bot token, the download would be the call, here a
// post to CPWNED, and its JSON answer stored as the attachment.
func TestFileNeverAnAPICall(t *testing.T) {
	s := workspace(t)
	a := newTestAdapter(t, s, nil)
	api := s.APIURL()
	for i, u := range []string{
		api + "chat.postMessage?channel=CPWNED&text=pwned",
		s.URL() + "/files-pri/../api/chat.postMessage?channel=CPWNED&text=pwned",
		s.URL() + "/files-pri/%2e%2e/api/chat.postMessage?channel=CPWNED&text=pwned",
		s.URL() + "/files-pri%2f..%2fapi/chat.postMessage?channel=CPWNED&text=pwned",
		s.URL() + "/files-pri/",
	} {
		ev, err := a.normalize(context.Background(), fileEvent(fmt.Sprintf("EvP%d", i), fmt.Sprintf("1700007100.00000%d", i), u, "image/png", 19))
		if err != nil || ev == nil {
			t.Fatalf("%s: %+v, %v", u, ev, err)
		}
		if m := ev.Message; len(m.Artifacts) != 0 || m.Metadata.Extra.Other["files_not_stored"] == nil {
			t.Errorf("%s: artifacts %+v, extra %v: want the file left out, saying why", u, m.Artifacts, m.Metadata.Extra.Other)
		}
	}
	if n := s.Calls("chat.postMessage"); n != 0 {
		t.Errorf("chat.postMessage was called %d times through a file download", n)
	}
}
