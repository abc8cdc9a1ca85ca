package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/config"
)

func TestNotifyHooks(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hook-secret"), []byte("s3cret\n"), 0o600)
	c, err := config.Parse([]byte(`courier:
  notify:
    - name: wake
      exec: [/usr/local/bin/wake-agent, --fast]
      providers: [email, slack]
      mentions: [U0BOT]
      personal_eligible: true
      correlation: "bug_*"
      digest: 2s
      rate: 10/m
      env: {AGENT: reviewer}
    - name: web
      url: https://hooks.example.com/courier
      secret_file: hook-secret
      direction: outbound
      rate: 3/10s
    - name: sh
      exec: "notify-send courier && true"
      shell: true
      on: [inbound, dead]
      direction: outbound
`), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Courier.Notify
	if len(h) != 3 || h[0].Exec.Argv[1] != "--fast" || h[0].Digest.D() != 2*time.Second || h[0].Rate.Calls != 10 || h[0].Rate.Per != time.Minute ||
		*h[0].PersonalEligible != true || h[0].Env["AGENT"] != "reviewer" {
		t.Fatalf("hooks %+v", h)
	}
	if h[1].Secret.Reveal() != "s3cret" || h[1].Rate.Per != 10*time.Second {
		t.Errorf("url hook %+v", h[1])
	}
	if got := strings.Join(h[0].Events(), ","); got != "inbound" {
		t.Errorf("default events %s", got)
	}
	if got := strings.Join(h[1].Events(), ","); got != "delivered,dead" {
		t.Errorf("outbound events %s", got)
	}
	if got := strings.Join(h[2].Events(), ","); got != "dead" {
		t.Errorf("on narrowed by direction: %s", got)
	}
}

// Each mistake is named with its key, and a secret never appears.
func TestNotifyErrors(t *testing.T) {
	for _, tc := range []struct{ hook, want string }{
		{`{name: "a b", exec: [x]}`, "courier.notify[0].name"},
		{`{exec: [x]}`, ""},
		{`{name: a, exec: "rm -rf /tmp/x"}`, "courier.notify[0].exec: \"rm -rf /tmp/x\" is one string"},
		{`{name: a}`, "needs exec (a command) or url"},
		{`{name: a, exec: [x], url: "https://h/"}`, "exec or url, not both"},
		{`{name: a, url: "ftp://h/x", secret: k}`, "the scheme \"ftp\" is not http or https"},
		{`{name: a, url: "https://h/x"}`, "courier.notify[0].secret: a url hook needs a secret"},
		{`{name: a, exec: [x], on: [sent]}`, "\"sent\" is not one of inbound, delivered, dead"},
		{`{name: a, exec: [x], on: [inbound], direction: outbound}`, "leaves none of on"},
		{`{name: a, exec: [x], providers: [fax]}`, "\"fax\" is not a provider"},
		{`{name: a, exec: [x], rate: fast}`, "\"fast\" is not a rate"},
		{`{name: a, exec: [x], correlation: "[a"}`, "is not a glob"},
		{`{name: a, exec: [x], concurrency: 1000}`, "at most 64"},
		{`{name: a, exec: [x], shell: true}`, ""},
		{`{name: a, exec: [x, y], shell: true}`, "with shell: true, exec is one string"},
	} {
		_, err := config.Parse([]byte("courier:\n  notify:\n    - "+tc.hook+"\n    - {name: b, url: \"https://u:pw@h/x\", secret: topsecret}\n"), t.TempDir(), nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.hook, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want %q", tc.hook, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%s: the error shows a secret: %v", tc.hook, err)
		}
	}
	_, err := config.Parse([]byte("courier:\n  notify:\n    - {name: a, exec: [x]}\n    - {name: a, exec: [y]}\n"), t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), `"a" names two hooks`) {
		t.Errorf("duplicate names: %v", err)
	}
	// DESIGN §8's example has no name: one is made from the command, the
	// same whatever the hook's place in the list; the same command twice
	// needs names.
	c1, err := config.Parse([]byte("courier:\n  notify:\n    - {on: [inbound], exec: [/usr/local/bin/wake-agent], providers: [email, slack]}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := config.Parse([]byte("courier:\n  notify:\n    - {name: x, url: \"https://h/\", secret: k}\n    - {exec: [/usr/local/bin/wake-agent]}\n"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n1, n2 := c1.Courier.Notify[0].Name, c2.Courier.Notify[1].Name; n1 == "" || n1 != n2 || !strings.HasPrefix(n1, "hook-") {
		t.Errorf("default names %q, %q", n1, n2)
	}
	if _, err := config.Parse([]byte("courier:\n  notify:\n    - {exec: [x]}\n    - {exec: [x], on: [dead]}\n"), t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "names two hooks") {
		t.Errorf("the same command twice without names: %v", err)
	}
}
