package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Hook is one entry of courier.notify: a command or a URL the service
// calls when a message becomes durable, or a draft is delivered or dead
// (package notify says what it gets).
type Hook struct {
	// Name keys the hook's queue and position in the journal. Left out,
	// it is made from the command or URL (hook-<8 hex>), so that reordering
	// hooks changes nothing, and changing one makes it a new hook.
	Name string   `yaml:"name"`
	On   []string `yaml:"on"` // inbound | delivered | dead (default: inbound)

	Exec  Command           `yaml:"exec"`  // argv; a string only with shell: true
	Shell bool              `yaml:"shell"` // run exec's one string under /bin/sh -c
	Env   map[string]string `yaml:"env"`   // added to the hook's clean environment

	URL        string         `yaml:"url"` // http or https; a signed POST
	Secret     confkit.Secret `yaml:"secret"`
	SecretFile string         `yaml:"secret_file"`

	Timeout confkit.Duration `yaml:"timeout"` // one call (default 30 s)
	Backoff confkit.Duration `yaml:"backoff"` // the first wait before a failed call runs again, doubling to 10 min (default 1 s)

	Providers        []string `yaml:"providers"`
	Direction        string   `yaml:"direction"`         // inbound | outbound: narrows on
	Mentions         []string `yaml:"mentions"`          // ids that are us (bot user ids, open_ids, our addresses; "all")
	PersonalEligible *bool    `yaml:"personal_eligible"` // metadata.extra.personal_eligible must be this
	Correlation      string   `yaml:"correlation"`       // a glob; "*": has one

	Digest    confkit.Duration `yaml:"digest"`     // a burst's window: one call with a list
	MaxDigest int              `yaml:"max_digest"` // events in one digest call (default 100)
	Rate      Rate             `yaml:"rate"`       // "10/m": calls per second, minute or hour

	MaxQueue    int `yaml:"max_queue"`   // events queued at most (default 10,000)
	Concurrency int `yaml:"concurrency"` // calls at once (default 4)
	MaxOutput   int `yaml:"max_output"`  // bytes of output kept for the log (default 16 KiB)
	// MaxAttempts runs a failing call at most this many times, then sets
	// it aside in the hook's dead letters (default 20).
	MaxAttempts int `yaml:"max_attempts"`
}

// Command is an exec hook's command: a list (argv), or one string.
type Command struct {
	Argv []string
	// String says it was written as one string (a shell command line).
	String bool
}

// UnmarshalYAML accepts a list of strings or one string.
func (c *Command) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		c.Argv, c.String = []string{n.Value}, true
		return nil
	}
	var argv []string
	if err := n.Decode(&argv); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: exec is a list of strings (the argv) or, with shell: true, one string", n.Line)}}
	}
	c.Argv = argv
	return nil
}

// Rate is a number of calls per period.
type Rate struct {
	Calls int
	Per   time.Duration
}

var rateRE = regexp.MustCompile(`^\s*(\d+)\s*/\s*(\S+)\s*$`)

// UnmarshalYAML accepts "10/m", "5/s", "100/h", "3/10s" (calls/period).
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	bad := &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a rate (want calls/period: 10/m, 5/s, 100/h, 3/10s)", n.Line, n.Value)}}
	m := rateRE.FindStringSubmatch(n.Value)
	if n.Kind != yaml.ScalarNode || m == nil {
		return bad
	}
	calls, err := strconv.Atoi(m[1])
	if err != nil || calls < 1 {
		return bad
	}
	per, ok := map[string]time.Duration{"s": time.Second, "sec": time.Second, "second": time.Second, "m": time.Minute, "min": time.Minute,
		"minute": time.Minute, "h": time.Hour, "hour": time.Hour}[m[2]]
	if !ok {
		if per, err = time.ParseDuration(m[2]); err != nil || per <= 0 {
			return bad
		}
	}
	r.Calls, r.Per = calls, per
	return nil
}

// defaultHookName names a hook without a name after what it calls.
func defaultHookName(h *Hook) string {
	what := h.URL
	if len(h.Exec.Argv) > 0 {
		what = strings.Join(h.Exec.Argv, "\x00")
	}
	sum := sha256.Sum256([]byte(what))
	return "hook-" + hex.EncodeToString(sum[:4])
}

