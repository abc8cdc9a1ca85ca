package confkit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/internal/confkit"
)

// A section's checker takes keys relative to the section and reports them
// by their whole path and line, into the one list its root collects.
func TestCheckerAt(t *testing.T) {
	lines := map[string]int{"courier.adapters.chat": 3, "courier.adapters.chat.rooms[1]": 5}
	root := confkit.NewChecker(func(p string) int { return lines[p] }, true)
	k := root.At("courier.adapters.chat")
	k.Bad("rooms[1]", "%q is not a room", "x")
	k.At("rooms[1]").Bad("", "again")
	k.Bad("", "the section")
	if !k.Secrets() || k.Path("token") != "courier.adapters.chat.token" || root.Path("") != "" {
		t.Errorf("paths: %q %q", k.Path("token"), root.Path(""))
	}
	var got []string
	for _, e := range root.Errors() {
		got = append(got, e.Error())
	}
	want := `[5: courier.adapters.chat.rooms[1]: "x" is not a room 5: courier.adapters.chat.rooms[1]: again 3: courier.adapters.chat: the section]`
	if fmt.Sprint(got) != want {
		t.Errorf("errors:\n got %v\nwant %s", got, want)
	}
}

func TestDurationAndDate(t *testing.T) {
	var v struct {
		A, B confkit.Duration
		D    confkit.Date
	}
	if err := yaml.Unmarshal([]byte("a: 90\nb: 1m30s\nd: 2026-01-02\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.A.D() != 90*time.Second || v.B.D() != 90*time.Second || v.D.Format("2006-01-02") != "2026-01-02" {
		t.Errorf("%v %v %v", v.A.D(), v.B.D(), v.D)
	}
	if err := yaml.Unmarshal([]byte("a: soon\n"), &v); err == nil {
		t.Error("soon is a duration")
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := confkit.Secret("hunter2")
	if out := fmt.Sprintf("%v %#v %+v %s", s, s, s, s); strings.Contains(out, "hunter2") || !strings.Contains(out, "[redacted]") {
		t.Errorf("printed %q", out)
	}
	if s.Reveal() != "hunter2" || confkit.Secret("").String() != "" {
		t.Error("Reveal or the empty secret")
	}
}
