package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// chatConfig is a provider's section as a new provider would write it: a
// secret and its file form, a list its Check looks at, an old key its
// Normalize rewrites, a duration with a default, and what it is without a
// config file.
type chatConfig struct {
	Enabled   bool             `yaml:"enabled"`
	Token     confkit.Secret   `yaml:"token"`
	TokenFile string           `yaml:"token_file"`
	Rooms     []string         `yaml:"rooms"`
	Room      string           `yaml:"room"` // the old key: one room
	Wait      confkit.Duration `yaml:"wait"`

	embedded bool
}

func (c *chatConfig) Defaults() {
	if c.Wait == 0 {
		c.Wait = confkit.Duration(time.Minute)
	}
}

func (c *chatConfig) Check(k *confkit.Checker) {
	for i, r := range c.Rooms {
		if !strings.HasPrefix(r, "#") {
			k.Bad(fmt.Sprintf("rooms[%d]", i), "%q is not a room (#name)", r)
		}
	}
	if k.Secrets() && c.Enabled && c.Token == "" {
		k.Bad("token", "required when discord is enabled")
	}
}

func (c *chatConfig) Normalize(k *confkit.Checker) {
	if c.Room == "" {
		return
	}
	if len(c.Rooms) > 0 {
		k.Bad("room", "room or rooms, not both")
		return
	}
	c.Rooms, c.Room = []string{c.Room}, ""
}

func (c *chatConfig) EmbeddedDefault() { c.embedded = true }

// chatAdapters is a provider table of one provider that internal/config
// has never heard of, and a row without a section.
var chatAdapters = []config.Adapter{
	{Name: schema.Discord, Config: func() confkit.Section { return new(chatConfig) }},
	{Name: schema.Teams},
}

func chatOf(t *testing.T, c *config.Config) *chatConfig {
	t.Helper()
	s, ok := c.Section(schema.Discord).(*chatConfig)
	if !ok {
		t.Fatalf("no discord section: %v", c.Section(schema.Discord))
	}
	return s
}

// A provider's section is read by its own Config, through the table: the
// strict reading, ${NAME}, the *_file secrets, Normalize, Defaults and
// Check, each error at the section's whole key and line; internal/config
// knows nothing of the provider.
func TestProviderSection(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "token"), []byte("tok-from-file\n"), 0o600)
	t.Setenv("CHAT_WAIT", "5s")
	c, err := config.Parse([]byte("courier:\n  adapters:\n    discord:\n      enabled: true\n      token_file: token\n      room: \"#general\"\n      wait: ${CHAT_WAIT}\n"), dir, chatAdapters)
	if err != nil {
		t.Fatal(err)
	}
	s := chatOf(t, c)
	if s.Token.Reveal() != "tok-from-file" || !slices.Equal(s.Rooms, []string{"#general"}) || s.Wait.D() != 5*time.Second || s.embedded {
		t.Errorf("section: %+v", s)
	}
	refs := c.Secrets()
	if len(refs) != 1 || refs[0].Path != "courier.adapters.discord.token" || refs[0].File != "token" || refs[0].Secret != &s.Token {
		t.Errorf("Secrets() = %+v", refs)
	}
	if c.Section(schema.Teams) != nil || c.Section(schema.Email) != nil {
		t.Error("a section for a provider without one, or not in the table")
	}

	// Left out of the file, the section is there with its defaults.
	c, err = config.Parse([]byte("courier: {}\n"), dir, chatAdapters)
	if err != nil {
		t.Fatal(err)
	}
	if s := chatOf(t, c); s.Wait.D() != time.Minute || s.Enabled {
		t.Errorf("left out: %+v", s)
	}
	// Without a file, the provider says what it is.
	if s := chatOf(t, config.Default(chatAdapters)); !s.embedded || s.Wait.D() != time.Minute {
		t.Errorf("embedded default: %+v", s)
	}

	for _, tc := range []struct {
		name, yaml string
		line       int
		path, msg  string
	}{
		{"check", "courier:\n  adapters:\n    discord:\n      rooms: [general]\n", 4, "courier.adapters.discord.rooms[0]", `"general" is not a room`},
		{"check with secrets", "courier:\n  adapters:\n    discord:\n      enabled: true\n", 3, "courier.adapters.discord.token", "required when discord is enabled"},
		{"unknown key", "courier:\n  adapters:\n    discord:\n      tokn: x\n", 4, "courier.adapters.discord.tokn", `unknown field "tokn" (did you mean "token"?)`},
		{"type", "courier:\n  adapters:\n    discord:\n      wait: soon\n", 4, "courier.adapters.discord.wait", "not a duration"},
		{"unknown provider", "courier:\n  adapters:\n    discrod: {}\n", 3, "courier.adapters.discrod", `unknown field "discrod" (did you mean "discord"?)`},
		{"a provider without a section", "courier:\n  adapters:\n    teams: {}\n", 3, "courier.adapters.teams", `unknown field "teams"`},
		{"a section not a mapping", "courier:\n  adapters:\n    discord: [a]\n", 3, "courier.adapters.discord", "want a mapping, found a list"},
		{"adapters not a mapping", "courier:\n  adapters: discord\n", 2, "courier.adapters", "want a mapping, found a string"},
		{"secret twice", "courier:\n  adapters:\n    discord:\n      token: x\n      token_file: token\n", 4, "courier.adapters.discord.token", "set either the secret or its _file"},
		{"unset variable", "courier:\n  adapters:\n    discord:\n      token: ${CHAT_UNSET}\n", 4, "courier.adapters.discord.token", "CHAT_UNSET is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, chatAdapters)
			var errs schema.Errors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Line != tc.line || errs[0].Path != tc.path || !strings.Contains(errs[0].Msg, tc.msg) {
				t.Errorf("err = %v; want one error, line %d %s ~%q", err, tc.line, tc.path, tc.msg)
			}
		})
	}

	// An error of Normalize ends the reading before the checks.
	_, err = config.Parse([]byte("courier:\n  adapters:\n    discord:\n      room: \"#a\"\n      rooms: [b]\n"), dir, chatAdapters)
	var errs schema.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "courier.adapters.discord.room" || errs[0].Line != 4 {
		t.Errorf("normalize: %v", err)
	}
}

// Without secrets (the commands agents run), a provider's secrets are
// left empty, their variables and files unread, and its checks about them
// not run; its inline secrets are found in the file all the same.
func TestProviderSectionWithoutSecrets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "courier.yaml")
	writePlain(t, p, "courier:\n  adapters:\n    discord:\n      enabled: true\n      token: ${CHAT_UNSET}\n")
	c, err := config.Load(p, config.LoadOptions{Adapters: chatAdapters})
	if err != nil {
		t.Fatalf("without secrets: %v", err)
	}
	if s := chatOf(t, c); s.Token != "" {
		t.Errorf("token %q", s.Token.Reveal())
	}
	if _, err := config.Load(p, config.LoadOptions{Adapters: chatAdapters, Secrets: true}); err == nil || !strings.Contains(err.Error(), "CHAT_UNSET is not set") {
		t.Errorf("with secrets: %v", err)
	}
	writePlain(t, p, "courier:\n  adapters:\n    discord:\n      token: literal\n")
	if c, err = config.Load(p, config.LoadOptions{Adapters: chatAdapters}); err != nil {
		t.Fatal(err)
	}
	if keys, err := c.InlineSecrets(); err != nil || !slices.Equal(keys, []string{"courier.adapters.discord.token"}) {
		t.Errorf("InlineSecrets = %v, %v", keys, err)
	}
}
