package slack

import (
	"strings"
	"testing"
)

func TestMissingScopes(t *testing.T) {
	all := make([]string, 0, len(botScopes))
	for _, b := range botScopes {
		all = append(all, b.scope)
	}
	if err := missingScopes(strings.Join(all, ",")); err != nil {
		t.Errorf("every scope granted: %v", err)
	}
	if err := missingScopes(""); err != nil {
		t.Errorf("no header: %v", err)
	}
	err := missingScopes("chat:write, channels:history,users:read,identify")
	if err == nil {
		t.Fatal("scopes missing, no error")
	}
	for _, want := range []string{"files:read (downloading the files of messages)", "im:write", "groups:history"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	for _, granted := range []string{"chat:write (", "channels:history (", "users:read ("} {
		if strings.Contains(err.Error(), granted) {
			t.Errorf("error %q names a granted scope %s", err, granted)
		}
	}
}
