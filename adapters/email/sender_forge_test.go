package email

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// TestSendRefusesForgedDrafts: issue 9, item 6. A draft dropped straight
// into outbound/ skips `courier send`, which sets From from the account
// and fixes the Message-ID; the Sender is the last to see it, so it
// refuses, as a permanent error (the engine dead-letters it with the
// reason), what send would never have queued: a From that is not the
// account's, an account that does not exist, message ids and media types
// that would break or add header fields. It refuses before connecting:
// the server never sees the forged mail.
func TestSendRefusesForgedDrafts(t *testing.T) {
	cases := []struct {
		name   string
		forge  func(d *schema.Draft)
		reason []string
	}{
		{"from another address", func(d *schema.Draft) { d.Email.From = "ceo@corp.test" },
			[]string{`email.from "ceo@corp.test" is not an address of account "work" (agent@corp.example, ops@corp.example)`, "courier.adapters.email.accounts[].addresses"}},
		{"from with a display name", func(d *schema.Draft) { d.Email.From = "The CEO <ceo@corp.test>" },
			[]string{`email.from "The CEO <ceo@corp.test>" is not an address of account "work"`}},
		{"from with SMTP smuggled in", func(d *schema.Draft) { d.Email.From = "agent@corp.example>\r\nRCPT TO:<evil@x.test" },
			[]string{`email.from "agent@corp.example>\r\nRCPT TO:<evil@x.test" is not an address`}},
		{"an account that does not exist", func(d *schema.Draft) { d.Email.Account = "ceo" },
			[]string{`no account named "ceo"`}},
		{"no Message-ID", func(d *schema.Draft) { d.IdempotencyKey = "" },
			[]string{"no Message-ID (idempotency_key)"}},
		{"Message-ID with a header after it", func(d *schema.Draft) { d.IdempotencyKey = "<a@corp.example>\r\nBcc: evil@x.test" },
			[]string{`idempotency_key "<a@corp.example>\r\nBcc: evil@x.test" is not a Message-ID (<id@domain>)`}},
		{"Message-ID without brackets", func(d *schema.Draft) { d.IdempotencyKey = "a@corp.example" },
			[]string{"is not a Message-ID"}},
		{"Message-ID without a domain", func(d *schema.Draft) { d.IdempotencyKey = "<abc>" },
			[]string{"is not a Message-ID"}},
		{"Message-ID of two ids", func(d *schema.Draft) { d.IdempotencyKey = "<a@x> <b@y>" },
			[]string{"is not a Message-ID"}},
		{"Message-ID too long to fit a line", func(d *schema.Draft) { d.IdempotencyKey = "<" + strings.Repeat("a", 1000) + "@x>" },
			[]string{"is not a Message-ID"}},
		{"In-Reply-To with a header after it", func(d *schema.Draft) { d.Email.InReplyTo = "<Q1@Example.com>\nBcc: evil@x.test" },
			[]string{`email.in_reply_to "<Q1@Example.com>\nBcc: evil@x.test" is not a message id`}},
		{"References of two ids in one", func(d *schema.Draft) { d.Email.References[1] = "<Q1@Example.com> <planted@x.test>" },
			[]string{`email.references[1] "<Q1@Example.com> <planted@x.test>" is not a message id`}},
		{"Content-ID with a line break", func(d *schema.Draft) {
			d.Artifacts = []schema.DraftArtifact{{ID: "sha256:" + strings.Repeat("a", 64), Name: "c.png", Inline: true, ContentID: "c@x\r\nBcc: evil@x.test"}}
		}, []string{`artifacts[0].content_id "c@x\r\nBcc: evil@x.test" is not a content id`}},
		{"media type with a header after it", func(d *schema.Draft) {
			d.Artifacts = []schema.DraftArtifact{{ID: "sha256:" + strings.Repeat("a", 64), Name: "r.pdf", MimeType: "application/pdf\r\nBcc: evil@x.test"}}
		}, []string{`artifacts[0].mime_type "application/pdf\r\nBcc: evil@x.test" is not a media type`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := startSMTPFake(t)
			s := NewSender(SenderOptions{Accounts: []Account{{Name: "work", Addresses: []string{"agent@corp.example", "ops@corp.example"}, SMTP: f.server()}},
				Timeout: 5 * time.Second})
			d := testDraft()
			tc.forge(d)
			_, err := s.Send(context.Background(), &adapters.Attempt{Draft: d})
			if err == nil || !adapters.IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent refusal", err)
			}
			for _, w := range tc.reason {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to say %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "email: ") {
				t.Errorf("err = %q, want it to start with the package name", err)
			}
			f.mu.Lock()
			n := f.sessions
			f.mu.Unlock()
			if n != 0 || len(f.messages()) != 0 {
				t.Errorf("the forged draft reached the server: %d connections, %d messages", n, len(f.messages()))
			}
		})
	}
}

// TestSendFromOwnAddresses: a draft may pick any of its account's own
// addresses (an alias), written in any case or with a display name; it
// goes out in the config's spelling, in the header and the envelope.
func TestSendFromOwnAddresses(t *testing.T) {
	for _, tc := range []struct{ from, want string }{
		{"", "agent@corp.example"}, // the account's first
		{"agent@corp.example", "agent@corp.example"},
		{"OPS@Corp.Example", "ops@corp.example"},
		{"Ops desk <ops@corp.example>", "ops@corp.example"},
	} {
		f := startSMTPFake(t)
		s := NewSender(SenderOptions{Accounts: []Account{{Name: "work", Addresses: []string{"agent@corp.example", "ops@corp.example"}, SMTP: f.server()}},
			Timeout: 5 * time.Second})
		d := testDraft()
		d.Email.From = tc.from
		if _, err := s.Send(context.Background(), &adapters.Attempt{Draft: d}); err != nil {
			t.Fatalf("from %q: %v", tc.from, err)
		}
		msgs := f.messages()
		if len(msgs) != 1 || msgs[0].from != tc.want {
			t.Fatalf("from %q: envelope %+v, want MAIL FROM %s", tc.from, msgs, tc.want)
		}
		if h := parseSent(t, msgs[0].data).h.Get("From"); h != "<"+tc.want+">" {
			t.Errorf("from %q: header From %q, want <%s>", tc.from, h, tc.want)
		}
	}
}
