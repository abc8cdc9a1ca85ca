package config_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters/email"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/providers/all"
	"github.com/monoco/courier/schema"
)

// adapters are the providers' sections as Courier reads them: the tests
// that hold a provider's section read it through the real table.
var adapters = all.Table.Adapters()

const full = `courier:
  root: .
  http: {listen: 127.0.0.1:9000}
  debounce: {window_ms: 1000, max_wait_ms: 2000}
  adapters:
    email:
      enabled: true
      receiver: {smtp: 127.0.0.1:2525, lmtp: "unix:/run/courier/lmtp.sock"}
      accounts:
        - name: work
          addresses: [agent@example.com]
          imap:
            host: imap.example.com
            port: ${IMAP_PORT}
            tls: implicit
            username: agent@example.com
            password: ${IMAP_PASSWORD}
            folders: [INBOX, Lists]
            mode: idle
            poll_interval: 90s
            since: 2026-01-01
          smtp: {host: smtp.example.com, port: 587, tls: starttls,
                 username: agent@example.com, password_file: smtp.secret}
    lark:  {enabled: false, app_id: "", app_secret: "", domain: feishu, mode: ws,
            verification_token: "", encrypt_key: ""}
    slack: {enabled: false, bot_token: "", app_token: "", signing_secret: "", mode: socket}
`

func TestParseFull(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "smtp.secret"), []byte("s3cret-smtp\n"), 0o600)
	t.Setenv("IMAP_PORT", "1993")
	t.Setenv("IMAP_PASSWORD", "pa$$word-with-$dollar")
	c, err := config.Parse([]byte(full), dir, adapters)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := email.ConfigOf(c).Account("work")
	if !ok {
		t.Fatal("no account work")
	}
	if a.IMAP.Port != 1993 || a.IMAP.Password.Reveal() != "pa$$word-with-$dollar" {
		t.Errorf("env not expanded: port %d password %q", a.IMAP.Port, a.IMAP.Password.Reveal())
	}
	if a.SMTP.Password.Reveal() != "s3cret-smtp" {
		t.Errorf("password_file: %q", a.SMTP.Password.Reveal())
	}
	if a.IMAP.PollInterval.D() != 90*time.Second || a.IMAP.Since == nil || a.IMAP.Since.Year() != 2026 {
		t.Errorf("poll %v since %v", a.IMAP.PollInterval, a.IMAP.Since)
	}
	if c.Courier.HTTP.Listen != "127.0.0.1:9000" || c.Courier.Debounce.WindowMS != 1000 {
		t.Errorf("courier: %+v", c.Courier)
	}
	if r := c.Courier.Restart; r.Refused.D() != 2*time.Minute || r.RefusedMax.D() != 10*time.Minute {
		t.Errorf("restart defaults not applied: %+v", r)
	}
	if c.Courier.Limits.MaxDraftBytes != 1<<20 || c.Courier.Outbound.MaxAttempts != 8 {
		t.Errorf("defaults not applied: %+v %+v", c.Courier.Limits, c.Courier.Outbound)
	}
	if len(a.IMAP.Folders) != 2 || a.SMTP.Port != 587 {
		t.Errorf("imap %+v smtp %+v", a.IMAP, a.SMTP)
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "smtp.secret"), []byte("s3cret-smtp\n"), 0o600)
	t.Setenv("IMAP_PORT", "993")
	t.Setenv("IMAP_PASSWORD", "hunter2-imap")
	c, err := config.Parse([]byte(full), dir, adapters)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	a, _ := email.ConfigOf(c).Account("work")
	log.Info("account", "imap", a.IMAP, "smtp", *a.SMTP, "password", a.IMAP.Password)
	text := buf.String() + fmt.Sprintf("%v %+v %#v %s", c, *a.IMAP, *a.SMTP, a.SMTP.Password)
	for _, secret := range []string{"hunter2-imap", "s3cret-smtp"} {
		if strings.Contains(text, secret) {
			t.Errorf("secret %q printed:\n%s", secret, text)
		}
	}
	if !strings.Contains(text, "[redacted]") {
		t.Errorf("no redaction marker in:\n%s", text)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		path, msg  string
	}{
		{"unknown key", "courier:\n  http: {listen: 127.0.0.1:1}\n  debounse: {window_ms: 1}\n", 3, "courier.debounse", `did you mean "debounce"`},
		{"unknown nested key", "courier:\n  adapters:\n    slack:\n      bot_tokn: x\n", 4, "courier.adapters.slack.bot_tokn", "unknown field"},
		{"unknown provider", "courier:\n  adapters:\n    emial:\n      enabled: true\n", 3, "courier.adapters.emial", `unknown field "emial" (did you mean "email"?)`},
		{"unset env", "courier:\n  adapters:\n    lark:\n      app_secret: ${NOPE_NOT_SET}\n", 4, "courier.adapters.lark.app_secret", "NOPE_NOT_SET is not set"},
		{"bad duration", "courier:\n  outbound:\n    backoff_base: soon\n", 3, "courier.outbound.backoff_base", "not a duration"},
		{"bad port type", "courier:\n  adapters:\n    email:\n      accounts:\n        - name: a\n          smtp: {host: h, port: twenty}\n", 6, "courier.adapters.email.accounts[0].smtp.port", "want an integer"},
		{"bad tls", "courier:\n  adapters:\n    email:\n      accounts:\n        - name: a\n          smtp: {host: h, tls: ssl}\n", 6, "courier.adapters.email.accounts[0].smtp.tls", "not one of implicit"},
		{"missing secret file", "courier:\n  adapters:\n    slack:\n      bot_token_file: /nonexistent/token\n", 4, "courier.adapters.slack.bot_token_file", "cannot read"},
		{"enabled without token", "courier:\n  adapters:\n    slack:\n      enabled: true\n      app_token: xapp\n", 3, "courier.adapters.slack.bot_token", "required"},
		{"syntax", "courier:\n  http: {listen: [\n", 2, "", "YAML syntax error"},
		{"duplicate account", "courier:\n  adapters:\n    email:\n      accounts:\n        - {name: a, smtp: {host: h}}\n        - {name: a, smtp: {host: h}}\n", 6, "courier.adapters.email.accounts[1].name", "used twice"},
		{"attach root under /proc", "courier:\n  outbound:\n    attach_roots: [/srv/reports, /proc/self]\n", 3, "courier.outbound.attach_roots[1]", "under /proc, whose files are never attached"},
		{"attach root with ~", "courier:\n  outbound:\n    attach_roots:\n      - ~/reports\n", 4, "courier.outbound.attach_roots[0]", "~ is not expanded"},
		{"empty attach root", "courier:\n  outbound:\n    attach_roots: [\"\"]\n", 3, "courier.outbound.attach_roots[0]", "empty folder"},
		{"refused retried at once", "courier:\n  restart:\n    refused: 10ms\n", 3, "courier.restart.refused", "less than a second"},
		{"refused_max below refused", "courier:\n  restart: {refused: 5m, refused_max: 1m}\n", 2, "courier.restart.refused_max", "less than refused (5m0s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), t.TempDir(), adapters)
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

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	c, err := config.Load(filepath.Join(dir, "missing.yaml"), config.LoadOptions{AllowMissing: true, Adapters: adapters})
	if err != nil || email.ConfigOf(c).Receiver.SMTP != "127.0.0.1:2525" {
		t.Errorf("missing default config: %+v, %v", c, err)
	}
	if _, err := config.Load(filepath.Join(dir, "missing.yaml"), config.LoadOptions{}); err == nil {
		t.Error("a missing --config file must be an error")
	}
	p := filepath.Join(dir, ".monoco", "config", "courier.yaml")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte("courier:\n  bogus: 1\n"), 0o644)
	_, err = config.Load(p, config.LoadOptions{AllowMissing: true, Adapters: adapters})
	if err == nil || !strings.HasPrefix(err.Error(), p+":2: courier.bogus: unknown field") {
		t.Errorf("err = %v, want it to start with %s:2: courier.bogus", err, p)
	}
	os.WriteFile(p, []byte("courier:\n  root: .\n"), 0o644)
	c, err = config.Load(p, config.LoadOptions{AllowMissing: true, Adapters: adapters})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RootDir("/elsewhere"); got != dir {
		t.Errorf("RootDir = %s, want the workspace %s", got, dir)
	}
	// attach_roots: a relative folder starts from the same place as root
	// (the workspace this file is in), not from the current folder.
	os.WriteFile(p, []byte("courier:\n  outbound:\n    attach_roots: [../shared, /srv/reports/]\n"), 0o644)
	if c, err = config.Load(p, config.LoadOptions{Adapters: adapters}); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(filepath.Dir(dir), "shared"), "/srv/reports"}
	if got := c.AttachRootDirs("/elsewhere"); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("AttachRootDirs = %q, want %q", got, want)
	}
}

