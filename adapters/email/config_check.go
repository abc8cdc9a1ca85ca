package email

import (
	"fmt"
	"net/mail"
	"net/netip"
	"strings"
	"time"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Check checks the section: the receiver, the trusted authserv-ids, the
// accounts and, when the secrets were read, that no login goes across a
// network in clear text.
func (c *Config) Check(k *confkit.Checker) {
	c.Receiver.check(k.At("receiver"))
	checkAuthservIDs(k, c.AuthservIDs)
	checkAccounts(k, c.Accounts)
	if k.Secrets() {
		c.checkPlaintextAuth(k)
	}
}

// check checks the embedded SMTP/LMTP receiver, k at its section.
func (r *ReceiverConfig) check(k *confkit.Checker) {
	if r.SMTP != "" {
		if err := confkit.ListenAddr(r.SMTP); err != nil {
			k.Bad("smtp", "%v", err)
		}
	}
	if l := r.LMTP; l != "" && !strings.HasPrefix(l, "unix:") {
		if err := confkit.ListenAddr(l); err != nil {
			k.Bad("lmtp", "%v (or unix:/path)", err)
		}
	}
	for i, a := range r.Addresses {
		if !schema.ValidEmail(a) {
			k.Bad(fmt.Sprintf("addresses[%d]", i), "%q is not an email address", a)
		}
	}
	for i, n := range r.AllowFrom {
		if _, err := ParsePrefix(n); err != nil {
			k.Bad(fmt.Sprintf("allow_from[%d]", i), "%v", err)
		}
	}
	if r.MaxSessions < 0 {
		k.Bad("max_sessions", "%d: must be at least 1 (or 0 for the default, 100)", r.MaxSessions)
	}
	if r.MaxSessionsPerIP < 0 {
		k.Bad("max_sessions_per_ip", "%d: must be at least 1 (or 0 for the default, 10)", r.MaxSessionsPerIP)
	}
	// Under a second no real client keeps up; a negative one is a typo.
	if d := r.MaxSessionTime.D(); d != 0 && d < time.Second {
		k.Bad("max_session_time", "%v: must be at least 1s (or 0 for the default, 10m)", d)
	}
	if d := r.ReadTimeout.D(); d != 0 && d < time.Second {
		k.Bad("read_timeout", "%v: must be at least 1s (or 0 for the default, 5m)", d)
	}
	if d := r.DedupeWindow.D(); d != 0 && d < time.Second {
		k.Bad("dedupe_window", "%v: must be at least 1s (or 0 for the default, 10m)", d)
	}
}

// ParsePrefix reads one network of receiver.allow_from: a CIDR prefix
// ("192.0.2.0/24", "2001:db8::/32") or a single address (a /32 or /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is neither a network (192.0.2.0/24) nor an address", s)
}

// checkAuthservIDs checks authserv_ids: each one token, as RFC 8601 §2.5
// writes an authserv-id (a host name, usually).
func checkAuthservIDs(k *confkit.Checker, ids []string) {
	for i, id := range ids {
		if id == "" || strings.ContainsAny(id, " \t;()\"") {
			k.Bad(fmt.Sprintf("authserv_ids[%d]", i), "%q is not an authserv-id (one token, such as mx.example.com)", id)
		}
	}
}

// checkAccounts checks the accounts: names present and distinct, and each
// account.
func checkAccounts(k *confkit.Checker, accounts []AccountConfig) {
	names := map[string]bool{}
	for i := range accounts {
		a := &accounts[i]
		ak := k.At(fmt.Sprintf("accounts[%d]", i))
		if a.Name == "" {
			ak.Bad("name", "an account needs a name")
		} else if names[a.Name] {
			ak.Bad("name", "account name %q is used twice", a.Name)
		}
		names[a.Name] = true
		a.check(ak)
	}
}

