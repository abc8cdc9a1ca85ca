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
	out, e, code := cli(t, ws, "", "slack", "manifest")
	var m slack.Manifest
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	if err := yaml.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("the manifest does not parse: %v\n%s", err, out)
	}
	if !slices.Equal(m.OAuthConfig.Scopes.Bot, slack.BotScopes()) || !m.Settings.SocketModeEnabled || m.Settings.EventSubscriptions.RequestURL != "" ||
		!slices.Equal(m.Settings.EventSubscriptions.BotEvents, slack.BotEvents) {
		t.Errorf("socket manifest: %+v", m)
	}
	url := "https://courier.example.com/webhook/slack"
	out, e, code = cli(t, ws, "", "slack", "manifest", "--mode", "events", "--url", url, "--format", "json")
	m = slack.Manifest{}
	if code != 0 {
		t.Fatalf("events: exit %d: %s", code, e)
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("the JSON manifest does not parse: %v\n%s", err, out)
	}
	if m.Settings.SocketModeEnabled || m.Settings.EventSubscriptions.RequestURL != url || !slices.Equal(m.OAuthConfig.Scopes.Bot, slack.BotScopes()) {
		t.Errorf("events manifest: %+v", m)
	}
	out, e, code = cli(t, ws, "", "slack", "manifest", "--mode", "events")
	if code != exitUsage || out != "" || !strings.Contains(e, "--mode events needs --url") {
		t.Errorf("events without --url: exit %d, stdout %q, stderr %q", code, out, e)
	}
}
