package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/monoco/courier/internal/config"
)

func TestInlineSecrets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "courier.yaml")
	writePlain(t, p, `courier:
  adapters:
    email:
      accounts:
        - name: a
          imap: {host: h, username: u, password: hunter2}
          smtp: {host: h, username: u, password: "${SMTP_PASSWORD}"}
        - name: b
          imap: {host: h, username: u, password_file: /run/secrets/imap}
    slack:
      bot_token: xoxb-${TEAM}-123
      app_token: ""
`)
	c, err := config.Load(p, config.LoadOptions{Adapters: adapters})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.InlineSecrets()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"courier.adapters.email.accounts[0].imap.password", "courier.adapters.slack.bot_token"}
	if !slices.Equal(got, want) {
		t.Errorf("InlineSecrets = %v, want %v (a ${NAME} alone, a *_file and an empty value are not inline)", got, want)
	}
}

func writePlain(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
