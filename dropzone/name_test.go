package dropzone_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/monoco/courier/dropzone"
)

func TestSanitizeName(t *testing.T) {
	long := strings.Repeat("a", 300)
	longCJK := strings.Repeat("名", 100) // 300 bytes, 3 per rune
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "report.pdf", "report.pdf"},
		{"unix traversal", "../../etc/passwd", "passwd"},
		{"windows traversal", `..\..\windows\system32\cmd.exe`, "cmd.exe"},
		{"mixed separators", `a/b\c.txt`, "c.txt"},
		{"backslash last", `a\b/c.txt`, "c.txt"},
		{"absolute", "/etc/shadow", "shadow"},
		{"trailing slash", "dir/", "attachment"},
		{"dot dot", "..", "attachment"},
		{"three dots", "...", "attachment"},
		{"one dot", ".", "attachment"},
		{"empty", "", "attachment"},
		{"only spaces", "   ", "attachment"},
		{"only controls", "\x00\x01\x7f", "attachment"},
		{"dot run inside", "a..b", "a.b"},
		{"long dot run", "report....final..pdf", "report.final.pdf"},
		{"dots split by a control", "a.\x00.b", "a.b"},
		{"NUL prefix", "\x00evil.exe", "evil.exe"},
		{"NUL inside", "evil.exe\x00.pdf", "evil.exe.pdf"},
		{"newlines and tabs", "line\r\nbreak\t.txt", "linebreak.txt"},
		{"DEL", "a\x7fb", "ab"},
		{"C1 controls", "a\u0085b\u009bc", "abc"},
		{"bidi override", "invoice\u202efdp.exe", "invoicefdp.exe"},
		{"bidi isolates and marks", "\u2067a\u200eb\u200f\u2069", "ab"},
		{"line separator", "a\u2028b", "ab"},
		{"byte order mark", "\ufeffnotes.txt", "notes.txt"},
		{"unicode", "名前.pdf", "名前.pdf"},
		{"emoji", "🎉 party.png", "🎉 party.png"},
		{"hidden with spaces", "  .hidden  ", "hidden"},
		{"trailing dots and spaces", "name. . .", "name"},
		{"unicode spaces trimmed", "\u00a0\u3000doc.txt\u3000", "doc.txt"},
		{"inner spaces kept", "my  file .txt", "my  file .txt"},
		{"invalid UTF-8 byte", "caf\xe9.txt", "caf\ufffd.txt"},
		{"invalid bytes each replaced", "\xff\xfe.bin", "\ufffd\ufffd.bin"},
		{"truncated rune", "a\xe5\x90", "a\ufffd\ufffd"},
		{"genuine replacement char", "a\ufffdb", "a\ufffdb"},
		{"windows reserved kept", "CON", "CON"},
		{"windows punctuation kept", `a:b*c?"d<e>|f`, `a:b*c?"d<e>|f`},
		{"exactly 255", strings.Repeat("b", 255), strings.Repeat("b", 255)},
		{"long no extension", long, strings.Repeat("a", 255)},
		{"long with extension", long + ".pdf", strings.Repeat("a", 251) + ".pdf"},
		{"long with long tail", long + "." + strings.Repeat("x", 20), strings.Repeat("a", 255)},
		{"long CJK", longCJK + ".txt", strings.Repeat("名", 83) + ".txt"},
		{"long CJK no extension", longCJK, strings.Repeat("名", 85)},
		{"cut before a dot", strings.Repeat("a", 250) + ".b" + strings.Repeat("c", 10) + ".pdf", strings.Repeat("a", 250) + ".pdf"},
		{"cut before a space", strings.Repeat("a", 254) + " " + strings.Repeat("c", 10), strings.Repeat("a", 254)},
		{"expansion by replacement", strings.Repeat("\xff", 100) + ".txt", strings.Repeat("\ufffd", 83) + ".txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := dropzone.SanitizeName(tc.in)
			if got != tc.want {
				t.Errorf("SanitizeName(%q) = %q, want %q", tc.in, got, tc.want)
			}
			checkName(t, tc.in, got)
		})
	}
}

// checkName asserts the properties every sanitised name has.
func checkName(t *testing.T, in, got string) {
	t.Helper()
	if again := dropzone.SanitizeName(got); again != got {
		t.Errorf("not idempotent: SanitizeName(%q) = %q, then %q", in, got, again)
	}
	if got == "" {
		t.Errorf("SanitizeName(%q) is empty", in)
	}
	if len(got) > 255 {
		t.Errorf("SanitizeName(%q) is %d bytes long", in, len(got))
	}
	if !utf8.ValidString(got) {
		t.Errorf("SanitizeName(%q) = %q: invalid UTF-8", in, got)
	}
	if strings.Contains(got, "..") {
		t.Errorf("SanitizeName(%q) = %q contains ..", in, got)
	}
	if strings.ContainsAny(got, `/\`) {
		t.Errorf("SanitizeName(%q) = %q contains a separator", in, got)
	}
	if strings.ContainsFunc(got, func(r rune) bool {
		return unicode.IsControl(r) || r == '\u202e' || r == '\u2028'
	}) {
		t.Errorf("SanitizeName(%q) = %q contains a control character", in, got)
	}
	first, _ := utf8.DecodeRuneInString(got)
	last, _ := utf8.DecodeLastRuneInString(got)
	for _, r := range []rune{first, last} {
		if r == '.' || unicode.IsSpace(r) {
			t.Errorf("SanitizeName(%q) = %q starts or ends with %q", in, got, r)
		}
	}
}

func FuzzSanitizeName(f *testing.F) {
	for _, s := range []string{
		"", ".", "..", "...", "../../etc/passwd", `a/b\c.txt`, "\x00evil.exe",
		"名前.pdf", "  .hidden  ", "caf\xe9", "a\u202eb", "CON",
		strings.Repeat("a", 300) + ".pdf", strings.Repeat("名", 90) + ". .x",
		strings.Repeat("\xff", 100), strings.Repeat(". ", 200),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkName(t, in, dropzone.SanitizeName(in))
	})
}
