package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// nopSink is a Sink with nothing behind it.
type nopSink struct{ adapters.Sink }

// The service's Sink keeps what a provider cannot file in the mailbox's
// dead letters, scrubbed of the providers' own credentials besides what
// looks like a secret; /health and /metrics count the dead letters (kept,
// refused beyond the bound, on disk) and the events ignored on purpose,
// by provider; a refusal is logged once a minute, not once an event.
func TestDeadLetterSinkCounted(t *testing.T) {
	w := wstest.Mailbox(t)
	root, mb := w.Root, w.MB
	dl := mailbox.NewDeadLetters(mb, mailbox.DeadLetterLimits{MaxFiles: 1})
	var logged testutil.Buffer
	sink := NewDeadLetterSink(nopSink{}, dl, []confkit.Secret{"sig-5ecret-value"}, slog.New(slog.NewTextHandler(&logged, nil)))
	var ignored adapters.Ignored
	ignored.Add("notice")
	ignored.Add("notice")
	s := &Service{Mailbox: mb, DeadLetters: dl, Ignored: map[schema.Provider]*adapters.Ignored{schema.Slack: &ignored},
		Adapters: map[string]adapters.HealthReporter{"slack": fixedHealth{Status: adapters.StatusConnected}, "lark": fixedHealth{Status: adapters.StatusConnected}}}

	payload := `{"token":"verification-token","event":{"type":"message","text":"sig-5ecret-value and xoxb-1-2-abc"}}`
	ctx := context.Background()
	for i := range 3 {
		d := adapters.DeadLetter{Provider: schema.Slack, Source: "slack events api", Reason: "slack: a message event without a ts", Payload: []byte(payload)}
		if i > 0 {
			d.Payload = []byte(strings.Replace(payload, "message", "message again", 1) + strings.Repeat(" ", i))
		}
		if err := sink.SetAside(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(root, ".monoco/mailbox/.deadletter/slack/*_raw_*.json"))
	if len(names) != 1 {
		t.Fatalf("kept %v, want one (max_files 1)", names)
	}
	kept, _ := os.ReadFile(names[0])
	for _, secret := range []string{"verification-token", "sig-5ecret-value", "xoxb-"} {
		if strings.Contains(string(kept), secret) {
			t.Errorf("%s kept in\n%s", secret, kept)
		}
	}
	if !strings.Contains(string(kept), `"text": "[redacted] and [scrubbed]"`) {
		t.Errorf("kept\n%s", kept)
	}
	if n := strings.Count(logged.String(), "at their bound"); n != 1 {
		t.Errorf("refusals logged %d times, want once:\n%s", n, logged.String())
	}
	if !strings.Contains(logged.String(), "set aside in .deadletter") {
		t.Errorf("log:\n%s", logged.String())
	}

	rec := httptest.NewRecorder()
	s.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	var r Report
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if got := r.DeadLetter["slack"]; got != (mailbox.DeadLetterStats{SetAside: 1, Refused: 2, Kept: 1, KeptBytes: int64(len(kept))}) {
		t.Errorf("/health deadletter slack %+v", got)
	}
	if got, ok := r.DeadLetter["lark"]; !ok || got != (mailbox.DeadLetterStats{}) {
		t.Errorf("/health deadletter lark %+v %v: an enabled provider shows its zeros", got, ok)
	}
	if r.Ignored["slack"]["notice"] != 2 {
		t.Errorf("/health ignored %v", r.Ignored)
	}
	if r.Status != "healthy" {
		t.Errorf("status %q: dead letters do not degrade the service (anyone can send bad events)", r.Status)
	}

	rec = httptest.NewRecorder()
	s.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`courier_deadletter_total{provider="slack"} 1`, `courier_deadletter_refused_total{provider="slack"} 2`,
		`courier_deadletter_kept{provider="slack"} 1`, `courier_deadletter_total{provider="lark"} 0`,
		`courier_events_ignored_total{provider="slack",reason="notice"} 2`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
