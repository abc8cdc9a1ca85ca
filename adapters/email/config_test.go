package email_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// sections is the email provider's row of the provider table as the
// config reads it: the email section, as Courier reads it, errors named by
// their whole key and line.
var sections = []config.Adapter{{Name: schema.Email, Config: func() confkit.Section { return new(email.Config) }}}

func TestUpstreamFlatKeys(t *testing.T) {
	t.Setenv("EMAIL_PASSWORD", "pw")
	c, err := config.Parse([]byte(`courier:
  adapters:
    email:
      enabled: true
      imap_server: imap.gmail.com
      imap_port: 993
      smtp_server: smtp.gmail.com
      smtp_port: 587
      username: bot@gmail.com
      password: ${EMAIL_PASSWORD}
      poll_interval: 60
`), t.TempDir(), sections)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := email.ConfigOf(c).Account("default")
	if !ok {
		t.Fatal("flat keys did not make an account")
	}
	if a.IMAP.Host != "imap.gmail.com" || a.IMAP.TLS != "implicit" || a.IMAP.Mode != "poll" || a.IMAP.PollInterval.D() != time.Minute {
		t.Errorf("imap = %+v", a.IMAP)
	}
	if a.SMTP.Host != "smtp.gmail.com" || a.SMTP.TLS != "starttls" || a.SMTP.Password.Reveal() != "pw" {
		t.Errorf("smtp = %+v", a.SMTP)
	}
	if len(a.Addresses) != 1 || a.Addresses[0] != "bot@gmail.com" {
		t.Errorf("addresses = %v, want the login", a.Addresses)
	}
}

// The flat upstream keys' password_file reaches the account they make, with
// the name of its file (so that doctor does not take it for an inline
// password).
func TestUpstreamFlatPasswordFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte("flat-pw\n"), 0o600)
	c, err := config.Parse([]byte(`courier:
  adapters:
    email:
      imap_server: imap.example.com
      smtp_server: smtp.example.com
      username: bot@example.com
      password_file: pw
`), dir, sections)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := email.ConfigOf(c).Account("default")
	for _, s := range []struct {
		pw   confkit.Secret
		file string
	}{{a.IMAP.Password, a.IMAP.PasswordFile}, {a.SMTP.Password, a.SMTP.PasswordFile}} {
		if s.pw.Reveal() != "flat-pw" || s.file != "pw" {
			t.Errorf("account from the flat keys: password %q from %q", s.pw.Reveal(), s.file)
		}
	}
	n := 0
	for _, r := range c.Secrets() {
		if !strings.HasPrefix(r.Path, "courier.adapters.email.") {
			continue
		}
		n++
		if r.Secret.Reveal() != "flat-pw" || r.File != "pw" {
			t.Errorf("%s: %q from %q", r.Path, r.Secret.Reveal(), r.File)
		}
	}
	if n != 3 {
		t.Errorf("%d email secrets, want email.password and the account's imap and smtp passwords", n)
	}
}

// The keys of sender authenticity: read as written, and a bad value is an
// error naming its key and line.
func TestSenderAuthKeys(t *testing.T) {
	c, err := config.Parse([]byte(`courier:
  adapters:
    email:
      enabled: true
      receiver:
        smtp: 0.0.0.0:2525
        allow_from: [192.0.2.0/24, "2001:db8::/32", 198.51.100.7]
      authserv_ids: [mx.example.com]
      trust_unverified: true
`), t.TempDir(), sections)
	if err != nil {
		t.Fatal(err)
	}
	e := email.ConfigOf(c)
	if strings.Join(e.Receiver.AllowFrom, ",") != "192.0.2.0/24,2001:db8::/32,198.51.100.7" ||
		strings.Join(e.AuthservIDs, ",") != "mx.example.com" || !e.TrustUnverified {
		t.Errorf("read %+v", e)
	}
	if d := *email.ConfigOf(config.Default(sections)); d.TrustUnverified || len(d.AuthservIDs) != 0 || len(d.Receiver.AllowFrom) != 0 {
		t.Errorf("defaults: %+v (unverified senders are not trusted, no host is)", d)
	}
	for in, want := range map[string]string{"198.51.100.7": "198.51.100.7/32", "192.0.2.9/24": "192.0.2.0/24", "::ffff:192.0.2.1": "192.0.2.1/32", "2001:db8::1": "2001:db8::1/128"} {
		if p, err := email.ParsePrefix(in); err != nil || p.String() != want {
			t.Errorf("ParsePrefix(%q) = %v, %v; want %s", in, p, err, want)
		}
	}

	for _, tc := range []struct {
		name, yaml string
		line       int
		path, msg  string
	}{
		{"bad network", "courier:\n  adapters:\n    email:\n      receiver:\n        allow_from: [192.0.2.0/24, 10.0.0.0/33]\n", 5,
			"courier.adapters.email.receiver.allow_from[1]", `"10.0.0.0/33" is neither a network`},
		{"a name is not a network", "courier:\n  adapters:\n    email:\n      receiver:\n        allow_from: [mx.example.com]\n", 5,
			"courier.adapters.email.receiver.allow_from[0]", "neither a network"},
		{"authserv-id with a space", "courier:\n  adapters:\n    email:\n      authserv_ids: [\"mx.example.com; spf=pass\"]\n", 4,
			"courier.adapters.email.authserv_ids[0]", "not an authserv-id"},
		{"empty authserv-id", "courier:\n  adapters:\n    email:\n      authserv_ids: [\"\"]\n", 4,
			"courier.adapters.email.authserv_ids[0]", "not an authserv-id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), t.TempDir(), sections)
			var errs schema.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			for _, e := range errs {
				if e.Line == tc.line && e.Path == tc.path && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want line %d path %q msg ~%q; got:\n%v", tc.line, tc.path, tc.msg, err)
		})
	}
}

