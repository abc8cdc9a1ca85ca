package slack

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestManifestScopesAreDoctors: a token granted exactly the manifest's
// scopes passes doctor's check, and one granted all but any one of them
// fails it naming that one, so the manifest and doctor cannot drift.
func TestManifestScopesAreDoctors(t *testing.T) {
	m, err := NewManifest("", "socket", "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var back Manifest
	if err := yaml.Unmarshal(out, &back); err != nil {
		t.Fatalf("the manifest does not parse: %v\n%s", err, out)
	}
	scopes := back.OAuthConfig.Scopes.Bot
	if err := missingScopes(strings.Join(scopes, ",")); err != nil {
		t.Errorf("the manifest's scopes fail doctor: %v", err)
	}
	if len(scopes) != len(botScopes) {
		t.Errorf("the manifest has %d scopes, doctor checks %d", len(scopes), len(botScopes))
	}
	for i, s := range scopes {
		rest := append(append([]string{}, scopes[:i]...), scopes[i+1:]...)
		if err := missingScopes(strings.Join(rest, ",")); err == nil || !strings.Contains(err.Error(), s+" (") {
			t.Errorf("without %s doctor says %v", s, err)
		}
	}
	if !back.Settings.SocketModeEnabled || back.Settings.EventSubscriptions.RequestURL != "" {
		t.Errorf("socket mode: %+v", back.Settings)
	}
	if strings.Join(back.Settings.EventSubscriptions.BotEvents, " ") != "message.channels message.groups message.im message.mpim app_mention" {
		t.Errorf("events: %v", back.Settings.EventSubscriptions.BotEvents)
	}
}

func TestManifestModes(t *testing.T) {
	m, err := NewManifest("Ops bot", "events", "https://courier.example.com/webhook/slack")
	if err != nil {
		t.Fatal(err)
	}
	if m.Settings.SocketModeEnabled || m.Settings.EventSubscriptions.RequestURL != "https://courier.example.com/webhook/slack" || m.Features.BotUser.DisplayName != "Ops bot" {
		t.Errorf("events mode: %+v", m)
	}
	for _, tc := range []struct{ mode, url, want string }{
		{"events", "", "--mode events needs --url"},
		{"events", "http://courier.example.com/webhook/slack", "is not an https URL"},
		{"socket", "https://courier.example.com/webhook/slack", "--url is for --mode events"},
		{"rtm", "", `--mode "rtm" is not one of socket, events`},
	} {
		if _, err := NewManifest("", tc.mode, tc.url); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--mode %s --url %q: %v, want %q", tc.mode, tc.url, err, tc.want)
		}
	}
}
