package lark

import (
	"context"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/testutil/larkfake"
)

// chkRun runs every doctor check of a provider built by New against fake
// with secret, and returns their errors by name.
func chkRun(t *testing.T, fake *larkfake.Server, secret string) map[string]error {
	t.Helper()
	p, err := New(Options{Config: Config{Enabled: true, AppID: fake.Options().AppID, AppSecret: confkit.Secret(secret), Domain: fake.URL(), Mode: "ws"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Checks) != 2 {
		t.Fatalf("%d checks, want the token and the permissions", len(p.Checks))
	}
	out := map[string]error{}
	for _, c := range p.Checks {
		out[c.Name] = c.Run(context.Background())
	}
	return out
}

// doctor: a good app passes; a wrong secret is named by its key (never
// shown); a permission Lark refuses is named in Lark's words, with what
// Courier needs it for; a rate limit is not mistaken for a missing scope.
func TestChecks(t *testing.T) {
	fake := larkfake.New(t, larkfake.Options{})
	secret := fake.Options().AppSecret
	for name, err := range chkRun(t, fake, secret) {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	bad := "not-the-secret-" + t.Name()
	errs := chkRun(t, fake, bad)
	for name, err := range errs {
		if err == nil {
			t.Errorf("%s passed with a wrong app_secret", name)
			continue
		}
		if !strings.Contains(err.Error(), "app_secret") || strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v (want the key named, the value not shown)", name, err)
		}
	}

	scope := "Access denied. One of the following scopes is required: [im:chat:readonly, im:chat]."
	fake.Fail(larkfake.RouteChats, larkfake.Failure{Status: 400, Code: larkfake.CodePermissionDenied, Msg: scope})
	err := chkRun(t, fake, secret)["lark permissions (im/v1 reads)"]
	if err == nil || !strings.Contains(err.Error(), "im:chat:readonly") || !strings.Contains(err.Error(), "catch-up") || !strings.Contains(err.Error(), "lacks permissions") {
		t.Errorf("a refused scope: %v", err)
	}

	fake.Fail(larkfake.RouteChats, larkfake.Failure{Status: 429})
	err = chkRun(t, fake, secret)["lark permissions (im/v1 reads)"]
	if err == nil || strings.Contains(err.Error(), "lacks permissions") || !adapters.IsTemporary(err) {
		t.Errorf("a rate limit: %v (want a temporary error, not a missing scope)", err)
	}
}
