package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/schema"
)

// buildAdapters makes the enabled adapters from the config: an explicit
// wiring, provider by provider, as matterbridge's router does, with no
// registry filled by init().
func buildAdapters(cfg *config.Config, deps adapterDeps) (*adapterSet, error) {
	set := &adapterSet{
		senders:  map[schema.Provider]adapters.Sender{},
		health:   map[string]adapters.HealthReporter{},
		handlers: map[string]http.Handler{},
		self:     map[schema.Provider][]string{},
		waiting:  map[schema.Provider]string{},
	}
	a := cfg.Courier.Adapters
	if a.Email.Enabled {
		if err := buildEmail(cfg, deps, set); err != nil {
			return nil, err
		}
	}
	if a.Lark.Enabled {
		return nil, fmt.Errorf("courier.adapters.lark.enabled: the Lark adapter is not in this version of Courier yet; set enabled: false (drafts for lark stay queued)")
	}
	if a.Slack.Enabled {
		return nil, fmt.Errorf("courier.adapters.slack.enabled: the Slack adapter is not in this version of Courier yet; set enabled: false (drafts for slack stay queued)")
	}
	return set, nil
}

func server(host string, port int, tls string, skip bool, user string, pass config.Secret, auth string) email.Server {
	return email.Server{Host: host, Port: port, TLS: tls, InsecureSkipVerify: skip, Username: user, Password: pass.Reveal(), Auth: auth}
}

// emailHealth sums the email parts into the one "email" entry of /health.
type emailHealth struct{ parts []adapters.HealthReporter }

func (h emailHealth) Health() adapters.Health {
	out := adapters.Health{Status: adapters.StatusConnected}
	var details []string
	for _, p := range h.parts {
		ph := p.Health()
		if ph.Status != adapters.StatusConnected && out.Status == adapters.StatusConnected {
			out.Status = ph.Status
		}
		if ph.LastEvent != nil && (out.LastEvent == nil || ph.LastEvent.After(*out.LastEvent)) {
			out.LastEvent = ph.LastEvent
		}
		if ph.LastErrorAt != nil && (out.LastErrorAt == nil || ph.LastErrorAt.After(*out.LastErrorAt)) {
			out.LastError, out.LastErrorAt = ph.LastError, ph.LastErrorAt
		}
		if ph.Detail != "" {
			details = append(details, ph.Detail)
		}
	}
	out.Detail = strings.Join(details, "; ")
	return out
}

