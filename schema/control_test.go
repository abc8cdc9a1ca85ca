package schema

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStripControls(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		n        int
	}{
		{"plain text, é, 中文", "plain text, é, 中文", 0},
		{"tab\tand\nnewline stay", "tab\tand\nnewline stay", 0},
		{"\x1b[31mred\x1b[0m", "[31mred[0m", 2},
		{"bell\a, CR\r, BS\b, NUL\x00, DEL\x7f", "bell, CR, BS, NUL, DEL", 5},
		{"C1 \u009b2J and \u0085", "C1 2J and ", 2},
		{"invoice\u202efdp.exe", "invoicefdp.exe", 1},
		{"\u2066isolate\u2069 \u202aembed\u202c", "isolate embed", 4},
		{"LRM \u200e stays", "LRM \u200e stays", 0},
		{"bad \xff byte", "bad \xff byte", 0},
	} {
		got, n := StripControls(tc.in)
		if got != tc.want || n != tc.n {
			t.Errorf("StripControls(%q) = %q, %d; want %q, %d", tc.in, got, n, tc.want, tc.n)
		}
	}
}

// stripRunes is StripControls as it was, rune by rune: the reference the
// byte scan must agree with.
func stripRunes(s string) (string, int) {
	var b strings.Builder
	n := 0
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if IsStrippedControl(r) {
			n++
		} else {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String(), n
}

// The byte scan of StripControls (issue 21) removes exactly what decoding
// every rune did, valid UTF-8 or not.
func TestStripControlsMatchesRunes(t *testing.T) {
	pieces := []string{"a", "é", "\t", "\n", "\r", "\x1b", "\x00", "\x7f", "\u0080", "\u009b", "\u009f", "\u00a0",
		"\u202a", "\u202e", "\u202f", "\u2029", "\u2066", "\u2069", "\u206a", "\u2028", "\xc2", "\xe2", "\xe2\x80", "\xe2\x81",
		"\x80", "\xaa", "\xa6", "\xff", "😀", "\xf0\x9f", "中"}
	rng := rand.New(rand.NewPCG(21, 21))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		got, n := StripControls(s)
		want, wn := stripRunes(s)
		if got != want || n != wn {
			t.Fatalf("StripControls(%q) = %q, %d; rune by rune: %q, %d", s, got, n, want, wn)
		}
	}
}

// BenchmarkStripControls: a 4 KB text with nothing to strip (the usual
// case), ASCII and not.
func BenchmarkStripControls(b *testing.B) {
	for name, s := range map[string]string{
		"ascii":   strings.Repeat("Hello Ann,\n\tthe figures are attached. ", 110),
		"unicode": strings.Repeat("Grüße, Ann — 数字は添付の通りです。\n", 100),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				StripControls(s)
			}
		})
	}
}

// previewWhole is Preview as it was: every word of s joined, then cut.
func previewWhole(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// FuzzPreview: Preview, which joins the words only as far as the preview
// reaches, says exactly what joining them all and cutting says, invalid
// UTF-8 and every kind of white space included.
func FuzzPreview(f *testing.F) {
	for _, s := range []string{"", "a", " a  b\tc\n", "héllo wörld ", "\xff\xfe x \u2003 y", strings.Repeat("word ", 100), strings.Repeat("x", 300), "日本語 の テキスト"} {
		for _, n := range []int{1, 2, 5, 120} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 1 || n > 1000 {
			return
		}
		if got, want := Preview(s, n), previewWhole(s, n); got != want {
			t.Fatalf("Preview(%q, %d) = %q, want %q", s, n, got, want)
		}
	})
}

// BenchmarkPreview: the index's preview line of a typical text and of a
// text of megabytes, against joining every word first (previewWhole).
func BenchmarkPreview(b *testing.B) {
	for _, size := range []int{4 << 10, 4 << 20} {
		text := strings.Repeat("Lorem ipsum dolor sit amet, consectetur\n", size/40)
		for _, impl := range []struct {
			name string
			fn   func(string, int) string
		}{{"scan", Preview}, {"whole", previewWhole}} {
			b.Run(fmt.Sprintf("%dKB/%s", size>>10, impl.name), func(b *testing.B) {
				for b.Loop() {
					impl.fn(text, 120)
				}
			})
		}
	}
}