// A login in clear text across a network is a config error naming the
// key, unless the server allows it or is on loopback.
func TestPlaintextAuth(t *testing.T) {
	account := func(imap, smtp string) string {
		return "courier:\n  adapters:\n    email:\n      accounts:\n        - name: w\n" + imap + smtp
	}
	imap := func(host, extra string) string {
		return "          imap: {host: " + host + ", tls: none, username: u@example.com, password: pw" + extra + "}\n"
	}
	smtp := func(host, extra string) string {
		return "          smtp: {host: " + host + ", tls: none, username: u@example.com, password: pw" + extra + "}\n"
	}
	for _, tc := range []struct {
		name, yaml, key, words string
	}{
		{"imap tls none", account(imap("imap.example.com", ""), ""), "courier.adapters.email.accounts[0].imap.tls", "IMAP password to imap.example.com in clear text"},
		{"smtp tls none", account("", smtp("smtp.example.com", "")), "courier.adapters.email.accounts[0].smtp.tls", "SMTP login to smtp.example.com in clear text"},
		{"flat smtp_port 25", "courier:\n  adapters:\n    email:\n      smtp_server: smtp.example.com\n      smtp_port: 25\n      username: u@example.com\n      password: pw\n",
			"courier.adapters.email.smtp_port", "smtp_port: 25 means no TLS"},
		{"flag without flat keys", "courier:\n  adapters:\n    email:\n      allow_plaintext_auth: true\n", "courier.adapters.email.allow_plaintext_auth", "belongs with the flat keys"},
		{"allowed on the server", account(imap("imap.example.com", ", allow_plaintext_auth: true"), smtp("smtp.example.com", ", allow_plaintext_auth: true")), "", ""},
		{"allowed, flat", "courier:\n  adapters:\n    email:\n      smtp_server: smtp.example.com\n      smtp_port: 25\n      username: u@example.com\n      password: pw\n      allow_plaintext_auth: true\n", "", ""},
		{"loopback 127.0.0.1", account(imap("127.0.0.1", ""), smtp("127.0.0.2", "")), "", ""},
		{"loopback ::1 and localhost", account(imap("'::1'", ""), smtp("localhost", "")), "", ""},
		{"smtp without login", account("", "          smtp: {host: mx.example.com, tls: none}\n"), "", ""},
		{"smtp auth none", account("", smtp("mx.example.com", ", auth: none")), "", ""},
		{"starttls", account("          imap: {host: imap.example.com, tls: starttls, username: u, password: pw}\n", ""), "", ""},
		{"port 25 with starttls", account("", "          smtp: {host: smtp.example.com, port: 25, tls: starttls, username: u, password: pw}\n"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), t.TempDir(), sections)
			if tc.key == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var errs schema.Errors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != tc.key || !strings.Contains(errs[0].Msg, tc.words) || errs[0].Line == 0 {
				t.Fatalf("err = %v; want one error at %s (with its line) saying %q", err, tc.key, tc.words)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}

// Commands that run without the secrets (agents' list, read) are not
// refused: they neither read the password nor connect.
func TestPlaintextAuthNotCheckedWithoutSecrets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "courier.yaml")
	writePlain(t, p, "courier:\n  adapters:\n    email:\n      accounts:\n        - name: w\n          imap: {host: imap.example.com, tls: none, username: u, password: pw}\n")
	if _, err := config.Load(p, config.LoadOptions{Adapters: sections}); err != nil {
		t.Errorf("Load without secrets: %v", err)
	}
	if _, err := config.Load(p, config.LoadOptions{Secrets: true, Adapters: sections}); err == nil {
		t.Error("Load with secrets accepted tls: none to a remote host")
	}
}

