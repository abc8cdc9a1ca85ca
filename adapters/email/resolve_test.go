package email

import (
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// utf8Parent is a mail as the receiver files one from an SMTPUTF8 sender:
// participants.from has no email (the protocol's schema takes none that
// is not ASCII), its platform_id and provider_raw's from hold the address
// as written.
func utf8Parent(platformID string, raw map[string]any) *adapters.Parent {
	if raw == nil {
		raw = map[string]any{}
	}
	raw["subject"], raw["message_id"] = "Réunion", "<q1@exämple.com>"
	return &adapters.Parent{Message: &schema.Message{ID: "email_1", Provider: schema.Email, Session: schema.Session{Name: "Réunion"},
		Participants: schema.Participants{From: schema.Participant{ID: strings.ToLower(platformID), Name: "José", PlatformID: platformID}},
		Metadata:     schema.Metadata{Extra: schema.Extra{Account: "work"}, ProviderRaw: raw}}}
}

func utf8Resolver() *Resolver {
	return &Resolver{Accounts: []AccountConfig{{Name: "work", Addresses: []string{"agent@corp.example"}}}}
}

// TestResolveReplyUTF8: a reply to an SMTPUTF8 sender goes to the address
// as it was written (platform_id, else provider_raw's from), and to a
// Reply-To that is one too; an ASCII sender's email is answered as
// before.
func TestResolveReplyUTF8(t *testing.T) {
	for _, c := range []struct {
		name   string
		parent *adapters.Parent
		want   string
	}{
		{"platform_id", utf8Parent("josé@exämple.com", map[string]any{"from": []any{"José <josé@exämple.com>"}}), "josé@exämple.com"},
		{"raw From only", utf8Parent("", map[string]any{"from": []any{"José <josé@exämple.com>"}}), "josé@exämple.com"},
		{"Reply-To, a comma in its name", utf8Parent("josé@exämple.com", map[string]any{"reply_to": []any{"Équipe, Support <équipe@exämple.com>"}}), "équipe@exämple.com"},
		{"Chinese", utf8Parent("用户@例子.广告", nil), "用户@例子.广告"},
		// net/mail read no address in this one, and the reply went to
		// the From.
		{"ASCII Reply-To, a comma in its name", utf8Parent("josé@exämple.com", map[string]any{"reply_to": []any{"Lee, Ann <ann@example.com>"}}), "ann@example.com"},
		{"ASCII email", &adapters.Parent{Message: &schema.Message{ID: "email_2", Provider: schema.Email,
			Participants: schema.Participants{From: schema.Participant{ID: "ann@example.com", Name: "Ann", Email: "ann@example.com", PlatformID: "Ann@Example.com"}},
			Metadata:     schema.Metadata{ProviderRaw: map[string]any{"subject": "Plan"}}}}, "ann@example.com"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &schema.Draft{ReplyTo: "email_1", Body: "Noted.\n"}
			if err := utf8Resolver().Resolve(d, c.parent, adapters.ResolveOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			if len(d.To) != 1 || d.To[0] != c.want {
				t.Errorf("to %q, want %q", d.To, c.want)
			}
		})
	}
}

// TestResolveReplyHostileAddress: what a sender writes in From or Reply-To
// is answered only when it is one plain address: a list, a line break, a
// quoted local part, an angle bracket, an invisible character or an
// address literal is refused, naming reply_to and the address; a Reply-To
// refused leaves the From.
func TestResolveReplyHostileAddress(t *testing.T) {
	for name, addr := range map[string]string{
		"two addresses":      "josé@exämple.com, victim@example.com",
		"a line break":       "josé@exämple.com\r\nBcc: victim@example.com",
		"a quoted list":      "a@x.com>, <b@exämple.com",
		"a space":            "jo sé@exämple.com",
		"a bidi override":    "josé\u202e@exämple.com",
		"a zero-width space": "jo\u200bsé@exämple.com",
		"two at signs":       "josé@victim@exämple.com",
		"an address literal": "josé@[127.0.0.1]",
		"no local part":      "@exämple.com",
		"no domain":          "josé@",
		"a NUL":              "josé\x00@exämple.com",
		"not UTF-8":          "jos\xe9@exämple.com",
		"too long":           strings.Repeat("é", 40) + "@exämple.com",
		"a dot at the end":   "josé.@exämple.com",
		"a bad label":        "josé@-exämple.com",
	} {
		t.Run(name, func(t *testing.T) {
			d := &schema.Draft{ReplyTo: "email_1", Body: "Noted.\n"}
			err := utf8Resolver().Resolve(d, utf8Parent(addr, nil), adapters.ResolveOptions{}, nil)
			if err == nil || !strings.Contains(err.Error(), "reply_to") || !strings.Contains(err.Error(), "cannot be answered") || len(d.To) != 0 {
				t.Fatalf("to %q, %v; want reply_to refused", d.To, err)
			}
			if strings.ContainsAny(err.Error(), "\r\n\x00\u202e\u200b") {
				t.Errorf("the error carries the address's invisible characters as they are: %q", err)
			}
			// The same as a Reply-To: skipped, the From answered.
			d = &schema.Draft{ReplyTo: "email_1", Body: "Noted.\n"}
			p := utf8Parent("josé@exämple.com", map[string]any{"reply_to": []any{"Help <" + addr + ">", addr}})
			if err := utf8Resolver().Resolve(d, p, adapters.ResolveOptions{}, nil); err != nil || len(d.To) != 1 || d.To[0] != "josé@exämple.com" {
				t.Errorf("Reply-To %q: to %q, %v; want the From", addr, d.To, err)
			}
		})
	}
}
