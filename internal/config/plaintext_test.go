package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/schema"
)

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
			_, err := config.Parse([]byte(tc.yaml), t.TempDir())
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
	if _, err := config.Load(p, config.LoadOptions{}); err != nil {
		t.Errorf("Load without secrets: %v", err)
	}
	if _, err := config.Load(p, config.LoadOptions{Secrets: true}); err == nil {
		t.Error("Load with secrets accepted tls: none to a remote host")
	}
}

func writePlain(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
