package all_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/adapterstest"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/internal/providers/all"
	"github.com/monoco/courier/schema"
)

// TestProviderTable checks the table's contract: every row builds a
// provider of its own name with a Resolver, whatever the config enables,
// and a row that builds another name is refused.
func TestProviderTable(t *testing.T) {
	set, err := all.Table.Build(config.Default(all.Table.Adapters()), providers.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != len(all.Table) {
		t.Fatalf("%d providers built from %d rows", len(set), len(all.Table))
	}
	for _, tc := range []struct {
		to   []string
		want schema.Provider
	}{
		{[]string{"ann@example.com"}, schema.Email},
		{[]string{"oc_a1b2", "ou_c3"}, schema.Lark},
		{[]string{"C0123ABCD"}, schema.Slack},
		{[]string{"ann@example.com", "C0123ABCD"}, ""}, // mixed: the draft must say
		{[]string{"general"}, ""},
		{nil, ""},
	} {
		if got := set.Guess(tc.to); got != tc.want {
			t.Errorf("guess(%v) = %q, want %q", tc.to, got, tc.want)
		}
	}
	table := append(slices.Clip(all.Table), providers.Row{Name: schema.Teams, New: func(cfg *config.Config, env providers.Env) (*adapters.Provider, error) {
		return adapterstest.New(adapterstest.Options{Chat: adapterstest.NewChat()}) // names itself discord
	}})
	if _, err := table.Build(config.Default(table.Adapters()), providers.Env{}); err == nil || !strings.Contains(err.Error(), "teams") {
		t.Fatalf("a row building another provider's name: %v", err)
	}
}

// A config read without the table's sections cannot build the providers
// that have one: Build says so rather than build them from nothing.
func TestBuildWithoutSections(t *testing.T) {
	if _, err := all.Table.Build(config.Default(nil), providers.Env{}); err == nil || !strings.Contains(err.Error(), "no section for email") {
		t.Fatalf("Build of a config without sections: %v", err)
	}
}
