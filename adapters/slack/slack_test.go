package slack

import (
	"context"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil/slackfake"
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

// A bot token without a scope Courier uses makes the running adapter
// degraded on /health, naming the scope, as doctor fails on it (issue
// 19, item 6); granted every scope, it is connected.
func TestMissingScopesDegraded(t *testing.T) {
	var all []string
	for _, b := range botScopes {
		all = append(all, b.scope)
	}
	for _, c := range []struct {
		scopes, want, detail string
	}{
		{strings.Join(all[1:], ","), adapters.StatusDegraded, "lacks scopes: " + all[0]},
		{strings.Join(all, ","), adapters.StatusConnected, ""},
	} {
		s := slackfake.New(t, slackfake.Options{Scopes: c.scopes})
		a := newTestAdapter(t, s, nil)
		if _, err := a.Identify(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.health.Set(adapters.StatusConnected, "")
		h := a.health.Health()
		if h.Status != c.want || !strings.Contains(h.Detail, c.detail) {
			t.Errorf("scopes %q: health %+v, want %s", c.scopes, h, c.want)
		}
	}
}
