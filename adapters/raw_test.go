package adapters

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestScrubRaw(t *testing.T) {
	var v map[string]any
	json.Unmarshal([]byte(`{"token":"t1","Secret":"s","event":{"action_token":"a","text":"hi","n":3,
		"list":[{"bot_token":"b","keep":1}]}}`), &v)
	// 20 levels of nesting under "deep".
	deep := map[string]any{}
	cur := deep
	for range 20 {
		next := map[string]any{}
		cur["x"] = next
		cur = next
	}
	v["deep"] = deep
	got := ScrubRaw(v, func(x any) any {
		if s, ok := x.(string); ok {
			return strings.ToUpper(s)
		}
		return x
	})
	b, _ := json.Marshal(got)
	out := string(b)
	for _, secret := range []string{"t1", `"s"`, `"a"`, `"b"`, "token", "ecret"} {
		if strings.Contains(out, secret) {
			t.Errorf("%s left in %s", secret, out)
		}
	}
	for _, want := range []string{`"text":"HI"`, `"n":3`, `"keep":1`, "(nested too deep)"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s missing from %s", want, out)
		}
	}
}

// RawEvent scrubs the event and says whether it fits the bound, measured
// after scrubbing; what is not a JSON object is nothing.
func TestRawEvent(t *testing.T) {
	for _, bad := range []string{``, `[1]`, `"x"`, `null`, `{`} {
		if v, fits := RawEvent(json.RawMessage(bad), 1<<10, nil); v != nil || fits {
			t.Errorf("%q: %v %v", bad, v, fits)
		}
	}
	ev := json.RawMessage(`{"token":"` + strings.Repeat("t", 100) + `","text":"hi"}`)
	v, fits := RawEvent(ev, 20, nil)
	if !fits || v["text"] != "hi" || v["token"] != nil {
		t.Errorf("scrubbed to 13 bytes, bound 20: %v %v", v, fits)
	}
	v, fits = RawEvent(ev, 12, nil)
	if fits || v["text"] != "hi" {
		t.Errorf("13 bytes, bound 12: %v %v", v, fits)
	}
}
