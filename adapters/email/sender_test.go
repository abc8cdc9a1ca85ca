package email

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
)

func testDraft() *schema.Draft {
	return &schema.Draft{
		ID: "email_out_0123456789abcdef0123456789abcdef", Provider: schema.Email,
		To: schema.Recipients{"Ann <ann@example.com>"}, Cc: schema.Recipients{"bob@example.com"}, Bcc: schema.Recipients{"audit@example.com"},
		Subject: "Re: Déploiement prévu", Type: schema.DraftMarkdown,
		CreatedAt:      schema.TimePtr(time.Date(2026, 2, 6, 20, 45, 0, 0, time.UTC)),
		IdempotencyKey: "<0f3c9a8b7c6d@corp.example>",
		Email: &schema.EmailHeaders{From: "agent@corp.example", Account: "work", InReplyTo: "<Q1@Example.com>",
			References: []string{"<root@example.com>", "<Q1@Example.com>"}},
		Body: "## Plan\n\n- build\n- **ship**\n",
	}
}

func newTestSender(t *testing.T, f *smtpFake, dz *dropzone.Store) *Sender {
	return NewSender(SenderOptions{Accounts: []Account{{Name: "work", Addresses: []string{"agent@corp.example"}, DisplayName: "Agent Zoë", SMTP: f.server()}},
		Dropzone: dz, Timeout: 5 * time.Second})
}

// parsed is a message read back with the standard library, not go-message.
type parsed struct {
	h     mail.Header
	parts map[string][]byte // by content type
	names map[string]string // filename -> content type
}

func parseSent(t *testing.T, raw []byte) parsed {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("sent message does not parse: %v\n%s", err, raw)
	}
	p := parsed{h: m.Header, parts: map[string][]byte{}, names: map[string]string{}}
	var walk func(ctype string, r io.Reader, cte string, disp string)
	walk = func(ctype string, r io.Reader, cte string, disp string) {
		mt, params, err := mime.ParseMediaType(ctype)
		if err != nil {
			t.Fatalf("bad content type %q", ctype)
		}
		if strings.HasPrefix(mt, "multipart/") {
			mr := multipart.NewReader(r, params["boundary"])
			for {
				part, err := mr.NextRawPart()
				if err == io.EOF {
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				walk(part.Header.Get("Content-Type"), part, part.Header.Get("Content-Transfer-Encoding"), part.Header.Get("Content-Disposition"))
			}
		}
		var body io.Reader = r
		switch strings.ToLower(cte) {
		case "quoted-printable":
			body = newStdQP(r)
		case "base64":
			body = newStdB64(r)
		}
		b, _ := io.ReadAll(body)
		if _, dp, err := mime.ParseMediaType(disp); err == nil && dp["filename"] != "" {
			p.names[dp["filename"]] = mt
		}
		p.parts[mt] = b
	}
	walk(m.Header.Get("Content-Type"), m.Body, m.Header.Get("Content-Transfer-Encoding"), "")
	return p
}

