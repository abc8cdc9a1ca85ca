package mime

import (
	"strings"
	"testing"
	"time"
)

// dateSeeds are dates of every form ParseDate meets, read and not read.
var dateSeeds = []string{
	"Fri, 06 Feb 2026 19:30:00 +0100", "Fri, 6 Feb 2026 19:30:00 -0000", "6 Feb 2026 19:30:00 +0100",
	"06 Feb 2026 19:30:00 +0100", "fri, 06 feb 2026 19:30:00 +0100", "FRI, 06 FEB 2026 19:30:00 +0100",
	"Fri, 06 Feb 2026 19:30:00 +0100 (CET)", "Fri, 06 Feb 2026 19:30:00 +0100(CET)", "Fri, 06 Feb 2026 19:30:00 +0100  (Central European Time)",
	"Fri, 06 Feb 2026 19:30:00 +0100 (CET) (x)", "Fri, 06 Feb 2026 19:30:00 +0100 (+CET)", "Fri, 06 Feb 2026 19:30:00 +0100 (CET",
	"Fri, 06 Feb 2026 (x) 19:30:00 +0100", "Fri, 06 Feb 2026 19:30 +0100", "Fri, 06 Feb 26 19:30:00 +0100",
	"Fri, 06 Feb 2026 19:30:00 +01:00", "Fri, 06 Feb 2026 19:30:00 EST", "Fri, 06 Feb 2026 19:30:00 +0000 GMT",
	"Fri, 06 Feb 2026 19:30:00 +0100 GMT", "Xyz, 06 Feb 2026 19:30:00 +0100", "Friday, 06 Feb 2026 19:30:00 +0100",
	"Fri,06 Feb 2026 19:30:00 +0100", "Fri,  06 Feb 2026 19:30:00 +0100", "Fri, 06 Feb 2026  19:30:00 +0100",
	"Fri, 06 Feb 2026 19:30:00\t+0100", "Fri, 06 Feb 2026 19:30:00 +01000", "Fri, 06 Feb 2026 19:30:00 +010",
	"Fri, 06 Feb 2026 19:30:60 +0100", "Fri, 31 Feb 2026 19:30:00 +0100", "Fri, 06 Feb 1900 19:30:00 +0000",
	"Fri, 06 Feb 2026 25:30:00 +0100", "Fri, 06 Feb 2026 19:30:00 +9999", "Fri, 006 Feb 2026 19:30:00 +0100",
	"Fri, 06 Feb 12026 19:30:00 +0100", "Fri, 06-Feb-2026 19:30:00 +0100", "Fri Feb  6 19:30:00 2026",
	"2026-02-06T19:30:00+01:00", "2026-02-06 19:30:00 -0100", "Fri, 06 Feb 2026 19:30:00", "+0100", " +0100",
	"x +0100", "Fri, 06 Feb 2026 19:30:00 +0100\r\n", "Fri, 06 Feb 2026 19:30:00 +0100 ()", "someday", "",
	"Fri, 06 Feb 2026 19:30:00.123 +0100", "Fri, 06 Sept 2026 19:30:00 +0100", "Fri, 06 Feb 2026 9:30:00 +0100",
}

// ParseDate's fast path reads a date to the same time as the full parser,
// which tries net/mail's layouts in turn, and reads nothing the full parser
// rejects.
func TestParseDateFast(t *testing.T) {
	for _, s := range dateSeeds {
		checkDateFast(t, s)
	}
	for _, c := range []struct {
		in   string
		fast bool
	}{
		{"Fri, 06 Feb 2026 19:30:00 +0100", true}, {"6 Feb 2026 19:30:00 -0000", true},
		{"Fri, 06 Feb 2026 19:30:00 +0100 (CET)", true}, {"Fri, 06 Feb 2026 19:30 +0100", false},
		{"Fri, 06 Feb 2026 19:30:00 EST", false}, {"Fri, 06 Feb 2026 19:30:00 +0100 (CET) (x)", false},
	} {
		if _, ok := parseDateFast(c.in); ok != c.fast {
			t.Errorf("parseDateFast(%q): ok %v, want %v", c.in, ok, c.fast)
		}
	}
}

func checkDateFast(t *testing.T, s string) {
	t.Helper()
	got, gok := ParseDate(s)
	want, wok := parseDate(strings.TrimSpace(s))
	if gok != wok || !got.Equal(want) || got.Location().String() != want.Location().String() || got.Format(time.RFC3339Nano) != want.Format(time.RFC3339Nano) {
		t.Errorf("ParseDate(%q) = %v, %v; the full parser: %v, %v", s, got, gok, want, wok)
	}
}

func FuzzParseDateFast(f *testing.F) {
	for _, s := range dateSeeds {
		f.Add(s)
	}
	f.Fuzz(checkDateFast)
}

// BenchmarkParseDate: the usual date.
func BenchmarkParseDate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ParseDate("Fri, 06 Feb 2026 19:30:00 +0100")
	}
}
