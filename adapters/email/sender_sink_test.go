package email

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// These tests send through Postfix's smtp-sink, a real SMTP peer
// (testutil.StartSMTPSink), and read what it received back with the
// standard library (net/mail, mime/multipart), not with go-message, which
// composed it. They skip without smtp-sink unless COURIER_REQUIRE_SERVERS=1.

func sinkSender(s *testutil.SMTPSink, dz *dropzone.Store) *Sender {
	return NewSender(SenderOptions{
		Accounts: []Account{{Name: "work", Addresses: []string{"agent@corp.example"},
			SMTP: Server{Host: s.Host(), Port: s.Port(), TLS: "none", Auth: "none"}}},
		Dropzone: dz,
		Timeout:  10 * time.Second,
	})
}

// mimeTree describes a message's structure, e.g.
// "multipart/mixed[multipart/alternative[text/plain text/html] application/pdf]".
func mimeTree(t *testing.T, h textprotoHeader, body io.Reader) string {
	t.Helper()
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		t.Fatalf("Content-Type %q: %v", h.Get("Content-Type"), err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		io.Copy(io.Discard, body)
		return mt
	}
	mr := multipart.NewReader(body, params["boundary"])
	var kids []string
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", mt, err)
		}
		kids = append(kids, mimeTree(t, p.Header, p))
	}
	return mt + "[" + strings.Join(kids, " ") + "]"
}

type textprotoHeader interface{ Get(string) string }

// TestSenderSinkReply: a Markdown reply goes out as multipart/alternative
// with the threading headers and Message-ID the draft carries; every
// recipient (Bcc included) is in the envelope, Bcc is not in the header;
// sending the draft again sends the same bytes.
func TestSenderSinkReply(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	s := sinkSender(sink, nil)
	d := testDraft()
	rc, err := s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	if rc.ProviderMessageID != d.IdempotencyKey {
		t.Errorf("provider message id %q, want %q", rc.ProviderMessageID, d.IdempotencyKey)
	}
	if rc.InboundID != threading.EmailID(d.IdempotencyKey) {
		t.Errorf("inbound id %q, want the id of the Message-ID sent", rc.InboundID)
	}
	if len(rc.Recipients) != 3 {
		t.Fatalf("recipients %+v", rc.Recipients)
	}
	for _, r := range rc.Recipients {
		if r.Status != "sent" || !strings.HasPrefix(string(r.Reply), "250") {
			t.Errorf("recipient %+v, want sent with the 250", r)
		}
	}
	msgs := sink.Messages(t)
	if len(msgs) != 1 {
		t.Fatalf("%d messages at the sink, want 1", len(msgs))
	}
	sm := msgs[0]
	if sm.From != "agent@corp.example" || strings.Join(sm.To, ",") != "ann@example.com,bob@example.com,audit@example.com" {
		t.Errorf("envelope %s -> %v", sm.From, sm.To)
	}
	if sm.Helo != "corp.example" || sm.Proto != "ESMTP" {
		t.Errorf("EHLO %q over %s, want corp.example over ESMTP", sm.Helo, sm.Proto)
	}
	m, err := mail.ReadMessage(bytes.NewReader(sm.Raw))
	if err != nil {
		t.Fatalf("the sink's copy does not parse: %v", err)
	}
	subj, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil || subj != "Re: Déploiement prévu" {
		t.Errorf("Subject %q (%v)", subj, err)
	}
	want := map[string]string{
		"Message-Id":  "<0f3c9a8b7c6d@corp.example>",
		"In-Reply-To": "<Q1@Example.com>",
		"References":  "<root@example.com> <Q1@Example.com>",
		"Date":        "Fri, 06 Feb 2026 20:45:00 +0000",
		"Bcc":         "",
	}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	to, err := m.Header.AddressList("To")
	if err != nil || len(to) != 1 || to[0].Address != "ann@example.com" || to[0].Name != "Ann" {
		t.Errorf("To: %v %v", to, err)
	}
	if tree := mimeTree(t, m.Header, m.Body); tree != "multipart/alternative[text/plain text/html]" {
		t.Errorf("structure %s", tree)
	}
	p := parseSent(t, sm.Raw)
	if got := strings.ReplaceAll(string(p.parts["text/plain"]), "\r\n", "\n"); got != d.Body {
		t.Errorf("text part %q, want the Markdown %q", got, d.Body)
	}
	if html := string(p.parts["text/html"]); !strings.Contains(html, "<h2>Plan</h2>") || !strings.Contains(html, "<strong>ship</strong>") {
		t.Errorf("HTML part %q", html)
	}

	// A resend (after a crash, say) is the same message.
	if _, err := s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	msgs = sink.Messages(t)
	if len(msgs) != 2 || !bytes.Equal(msgs[0].Raw, msgs[1].Raw) {
		t.Error("sending the same draft twice sent different bytes")
	}
}

