package email

import (
	"bytes"
	"context"
	"net/mail"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// utf8Draft is a reply to josé@exämple.com, as the Resolver makes it from
// a mail of an SMTPUTF8 sender.
func utf8Draft() *schema.Draft {
	d := testDraft()
	d.To, d.Cc, d.Bcc = schema.Recipients{"josé@exämple.com"}, nil, nil
	return d
}

// TestSendSMTPUTF8: a draft to an address that is not ASCII goes out with
// SMTPUTF8 (MAIL FROM ... SMTPUTF8, the address as written in RCPT TO and
// in To:); an ASCII draft does not ask for it.
func TestSendSMTPUTF8(t *testing.T) {
	f := startSMTPFakeWith(t, true)
	s := newTestSender(t, f, nil)
	if _, err := s.Send(context.Background(), &adapters.Attempt{Draft: utf8Draft()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(context.Background(), &adapters.Attempt{Draft: testDraft()}); err != nil {
		t.Fatal(err)
	}
	msgs := f.messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2", len(msgs))
	}
	if !msgs[0].utf8 || strings.Join(msgs[0].rcpts, ",") != "josé@exämple.com" {
		t.Errorf("the reply: SMTPUTF8 %v, RCPT %v; want SMTPUTF8 to josé@exämple.com", msgs[0].utf8, msgs[0].rcpts)
	}
	m, err := mail.ReadMessage(bytes.NewReader(msgs[0].data))
	if err != nil {
		t.Fatal(err)
	}
	if to := m.Header.Get("To"); to != "<josé@exämple.com>" {
		t.Errorf("To: %q, want the address as written", to)
	}
	if msgs[1].utf8 {
		t.Errorf("an ASCII draft was sent with SMTPUTF8")
	}
}

// TestSendSMTPUTF8Refused: a server that does not offer SMTPUTF8 cannot
// take a reply to josé@exämple.com: the error is permanent (no retry
// loop), names the address and says why, and nothing is sent. Both a
// go-smtp server and Postfix's smtp-sink, which offers none.
func TestSendSMTPUTF8Refused(t *testing.T) {
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !adapters.IsPermanent(err) || !strings.Contains(err.Error(), "josé@exämple.com") || !strings.Contains(err.Error(), "does not offer SMTPUTF8") {
			t.Errorf("err = %v (permanent %v); want a permanent error naming the address and SMTPUTF8", err, adapters.IsPermanent(err))
		}
	}
	t.Run("go-smtp", func(t *testing.T) {
		f := startSMTPFakeWith(t, false)
		_, err := newTestSender(t, f, nil).Send(context.Background(), &adapters.Attempt{Draft: utf8Draft()})
		check(t, err)
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.msgs) != 0 || f.sessions != 1 {
			t.Errorf("%d messages in %d sessions; want none in one", len(f.msgs), f.sessions)
		}
	})
	t.Run("smtp-sink", func(t *testing.T) {
		sink := testutil.StartSMTPSink(t, nil)
		_, err := sinkSender(sink, nil).Send(context.Background(), &adapters.Attempt{Draft: utf8Draft()})
		check(t, err)
		if n := len(sink.Messages(t)); n != 0 {
			t.Errorf("the sink kept %d transactions, want none", n)
		}
	})
}

// TestSendEnvelopeAddress: an address that would change the SMTP command
// it is written into (a quoted local part holding "<", ">" or a space) is
// refused for good, before anything is sent.
func TestSendEnvelopeAddress(t *testing.T) {
	for _, to := range []string{`"a@x.com>, <b"@example.com`, `"a b"@example.com`, `"a,b"@example.com`} {
		f := startSMTPFake(t)
		d := testDraft()
		d.To, d.Cc, d.Bcc = schema.Recipients{to}, nil, nil
		_, err := newTestSender(t, f, nil).Send(context.Background(), &adapters.Attempt{Draft: d})
		if err == nil || !adapters.IsPermanent(err) || !strings.Contains(err.Error(), "SMTP envelope") || len(f.messages()) != 0 {
			t.Errorf("to %s: %v, %d sent; want it refused for good", to, err, len(f.messages()))
		}
	}
}
