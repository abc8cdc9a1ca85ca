package email

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Issue 18, item 12: a spoofed reply inherited the conversation. Alice
// took part (our draft went to her), so a mail From alice@example.com
// answering it passed the "took part" check, which reads the From a forger
// writes. An unverified sender whose envelope sender (MAIL FROM at the
// receiver, Return-Path over IMAP) is not aligned with the From domain now
// inherits nothing, and its file says why in metadata.extra.auth.

// queueSentToAlice puts one of our drafts in the mailbox, as sent to alice with
// Message-ID <sent-1@courier.test> and tied to incident_7.
func queueSentToAlice(t *testing.T, ws *workspace) {
	t.Helper()
	at := testutil.Time("2026-02-06T17:00:00Z")
	d := &schema.Draft{ID: "email_out_00000000000000000000000000000001", Provider: schema.Email, To: schema.Recipients{"Alice <alice@example.com>"},
		Subject: "the incident", CorrelationID: "incident_7", CreatedAt: schema.TimePtr(at), Body: "Looking into it.\n",
		InboundID: threading.EmailID("<sent-1@courier.test>"), ThreadKey: schema.NullString("email-thread:" + threading.NormalizeID("<sent-1@courier.test>"))}
	if _, err := ws.mb.Queue(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// spoofCase is one mail of the tests below: the issue's mail (From Alice,
// In-Reply-To our draft to her) with an envelope sender, what it should
// inherit, and what auth.correlation should say.
type spoofCase struct {
	name, msgID, envelope string
	signed                bool
	want                  string
	reason                []string // substrings of auth.correlation; none: empty
}

func checkSpoofCase(t *testing.T, ms map[string]*schema.Message, c spoofCase) {
	t.Helper()
	m := ms[threading.EmailID(c.msgID)]
	if m == nil {
		t.Errorf("%s: no file", c.name)
		return
	}
	a := m.Metadata.Extra.Auth
	if string(m.CorrelationID) != c.want {
		t.Errorf("%s: correlation_id %q, want %q (auth %+v)", c.name, m.CorrelationID, c.want, a)
	}
	if a == nil {
		t.Errorf("%s: no auth block", c.name)
		return
	}
	if len(c.reason) == 0 && a.Correlation != "" {
		t.Errorf("%s: auth.correlation %q, want none", c.name, a.Correlation)
	}
	for _, s := range c.reason {
		if !strings.Contains(a.Correlation, s) {
			t.Errorf("%s: auth.correlation %q does not say %q", c.name, a.Correlation, s)
		}
	}
}

// Through the receiver: the envelope is MAIL FROM.
func TestSpoofedParticipantThroughReceiver(t *testing.T) {
	ws := newWorkspace(t)
	dns := newTestDNS()
	alice := newKey(t, dns, "example.com", "s2026", false)
	r := startReceiver(t, ws, nil, ReceiverOptions{Own: []string{"agent@courier.test"}, Verifier: authVerifier(dns)})
	queueSentToAlice(t, ws)
	cases := []spoofCase{
		{name: "the issue's mail: envelope mallory@evil.test, no DKIM", msgID: "<spoof-1@evil.test>", envelope: "mallory@evil.test",
			reason: []string{"not verified", "evil.test (MAIL FROM)", "not aligned with the From domain example.com"}},
		{name: "null envelope sender", msgID: "<spoof-2@evil.test>", envelope: "",
			reason: []string{"not verified", "null (MAIL FROM:<>)"}},
		{name: "unverified, envelope aligned (bounce@mail.example.com)", msgID: "<aligned-1@example.com>", envelope: "bounce@mail.example.com",
			want: "incident_7"},
		{name: "verified by DKIM, envelope not aligned (a forwarder)", msgID: "<signed-1@example.com>", envelope: "bounce@forwarder.test",
			signed: true, want: "incident_7"},
	}
	for _, c := range cases {
		raw := crlf(issueMail(c.msgID))
		if c.signed {
			raw = alice.sign(t, issueMail(c.msgID))
		}
		if err := sendEnvelope(t, r.Addr(), "mail.test", c.envelope, []string{"agent@courier.test"}, raw); err != nil {
			t.Fatalf("%s: end of DATA: %v", c.name, err)
		}
	}
	ms := ws.messages(t)
	for _, c := range cases {
		checkSpoofCase(t, ms, c)
	}
}

// Over IMAP (go-imap's in-memory server): the envelope is the Return-Path
// the delivering MTA wrote; a mail without one has no known envelope.
func TestSpoofedParticipantOverIMAP(t *testing.T) {
	ws := newWorkspace(t)
	queueSentToAlice(t, ws)
	srv := startMemIMAP(t, memOptions{})
	cases := imapSpoofCases()
	for i, c := range cases {
		srv.append(t, "INBOX", imapSpoofMail(c), testutil.Time("2026-02-06T18:00:00Z").Add(time.Duration(i)*time.Minute))
	}
	syncSpoofCases(t, ws, srv.source(t, ws, IMAPOptions{Verifier: authVerifier(newTestDNS())}), cases)
}

// The same from a real Dovecot.
func TestSpoofedParticipantDovecot(t *testing.T) {
	t.Parallel()
	d := testutil.StartDovecot(t)
	ws := newWorkspace(t)
	queueSentToAlice(t, ws)
	cases := imapSpoofCases()
	for _, c := range cases {
		d.Deliver(t, "INBOX", imapSpoofMail(c))
	}
	syncSpoofCases(t, ws, dovecotSource(d, ws, IMAPOptions{Verifier: authVerifier(newTestDNS())}), cases)
}

// syncSpoofCases syncs src once into ws and checks each case's file.
func syncSpoofCases(t *testing.T, ws *workspace, src *IMAPSource, cases []spoofCase) {
	t.Helper()
	if err := src.SyncOnce(context.Background(), ws.pipe); err != nil {
		t.Fatal(err)
	}
	ms := ws.messages(t)
	for _, c := range cases {
		checkSpoofCase(t, ms, c)
	}
}

func imapSpoofCases() []spoofCase {
	return []spoofCase{
		{name: "the issue's mail: Return-Path mallory@evil.test, no DKIM", msgID: "<spoof-1@evil.test>", envelope: "mallory@evil.test",
			reason: []string{"not verified", "evil.test (Return-Path)", "not aligned with the From domain example.com"}},
		{name: "no Return-Path", msgID: "<spoof-2@evil.test>", envelope: "-",
			reason: []string{"not verified", "no Return-Path", "example.com"}},
		{name: "null Return-Path", msgID: "<spoof-3@evil.test>", envelope: "",
			reason: []string{"not verified", "no Return-Path, or a null one"}},
		{name: "unverified, Return-Path aligned (bounce@mail.example.com)", msgID: "<aligned-1@example.com>", envelope: "bounce@mail.example.com",
			want: "incident_7"},
	}
}

// imapSpoofMail is the issue's mail as the delivering MTA left it: with
// the Return-Path of c.envelope ("-": none).
func imapSpoofMail(c spoofCase) []byte {
	raw := crlf(issueMail(c.msgID))
	if c.envelope == "-" {
		return raw
	}
	return append([]byte("Return-Path: <"+c.envelope+">\r\nDelivered-To: agent@courier.test\r\n"), raw...)
}
