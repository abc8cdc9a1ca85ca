package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// plaintextAuth refuses a login sent in clear text across a network: an
// IMAP or SMTP server with tls: none that Courier logs in to (IMAP always
// does; SMTP with a username and auth other than none), unless its host is
// on loopback or the server says allow_plaintext_auth: true. Upstream's
// flat smtp_port: 25 means tls: none, so it is caught here too, named by
// that key.
//
// Loopback is allowed by default: the password never leaves the machine,
// where whoever could read it on the wire (root) can read the config and
// the credential files as well. That is also how a local relay or a test
// Dovecot is reached, plain on 127.0.0.1.
//
// It runs only when secrets are read (serve, fetch, doctor): the commands
// agents run neither read the password nor connect.
func (k *checker) plaintextAuth(e *Email) {
	flat := e.IMAPServer != "" || e.SMTPServer != ""
	if e.AllowPlaintextAuth && !flat {
		k.bad(emailPath+".allow_plaintext_auth", "belongs with the flat keys (imap_server, smtp_server, ...); with accounts, set it on the account's imap or smtp section")
	}
	for i, a := range e.Accounts {
		ap := fmt.Sprintf("%s.accounts[%d]", emailPath, i)
		if s := a.IMAP; s != nil && s.TLS == "none" && s.Username != "" && !s.AllowPlaintextAuth && !loopbackHost(s.Host) {
			k.bad(ap+".imap.tls", "tls: none would send the IMAP password to %s in clear text: use tls: implicit or starttls, or set allow_plaintext_auth: true on this server", s.Host)
		}
		s := a.SMTP
		if s == nil || s.TLS != "none" || s.Username == "" || s.Auth == "none" || s.AllowPlaintextAuth || loopbackHost(s.Host) {
			continue
		}
		if flat {
			k.bad(emailPath+".smtp_port", "smtp_port: %d means no TLS, so the login would go to %s in clear text: use smtp_port 465 or 587, or set allow_plaintext_auth: true", s.Port, s.Host)
			continue
		}
		k.bad(ap+".smtp.tls", "tls: none would send the SMTP login to %s in clear text: use tls: implicit or starttls, or set allow_plaintext_auth: true on this server", s.Host)
	}
}

// loopbackHost reports whether host is this machine by name or address:
// localhost (RFC 6761 reserves it for loopback), 127.0.0.0/8 or ::1. Other
// names are not resolved: a name can point anywhere tomorrow.
func loopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}
