package service

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/confkit"
)

// TestRedactor: a secret a provider holds never reaches the log, whether a
// message, a string attribute, an error or a group quotes it, including
// through loggers derived before the secret was known.
func TestRedactor(t *testing.T) {
	var buf bytes.Buffer
	r := NewRedactor(slog.NewTextHandler(&buf, nil))
	log := slog.New(r)
	derived := log.With("adapter", "email").WithGroup("g")
	r.Add(confkit.Secret("hunter2-imap-pass"), confkit.Secret("xoxb-123"), confkit.Secret("abc")) // "abc": short, redacted only as a whole word
	log.Info("login failed for hunter2-imap-pass", "err", errors.New(`AUTH PLAIN "hunter2-imap-pass" refused`), "token", "xoxb-123")
	derived.Warn("x", "detail", "the token xoxb-123 expired", "n", 3, slog.Group("inner", "s", "hunter2-imap-pass"))
	log.Info("abc stays", "word", "abcdef")
	out := buf.String()
	for _, s := range []string{"hunter2-imap-pass", "xoxb-123"} {
		if strings.Contains(out, s) {
			t.Errorf("the log holds the secret %q:\n%s", s, out)
		}
	}
	if n := strings.Count(out, "[redacted]"); n != 6 {
		t.Errorf("%d redactions, want 6:\n%s", n, out)
	}
	if !strings.Contains(out, "[redacted] stays") || !strings.Contains(out, "word=abcdef") || !strings.Contains(out, "n=3") || !strings.Contains(out, "adapter=email") {
		t.Errorf("redaction touched what is no secret:\n%s", out)
	}
}

// A secret under confkit.StrongSecretLen is redacted only as a whole
// word: with Lark's test verification token "v" every v of the log was
// [redacted] ("larkfake does not ser[redacted]e GET
// /open-apis/im/[redacted]1/chats"). Dead letters alike.
func TestRedactorShortSecret(t *testing.T) {
	var buf bytes.Buffer
	r := NewRedactor(slog.NewTextHandler(&buf, nil))
	r.Add(confkit.Secret("v"))
	slog.New(r).Warn("larkfake does not serve GET /open-apis/im/v1/chats", "err", errors.New("verification token v refused"))
	out := buf.String()
	if !strings.Contains(out, "larkfake does not serve GET /open-apis/im/v1/chats") || !strings.Contains(out, `"verification token [redacted] refused"`) {
		t.Errorf("a one-letter secret:\n%s", out)
	}
	if got := r.redact(`{"token":"v","type":"event_callback"}`); got != `{"token":"[redacted]","type":"event_callback"}` {
		t.Errorf("a payload: %s", got)
	}
}
