package lark

import (
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Config is the lark section of the config, courier.adapters.lark: the
// Lark (Feishu) app. It is the provider's confkit.Section: internal/config
// decodes the section into it and calls Defaults and Check.
type Config struct {
	Enabled               bool           `yaml:"enabled"`
	AppID                 string         `yaml:"app_id"`
	AppSecret             confkit.Secret `yaml:"app_secret"`
	AppSecretFile         string         `yaml:"app_secret_file"`
	Domain                string         `yaml:"domain"` // feishu | lark | a base URL
	Mode                  string         `yaml:"mode"`   // ws | webhook
	VerificationToken     confkit.Secret `yaml:"verification_token"`
	VerificationTokenFile string         `yaml:"verification_token_file"`
	EncryptKey            confkit.Secret `yaml:"encrypt_key"`
	EncryptKeyFile        string         `yaml:"encrypt_key_file"`
}

var _ confkit.Section = (*Config)(nil)

// ConfigOf returns the lark section of a config (internal/config's
// *Config), nil when it has none.
func ConfigOf(s confkit.Sections) *Config { return confkit.SectionOf[*Config](s, schema.Lark) }

// Defaults sets the domain (feishu) and the mode (ws).
func (c *Config) Defaults() {
	if c.Domain == "" {
		c.Domain = "feishu"
	}
	if c.Mode == "" {
		c.Mode = "ws"
	}
}

// Check checks the section when lark is enabled, its secrets included: so
// only when the secrets were read.
func (c *Config) Check(k *confkit.Checker) {
	if !k.Secrets() || !c.Enabled {
		return
	}
	if c.AppID == "" {
		k.Bad("app_id", "required when lark is enabled")
	}
	if c.AppSecret == "" {
		k.Bad("app_secret", "required when lark is enabled")
	}
	switch c.Mode {
	case "ws", "webhook":
	default:
		k.Bad("mode", "%q is not one of ws, webhook", c.Mode)
	}
	k.NoPlainHTTP("domain", c.Domain)
	if c.Mode == "webhook" && c.VerificationToken == "" && c.EncryptKey == "" {
		k.Bad("verification_token", "webhook mode needs verification_token or encrypt_key to verify requests")
	}
}
