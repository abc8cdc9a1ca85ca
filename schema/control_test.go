package schema

import "testing"

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