func TestSendMarkdownReply(t *testing.T) {
	f := startSMTPFake(t)
	s := newTestSender(t, f, nil)
	d := testDraft()
	rc, err := s.Send(context.Background(), &adapters.Attempt{Draft: d})
	if err != nil {
		t.Fatal(err)
	}
	if rc.ProviderMessageID != d.IdempotencyKey || len(rc.Recipients) != 3 {
		t.Errorf("receipt = %+v", rc)
	}
	msgs := f.messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if m.from != "agent@corp.example" || strings.Join(m.rcpts, ",") != "ann@example.com,bob@example.com,audit@example.com" {
		t.Errorf("envelope %s -> %v", m.from, m.rcpts)
	}
	p := parseSent(t, m.data)
	dec := new(mime.WordDecoder)
	subj, _ := dec.DecodeHeader(p.h.Get("Subject"))
	checks := map[string]string{
		"Message-Id":  "<0f3c9a8b7c6d@corp.example>",
		"In-Reply-To": "<Q1@Example.com>", "References": "<root@example.com> <Q1@Example.com>",
		"Date": "Fri, 06 Feb 2026 20:45:00 +0000", "X-Courier-Draft": d.ID,
	}
	for k, want := range checks {
		if got := p.h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if from, err := (&mail.AddressParser{WordDecoder: dec}).Parse(p.h.Get("From")); err != nil || from.Name != "Agent Zoë" || from.Address != "agent@corp.example" {
		t.Errorf("From %q: %v, %v (want the account's display name)", p.h.Get("From"), from, err)
	}
	if subj != "Re: Déploiement prévu" {
		t.Errorf("subject %q", subj)
	}
	if p.h.Get("Bcc") != "" {
		t.Error("Bcc must not appear in the headers")
	}
	if to := p.h.Get("To"); !strings.Contains(to, "ann@example.com") || !strings.Contains(p.h.Get("Cc"), "bob@example.com") {
		t.Errorf("To %q Cc %q", to, p.h.Get("Cc"))
	}
	if !strings.HasPrefix(p.h.Get("Content-Type"), "multipart/alternative") {
		t.Errorf("content type %q", p.h.Get("Content-Type"))
	}
	if strings.ReplaceAll(string(p.parts["text/plain"]), "\r\n", "\n") != d.Body {
		t.Errorf("text part = %q, want the Markdown", p.parts["text/plain"])
	}
	html := string(p.parts["text/html"])
	if !strings.Contains(html, "<h2>Plan</h2>") || !strings.Contains(html, "<strong>ship</strong>") {
		t.Errorf("html part = %q", html)
	}
	// The same draft composes to the same bytes (a resend after a crash
	// is the same message).
	var a, b bytes.Buffer
	acct, _ := s.account("work")
	s.compose(&a, acct, d)
	s.compose(&b, acct, d)
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !bytes.Equal(a.Bytes(), m.data) {
		t.Error("composing a draft twice gives different bytes")
	}
}

func TestSendAttachmentsAndUrgent(t *testing.T) {
	f := startSMTPFake(t)
	dz, err := dropzone.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pdf := bytes.Repeat([]byte("%PDF binary \x00\xff "), 5000)
	obj, err := dz.Put(bytes.NewReader(pdf))
	if err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\nfake image")
	img, _ := dz.Put(bytes.NewReader(png))
	s := newTestSender(t, f, dz)
	d := testDraft()
	d.Options.Urgent = true
	d.Body = "See the chart:\n\n![chart](cid:chart@x)\n"
	d.Artifacts = []schema.DraftArtifact{
		{ID: obj.ID, Name: "report é.pdf", MimeType: "application/pdf", Size: obj.Size},
		{ID: img.ID, Name: "chart.png", MimeType: "image/png", Inline: true, ContentID: "chart@x"},
	}
	if _, err := s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
		t.Fatal(err)
	}
	p := parseSent(t, f.messages()[0].data)
	if !strings.HasPrefix(p.h.Get("Content-Type"), "multipart/mixed") {
		t.Errorf("content type %q", p.h.Get("Content-Type"))
	}
	if !bytes.Equal(p.parts["application/pdf"], pdf) {
		t.Errorf("attachment bytes differ (%d vs %d)", len(p.parts["application/pdf"]), len(pdf))
	}
	if !bytes.Equal(p.parts["image/png"], png) {
		t.Error("inline image bytes differ")
	}
	if p.h.Get("Importance") != "high" || !strings.HasPrefix(p.h.Get("X-Priority"), "1") {
		t.Errorf("urgent headers: %q %q", p.h.Get("Importance"), p.h.Get("X-Priority"))
	}
	if !strings.Contains(string(p.parts["text/html"]), `src="cid:chart@x"`) {
		t.Errorf("html does not reference the inline image: %s", p.parts["text/html"])
	}
}

func TestSendErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		setup     func(f *smtpFake)
		permanent bool
		partial   bool
		want      string
	}{
		{"all recipients 5xx", func(f *smtpFake) {
			for _, r := range []string{"ann@example.com", "bob@example.com", "audit@example.com"} {
				f.rcptErr[r] = errPerm
			}
		}, true, false, "every recipient was rejected"},
		{"all recipients 4xx", func(f *smtpFake) {
			for _, r := range []string{"ann@example.com", "bob@example.com", "audit@example.com"} {
				f.rcptErr[r] = errTemp
			}
		}, false, false, "every recipient was deferred"},
		{"one deferred", func(f *smtpFake) { f.rcptErr["bob@example.com"] = errTemp }, false, true, "deferred: bob@example.com: 451"},
		{"data 5xx", func(f *smtpFake) { f.dataErr = errPerm }, true, false, "end of DATA: 550"},
		{"data 4xx", func(f *smtpFake) { f.dataErr = errTemp }, false, false, "end of DATA: 451"},
		{"mail from 4xx", func(f *smtpFake) { f.mailErr = errTemp }, false, false, "MAIL FROM: 451"},
		{"bad login", func(f *smtpFake) { f.user, f.pass = "agent", "right" }, false, false, "authentication failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startSMTPFake(t)
			tc.setup(f)
			s := newTestSender(t, f, nil)
			if tc.name == "bad login" {
				s.opts.Accounts[0].SMTP.Username, s.opts.Accounts[0].SMTP.Password, s.opts.Accounts[0].SMTP.Auth = "agent", "wrong", "plain"
			}
			_, err := s.Send(ctx, &adapters.Attempt{Draft: testDraft()})
			if err == nil {
				t.Fatal("no error")
			}
			if adapters.IsPermanent(err) != tc.permanent || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v (permanent %v), want permanent=%v ~%q", err, adapters.IsPermanent(err), tc.permanent, tc.want)
			}
			var pe *adapters.PartialError
			if errors.As(err, &pe) != tc.partial {
				t.Errorf("partial = %v", !tc.partial)
			}
			if tc.partial {
				// The retry goes to the deferred recipient only.
				f.mu.Lock()
				delete(f.rcptErr, "bob@example.com")
				f.mu.Unlock()
				if _, err := s.Send(ctx, &adapters.Attempt{Draft: testDraft(), Accepted: pe.Accepted}); err != nil {
					t.Fatal(err)
				}
				msgs := f.messages()
				if len(msgs) != 2 || strings.Join(msgs[1].rcpts, ",") != "bob@example.com" {
					t.Errorf("retry went to %v", msgs[len(msgs)-1].rcpts)
				}
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		f := startSMTPFake(t)
		s := newTestSender(t, f, nil)
		f.ln.Close()
		f.srv.Close()
		_, err := s.Send(ctx, &adapters.Attempt{Draft: testDraft()})
		if err == nil || adapters.IsPermanent(err) {
			t.Errorf("err = %v, want temporary", err)
		}
	})
	t.Run("good login", func(t *testing.T) {
		f := startSMTPFake(t)
		f.user, f.pass = "agent", "s3cret"
		s := newTestSender(t, f, nil)
		if _, err := s.Send(ctx, &adapters.Attempt{Draft: testDraft()}); err != nil {
			t.Fatal(err)
		}
	})
}

func newStdQP(r io.Reader) io.Reader  { return quotedprintable.NewReader(r) }
func newStdB64(r io.Reader) io.Reader { return base64.NewDecoder(base64.StdEncoding, r) }

// TestEncodeText: a subject of any length and script comes back whole
// through a standard decoder, and the field folds into lines of at most 76
// characters.
func TestEncodeText(t *testing.T) {
	dec := new(mime.WordDecoder)
	for _, s := range []string{
		"Plain ASCII stays as it is",
		strings.Repeat("a long plain subject ", 12),
		"Re: Déploiement prévu",
		"Wöchentlicher Bericht — 周报 with a rather long subject line that needs folding when encoded",
		strings.Repeat("施氏食狮史", 20),
		"=?utf-8?q?not_an_encoded_word?= taken literally",
		"under_score, question? equals= and tab\there",
		"bad \xff byte",
	} {
		enc := encodeText(s)
		got, err := dec.DecodeHeader(enc)
		want := strings.ToValidUTF8(s, "\uFFFD")
		if err != nil || got != want {
			t.Errorf("%q: encoded %q decodes to %q, %v", s, enc, got, err)
		}
		var h gomail.Header
		h.Set("Subject", enc)
		var buf bytes.Buffer
		if err := textproto.WriteHeader(&buf, h.Header.Header); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimRight(buf.String(), "\r\n"), "\r\n") {
			if len(line) > 76 {
				t.Errorf("%q: a header line of %d characters: %q", s, len(line), line)
			}
		}
	}
}
