package email

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
)

// typicalMessage is a 5 KB reply: text and HTML alternatives and a small
// PDF attachment, as a mail client sends it.
func typicalMessage() []byte {
	var b strings.Builder
	b.WriteString("Return-Path: <ann@example.com>\r\n")
	for i := range 4 {
		b.WriteString("Received: from mx" + string(rune('1'+i)) + ".example.com (mx.example.com [192.0.2.1]) by mail.monoco.dev with ESMTPS id abc123\r\n\tfor <agent@monoco.dev>; Fri, 6 Feb 2026 18:30:05 +0000\r\n")
	}
	b.WriteString("DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.com; s=s1; h=from:to:subject:date;\r\n bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0\r\n")
	b.WriteString("Message-ID: <bench-2@example.com>\r\nIn-Reply-To: <bench-1@monoco.dev>\r\nReferences: <bench-0@monoco.dev> <bench-1@monoco.dev>\r\n")
	b.WriteString("Date: Fri, 06 Feb 2026 19:30:00 +0100\r\nFrom: =?UTF-8?Q?Ann_M=C3=BCller?= <ann@example.com>\r\nTo: Courier Agent <agent@monoco.dev>\r\nCc: Bob <bob@example.com>, carol@example.com\r\n")
	b.WriteString("Subject: =?UTF-8?B?UmU6IERlc2lnbiByZXZpZXcg4oCUIEFQSSBzY2hlbWE=?=\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n")
	b.WriteString("--mix\r\nContent-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n--alt\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	para := "Thanks for the review. I went through the comments and updated the schema =E2=80=94 see the attached PDF.\r\n"
	for range 6 {
		b.WriteString(para)
	}
	b.WriteString("\r\n--alt\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n<html><body>")
	for range 6 {
		b.WriteString("<p>Thanks for the <b>review</b>. I went through the comments and updated the schema =E2=80=94 see the <a href=3D\"https://example.com/pdf\">attached PDF</a>.</p>\r\n")
	}
	b.WriteString("</body></html>\r\n--alt--\r\n\r\n--mix\r\nContent-Type: application/pdf; name=\"schema.pdf\"\r\nContent-Disposition: attachment; filename=\"schema.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	pdf := bytes.Repeat([]byte("%PDF-1.4 fake content "), 50)
	enc := base64.StdEncoding.EncodeToString(pdf)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--mix--\r\n")
	return []byte(b.String())
}

// BenchmarkNormalize normalises a typical 5 KB multipart message, the
// attachment streamed into a dropzone batch (aborted each time, so the
// disk does not fill).
func BenchmarkNormalize(b *testing.B) { benchNormalize(b, typicalMessage()) }

// BenchmarkNormalizeNoAttachment is the typical message without its
// attachment: the cost of parsing alone, no dropzone file created.
func BenchmarkNormalizeNoAttachment(b *testing.B) {
	raw := typicalMessage()
	cut := bytes.Index(raw, []byte("--mix\r\nContent-Type: application/pdf"))
	benchNormalize(b, append(raw[:cut:cut], "--mix--\r\n"...))
}

// BenchmarkNormalizeTextOnly is the typical message without its HTML
// alternative and its attachment: the cost of everything but the HTML's
// conversion to Markdown and the dropzone.
func BenchmarkNormalizeTextOnly(b *testing.B) { benchNormalize(b, textOnlyMessage()) }

// textOnlyMessage is typicalMessage without its HTML alternative and its
// attachment.
func textOnlyMessage() []byte {
	raw := typicalMessage()
	html := bytes.Index(raw, []byte("\r\n--alt\r\nContent-Type: text/html"))
	end := bytes.Index(raw, []byte("--alt--\r\n"))
	cut := bytes.Index(raw, []byte("--mix\r\nContent-Type: application/pdf"))
	out := append([]byte{}, raw[:html]...)
	out = append(out, "\r\n"...)
	out = append(out, raw[end:cut]...)
	return append(out, "--mix--\r\n"...)
}

// benchNormalize normalises raw over and over, each time into a batch it
// aborts.
func benchNormalize(b *testing.B, raw []byte) {
	s := testutil.NewDropzone(b, nil)
	opts := normOptions()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		batch := s.NewBatch()
		if _, err := Normalize(bytes.NewReader(raw), batch, dropzone.Object{}, opts); err != nil {
			b.Fatal(err)
		}
		batch.Abort()
	}
}

// BenchmarkNormalizeParallel is BenchmarkNormalize on every core.
func BenchmarkNormalizeParallel(b *testing.B) {
	raw := typicalMessage()
	s := testutil.NewDropzone(b, nil)
	opts := normOptions()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			batch := s.NewBatch()
			if _, err := Normalize(bytes.NewReader(raw), batch, dropzone.Object{}, opts); err != nil {
				b.Error(err)
				return
			}
			batch.Abort()
		}
	})
}

func TestTextOnlyMessage(t *testing.T) {
	m := normalizeBytes(t, textOnlyMessage())
	if m.Content.HTML != "" || m.Content.Text == "" || len(m.Artifacts) != 0 || m.Metadata.Extra.ParseError != "" {
		t.Errorf("html %d bytes, text %d bytes, %d artifacts, parse_error %q", len(m.Content.HTML), len(m.Content.Text), len(m.Artifacts), m.Metadata.Extra.ParseError)
	}
}

func TestTypicalMessage(t *testing.T) {
	raw := typicalMessage()
	if len(raw) < 4500 || len(raw) > 6000 {
		t.Errorf("typical message is %d bytes, want about 5 KB", len(raw))
	}
	m := normalizeBytes(t, raw)
	testutil.CheckMessage(t, "typical", m)
	if m.Type != "mixed" || len(m.Artifacts) != 1 || m.Content.Markdown == "" || m.Metadata.Extra.ParseError != "" {
		t.Errorf("type %s, %d artifacts, parse_error %q", m.Type, len(m.Artifacts), m.Metadata.Extra.ParseError)
	}
}
