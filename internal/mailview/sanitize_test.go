package mailview

import (
	"strings"
	"testing"
)

// JSONSafeWriter escapes a rune whatever write it is cut across.
func TestJSONSafeWriterSplitRunes(t *testing.T) {
	in := []byte(`{"a":"x` + "\u202e" + `y` + "\u0085" + `z` + "\x7f" + `é€"}`)
	want := `{"a":"x\u202ey\u0085z\u007fé€"}`
	for cut1 := 0; cut1 <= len(in); cut1++ {
		for cut2 := cut1; cut2 <= len(in); cut2++ {
			var b strings.Builder
			w := &JSONSafeWriter{W: &b}
			w.Write(in[:cut1])
			w.Write(in[cut1:cut2])
			w.Write(in[cut2:])
			w.Close()
			if b.String() != want {
				t.Fatalf("cut at %d and %d: %q, want %q", cut1, cut2, b.String(), want)
			}
		}
	}
}
