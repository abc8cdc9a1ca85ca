package email

import (
	"cmp"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Resolver is email's rules for drafts (seed 003): a reply goes to the
// parent's Reply-To, else its From, with "Re:" and In-Reply-To/References
// from the parent, from the account the parent came to; every attempt
// sends the Message-ID fixed here. An address that is not ASCII is
// answered as it was written (see replyRecipients), and the Sender
// delivers it over SMTPUTF8.
type Resolver struct {
	// Accounts are the configured accounts; the first is the default.
	Accounts []AccountConfig
}

var _ adapters.Resolver = (*Resolver)(nil)

// Recognizes reports whether r is an email address.
func (*Resolver) Recognizes(r string) bool { return strings.Contains(r, "@") }

// Resolve fills in the recipients, the account and From, the subject and
// the reply headers, then fixes the Message-ID (the idempotency key) and
// the inbound id a copy of the mail will have.
func (r *Resolver) Resolve(d *schema.Draft, parent *adapters.Parent, opts adapters.ResolveOptions, src *schema.Source) error {
	if len(d.To) == 0 && parent != nil {
		to, refused := replyRecipients(parent)
		if len(to) == 0 && refused != nil {
			return src.Errorf("reply_to", "%s: the address it came from cannot be answered: %v; set to", d.ReplyTo, refused)
		}
		d.To = to
	}
	if len(d.To) == 0 {
		return nil // the caller names the missing recipient
	}
	if d.Email == nil {
		d.Email = &schema.EmailHeaders{}
	}
	if err := r.resolveAccount(d, parent, opts.Account, src); err != nil {
		return err
	}
	if parent != nil {
		subject, mid, refs, irt := parentHeaders(parent)
		if d.Subject == "" {
			d.Subject = threading.ReplySubject(subject)
		}
		if mid != "" {
			d.Email.InReplyTo, d.Email.References = threading.ReplyHeaders(mid, refs, irt)
		}
	}
	if strings.TrimSpace(d.Subject) == "" {
		return src.Errorf("subject", "a new email needs a subject")
	}
	d.IdempotencyKey = "<" + strings.ReplaceAll(uuid.NewString(), "-", "") + "@" + messageIDDomain(d) + ">"
	d.InboundID = threading.EmailID(d.IdempotencyKey)
	return nil
}

// resolveAccount picks the account to send from: the one asked for, else
// the one the message answered came to, else the first; and takes From
// from it.
func (r *Resolver) resolveAccount(d *schema.Draft, parent *adapters.Parent, account string, src *schema.Source) error {
	if account == "" && parent != nil && parent.Message != nil {
		account = parent.Message.Metadata.Extra.Account
	}
	if account == "" && parent != nil && parent.Draft != nil && parent.Draft.Email != nil {
		account = parent.Draft.Email.Account
	}
	for i := range r.Accounts {
		acct := &r.Accounts[i]
		if account == "" || acct.Name == account {
			d.Email.Account = acct.Name
			if d.Email.From != "" {
				// The draft picks one of the account's own addresses (an
				// alias); any other would be sent as a forgery, and the
				// Sender refuses it: say so now, at the field.
				from, err := fromAddress(&Account{Name: acct.Name, Addresses: acct.Addresses}, d)
				if err != nil {
					return src.Errorf("email.from", "%s is not an address of account %s (%s): a draft is sent only from its account's own addresses",
						d.Email.From, acct.Name, strings.Join(acct.Addresses, ", "))
				}
				d.Email.From = from
			} else if len(acct.Addresses) > 0 {
				d.Email.From = acct.Addresses[0]
			} else {
				// The Sender would set the draft aside at its first
				// attempt: say so now.
				return src.Errorf("email.account", "%s", noAddress(acct.Name))
			}
			return nil
		}
	}
	if account != "" && len(r.Accounts) > 0 {
		return src.Errorf("to", "no email account named %q in the config", account)
	}
	return nil
}

// replyRecipients applies seed 003: the parent's Reply-To, else its From;
// a follow-up to our own mail goes to its recipients again. An address
// is answered as it was written: the From's email when the file has one
// (ASCII, as the protocol's schema takes it), else its platform_id or the
// raw From (an SMTPUTF8 address, josé@exämple.com), which the Sender
// delivers over SMTPUTF8. Each must be one plain address (plainAddress):
// one that is not is skipped, and refused names the first such when
// none is left.
func replyRecipients(p *adapters.Parent) (to schema.Recipients, refused error) {
	if p.Draft != nil {
		return p.Draft.To, nil
	}
	m := p.Message
	pick := func(list []string) []threading.Address {
		var out []threading.Address
		for _, a := range list {
			if a == "" {
				continue
			}
			if err := plainAddress(a); err != nil {
				if refused == nil {
					refused = fmt.Errorf("%.200q: %v", a, err)
				}
				continue
			}
			out = append(out, threading.Address{Email: a})
		}
		return out
	}
	raw := func(key string) []string {
		var out []string
		for _, s := range rawStrings(m.Metadata.ProviderRaw[key]) {
			out = append(out, rawAddress(s))
		}
		return out
	}
	replyTo := pick(raw("reply_to"))
	f := m.Participants.From
	addr := cmp.Or(f.Email, f.PlatformID)
	if rf := raw("from"); addr == "" && len(rf) > 0 {
		addr = rf[0]
	}
	from := pick([]string{addr})
	for _, t := range threading.ReplyTarget(from, replyTo) {
		to = append(to, t.Email)
	}
	return to, refused
}

// rawStrings are the strings of a provider_raw list (a YAML sequence read
// back as []any).
func rawStrings(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case string:
		return []string{v}
	}
	return nil
}

// parentHeaders returns the subject, Message-ID, References and
// In-Reply-To of the message answered.
func parentHeaders(p *adapters.Parent) (subject, mid, refs, irt string) {
	if p.Draft != nil {
		subject, mid = p.Draft.Subject, p.Draft.IdempotencyKey
		if p.Draft.Email != nil {
			refs = strings.Join(p.Draft.Email.References, " ")
			irt = p.Draft.Email.InReplyTo
		}
		return
	}
	raw := p.Message.Metadata.ProviderRaw
	str := func(k string) string { s, _ := raw[k].(string); return s }
	subject, mid, irt = str("subject"), str("message_id"), str("in_reply_to")
	if subject == "" {
		subject = p.Message.Session.Name
	}
	switch r := raw["references"].(type) {
	case string:
		refs = r
	case []any:
		parts := make([]string, 0, len(r))
		for _, x := range r {
			if s, ok := x.(string); ok {
				parts = append(parts, s)
			}
		}
		refs = strings.Join(parts, " ")
	}
	return
}

// messageIDDomain is the right-hand side of a Message-ID Courier makes: the
// sender's domain, else this host's name.
func messageIDDomain(d *schema.Draft) string {
	if d.Email != nil {
		if i := strings.LastIndexByte(d.Email.From, '@'); i >= 0 && i < len(d.Email.From)-1 {
			return d.Email.From[i+1:]
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" && !strings.ContainsAny(h, " <>@") {
		return h
	}
	return "courier.localhost"
}