var hookName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// checkNotify checks courier.notify: each hook, and that no two have one
// name. Without secrets a url hook's secret is not looked for (the
// commands agents run do not read it).
func checkNotify(k *confkit.Checker, hooks []Hook) {
	names := map[string]bool{}
	for i := range hooks {
		h := &hooks[i]
		hk := k.At(fmt.Sprintf("courier.notify[%d]", i))
		if h.Name == "" {
			h.Name = defaultHookName(h)
		}
		switch {
		case !hookName.MatchString(h.Name):
			hk.Bad("name", "%q: a hook's name is letters, digits, - _ . (its queue is kept under it)", h.Name)
		case names[h.Name]:
			hk.Bad("name", "%q names two hooks", h.Name)
		}
		names[h.Name] = true
		h.check(hk)
	}
}

// check checks one hook, k at it: what it runs for, what it calls, what
// it narrows on, and its bounds.
func (h *Hook) check(k *confkit.Checker) {
	for _, on := range h.On {
		if on != "inbound" && on != "delivered" && on != "dead" && on != "awaiting_approval" {
			k.Bad("on", "%q is not one of inbound, delivered, dead, awaiting_approval", on)
		}
	}
	switch h.Direction {
	case "", "inbound", "outbound":
		if h.Direction != "" && len(h.On) > 0 && len(h.Events()) == 0 {
			k.Bad("direction", "%s leaves none of on: %v", h.Direction, h.On)
		}
	default:
		k.Bad("direction", "%q is not one of inbound, outbound", h.Direction)
	}
	h.checkTarget(k)
	for _, pr := range h.Providers {
		if !schema.Provider(pr).Valid() {
			k.Bad("providers", "%q is not a provider (email, lark, slack, ...)", pr)
		}
	}
	if h.Correlation != "" {
		if _, err := path.Match(h.Correlation, ""); err != nil {
			k.Bad("correlation", "%q is not a glob: %v", h.Correlation, err)
		}
	}
	if h.Timeout < 0 || h.Digest < 0 || h.Backoff < 0 {
		k.Bad("", "timeout, backoff and digest must not be negative")
	}
	if h.MaxDigest < 0 || h.MaxQueue < 0 || h.Concurrency < 0 || h.MaxOutput < 0 || h.MaxAttempts < 0 {
		k.Bad("", "max_digest, max_queue, concurrency, max_output and max_attempts must not be negative (0: the default)")
	}
	if h.Concurrency > 64 {
		k.Bad("concurrency", "%d: at most 64 calls at once", h.Concurrency)
	}
	if h.MaxOutput > 1<<20 {
		k.Bad("max_output", "%d: at most 1 MiB of a hook's output goes to the log", h.MaxOutput)
	}
}

// checkTarget checks what the hook calls: a command (exec, and its env)
// or a URL (and the secret it signs with), one of the two.
func (h *Hook) checkTarget(k *confkit.Checker) {
	switch {
	case len(h.Exec.Argv) > 0 && h.URL != "":
		k.Bad("", "a hook has exec or url, not both")
	case len(h.Exec.Argv) == 0 && h.URL == "":
		k.Bad("", "a hook needs exec (a command) or url")
	case len(h.Exec.Argv) > 0:
		switch {
		case h.Shell && len(h.Exec.Argv) != 1:
			k.Bad("exec", "with shell: true, exec is one string (the script for /bin/sh -c)")
		case !h.Shell && h.Exec.String:
			k.Bad("exec", "%q is one string: write the argv as a list ([/path/to/cmd, arg]), or set shell: true to run it with /bin/sh -c", h.Exec.Argv[0])
		case strings.TrimSpace(h.Exec.Argv[0]) == "":
			k.Bad("exec", "the command is empty")
		}
		for name := range h.Env {
			if name == "" || strings.ContainsAny(name, "=\x00") {
				k.Bad("env", "%q is not a variable name", name)
			}
		}
	default:
		u, err := url.Parse(h.URL)
		switch {
		case err != nil || u.Host == "":
			k.Bad("url", "not an absolute http or https URL")
		case u.Scheme != "http" && u.Scheme != "https":
			k.Bad("url", "the scheme %q is not http or https", u.Scheme)
		}
		if k.Secrets() && h.Secret == "" {
			k.Bad("secret", "a url hook needs a secret (or secret_file) to sign its requests with")
		}
	}
}

// Events returns the events the hook runs for: on, narrowed by direction
// (on left out: every event of the direction; both left out: inbound).
func (h *Hook) Events() []string {
	on := h.On
	if len(on) == 0 {
		switch h.Direction {
		case "outbound":
			return []string{"delivered", "dead"}
		default:
			return []string{"inbound"}
		}
	}
	if h.Direction == "" {
		return on
	}
	var out []string
	for _, e := range on {
		if (e == "inbound") == (h.Direction == "inbound") {
			out = append(out, e)
		}
	}
	return out
}
