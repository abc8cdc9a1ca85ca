package emailbench

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"
)

// The synthetic mail of the fetch benchmark: what an agent's inbox holds,
// not a best case for a parser. Every message is multipart/alternative
// (quoted-printable text and an HTML rendering with inline styles, as mail
// clients send), under a realistic header block (Received chain, DKIM,
// encoded-word names and subjects, threads with In-Reply-To and
// References); one in five is multipart/mixed with a small attachment. The
// content is seeded by the message number, so every run and every machine
// sees the same bytes. Mean size is about 4.6 KB (TestSyntheticMessages).

var (
	firstNames = []string{"Ann", "Bob", "Carol", "Dmitri", "Eve", "François", "Grace", "Hiroshi", "Ines", "Jürgen",
		"Kofi", "Lena", "Mateo", "Nadia", "Olu", "Priya", "Quentin", "Rosa", "Søren", "Tanvi", "Ulla", "Viktor", "Wei", "Yara"}
	lastNames = []string{"Müller", "Smith", "Okafor", "García", "Tanaka", "Novak", "Dubois", "Kowalski", "Larsen",
		"Rossi", "Chen", "Haddad", "O'Brien", "Silva", "Ivanova", "Patel"}
	domains = []string{"example.com", "example.org", "corp.example", "mail.example.net", "partner.example",
		"vendor.example.co.uk", "univ.example.edu"}
	words = strings.Fields(`the a to of and in for on with is that this we it be as are at from by our
		can will have not your please review schema deploy release logs incident customer report
		meeting tomorrow thanks update draft agent queue latency database migration rollout
		budget invoice contract ticket branch build test failure alert dashboard metrics
		service config backup restore cluster region timeout retry error warning attached
		proposal feedback question answer decision owner deadline Friday Monday morning`)
	tags    = []string{"Re: ", "Re: ", "RE: ", "Fwd: ", "", "", "", "[ops] ", "[billing] "}
	mailers = []string{"Mozilla Thunderbird 115.6", "Apple Mail (2.3774)", "Microsoft Outlook 16.0", "Roundcube Webmail/1.6.5", "mutt/2.2.12"}
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func sentence(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = pick(r, words)
	}
	w[0] = strings.ToUpper(w[0][:1]) + w[0][1:]
	s := strings.Join(w, " ")
	switch r.IntN(8) {
	case 0:
		s += " — see below"
	case 1:
		s += " (naïve estimate: 3–5 days)"
	}
	return s + "."
}

func paragraph(r *rand.Rand) string {
	n := 2 + r.IntN(3)
	s := make([]string, n)
	for i := range s {
		s[i] = sentence(r, 8+r.IntN(10))
	}
	return strings.Join(s, " ")
}

func person(r *rand.Rand) (name, addr string) {
	first, last := pick(r, firstNames), pick(r, lastNames)
	return first + " " + last, strings.ToLower(strings.NewReplacer("ü", "u", "ç", "c", "ø", "o", "'", "").Replace(first+"."+last)) + "@" + pick(r, domains)
}

// msgID is the Message-ID of synthetic message i.
func msgID(i int) string { return fmt.Sprintf("<%d.%08x@bench.example.com>", i, uint32(i)*2654435761) }