// TestSenderSinkAttachments: an attachment and an inline image make
// multipart/mixed around multipart/related around multipart/alternative;
// the bytes and names arrive intact.
func TestSenderSinkAttachments(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	dz := testutil.NewDropzone(t, nil)
	pdf := bytes.Repeat([]byte("%PDF-1.7 \x00\x01\xfe\xff binary\r\n.\r\n"), 3000)
	obj, err := dz.Put(bytes.NewReader(pdf))
	if err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake")
	img, err := dz.Put(bytes.NewReader(png))
	if err != nil {
		t.Fatal(err)
	}
	s := sinkSender(sink, dz)
	d := testDraft()
	d.Body = "The chart:\n\n![chart](cid:chart@x)\n"
	d.Artifacts = []schema.DraftArtifact{
		{ID: obj.ID, Name: "report é.pdf", MimeType: "application/pdf", Size: obj.Size},
		{ID: img.ID, Name: "chart.png", MimeType: "image/png", Inline: true, ContentID: "chart@x"},
	}
	if _, err := s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	sm := sink.Messages(t)[0]
	m, err := mail.ReadMessage(bytes.NewReader(sm.Raw))
	if err != nil {
		t.Fatal(err)
	}
	want := "multipart/mixed[multipart/related[multipart/alternative[text/plain text/html] image/png] application/pdf]"
	if tree := mimeTree(t, m.Header, m.Body); tree != want {
		t.Errorf("structure\n %s\nwant\n %s", tree, want)
	}
	p := parseSent(t, sm.Raw)
	if !bytes.Equal(p.parts["application/pdf"], pdf) {
		t.Errorf("the PDF arrived with %d bytes, want %d, or changed", len(p.parts["application/pdf"]), len(pdf))
	}
	if !bytes.Equal(p.parts["image/png"], png) {
		t.Error("the inline image changed")
	}
	if p.names["report é.pdf"] != "application/pdf" || p.names["chart.png"] != "image/png" {
		t.Errorf("file names %v", p.names)
	}
	if !strings.Contains(string(p.parts["text/html"]), `src="cid:chart@x"`) {
		t.Errorf("the HTML does not show the inline image: %s", p.parts["text/html"])
	}
	if !bytes.Contains(sm.Raw, []byte("Content-Id: <chart@x>")) && !bytes.Contains(sm.Raw, []byte("Content-ID: <chart@x>")) {
		t.Error("the inline image has no Content-ID <chart@x>")
	}
	// Our own reader agrees: what the sender writes, Normalize reads back.
	back := normalizeBytes(t, sm.Raw)
	names := map[string]string{}
	for _, a := range back.Artifacts {
		names[a.Name] = a.MimeType
		if a.Name == "chart.png" && a.ContentID != "chart@x" {
			t.Errorf("chart.png content id %q", a.ContentID)
		}
	}
	if names["report é.pdf"] != "application/pdf" || names["chart.png"] != "image/png" {
		t.Errorf("Normalize reads back the artifacts %v", names)
	}
	if back.ID != threading.EmailID(d.IdempotencyKey) || back.Session.Name != d.Subject {
		t.Errorf("Normalize reads back id %s subject %q", back.ID, back.Session.Name)
	}
}

// TestSenderSinkFailures: the peer's 4xx replies make temporary errors and
// 5xx permanent ones, at RCPT (each recipient named with its reply), at
// MAIL, at DATA and at the end of the data; a temporary failure followed
// by a retry that the peer accepts delivers once.
func TestSenderSinkFailures(t *testing.T) {
	rcpts := []string{"ann@example.com", "bob@example.com", "audit@example.com"}
	cases := []struct {
		name      string
		opts      testutil.SMTPSinkOptions
		permanent bool
		want      []string // in the error
		dumped    int      // transactions the sink kept
	}{
		{"RCPT 4xx", testutil.SMTPSinkOptions{TempFail: []string{"RCPT"}, TempReply: "452 4.2.2 Mailbox full"},
			false, append([]string{"every recipient was deferred", "452"}, rcpts...), 0},
		{"RCPT 5xx", testutil.SMTPSinkOptions{PermFail: []string{"RCPT"}, PermReply: "550 5.1.1 No such user"},
			true, append([]string{"every recipient was rejected", "550"}, rcpts...), 0},
		{"MAIL 4xx", testutil.SMTPSinkOptions{TempFail: []string{"MAIL"}, TempReply: "421 4.7.0 Try again later"},
			false, []string{"MAIL FROM: 421"}, 0},
		{"DATA 5xx", testutil.SMTPSinkOptions{PermFail: []string{"DATA"}, PermReply: "554 5.5.1 No valid recipients"},
			true, []string{"DATA: 554"}, 0},
		{"end of data 5xx", testutil.SMTPSinkOptions{PermFail: []string{"."}, PermReply: "554 5.7.1 Rejected as spam"},
			true, []string{"end of DATA: 554", "Rejected as spam"}, 1},
		{"end of data 4xx", testutil.SMTPSinkOptions{TempFail: []string{"."}, TempReply: "451 4.3.0 Queue full"},
			false, []string{"end of DATA: 451"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			sink := testutil.StartSMTPSink(t, &opts)
			s := sinkSender(sink, nil)
			_, err := s.Send(context.Background(), &adapters.Attempt{Draft: testDraft()})
			if err == nil {
				t.Fatal("Send succeeded")
			}
			if adapters.IsPermanent(err) != tc.permanent || adapters.IsTemporary(err) == tc.permanent {
				t.Errorf("%v: permanent=%v, want %v", err, adapters.IsPermanent(err), tc.permanent)
			}
			var pe *adapters.PartialError
			if errors.As(err, &pe) {
				t.Errorf("%v is a partial error: no recipient has the message", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if n := len(sink.Messages(t)); n != tc.dumped {
				t.Errorf("the sink kept %d transactions, want %d", n, tc.dumped)
			}
			if tc.permanent {
				return
			}
			// The retry, once the peer accepts, goes through once.
			sink.Restart(t, nil)
			if _, err := s.Send(context.Background(), &adapters.Attempt{Draft: testDraft()}); err != nil {
				t.Fatalf("retry: %v", err)
			}
			msgs := sink.Messages(t)
			if len(msgs) != tc.dumped+1 {
				t.Fatalf("%d transactions after the retry, want %d", len(msgs), tc.dumped+1)
			}
			if last := msgs[len(msgs)-1]; strings.Join(last.To, ",") != strings.Join(rcpts, ",") {
				t.Errorf("retry went to %v", last.To)
			}
		})
	}
}