// check checks one account, k at it: its addresses and its imap and smtp
// sections.
func (a *AccountConfig) check(k *confkit.Checker) {
	if a.IMAP == nil && a.SMTP == nil {
		k.Bad("", "an account needs imap, smtp or both")
	}
	for j, addr := range a.Addresses {
		if _, err := mail.ParseAddress(addr); err != nil || !schema.ValidEmail(addr) {
			k.Bad(fmt.Sprintf("addresses[%d]", j), "%q is not an email address", addr)
		}
	}
	if a.IMAP != nil {
		a.IMAP.check(k.At("imap"))
	}
	if a.SMTP != nil {
		a.SMTP.check(k.At("smtp"), a.IMAP != nil)
	}
}

func (im *IMAPConfig) check(k *confkit.Checker) {
	checkServer(k, im.Host, im.Port, im.TLS)
	switch im.Mode {
	case "idle", "poll":
	default:
		k.Bad("mode", "%q is not one of idle, poll", im.Mode)
	}
	switch im.Auth {
	case "plain", "login":
	default:
		k.Bad("auth", "%q is not one of plain, login", im.Auth)
	}
	if im.Username == "" {
		k.Bad("username", "required")
	}
}

// check checks an account's smtp section; hasIMAP says whether the
// account has an imap section too (append_sent needs one).
func (sm *SMTPConfig) check(k *confkit.Checker, hasIMAP bool) {
	checkServer(k, sm.Host, sm.Port, sm.TLS)
	switch sm.Auth {
	case "plain", "login", "none":
	default:
		k.Bad("auth", "%q is not one of plain, login, none", sm.Auth)
	}
	if sm.AppendSent && !hasIMAP {
		k.Bad("append_sent", "needs the account's imap section to append to")
	}
}

// checkServer checks what an imap and an smtp section share, k at the
// section.
func checkServer(k *confkit.Checker, host string, port int, tls string) {
	if host == "" {
		k.Bad("host", "required")
	}
	if port < 1 || port > 65535 {
		k.Bad("port", "%d is not a port", port)
	}
	switch tls {
	case "implicit", "starttls", "none":
	default:
		k.Bad("tls", "%q is not one of implicit, starttls, none", tls)
	}
}

// checkPlaintextAuth refuses a login sent in clear text across a network:
// an IMAP or SMTP server with tls: none that Courier logs in to (IMAP
// always does; SMTP with a username and auth other than none), unless its
// host is on loopback or the server says allow_plaintext_auth: true.
// Upstream's flat smtp_port: 25 means tls: none, so it is caught here too,
// named by that key.
//
// Loopback is allowed by default: the password never leaves the machine,
// where whoever could read it on the wire (root) can read the config and
// the credential files as well. That is also how a local relay or a test
// Dovecot is reached, plain on 127.0.0.1.
//
// It runs only when secrets are read (serve, fetch, doctor): the commands
// agents run neither read the password nor connect.
func (c *Config) checkPlaintextAuth(k *confkit.Checker) {
	flat := c.IMAPServer != "" || c.SMTPServer != ""
	if c.AllowPlaintextAuth && !flat {
		k.Bad("allow_plaintext_auth", "belongs with the flat keys (imap_server, smtp_server, ...); with accounts, set it on the account's imap or smtp section")
	}
	for i, a := range c.Accounts {
		ak := k.At(fmt.Sprintf("accounts[%d]", i))
		if s := a.IMAP; s != nil && s.TLS == "none" && s.Username != "" && !s.AllowPlaintextAuth && !confkit.LoopbackHost(s.Host) {
			ak.Bad("imap.tls", "tls: none would send the IMAP password to %s in clear text: use tls: implicit or starttls, or set allow_plaintext_auth: true on this server", s.Host)
		}
		s := a.SMTP
		if s == nil || s.TLS != "none" || s.Username == "" || s.Auth == "none" || s.AllowPlaintextAuth || confkit.LoopbackHost(s.Host) {
			continue
		}
		if flat {
			k.Bad("smtp_port", "smtp_port: %d means no TLS, so the login would go to %s in clear text: use smtp_port 465 or 587, or set allow_plaintext_auth: true", s.Port, s.Host)
			continue
		}
		ak.Bad("smtp.tls", "tls: none would send the SMTP login to %s in clear text: use tls: implicit or starttls, or set allow_plaintext_auth: true on this server", s.Host)
	}
}