// syntheticMessage returns message i (0-based), CRLF line endings.
func syntheticMessage(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	name, addr := person(r)
	date := time.Date(2026, 1, 5, 8, 0, 0, 0, time.FixedZone("", 3600)).Add(time.Duration(i) * 97 * time.Second)
	h("Return-Path", "<"+addr+">")
	hops := 2 + r.IntN(3)
	for k := 0; k < hops; k++ {
		h("Received", fmt.Sprintf("from mx%d.%s (mx%d.%s [192.0.2.%d])\r\n\tby mail.monoco.dev (Postfix) with ESMTPS id %08X%02X\r\n\tfor <agent@monoco.dev>; %s",
			k+1, pick(r, domains), k+1, pick(r, domains), 1+r.IntN(250), r.Uint32(), k, date.Add(-time.Duration(hops-k)*time.Second).Format(time.RFC1123Z)))
	}
	if r.IntN(2) == 0 {
		sig := make([]byte, 128)
		for k := range sig {
			sig[k] = byte(r.Uint32())
		}
		s := base64.StdEncoding.EncodeToString(sig)
		h("DKIM-Signature", "v=1; a=rsa-sha256; c=relaxed/relaxed; d="+addr[strings.IndexByte(addr, '@')+1:]+"; s=s2025;\r\n\th=from:to:cc:subject:date:message-id:in-reply-to:references;\r\n\tbh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=;\r\n\tb="+s[:64]+"\r\n\t "+s[64:])
	}
	h("Message-ID", msgID(i))
	subject := pick(r, tags) + sentence(r, 3+r.IntN(5))
	subject = strings.TrimSuffix(subject, ".")
	if i > 10 && strings.HasPrefix(subject, "Re") {
		parent := i - 1 - r.IntN(10)
		h("In-Reply-To", msgID(parent))
		h("References", msgID(parent-1)+"\r\n "+msgID(parent))
	}
	h("Date", date.Format(time.RFC1123Z))
	h("From", mime.QEncoding.Encode("utf-8", name)+" <"+addr+">")
	h("To", "Courier Agent <agent@monoco.dev>")
	if r.IntN(3) == 0 {
		n1, a1 := person(r)
		n2, a2 := person(r)
		h("Cc", mime.QEncoding.Encode("utf-8", n1)+" <"+a1+">, "+mime.QEncoding.Encode("utf-8", n2)+" <"+a2+">")
	}
	h("Subject", mime.QEncoding.Encode("utf-8", subject))
	h("User-Agent", pick(r, mailers))
	h("MIME-Version", "1.0")

	paras := make([]string, 2+r.IntN(4))
	for k := range paras {
		paras[k] = paragraph(r)
	}
	text := "Hi,\r\n\r\n" + strings.Join(paras, "\r\n\r\n") + "\r\n\r\nBest,\r\n" + name + "\r\n"
	var html strings.Builder
	html.WriteString("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\"></head>\r\n<body style=\"font-family: Calibri, Arial, sans-serif; font-size: 11pt;\">\r\n<div dir=\"ltr\"><p>Hi,</p>\r\n")
	for k, p := range paras {
		if k == 1 {
			fmt.Fprintf(&html, "<p style=\"margin:0 0 8px 0\">%s <a href=\"https://%s/t/%d\">ticket %d</a>.</p>\r\n", p, pick(r, domains), i, i)
		} else {
			fmt.Fprintf(&html, "<p style=\"margin:0 0 8px 0\">%s</p>\r\n", strings.Replace(p, " the ", " <b>the</b> ", 1))
		}
	}
	fmt.Fprintf(&html, "<p>Best,<br>%s</p></div>\r\n</body></html>\r\n", name)

	alt := func(w io.Writer, boundary string) {
		mw := multipart.NewWriter(w)
		mw.SetBoundary(boundary)
		for _, part := range []struct{ typ, body string }{{"text/plain; charset=\"UTF-8\"", text}, {"text/html; charset=\"UTF-8\"", html.String()}} {
			pw, _ := mw.CreatePart(map[string][]string{"Content-Type": {part.typ}, "Content-Transfer-Encoding": {"quoted-printable"}})
			qw := quotedprintable.NewWriter(pw)
			io.WriteString(qw, part.body)
			qw.Close()
		}
		mw.Close()
	}
	altBoundary := fmt.Sprintf("000000000000alt%08x", r.Uint32())
	if i%5 != 4 {
		h("Content-Type", "multipart/alternative; boundary=\""+altBoundary+"\"")
		b.WriteString("\r\n")
		alt(&b, altBoundary)
		return b.Bytes()
	}
	// One in five carries a small attachment: a report, a screenshot, a
	// log excerpt.
	mixBoundary := fmt.Sprintf("000000000000mix%08x", r.Uint32())
	h("Content-Type", "multipart/mixed; boundary=\""+mixBoundary+"\"")
	b.WriteString("\r\n")
	mw := multipart.NewWriter(&b)
	mw.SetBoundary(mixBoundary)
	pw, _ := mw.CreatePart(map[string][]string{"Content-Type": {"multipart/alternative; boundary=\"" + altBoundary + "\""}})
	alt(pw, altBoundary)
	kinds := []struct{ typ, name, magic string }{{"application/pdf", "report.pdf", "%PDF-1.7\n"}, {"image/png", "screenshot.png", "\x89PNG\r\n\x1a\n"}, {"text/csv", "export.csv", "id,name,amount\n"}}
	k := kinds[r.IntN(len(kinds))]
	data := make([]byte, 1100+r.IntN(2800))
	copy(data, k.magic)
	for n := len(k.magic); n < len(data); n++ {
		data[n] = byte(r.Uint32())
	}
	aw, _ := mw.CreatePart(map[string][]string{
		"Content-Type":              {k.typ + "; name=\"" + k.name + "\""},
		"Content-Disposition":       {"attachment; filename=\"" + k.name + "\""},
		"Content-Transfer-Encoding": {"base64"},
	})
	writeBase64(aw, data)
	mw.Close()
	return b.Bytes()
}

