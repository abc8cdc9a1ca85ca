package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// LoadOptions say how to read a config.
type LoadOptions struct {
	// AllowMissing returns the embedded default when there is no file.
	AllowMissing bool
	// Secrets resolves secrets: ${NAME} in them and their *_file forms.
	// Only the service needs them; the mailbox commands agents run must
	// work without the service's environment or credentials (a password
	// in ${CREDENTIALS_DIRECTORY} exists only inside the systemd unit), so
	// without Secrets, secrets are left empty and not checked.
	Secrets bool
	// Adapters are the providers whose sections courier.adapters may
	// hold, in the provider table's order (internal/providers/all's
	// Table.Adapters()). A name under courier.adapters that none of them
	// has is an error.
	Adapters []Adapter
}

// Load reads the config at path.
func Load(path string, opts LoadOptions) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && opts.AllowMissing {
		return Default(opts.Adapters), nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parse(data, filepath.Dir(path), opts.Secrets, opts.Adapters)
	if err != nil {
		var errs schema.Errors
		if errors.As(err, &errs) {
			return nil, errs.WithFile(path)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	sum := sha256.Sum256(data)
	c.Hash = hex.EncodeToString(sum[:])
	return c, nil
}

// Parse reads a config from data, secrets resolved, with the sections of
// adapters; relative *_file paths are relative to dir.
func Parse(data []byte, dir string, adapters []Adapter) (*Config, error) {
	return parse(data, dir, true, adapters)
}

// Default returns the embedded default: the mailbox in the current
// workspace and what each provider's section is without a file (the SMTP
// receiver on 127.0.0.1:2525, nothing else).
func Default(adapters []Adapter) *Config {
	c := newConfig(adapters)
	c.Courier.Root = "."
	c.Courier.Adapters.each("", func(_ string, s confkit.Section) {
		if d, ok := s.(confkit.EmbeddedDefaulter); ok {
			d.EmbeddedDefault()
		}
	})
	c.applyDefaults()
	return c
}

// parse reads a config in its steps: ${NAME} (env.go), the typed structs
// (the providers' sections among them), the secrets' files and the
// sections' normalising (secrets.go), the defaults, the checks (check.go).
// Each step that finds errors ends the reading with them.
func parse(data []byte, dir string, secrets bool, adapters []Adapter) (*Config, error) {
	root, err := schema.YAMLNode(data)
	if err != nil {
		return nil, err
	}
	if errs := expandEnv(root, "", secrets, secretKeys(adapters)); len(errs) > 0 {
		return nil, errs
	}
	c := newConfig(adapters)
	if errs := c.decode(root); len(errs) > 0 {
		return nil, errs
	}
	c.Courier.Debounce.off = c.Courier.Debounce.WindowMS == 0 && hasKey(root, "courier", "debounce", "window_ms")
	c.Courier.Adapters.findUnenabled(root)
	lines := lineFinder(root)
	if errs := c.resolve(dir, lines, secrets); len(errs) > 0 {
		return nil, errs
	}
	c.applyDefaults()
	if errs := c.validate(lines, secrets); len(errs) > 0 {
		return nil, errs
	}
	// Every *_file key is relative to the config file's folder, the
	// secrets' (readSecret) and this one alike.
	if f := c.Courier.MCP.TokenFile; f != "" && !filepath.IsAbs(f) && dir != "" {
		c.Courier.MCP.TokenFile = filepath.Join(dir, f)
	}
	return c, nil
}

// decode decodes the document into c: the courier-wide keys, then each
// provider's section into its Config. The errors of both are in line
// order, as schema.DecodeNode gives them.
func (c *Config) decode(root *yaml.Node) schema.Errors {
	var errs schema.Errors
	if err := schema.DecodeNode(root, c); err != nil && !errors.As(err, &errs) {
		return schema.Errors{{Msg: err.Error()}}
	}
	errs = append(errs, c.Courier.Adapters.decode("courier.adapters")...)
	slices.SortStableFunc(errs, func(a, b *schema.FieldError) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Path, b.Path)
	})
	return errs
}