func writePlain(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReceiverLimits: the receiver's caps have safe defaults when unset,
// take the values given, and a value no receiver can work with is an
// error naming the key, its line and the default.
func TestReceiverLimits(t *testing.T) {
	c, err := config.Parse([]byte("courier:\n  adapters:\n    email:\n      enabled: true\n"), t.TempDir(), sections)
	if err != nil {
		t.Fatal(err)
	}
	r := email.ConfigOf(c).Receiver
	if r.MaxSessions != 100 || r.MaxSessionsPerIP != 10 || r.MaxSessionTime.D() != 10*time.Minute || r.ReadTimeout.D() != 5*time.Minute {
		t.Errorf("defaults: %d sessions, %d per IP, %v, %v", r.MaxSessions, r.MaxSessionsPerIP, r.MaxSessionTime.D(), r.ReadTimeout.D())
	}
	if d := email.ConfigOf(config.Default(sections)).Receiver; d.MaxSessions != 100 || d.ReadTimeout.D() != 5*time.Minute {
		t.Errorf("the embedded default lacks the caps: %+v", d)
	}

	c, err = config.Parse([]byte(`courier:
  adapters:
    email:
      receiver: {smtp: 127.0.0.1:2525, max_sessions: 20, max_sessions_per_ip: 2, max_session_time: 90s, read_timeout: 1m}
`), t.TempDir(), sections)
	if err != nil {
		t.Fatal(err)
	}
	r = email.ConfigOf(c).Receiver
	if r.MaxSessions != 20 || r.MaxSessionsPerIP != 2 || r.MaxSessionTime.D() != 90*time.Second || r.ReadTimeout.D() != time.Minute {
		t.Errorf("values given: %d, %d, %v, %v", r.MaxSessions, r.MaxSessionsPerIP, r.MaxSessionTime.D(), r.ReadTimeout.D())
	}

	for _, tc := range []struct{ key, value, msg string }{
		{"max_sessions", "-1", "must be at least 1 (or 0 for the default, 100)"},
		{"max_sessions_per_ip", "-5", "must be at least 1 (or 0 for the default, 10)"},
		{"max_session_time", "500ms", "must be at least 1s (or 0 for the default, 10m)"},
		{"read_timeout", "-1m", "must be at least 1s (or 0 for the default, 5m)"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			yaml := "courier:\n  adapters:\n    email:\n      receiver:\n        " + tc.key + ": " + tc.value + "\n"
			_, err := config.Parse([]byte(yaml), t.TempDir(), sections)
			var errs schema.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("%s: %s: err = %v, want a field error", tc.key, tc.value, err)
			}
			for _, e := range errs {
				if e.Line == 5 && e.Path == "courier.adapters.email.receiver."+tc.key && strings.Contains(e.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want line 5, courier.adapters.email.receiver.%s, ~%q; got:\n%v", tc.key, tc.msg, err)
		})
	}
}

// The receiver's addresses are checked as serve would use them (the
// courier-wide ones: internal/config's TestListenAddresses).
func TestReceiverListen(t *testing.T) {
	for _, tc := range []struct {
		key, yaml string
		ok        bool
	}{
		{"courier.adapters.email.receiver.smtp", `courier: {adapters: {email: {receiver: {smtp: "127.0.0.1:99999"}}}}`, false},
		{"courier.adapters.email.receiver.lmtp", `courier: {adapters: {email: {receiver: {lmtp: "127.0.0.1:0"}}}}`, false},
		{"courier.adapters.email.receiver.lmtp", `courier: {adapters: {email: {receiver: {lmtp: "unix:/run/courier/lmtp.sock"}}}}`, true},
	} {
		_, err := config.Parse([]byte(tc.yaml), t.TempDir(), sections)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.yaml, err)
		case !tc.ok && err == nil:
			t.Errorf("%s: accepted", tc.yaml)
		case !tc.ok && !strings.Contains(err.Error(), tc.key):
			t.Errorf("%s: %v (want it to name %s)", tc.yaml, err, tc.key)
		}
	}
}