func buildEmail(cfg *config.Config, deps adapterDeps, set *adapterSet) error {
	e := cfg.Courier.Adapters.Email
	lim := cfg.Courier.Limits
	log := deps.log.With("adapter", "email")
	var parts []adapters.HealthReporter
	var own []string
	for _, acct := range e.Accounts {
		own = append(own, acct.Addresses...)
	}
	own = append(own, e.Receiver.Addresses...)
	set.self[schema.Email] = nil // our own mail is recognised by Message-ID (mailbox.DraftKeys)
	for _, r := range []struct {
		addr string
		lmtp bool
	}{{e.Receiver.SMTP, false}, {e.Receiver.LMTP, true}} {
		if r.addr == "" {
			continue
		}
		rc := email.NewReceiver(email.ReceiverOptions{Addr: r.addr, LMTP: r.lmtp, Hostname: e.Receiver.Hostname, Own: own,
			MaxMessage: lim.MaxMessageBytes, MaxArtifact: lim.MaxArtifactBytes, Dropzone: deps.dropzone, Logger: log})
		set.sources = append(set.sources, rc)
		parts = append(parts, rc)
		addr := r.addr
		set.checks = append(set.checks, check{name: rc.Name(), fn: func(ctx context.Context) error { return checkListen(addr) }, listen: true})
	}
	var accounts []email.Account
	for _, acct := range e.Accounts {
		if acct.IMAP != nil {
			im := acct.IMAP
			src := email.NewIMAPSource(email.IMAPOptions{
				Account: acct.Name, Addresses: acct.Addresses,
				Server:  server(im.Host, im.Port, im.TLS, im.InsecureSkipVerify, im.Username, im.Password, im.Auth),
				Folders: im.Folders, Mode: im.Mode, PollInterval: im.PollInterval.D(), MarkSeen: im.MarkSeen, MoveTo: im.MoveTo,
				Dropzone: deps.dropzone, MaxArtifact: lim.MaxArtifactBytes, MaxMessage: lim.MaxMessageBytes, Logger: log,
				Progress: deps.progress, Since: sinceOf(im),
			})
			set.sources = append(set.sources, src)
			parts = append(parts, src)
			set.checks = append(set.checks, check{name: "email/" + acct.Name + " imap", fn: src.Check})
		}
		if acct.SMTP != nil {
			sm := acct.SMTP
			ea := email.Account{Name: acct.Name, Addresses: acct.Addresses, DisplayName: acct.DisplayName, Hostname: sm.Hostname,
				SMTP:       server(sm.Host, sm.Port, sm.TLS, sm.InsecureSkipVerify, sm.Username, sm.Password, sm.Auth),
				AppendSent: sm.AppendSent}
			if sm.AppendSent && acct.IMAP != nil {
				im := acct.IMAP
				srv := server(im.Host, im.Port, im.TLS, im.InsecureSkipVerify, im.Username, im.Password, im.Auth)
				ea.IMAP, ea.SentFolder = &srv, im.SentFolder
			}
			accounts = append(accounts, ea)
			set.checks = append(set.checks, check{name: "email/" + acct.Name + " smtp", fn: ea.Check})
		}
	}
	if len(accounts) == 0 {
		set.waiting[schema.Email] = "no email account has smtp configured (courier.adapters.email.accounts[].smtp)"
	}
	if len(accounts) > 0 {
		snd := email.NewSender(email.SenderOptions{Accounts: accounts, Dropzone: deps.dropzone, Logger: log})
		set.senders[schema.Email] = snd
		parts = append(parts, snd)
	}
	if len(parts) > 0 {
		set.health["email"] = emailHealth{parts: parts}
	}
	return nil
}

// checkListen says whether the receiver's address can be bound (or is held
// by a running service).
func checkListen(addr string) error {
	if len(addr) > 5 && addr[:5] == "unix:" {
		return nil
	}
	ln, err := listenTCP(addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %v (another program holds the port, or the service is running)", addr, err)
	}
	return ln.Close()
}

func (a *app) fetchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "fetch",
		Short: "Run one IMAP sync pass of every account and exit (for cron, and to compare with mbsync)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.secrets = true
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			lock, mb, dz, err := a.openExclusive(cfg)
			if err != nil {
				return err
			}
			defer lock.Release()
			deps := adapterDeps{log: a.logger(), mailbox: mb, dropzone: dz}
			if isTerminal(a.stderr) {
				deps.progress = a.stderr
			}
			set, err := buildAdapters(cfg, deps)
			if err != nil {
				return withCode(exitConfig, err)
			}
			p := ingest.New(mb, &ingest.Options{Logger: a.logger()})
			if err := p.Start(cmd.Context()); err != nil {
				return err
			}
			defer p.Stop(context.Background())
			n := 0
			start := time.Now()
			for _, src := range set.sources {
				if s, ok := src.(*email.IMAPSource); ok {
					if err := s.SyncOnce(cmd.Context(), p); err != nil {
						return withCode(exitUnavailable, fmt.Errorf("%s: %w", s.Name(), err))
					}
					n++
				}
			}
			if n == 0 {
				return withCode(exitConfig, fmt.Errorf("no email account has imap configured (courier.adapters.email.accounts[].imap)"))
			}
			st := p.Stats()[schema.Email]
			fmt.Fprintf(a.stdout, "fetched %d new message(s) (%d already in the mailbox) from %d account(s) in %s\n",
				st.Written, st.Duplicates, n, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

func sinceOf(im *config.IMAP) time.Time {
	if im.Since == nil {
		return time.Time{}
	}
	return im.Since.Time
}

func listenTCP(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