// applyDefaults fills in what the file left out: the courier-wide keys',
// then each section's own (its Defaults).
func (c *Config) applyDefaults() {
	cc := &c.Courier
	if cc.Root == "" {
		cc.Root = "."
	}
	if cc.HTTP.Listen == "" {
		cc.HTTP.Listen = "127.0.0.1:8644"
	}
	if cc.Socket.Path == "" {
		cc.Socket.Path = DefaultSocket
	}
	cc.Log.defaults()
	if cc.Debounce.WindowMS == 0 && !cc.Debounce.off {
		cc.Debounce.WindowMS = 5000
	}
	if cc.Debounce.MaxWaitMS == 0 {
		cc.Debounce.MaxWaitMS = 30000
	}
	limitsDefaults(&cc.Limits)
	if cc.Mailbox.ClaimTimeout == 0 {
		cc.Mailbox.ClaimTimeout = confkit.Duration(300 * time.Second)
	}
	if cc.Mailbox.MaxFailures == 0 {
		cc.Mailbox.MaxFailures = 3
	}
	if cc.Claims.MaxTimeout == 0 {
		cc.Claims.MaxTimeout = confkit.Duration(24 * time.Hour)
	}
	cc.MCP.defaults()
	cc.Outbound.defaults()
	if cc.Restart.Refused == 0 {
		cc.Restart.Refused = confkit.Duration(2 * time.Minute)
	}
	if cc.Restart.RefusedMax == 0 {
		cc.Restart.RefusedMax = max(confkit.Duration(10*time.Minute), cc.Restart.Refused)
	}
	cc.Adapters.each("", func(_ string, s confkit.Section) { s.Defaults() })
}

func (l *Log) defaults() {
	if l.Level == "" {
		l.Level = "info"
	}
	if l.File == "" {
		l.File = DefaultLogFile
	}
	if l.MaxSizeMB == 0 {
		l.MaxSizeMB = 10
	}
	if l.MaxFiles == 0 {
		l.MaxFiles = 5
	}
}

func limitsDefaults(l *confkit.Limits) {
	if l.MaxDraftBytes == 0 {
		l.MaxDraftBytes = 1 << 20
	}
	if l.MaxArtifactBytes == 0 {
		l.MaxArtifactBytes = 100 << 20
	}
	if l.MaxMessageBytes == 0 {
		l.MaxMessageBytes = 150 << 20
	}
	if l.MaxTextBytes == 0 {
		l.MaxTextBytes = 4 << 20
	}
}

func (m *MCP) defaults() {
	if m.MaxSessions == 0 {
		m.MaxSessions = 32
	}
	if m.SessionTimeout == 0 {
		m.SessionTimeout = confkit.Duration(30 * time.Minute)
	}
	if m.MaxRequestBytes == 0 {
		m.MaxRequestBytes = 8 << 20
	}
}

func (o *Outbound) defaults() {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 8
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = confkit.Duration(2 * time.Second)
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = confkit.Duration(10 * time.Minute)
	}
	if o.RescanInterval == 0 {
		o.RescanInterval = confkit.Duration(30 * time.Second)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = confkit.Duration(2 * time.Minute)
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = confkit.Duration(30 * time.Second)
	}
	if o.MaxRecipients == 0 {
		o.MaxRecipients = 50
	}
}

// hasKey reports whether the document root has the key at path, whatever
// its value.
func hasKey(root *yaml.Node, path ...string) bool {
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	return valueAt(root, path...) != nil
}

// lineFinder returns a function giving the line of a dotted path (of its
// nearest ancestor in the file; 0 when none is).
func lineFinder(root *yaml.Node) func(path string) int {
	lines := map[string]int{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := joinKey(path, n.Content[i].Value)
				lines[p] = n.Content[i].Line
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				lines[p] = c.Line
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return func(path string) int {
		for p := path; p != ""; {
			if n, ok := lines[p]; ok {
				return n
			}
			i := strings.LastIndexAny(p, ".[")
			if i < 0 {
				break
			}
			p = p[:i]
		}
		return 0
	}
}
