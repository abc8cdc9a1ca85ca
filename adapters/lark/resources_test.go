package lark

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/larkfake"
)

// TestResourceStreamedOverLimit: a download with no Content-Length that
// runs past the artifact limit is cut off and the message written
// without it; the token and the app secret reach neither the file nor the
// log, whatever fails.
func TestResourceStreamedOverLimit(t *testing.T) {
	const secret, token = "app-s3cret-value", "t-tenant-token-value"
	base := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/tenant_access_token/internal"):
			w.Write([]byte(`{"code":0,"tenant_access_token":"` + token + `","expire":7200}`))
		case strings.Contains(r.URL.Path, "/resources/"):
			// Chunked, no Content-Length: only the stream can tell.
			chunk := bytes.Repeat([]byte("x"), 4096)
			for range 64 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		default:
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"code":1,"msg":"echo ` + r.Header.Get("Authorization") + `"}`))
		}
	}))
	defer base.Close()
	a, _ := testAdapter(t, base.URL, secret)
	var logs bytes.Buffer
	a.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a.limits.MaxArtifactBytes = 10 << 10
	out, err := a.normalize(context.Background(), readEvent(t, "testdata/file.json"))
	if err != nil {
		t.Fatalf("normalize: %v", err)
	}
	if len(out.Message.Artifacts) != 0 {
		t.Errorf("a resource over the limit was stored: %+v", out.Message.Artifacts)
	}
	notes, _ := out.Message.Metadata.Extra.Other["resources"].([]any)
	if len(notes) != 1 || !strings.Contains(stringOf(notes), "max_artifact_bytes") {
		t.Errorf("resources note %v does not name the limit", notes)
	}
	data := testutil.CheckMessage(t, "over limit", out.Message)
	for _, s := range []string{secret, token} {
		if strings.Contains(logs.String(), s) || strings.Contains(string(data), s) {
			t.Errorf("%q reached the log or the file:\n%s", s, logs.String())
		}
	}
}

func stringOf(v []any) string {
	var b strings.Builder
	for _, x := range v {
		if m, ok := x.(map[string]any); ok {
			for _, k := range []string{"key", "kind", "reason"} {
				s, _ := m[k].(string)
				b.WriteString(s + " ")
			}
		}
	}
	return b.String()
}

// TestTokenCachedAndShared: events normalised at once (the transports call
// normalize from several goroutines) share one tenant token and one name
// cache, without a race.
func TestTokenCachedAndShared(t *testing.T) {
	s := fakeLark(t)
	a, _ := testAdapter(t, s.URL(), s.Options().AppSecret)
	names := []string{"image", "file", "text_mention", "post", "thread_reply", "interactive"}
	errs := make(chan error, 4*len(names))
	var wg sync.WaitGroup
	for range 4 {
		for _, n := range names {
			ev := readEvent(t, "testdata/"+n+".json")
			wg.Go(func() {
				out, err := a.normalize(context.Background(), ev)
				if err == nil && out.Message.Participants.From.Name != "Ann Lee" {
					err = fmt.Errorf("%s: from %+v", n, out.Message.Participants.From)
				}
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := s.Calls(larkfake.RouteTenantToken); n != 1 {
		t.Errorf("tenant token fetched %d times for 24 events, want 1 (cached until its expiry)", n)
	}
}
