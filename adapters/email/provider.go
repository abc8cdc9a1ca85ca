package email

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Options configure the email provider.
type Options struct {
	// Config is the email section of the config (courier.adapters.email).
	Config Config
	// Limits bound what is received and sent.
	Limits confkit.Limits
	// Dropzone stores attachments and raw messages; nil for a provider
	// that only resolves drafts.
	Dropzone *dropzone.Store
	// Logger is tagged adapter=email; nil discards.
	Logger *slog.Logger
	// Progress, when set, shows the IMAP backfill's progress (a terminal).
	Progress io.Writer
	// LookupTXT resolves the DNS TXT records of DKIM keys; nil uses the
	// system resolver (VerifierOptions.LookupTXT).
	LookupTXT func(ctx context.Context, name string) ([]string, error)
}

// New returns the email provider: the embedded SMTP/LMTP receivers and an
// IMAP source per account, a Sender over the accounts that have SMTP, and
// the rules of seed 003 for drafts. A provider that is not enabled only
// resolves drafts. New does no I/O.
func New(o Options) (*adapters.Provider, error) {
	e := o.Config
	p := &adapters.Provider{Name: schema.Email, Resolver: &Resolver{Accounts: e.Accounts}}
	if !e.Enabled {
		return p, nil
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("adapter", "email")
	// One verifier for every source: they share its cache of DKIM keys.
	verifier := NewVerifier(&VerifierOptions{AuthservIDs: e.AuthservIDs, TrustUnverified: e.TrustUnverified, LookupTXT: o.LookupTXT})
	allow, err := allowFrom(e.Receiver.AllowFrom)
	if err != nil {
		return nil, err
	}
	// One set of bounds for every source, so that they hold for the
	// process: sixty sessions and an IMAP backfill share the turns.
	bounds := NewBounds(o.Limits.MaxTextBytes, o.Limits.NormalizeConcurrency)
	var parts []adapters.HealthReporter
	for _, rc := range receivers(e, o, log, allow, verifier, bounds) {
		p.Sources = append(p.Sources, rc)
		parts = append(parts, rc)
		p.Checks = append(p.Checks, adapters.Check{Name: rc.Name(), Run: rc.Check, Listen: true},
			adapters.Check{Name: rc.Name() + " exposure", Run: func(context.Context) error { return rc.Exposure() }})
	}
	var accounts []Account
	for _, acct := range e.Accounts {
		if im := acct.IMAP; im != nil {
			src := NewIMAPSource(IMAPOptions{
				Account: acct.Name, Addresses: acct.Addresses,
				Server:  imapServer(im),
				Folders: im.Folders, Mode: im.Mode, PollInterval: im.PollInterval.D(), MarkSeen: im.MarkSeen, MoveTo: im.MoveTo,
				Dropzone: o.Dropzone, MaxArtifact: o.Limits.MaxArtifactBytes, MaxMessage: o.Limits.MaxMessageBytes, Logger: log,
				Progress: o.Progress, Since: sinceOf(im), Verifier: verifier, Bounds: bounds,
				DedupeWindow: e.Receiver.DedupeWindow.D(),
			})
			p.Sources = append(p.Sources, src)
			parts = append(parts, src)
			p.Checks = append(p.Checks, adapters.Check{Name: "email/" + acct.Name + " imap", Run: src.Check})
			p.Secrets = append(p.Secrets, im.Password)
		}
		if sm := acct.SMTP; sm != nil {
			ea := Account{Name: acct.Name, Addresses: acct.Addresses, DisplayName: acct.DisplayName, Hostname: sm.Hostname,
				SMTP: Server{Host: sm.Host, Port: sm.Port, TLS: sm.TLS, InsecureSkipVerify: sm.InsecureSkipVerify,
					Username: sm.Username, Password: sm.Password, Auth: sm.Auth},
				AppendSent: sm.AppendSent}
			if sm.AppendSent && acct.IMAP != nil {
				srv := imapServer(acct.IMAP)
				ea.IMAP, ea.SentFolder = &srv, acct.IMAP.SentFolder
			}
			accounts = append(accounts, ea)
			p.Checks = append(p.Checks, adapters.Check{Name: "email/" + acct.Name + " smtp", Run: ea.Check})
			if len(acct.Addresses) == 0 {
				// Doctor says what every reply would meet.
				why := errors.New(noAddress(acct.Name))
				p.Checks = append(p.Checks, adapters.Check{Name: "email/" + acct.Name + " from", Run: func(context.Context) error { return why }})
			}
			p.Secrets = append(p.Secrets, sm.Password)
		}
	}
	if len(accounts) == 0 {
		p.Waiting = "no email account has smtp configured (courier.adapters.email.accounts[].smtp)"
	} else {
		snd := NewSender(SenderOptions{Accounts: accounts, Dropzone: o.Dropzone, Logger: log})
		p.Sender = snd
		parts = append(parts, snd)
	}
	if len(parts) > 0 {
		p.Health = adapters.CombineHealth(parts...)
	}
	return p, nil
}

// receivers makes the receiver's SMTP and LMTP listeners that are set.
func receivers(e Config, o Options, log *slog.Logger, allow []netip.Prefix, verifier *Verifier, bounds *Bounds) []*Receiver {
	var out []*Receiver
	for _, r := range []struct {
		addr string
		lmtp bool
	}{{e.Receiver.SMTP, false}, {e.Receiver.LMTP, true}} {
		if r.addr == "" {
			continue
		}
		out = append(out, NewReceiver(ReceiverOptions{Addr: r.addr, LMTP: r.lmtp, Hostname: e.Receiver.Hostname, Own: ownAddresses(e),
			MaxMessage: o.Limits.MaxMessageBytes, MaxArtifact: o.Limits.MaxArtifactBytes, Dropzone: o.Dropzone, Logger: log,
			AllowFrom: allow, Verifier: verifier, Bounds: bounds,
			MaxSessions: e.Receiver.MaxSessions, MaxSessionsPerIP: e.Receiver.MaxSessionsPerIP,
			MaxSessionTime: e.Receiver.MaxSessionTime.D(), ReadTimeout: e.Receiver.ReadTimeout.D(),
			DedupeWindow: e.Receiver.DedupeWindow.D()}))
	}
	return out
}

// ownAddresses are the addresses mail to us is sent to: every account's
// and the receiver's; they are left out of a message's participants.
func ownAddresses(e Config) []string {
	var own []string
	for _, acct := range e.Accounts {
		own = append(own, acct.Addresses...)
	}
	return append(own, e.Receiver.Addresses...)
}

// allowFrom parses receiver.allow_from (validated with the config; an
// error here names the key all the same).
func allowFrom(nets []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, n := range nets {
		p, err := ParsePrefix(n)
		if err != nil {
			return nil, fmt.Errorf("email: courier.adapters.email.receiver.allow_from[%d]: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func imapServer(im *IMAPConfig) Server {
	return Server{Host: im.Host, Port: im.Port, TLS: im.TLS, InsecureSkipVerify: im.InsecureSkipVerify,
		Username: im.Username, Password: im.Password, Auth: im.Auth}
}

func sinceOf(im *IMAPConfig) time.Time {
	if im.Since == nil {
		return time.Time{}
	}
	return im.Since.Time
}
