package mime

import (
	"fmt"
	"mime/quotedprintable"
	"strings"
	"testing"
)

// qpEncode encodes s as quoted-printable, CRLF line breaks.
func qpEncode(s string) string {
	var b strings.Builder
	w := quotedprintable.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// An attached message sent quoted-printable, inside an attached message,
// whose text part is quoted-printable too: two decoders read at once, one
// feeding the other, each with its own pooled buffer, and the text comes
// out whole.
func TestNestedQuotedPrintable(t *testing.T) {
	var text strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&text, "line %d caf\u00e9 %s\r\n", i, strings.Repeat("x", i%97))
	}
	inner := "From: inner@example.com\r\nSubject: inner\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" + qpEncode(text.String()) + "\r\n--b--\r\n"
	middle := "From: middle@example.com\r\nSubject: middle\r\nContent-Type: message/rfc822\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" + qpEncode(inner)
	raw := "From: outer@example.com\r\nSubject: outer\r\nContent-Type: message/rfc822\r\n\r\n" + middle
	got := render(t, []byte(raw), Options{}).text
	want := strings.ReplaceAll(text.String(), "\r\n", "\n")
	if !strings.Contains(got, want) {
		i := firstDiff(got[strings.Index(got, "line 0 "):], want)
		t.Errorf("the innermost text differs from byte %d: %q", i, got[strings.Index(got, "line 0 ")+max(0, i-20):][:80])
	}
}
