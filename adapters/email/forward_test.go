package email

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/internal/testutil"
)

// forwardMail is a plain-text note with a message forwarded inline whose
// body is HTML only and which carries an attachment of its own, then a
// second message forwarded as an attachment.
const forwardMail = `From: Ann <ann@example.com>
To: agent@example.com
Subject: Fwd: two things
Message-ID: <fwd-1@example.com>
Date: Mon, 9 Feb 2026 12:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: text/plain; charset=utf-8

Can you handle these?
--outer
Content-Type: message/rfc822
Content-Disposition: inline

From: =?utf-8?q?Z=C3=BCrich_Billing?= <billing@vendor.example>
To: ann@example.com
Subject: =?utf-8?q?Invoice_=E2=82=AC120?=
Date: Tue, 10 Feb 2026 08:00:00 +0000
Message-ID: <inner-1@vendor.example>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="inner"

--inner
Content-Type: text/html; charset=utf-8

<p>Please pay <b>120 EUR</b>.</p>
--inner
Content-Type: application/pdf; name="invoice.pdf"
Content-Disposition: attachment; filename="invoice.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQKJcOkw7zDtsOfCg==
--inner--
--outer
Content-Type: message/rfc822
Content-Disposition: attachment; filename="old.eml"

From: carol@example.org
Subject: Not to be shown
Message-ID: <inner-2@example.org>

This stays in old.eml.
--outer--
`

// TestForwardedInline: a message attached inline is shown in the body as a
// mail reader shows it (header block, then its body, HTML converted), its
// own attachments become artifacts, and it is still kept whole as an .eml;
// one attached with Content-Disposition: attachment is only an artifact.
func TestForwardedInline(t *testing.T) {
	m := normalizeTest(t, testutil.NewDropzone(t, nil), strings.NewReader(forwardMail), NormalizeOptions{})

	for _, want := range []string{
		"Can you handle these?",
		mime.ForwardTitle + "\nFrom: Zürich Billing <billing@vendor.example>\nDate: Tue, 10 Feb 2026 08:00:00 +0000\nSubject: Invoice €120\nTo: ann@example.com",
		"Please pay **120 EUR**.",
	} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, m.Body)
		}
	}
	if strings.Index(m.Body, "Can you handle") > strings.Index(m.Body, mime.ForwardTitle) {
		t.Errorf("the note must come before the forwarded message:\n%s", m.Body)
	}
	if strings.Contains(m.Body, "This stays in old.eml") || strings.Contains(m.Body, "Not to be shown") {
		t.Errorf("a message attached as an attachment is shown in the body:\n%s", m.Body)
	}
	// content.text holds the note and the header block (the forwarded body
	// is HTML only: no text is made up from it); content.html the HTML with
	// its header block.
	if txt := string(m.Content.Text); !strings.Contains(txt, "Can you handle these?") || !strings.Contains(txt, "Subject: Invoice €120") || strings.Contains(txt, "120 EUR") {
		t.Errorf("content.text = %q", txt)
	}
	if h := string(m.Content.HTML); !strings.Contains(h, "<p>Please pay <b>120 EUR</b>.</p>") || !strings.Contains(h, "Zürich Billing &lt;billing@vendor.example&gt;") {
		t.Errorf("content.html = %q", h)
	}

	pdf := sha256.Sum256([]byte("%PDF-1.4\n%\xc3\xa4\xc3\xbc\xc3\xb6\xc3\x9f\n"))
	byName := map[string]string{}
	for _, a := range m.Artifacts {
		byName[a.Name] = a.ID
	}
	if byName["invoice.pdf"] != "sha256:"+hex.EncodeToString(pdf[:]) {
		t.Errorf("the forwarded message's attachment: artifacts %v", byName)
	}
	if _, ok := byName["Invoice €120.eml"]; !ok {
		t.Errorf("the forwarded message is not kept whole: artifacts %v", byName)
	}
	if _, ok := byName["old.eml"]; !ok {
		t.Errorf("the attached message is not an artifact: artifacts %v", byName)
	}
	if len(m.Artifacts) != 3 {
		t.Errorf("%d artifacts, want 3: %v", len(m.Artifacts), byName)
	}
}

// TestBodyKeepsTextBesideHTML: a text part after a multipart/alternative
// (a mailing list footer) is in content.text and in the body, which is
// made from the HTML; before, the body was the HTML's Markdown alone.
func TestBodyKeepsTextBesideHTML(t *testing.T) {
	raw := `From: ann@example.com
Subject: footer
Message-ID: <footer-1@example.com>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="m"

--m
Content-Type: multipart/alternative; boundary="a"

--a
Content-Type: text/plain

Hello plain.
--a
Content-Type: text/html

<p>Hello <i>html</i>.</p>
--a--
--m
Content-Type: text/plain

--
To unsubscribe, write to list@example.com
--m--
`
	m := normalizeTest(t, testutil.NewDropzone(t, nil), strings.NewReader(raw), NormalizeOptions{})
	if want := "Hello *html*.\n\n--\nTo unsubscribe, write to list@example.com\n"; m.Body != want {
		t.Errorf("body %q, want %q", m.Body, want)
	}
	if txt := string(m.Content.Text); txt != "Hello plain.\n--\nTo unsubscribe, write to list@example.com" {
		t.Errorf("content.text %q", txt)
	}
	if h := string(m.Content.HTML); h != "<p>Hello <i>html</i>.</p>" {
		t.Errorf("content.html %q (the HTML as received)", h)
	}
}

// TestForwardChainBounded: messages forwarded inside one another are shown
// down to mime.MaxForwards levels; deeper ones are kept whole, noted.
func TestForwardChainBounded(t *testing.T) {
	inner := "From: level0@example.org\nSubject: level 0\n\nthe innermost text\n"
	for i := 1; i <= mime.MaxForwards+2; i++ {
		inner = fmt.Sprintf("From: level%d@example.org\nSubject: level %d\nMIME-Version: 1.0\nContent-Type: message/rfc822\n\n%s", i, i, inner)
	}
	m := normalizeTest(t, testutil.NewDropzone(t, nil), strings.NewReader("Message-ID: <chain@example.org>\n"+inner), NormalizeOptions{})
	if n := strings.Count(m.Body, mime.ForwardTitle); n != mime.MaxForwards {
		t.Errorf("%d forwarded messages shown, want %d:\n%s", n, mime.MaxForwards, m.Body)
	}
	if strings.Contains(m.Body, "the innermost text") {
		t.Errorf("the message below the bound is shown:\n%s", m.Body)
	}
	if !strings.Contains(string(m.Metadata.Extra.ParseError), "kept whole, not shown") {
		t.Errorf("parse_error %q does not note the bound", m.Metadata.Extra.ParseError)
	}
	// The outermost attached message is kept whole, and so is the one at
	// the bound, which is not shown; the levels between are inside the
	// outermost one's bytes and are not stored again.
	if len(m.Artifacts) != 2 {
		t.Errorf("%d artifacts, want 2: the outermost attached message and the one at the bound", len(m.Artifacts))
	}
}
