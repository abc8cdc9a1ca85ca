package slack

import (
	"bytes"
	"fmt"
	"net/url"

	"gopkg.in/yaml.v3"
)

// BotEvents are the bot events Courier reads: messages of the four kinds
// of conversation, and mentions of the app (normalize.go).
var BotEvents = []string{"message.channels", "message.groups", "message.im", "message.mpim", "app_mention"}

// BotScopes are the bot token scopes Courier uses, in the order doctor
// names them (botScopes, which missingScopes checks the token against).
func BotScopes() []string {
	out := make([]string, len(botScopes))
	for i, b := range botScopes {
		out[i] = b.scope
	}
	return out
}

// Manifest is a Slack app manifest: what "Create an app → From a
// manifest" takes (https://api.slack.com/reference/manifests).
type Manifest struct {
	DisplayInformation struct {
		Name        string `yaml:"name" json:"name"`
		Description string `yaml:"description" json:"description"`
	} `yaml:"display_information" json:"display_information"`
	Features struct {
		AppHome struct {
			HomeTabEnabled             bool `yaml:"home_tab_enabled" json:"home_tab_enabled"`
			MessagesTabEnabled         bool `yaml:"messages_tab_enabled" json:"messages_tab_enabled"`
			MessagesTabReadOnlyEnabled bool `yaml:"messages_tab_read_only_enabled" json:"messages_tab_read_only_enabled"`
		} `yaml:"app_home" json:"app_home"`
		BotUser struct {
			DisplayName  string `yaml:"display_name" json:"display_name"`
			AlwaysOnline bool   `yaml:"always_online" json:"always_online"`
		} `yaml:"bot_user" json:"bot_user"`
	} `yaml:"features" json:"features"`
	OAuthConfig struct {
		Scopes struct {
			Bot []string `yaml:"bot" json:"bot"`
		} `yaml:"scopes" json:"scopes"`
	} `yaml:"oauth_config" json:"oauth_config"`
	Settings struct {
		EventSubscriptions struct {
			RequestURL string   `yaml:"request_url,omitempty" json:"request_url,omitempty"`
			BotEvents  []string `yaml:"bot_events" json:"bot_events"`
		} `yaml:"event_subscriptions" json:"event_subscriptions"`
		OrgDeployEnabled     bool `yaml:"org_deploy_enabled" json:"org_deploy_enabled"`
		SocketModeEnabled    bool `yaml:"socket_mode_enabled" json:"socket_mode_enabled"`
		TokenRotationEnabled bool `yaml:"token_rotation_enabled" json:"token_rotation_enabled"`
	} `yaml:"settings" json:"settings"`
}

// NewManifest is the manifest of an app Courier can run with: the bot
// scopes doctor checks, the events Courier reads, a messages tab people
// can write in (direct messages), and either Socket Mode (mode "socket")
// or the Events API at requestURL (mode "events", which needs an https
// URL; Courier serves it at /webhook/slack behind a reverse proxy).
func NewManifest(name, mode, requestURL string) (*Manifest, error) {
	m := &Manifest{}
	if name == "" {
		name = "Courier"
	}
	m.DisplayInformation.Name = name
	m.DisplayInformation.Description = "Brings Slack messages to AI agents through a filesystem mailbox, and posts their replies"
	m.Features.AppHome.MessagesTabEnabled = true
	m.Features.BotUser.DisplayName = name
	m.Features.BotUser.AlwaysOnline = true
	m.OAuthConfig.Scopes.Bot = BotScopes()
	m.Settings.EventSubscriptions.BotEvents = append([]string(nil), BotEvents...)
	switch mode {
	case "socket", "":
		if requestURL != "" {
			return nil, fmt.Errorf("slack manifest: --url is for --mode events; socket mode needs no public URL")
		}
		m.Settings.SocketModeEnabled = true
	case "events":
		if requestURL == "" {
			return nil, fmt.Errorf("slack manifest: --mode events needs --url, the public https URL Slack posts events to (Courier serves them at /webhook/slack)")
		}
		u, err := url.Parse(requestURL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("slack manifest: --url %q is not an https URL (Slack posts events only to https)", requestURL)
		}
		m.Settings.EventSubscriptions.RequestURL = requestURL
	default:
		return nil, fmt.Errorf("slack manifest: --mode %q is not one of socket, events", mode)
	}
	return m, nil
}

// YAML is the manifest as YAML, with a comment on what to do with it.
func (m *Manifest) YAML() ([]byte, error) {
	var body bytes.Buffer
	enc := yaml.NewEncoder(&body)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# Paste into https://api.slack.com/apps → Create New App → From a manifest.\n")
	if m.Settings.SocketModeEnabled {
		b.WriteString("# Then: Basic Information → App-Level Tokens → a token with connections:write (app_token_file),\n")
	} else {
		b.WriteString("# Then: Basic Information → Signing Secret (signing_secret_file),\n")
	}
	b.WriteString("# and Install App → the Bot User OAuth Token, xoxb-... (bot_token_file).\n")
	b.Write(body.Bytes())
	return b.Bytes(), nil
}
