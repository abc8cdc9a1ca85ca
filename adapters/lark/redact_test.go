package lark

import (
	"strings"
	"testing"

	"github.com/monoco/courier/internal/confkit"
)

// With Lark's test verification token "v", the adapter's redaction turned
// every v of its log and errors into [redacted] ("larkfake does not
// ser[redacted]e GET /open-apis/im/[redacted]1/chats"). A secret under
// confkit.StrongSecretLen goes only where it stands alone.
func TestRedactShortVerificationToken(t *testing.T) {
	a, err := newAdapter(Config{AppID: "cli_1", AppSecret: "app-secret-long-enough", VerificationToken: "v"}, confkit.Limits{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	line := "larkfake does not serve GET /open-apis/im/v1/chats"
	if got := a.redact(line); got != line {
		t.Errorf("redact(%q) = %q", line, got)
	}
	got := a.redact(`token "v" and app-secret-long-enough refused`)
	if got != `token "[redacted]" and [redacted] refused` || strings.Contains(got, "app-secret") {
		t.Errorf("the secrets themselves: %q", got)
	}
}
