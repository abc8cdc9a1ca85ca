package adapters

import (
	"encoding/json"
)

// ScrubRaw readies a decoded JSON value (an event, for
// metadata.provider_raw) to be kept: every key that holds or names a
// secret ("token", "secret", "encrypt_key", "password", any key ending in
// "_token" or "_secret") is removed, at
// every depth, and what lies deeper than 16 levels is replaced by
// "(nested too deep)". leaf, when set, rewrites each other value in maps
// and lists. Maps are changed in place; the value to keep is returned.
func ScrubRaw(v any, leaf func(any) any) any { return scrub(v, leaf, 0) }

func scrub(v any, leaf func(any) any, depth int) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if secretKey(k) {
				delete(t, k)
				continue
			}
			if depth > 16 {
				t[k] = "(nested too deep)"
				continue
			}
			t[k] = scrub(x, leaf, depth+1)
		}
	case []any:
		for i, x := range t {
			if depth > 16 {
				t[i] = "(nested too deep)"
				continue
			}
			t[i] = scrub(x, leaf, depth+1)
		}
	default:
		if leaf != nil {
			return leaf(v)
		}
	}
	return v
}

// RawEvent decodes a provider's event for metadata.provider_raw and
// scrubs it (ScrubRaw, with leaf): v is nil when the event is not a JSON
// object; fits is false when its JSON, scrubbed, is over max bytes, and the
// provider then keeps only what identifies the event.
func RawEvent(event json.RawMessage, max int, leaf func(any) any) (v map[string]any, fits bool) {
	if json.Unmarshal(event, &v) != nil || v == nil {
		return nil, false
	}
	ScrubRaw(v, leaf)
	b, err := json.Marshal(v)
	return v, err == nil && len(b) <= max
}
