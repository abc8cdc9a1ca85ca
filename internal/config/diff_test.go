package config_test

import (
	"slices"
	"testing"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/providers/all"
)

// Diff names each changed key as deep as a reload acts on it.
func TestDiff(t *testing.T) {
	parse := func(s string) *config.Config {
		c, err := config.Parse([]byte(s), t.TempDir(), all.Table.Adapters())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := parse("courier:\n  http: {listen: 127.0.0.1:1}\n  adapters:\n    slack: {enabled: false, channels: [C1]}\n")
	b := parse("courier:\n  http: {listen: 127.0.0.1:2}\n  log: {level: debug}\n  notify: [{name: h, exec: [/bin/true]}]\n  adapters:\n    slack: {enabled: false, channels: [C2]}\n")
	got := config.Diff(a, b)
	for _, k := range []string{"courier.http.listen", "courier.log.level", "courier.notify", "courier.adapters.slack"} {
		if !slices.Contains(got, k) {
			t.Errorf("Diff = %v, want %s in it", got, k)
		}
	}
	if len(got) != 4 {
		t.Errorf("Diff = %v, want 4 keys", got)
	}
	if d := config.Diff(a, a); len(d) != 0 {
		t.Errorf("Diff of a config with itself: %v", d)
	}
}
