package slack

import (
	"fmt"
	"net/url"
	"regexp"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Config is the slack section of the config, courier.adapters.slack. It
// is the provider's confkit.Section: internal/config decodes the section
// into it and calls Defaults and Check.
type Config struct {
	Enabled           bool           `yaml:"enabled"`
	BotToken          confkit.Secret `yaml:"bot_token"`
	BotTokenFile      string         `yaml:"bot_token_file"`
	AppToken          confkit.Secret `yaml:"app_token"`
	AppTokenFile      string         `yaml:"app_token_file"`
	SigningSecret     confkit.Secret `yaml:"signing_secret"`
	SigningSecretFile string         `yaml:"signing_secret_file"`
	Mode              string         `yaml:"mode"`    // socket | events
	APIURL            string         `yaml:"api_url"` // Slack's by default; GovSlack, tests
	// IgnoreBots drops messages other bots post (the app's own are always
	// dropped).
	IgnoreBots bool `yaml:"ignore_bots"`
	// Channels, when set, is the allow-list of conversation ids (C..., G...,
	// D...) whose messages are ingested; the others are acknowledged and
	// dropped.
	Channels []string `yaml:"channels"`
}

var _ confkit.Section = (*Config)(nil)

// ConfigOf returns the slack section of a config (internal/config's
// *Config), nil when it has none.
func ConfigOf(s confkit.Sections) *Config { return confkit.SectionOf[*Config](s, schema.Slack) }

// Defaults sets the mode: socket.
func (c *Config) Defaults() {
	if c.Mode == "" {
		c.Mode = "socket"
	}
}

// Check checks the section when slack is enabled, its tokens included: so
// only when the secrets were read.
func (c *Config) Check(k *confkit.Checker) {
	if !k.Secrets() || !c.Enabled {
		return
	}
	if c.BotToken == "" {
		k.Bad("bot_token", "required when slack is enabled")
	}
	switch c.Mode {
	case "socket":
		if c.AppToken == "" {
			k.Bad("app_token", "socket mode needs an app-level token (xapp-...)")
		}
	case "events":
		if c.SigningSecret == "" {
			k.Bad("signing_secret", "events mode needs the signing secret to verify requests")
		}
	default:
		k.Bad("mode", "%q is not one of socket, events", c.Mode)
	}
	if c.APIURL != "" {
		if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			k.Bad("api_url", "%q is not an http(s) URL", c.APIURL)
		} else {
			k.NoPlainHTTP("api_url", c.APIURL)
		}
	}
	for i, ch := range c.Channels {
		if !conversationID.MatchString(ch) {
			k.Bad(fmt.Sprintf("channels[%d]", i), "%q is not a conversation id (C..., G... or D...)", ch)
		}
	}
}

// conversationID is a Slack conversation id: a channel, a private channel
// or group DM, a DM.
var conversationID = regexp.MustCompile(`^[CGD][A-Z0-9]{6,}$`)