// writeBase64 writes data base64-encoded in lines of 76 characters.
func writeBase64(w io.Writer, data []byte) {
	const in = 57 // 76 encoded characters
	line := make([]byte, 78)
	for len(data) > 0 {
		n := min(in, len(data))
		m := base64.StdEncoding.EncodedLen(n)
		base64.StdEncoding.Encode(line, data[:n])
		line[m], line[m+1] = '\r', '\n'
		w.Write(line[:m+2])
		data = data[n:]
	}
}

// largeMessage returns a plain message carrying an attachment of size
// random (incompressible) bytes, base64-encoded.
func largeMessage(size int) []byte {
	var b bytes.Buffer
	b.Grow(size*4/3 + size/30 + 4096)
	b.WriteString("From: Ann Example <ann@example.com>\r\nTo: agent@monoco.dev\r\nSubject: The full database dump\r\n" +
		"Message-ID: <large-attachment@bench.example.com>\r\nDate: Mon, 05 Jan 2026 09:00:00 +0100\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n--mix\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nThe dump you asked for is attached.\r\n" +
		"--mix\r\nContent-Type: application/octet-stream; name=\"dump.bin\"\r\nContent-Disposition: attachment; filename=\"dump.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{1}).Read(data)
	writeBase64(&b, data)
	b.WriteString("--mix--\r\n")
	return b.Bytes()
}

// TestSyntheticMessages checks the corpus is what the benchmark claims:
// about 4.6 KB a message, every one parseable, multipart/alternative, one
// in five with an attachment.
func TestSyntheticMessages(t *testing.T) {
	const n = 5000
	total, attach := 0, 0
	for i := range n {
		raw := syntheticMessage(i)
		total += len(raw)
		m, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if mt == "multipart/mixed" {
			attach++
		}
		mr := multipart.NewReader(m.Body, params["boundary"])
		parts := 0
		for {
			if _, err := mr.NextPart(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("message %d: part %d: %v", i, parts, err)
			}
			parts++
		}
		if parts != 2 {
			t.Errorf("message %d (%s): %d parts, want 2", i, mt, parts)
		}
	}
	mean := float64(total) / n
	t.Logf("%d messages, %.1f MB, mean %.0f bytes, %d with an attachment", n, float64(total)/1e6, mean, attach)
	if mean < 4300 || mean > 4900 {
		t.Errorf("mean size %.0f bytes, want about 4,600", mean)
	}
	if attach != n/5 {
		t.Errorf("%d messages with an attachment, want %d", attach, n/5)
	}
}
