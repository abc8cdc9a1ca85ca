package email

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// TestNew: what the email provider offers follows its config; a disabled
// provider only resolves drafts; its secrets stay confkit.Secret values.
func TestNew(t *testing.T) {
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != schema.Email || p.Resolver == nil || len(p.Sources) != 0 || p.Sender != nil || p.Health != nil || len(p.Checks) != 0 {
		t.Fatalf("disabled provider: %+v", p)
	}

	cfg := Config{Enabled: true, Receiver: ReceiverConfig{SMTP: "127.0.0.1:0", LMTP: "unix:/nonexistent/lmtp"},
		Accounts: []AccountConfig{
			{Name: "in", Addresses: []string{"in@corp.test"}, IMAP: &IMAPConfig{Host: "imap.corp.test", Port: 993, Password: "imap-secret-1"}},
		}}
	p, err = New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sources) != 3 || p.Sender != nil || !strings.Contains(p.Waiting, "smtp") {
		t.Fatalf("receivers and IMAP without SMTP: %d sources, sender %v, waiting %q", len(p.Sources), p.Sender, p.Waiting)
	}
	var names []string
	for _, c := range p.Checks {
		names = append(names, fmt.Sprintf("%s/%v", c.Name, c.Listen))
	}
	// Each receiver: can it bind, and who can reach it (exposure).
	if got := strings.Join(names, " "); got != "email/receiver/smtp/true email/receiver/smtp exposure/false "+
		"email/receiver/lmtp/true email/receiver/lmtp exposure/false email/in imap/false" {
		t.Errorf("checks: %s", got)
	}
	if _, ok := p.Sources[2].(adapters.Fetcher); !ok {
		t.Error("the IMAP source cannot fetch once")
	}
	if len(p.Secrets) != 1 || p.Secrets[0].Reveal() != "imap-secret-1" || fmt.Sprint(p.Secrets[0]) == "imap-secret-1" {
		t.Errorf("secrets: %v", p.Secrets)
	}

	cfg.Accounts = append(cfg.Accounts, AccountConfig{Name: "out", Addresses: []string{"out@corp.test"},
		SMTP: &SMTPConfig{Host: "smtp.corp.test", Port: 587, Password: "smtp-secret-2"}})
	p, err = New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if p.Sender == nil || p.Waiting != "" || len(p.Secrets) != 2 || p.Health == nil {
		t.Fatalf("with an SMTP account: sender %v waiting %q secrets %d", p.Sender, p.Waiting, len(p.Secrets))
	}
}

// TestReceiverCheck: the receiver's doctor check fails, saying why, when
// its port is taken, and passes when it is free.
func TestReceiverCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	rc := NewReceiver(ReceiverOptions{Addr: addr})
	if err := rc.Check(context.Background()); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("port held: %v", err)
	}
	ln.Close()
	if err := rc.Check(context.Background()); err != nil {
		t.Errorf("port free: %v", err)
	}
}

// TestResolver: seed 003's reply rules, the account, and the ids fixed at
// queue time.
func TestResolver(t *testing.T) {
	r := &Resolver{Accounts: []AccountConfig{
		{Name: "main", Addresses: []string{"agent@corp.test"}},
		{Name: "support", Addresses: []string{"help@corp.test"}},
	}}
	for _, s := range []string{"ann@example.com", "Ann <ann@example.com>"} {
		if !r.Recognizes(s) {
			t.Errorf("%q not recognised", s)
		}
	}
	if r.Recognizes("C0123ABCD") || r.Recognizes("oc_123") {
		t.Error("a chat id recognised as an address")
	}
	parent := &schema.Message{ID: "email_1", Provider: schema.Email,
		Session:      schema.Session{Name: "Plan"},
		Participants: schema.Participants{From: schema.Participant{Name: "Ann", Email: "ann@example.com"}},
		Metadata: schema.Metadata{Extra: schema.Extra{Account: "support"}, ProviderRaw: map[string]any{
			"subject": "Plan", "message_id": "<m2@example.com>", "references": []any{"<m1@example.com>"},
			"reply_to": []any{"Team <team@example.com>"}}}}
	d := &schema.Draft{}
	if err := r.Resolve(d, &adapters.Parent{Message: parent}, adapters.ResolveOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if len(d.To) != 1 || d.To[0] != "team@example.com" {
		t.Errorf("to %v, want the parent's Reply-To", d.To)
	}
	if d.Subject != "Re: Plan" || d.Email.Account != "support" || d.Email.From != "help@corp.test" {
		t.Errorf("subject %q account %q from %q", d.Subject, d.Email.Account, d.Email.From)
	}
	if d.Email.InReplyTo != "<m2@example.com>" || strings.Join(d.Email.References, " ") != "<m1@example.com> <m2@example.com>" {
		t.Errorf("in-reply-to %q references %v", d.Email.InReplyTo, d.Email.References)
	}
	if !strings.HasSuffix(d.IdempotencyKey, "@corp.test>") || d.InboundID != threading.EmailID(d.IdempotencyKey) {
		t.Errorf("message-id %q inbound id %q", d.IdempotencyKey, d.InboundID)
	}
	// A new mail needs a subject; an account that does not exist is named.
	err := r.Resolve(&schema.Draft{To: schema.Recipients{"bob@example.com"}}, nil, adapters.ResolveOptions{}, nil)
	if err == nil || !strings.Contains(err.Error(), "subject") {
		t.Errorf("no subject: %v", err)
	}
	err = r.Resolve(&schema.Draft{To: schema.Recipients{"bob@example.com"}, Subject: "x"}, nil, adapters.ResolveOptions{Account: "nope"}, nil)
	if err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown account: %v", err)
	}
}
