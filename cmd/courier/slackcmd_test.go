package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/adapters/slack"
)

// TestSlackManifest: `courier slack manifest` prints a manifest that
// parses, as YAML and as JSON, with the scopes doctor checks, socket mode
// by default or the request URL with --mode events, which needs --url.
func TestSlackManifest(t *testing.T) {
	ws := t.TempDir()
	type manifest struct {
		OAuth struct {
			Scopes struct{ Bot []string } `yaml:"scopes" json:"scopes"`
		} `yaml:"oauth_config" json:"oauth_config"`
		Settings struct {
			Events struct {
				RequestURL string   `yaml:"request_url" json:"request_url"`
				BotEvents  []string `yaml:"bot_events" json:"bot_events"`
			} `yaml:"event_subscriptions" json:"event_subscriptions"`
			Socket bool `yaml:"socket_mode_enabled" json:"socket_mode_enabled"`
		} `yaml:"settings" json:"settings"`
	}
	out, e, code := cli(t, ws, "", "slack", "manifest")
	var m manifest
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	if err := yaml.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("the manifest does not parse: %v\n%s", err, out)
	}
	if !slices.Equal(m.OAuth.Scopes.Bot, slack.BotScopes()) || !m.Settings.Socket || m.Settings.Events.RequestURL != "" ||
		!slices.Equal(m.Settings.Events.BotEvents, slack.BotEvents) {
		t.Errorf("socket manifest: %+v", m)
	}
	url := "https://courier.example.com/webhook/slack"
	out, e, code = cli(t, ws, "", "slack", "manifest", "--mode", "events", "--url", url, "--format", "json")
	m = manifest{}
	if code != 0 {
		t.Fatalf("events: exit %d: %s", code, e)
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("the JSON manifest does not parse: %v\n%s", err, out)
	}
	if m.Settings.Socket || m.Settings.Events.RequestURL != url || !slices.Equal(m.OAuth.Scopes.Bot, slack.BotScopes()) {
		t.Errorf("events manifest: %+v", m)
	}
	out, e, code = cli(t, ws, "", "slack", "manifest", "--mode", "events")
	if code != exitUsage || out != "" || !strings.Contains(e, "--mode events needs --url") {
		t.Errorf("events without --url: exit %d, stdout %q, stderr %q", code, out, e)
	}
}