// The mailbox commands agents run read the config without the service's
// secrets: a password in a systemd credential, or in an environment
// variable only the unit sets, must not break `courier list`.
func TestLoadWithoutSecrets(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "courier.yaml")
	os.WriteFile(p, []byte(`courier:
  root: ${COURIER_TEST_ROOT}
  adapters:
    email:
      enabled: true
      accounts:
        - name: work
          imap:
            host: imap.example.com
            username: a@example.com
            password_file: ${CREDENTIALS_DIRECTORY}/imap
          smtp:
            host: smtp.example.com
            username: a@example.com
            password: ${SMTP_PASSWORD_UNSET}
    slack:
      enabled: true
      bot_token_file: /nonexistent/token
      app_token: ${NOPE}
`), 0o644)
	t.Setenv("COURIER_TEST_ROOT", "/srv/ws")
	c, err := config.Load(p, config.LoadOptions{Adapters: adapters})
	if err != nil {
		t.Fatalf("loading without secrets: %v", err)
	}
	if c.Courier.Root != "/srv/ws" {
		t.Errorf("root = %q: non-secret ${ENV} must still expand", c.Courier.Root)
	}
	if _, err := config.Load(p, config.LoadOptions{Secrets: true, Adapters: adapters}); err == nil {
		t.Error("loading with secrets must fail on the unset variables and unreadable files")
	}
}

// debounce: {window_ms: 0} turns debounce off; left out, it is 5 s.
func TestDebounceOff(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{
		{"courier:\n  debounce: {window_ms: 0}\n", 0},
		{"courier:\n  debounce: {max_wait_ms: 1000}\n", 5000},
		{"courier:\n  root: .\n", 5000},
		{"courier:\n  debounce: {window_ms: 250}\n", 250},
	} {
		c, err := config.Parse([]byte(tc.yaml), t.TempDir(), nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Courier.Debounce.WindowMS; got != tc.want {
			t.Errorf("%q: window_ms %d, want %d", tc.yaml, got, tc.want)
		}
	}
}
