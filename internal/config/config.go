// Package config reads courier.yaml (DESIGN §8) into typed structs, once,
// for cmd/courier to hand each package its options.
//
// It owns the courier-wide keys (root, http, socket, log, systemd,
// debounce, limits, mailbox, mcp, outbound, notify). Each provider owns its
// section, courier.adapters.<name>, as a mautrix bridgev2 connector owns
// its config: the provider's package defines the section's Config (a
// confkit.Section), its defaults and its checks. The provider table
// (internal/providers/all) lists each provider's name with a constructor of
// its Config, an Adapter; Load takes them (LoadOptions.Adapters), decodes
// each section into its provider's Config and runs the Config's Normalize,
// Defaults and Check. This package never names a provider, and adding one
// does not edit it. Callers get a provider's Config back typed from its
// package's ConfigOf (email.ConfigOf(cfg)), or untyped from
// Config.Section.
//
// Reading is strict: an unknown key is an error naming the key and its
// line, within a provider's section too, and so is a name under
// courier.adapters that no provider of the table has (with "did you mean",
// as for any key); "${NAME}" in any value is replaced by the environment
// variable NAME (an unset variable is an error); every secret also has a
// *_file form that reads the secret from a file (systemd credentials,
// Docker secrets). Secrets are of type confkit.Secret, which never prints
// its value: not in logs, not in errors, not with %v. Config.Secrets finds
// every one, the providers' included, by reflection over the typed
// structs.
//
// The steps, a file each: load.go (Load, Parse, Default and the order of
// the steps), adapters.go (the providers' sections), env.go (${NAME}),
// secrets.go (finding and reading secrets; inline.go, the ones written in
// the file itself), check.go and notify.go (the courier-wide checks).
package config

import (
	"path/filepath"

	"github.com/monoco/courier/internal/confkit"
)

// Config is the whole file.
type Config struct {
	Courier Courier `yaml:"courier"`

	// Path is the file it was read from ("" for the embedded default);
	// Hash is the SHA-256 of its bytes, hex ("" for the default): the
	// running service shows it on /health, and doctor compares it with
	// the file's.
	Path string `yaml:"-"`
	Hash string `yaml:"-"`
}

// Courier is the courier: section.
type Courier struct {
	Root     string         `yaml:"root"`
	HTTP     HTTP           `yaml:"http"`
	Socket   Socket         `yaml:"socket"`
	Log      Log            `yaml:"log"`
	Systemd  Systemd        `yaml:"systemd"`
	Debounce Debounce       `yaml:"debounce"`
	Limits   confkit.Limits `yaml:"limits"`
	Mailbox  Mailbox        `yaml:"mailbox"`
	MCP      MCP            `yaml:"mcp"`
	Claims   Claims         `yaml:"claims"`
	Outbound Outbound       `yaml:"outbound"`
	Restart  Restart        `yaml:"restart"`
	Adapters Adapters       `yaml:"adapters"` // the providers' sections (adapters.go)
	Notify   []Hook         `yaml:"notify"`   // wake-up hooks (notify.go)
	// Retention is what the service prunes on its own (`courier prune`).
	Retention Retention `yaml:"retention"`
}

// Retention is courier.retention.
type Retention struct {
	// Archive, when set, makes the service run `courier prune
	// --older-than` it once a day: archived messages, delivered drafts
	// and the dropzone objects nothing else names go once older. 0 (the
	// default): kept forever.
	Archive confkit.Duration `yaml:"archive"`
}

// HTTP is the service's HTTP endpoint (/health, /metrics, webhooks).
type HTTP struct {
	Listen string `yaml:"listen"`
}

// Socket is the service's Unix socket (DESIGN §7): while the service
// runs, agents' writing verbs (send, claim, done, fail) reach it there, so
// that it is the only writer of the mailbox.
type Socket struct {
	// Path is where the service listens, relative to the workspace
	// unless absolute. Agents connect if they may write the socket (mode
	// 0660: its folder's group, or the service's) and traverse its folder.
	Path string `yaml:"path"`
}

// DefaultSocket is the socket's path in a workspace unless the config
// names another.
const DefaultSocket = ".monoco/run/courier.sock"

// SocketPath returns the socket's absolute path in the workspace root.
func (c *Config) SocketPath(root string) string {
	p := c.Courier.Socket.Path
	if p == "" {
		p = DefaultSocket
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(root, p)
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json (default: text on a terminal, json otherwise)
	// File is the log of a service started with `courier start` (and
	// read by `courier logs`), relative to the workspace unless absolute.
	File string `yaml:"file"`
	// MaxSizeMB is the size at which File is rotated; MaxFiles is how
	// many rotated files are kept besides it (the oldest are removed).
	MaxSizeMB int `yaml:"max_size_mb"`
	MaxFiles  int `yaml:"max_files"`
}

// DefaultLogFile is the service's log file when `courier start` runs it.
const DefaultLogFile = ".monoco/logs/courier.log"

// LogPath returns the log file's absolute path in the workspace root.
func (c *Config) LogPath(root string) string {
	if filepath.IsAbs(c.Courier.Log.File) {
		return filepath.Clean(c.Courier.Log.File)
	}
	return filepath.Join(root, c.Courier.Log.File)
}

// Systemd names the unit that runs the service, when one does: `courier
// start`, `stop`, `restart` and `logs` then act through systemctl and
// journalctl instead of on a process of their own.
type Systemd struct {
	Unit string `yaml:"unit"` // e.g. courier.service; "" = found from the running service's cgroup
	User bool   `yaml:"user"` // a unit of the user's manager (systemctl --user)
}

// Debounce configures IM message merging.
type Debounce struct {
	// WindowMS is how long a group waits for the next message; an
	// explicit 0 turns debounce off (left out, it is 5000).
	WindowMS  int `yaml:"window_ms"`
	MaxWaitMS int `yaml:"max_wait_ms"`
	off       bool
}

// minTextBytes is the smallest max_text_bytes: a file keeps at least the
// start of a long mail.

// MCP is the Model Context Protocol server's HTTP endpoint, /mcp on the
// HTTP listener (`courier mcp` serves stdio and needs none of it).
type MCP struct {
	// HTTP serves /mcp (default true; false: no /mcp).
	HTTP *bool `yaml:"http"`
	// TokenFile holds a bearer token every request to /mcp must carry
	// (Authorization: Bearer ...), relative to the config file's folder
	// unless absolute, as every *_file key is (Load makes it absolute). Without it /mcp refuses every request, unless
	// AllowAnonymous: a TCP port, even on loopback, is open to every
	// local user, who would then read and answer the mailbox that the
	// filesystem keeps from them.
	TokenFile string `yaml:"token_file"`
	// AllowAnonymous serves /mcp without a token: for a machine whose
	// every local user may read and answer this mailbox.
	AllowAnonymous bool `yaml:"allow_anonymous"`
	// MaxSessions bounds the sessions open at once (default 32);
	// SessionTimeout closes one idle for so long (default 30m).
	MaxSessions    int              `yaml:"max_sessions"`
	SessionTimeout confkit.Duration `yaml:"session_timeout"`
	// MaxRequestBytes bounds a request's body (default 8 MiB: a draft
	// of limits.max_draft_bytes, escaped, in JSON-RPC).
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
}

// Enabled reports whether /mcp is served.
func (m MCP) Enabled() bool { return m.HTTP == nil || *m.HTTP }

// Claims bounds what an agent may ask of a claim.
type Claims struct {
	// MaxTimeout is the longest claim an agent may ask for (default
	// 24h): `claim --timeout 876000h` held a message until 2126, out of
	// every other agent's reach. Longer asks are refused, naming the key.
	MaxTimeout confkit.Duration `yaml:"max_timeout"`
}

// Mailbox configures claims and the dead letters.
type Mailbox struct {
	ClaimTimeout confkit.Duration `yaml:"claim_timeout"`
	MaxFailures  int              `yaml:"max_failures"`
	// DeadLetter bounds what .deadletter/<provider>/ keeps of the inbound
	// events and mails that cannot become messages, per provider.
	DeadLetter DeadLetter `yaml:"deadletter"`
}

// DeadLetter bounds the raw dead letters kept per provider; beyond
// either bound they are counted, not kept. 0 is the default (1000
// files, 64 MiB).
type DeadLetter struct {
	MaxFiles int   `yaml:"max_files"`
	MaxBytes int64 `yaml:"max_bytes"`
}

// Outbound configures delivery.
type Outbound struct {
	MaxAttempts    int              `yaml:"max_attempts"`
	BackoffBase    confkit.Duration `yaml:"backoff_base"`
	BackoffMax     confkit.Duration `yaml:"backoff_max"`
	RescanInterval confkit.Duration `yaml:"rescan_interval"`
	Concurrency    int              `yaml:"concurrency"`
	SendTimeout    confkit.Duration `yaml:"send_timeout"`
	ShutdownGrace  confkit.Duration `yaml:"shutdown_grace"`
	// AttachRoots are the folders, besides the workspace, that a draft's
	// artifact path may name files in: a draft can be written by a
	// prompt-injected agent, so `courier send` copies nothing from
	// elsewhere (not /etc/shadow, not ~/.ssh). Relative ones start from the
	// workspace of the config file, as root does; AttachRootDirs resolves
	// them.
	AttachRoots []string `yaml:"attach_roots"`
	// AttachHidden lets artifact paths name hidden files and folders (a
	// name starting with "."): .env, .git, .ssh hold secrets, so they are
	// refused by default. The workspace's .monoco/ is refused even then.
	AttachHidden bool `yaml:"attach_hidden"`
	// MaxRecipients bounds the addresses of a draft, to, cc and bcc
	// together (default 50): a reply goes to the Reply-To of a mail
	// anyone could send, which may list thousands. `courier send`
	// refuses a draft past it (exit 65); the engine dead-letters one
	// dropped into outbound/ by hand.
	MaxRecipients int `yaml:"max_recipients"`
	// Approval, Internal and Approvers are the approval gate (approval.go).
	Approval  string    `yaml:"approval"`
	Internal  Internal  `yaml:"internal"`
	Approvers Approvers `yaml:"approvers"`
}

// Restart is how the service starts again a provider's source that
// failed. A connection lost or a server down is tried again after a
// second, doubling up to a minute; credentials or scopes the provider
// refused (a wrong password, a revoked token, app keys it does not know)
// after Refused, doubling up to RefusedMax: the provider's side may be
// fixed at any time, and asking again every second would only fill its
// log and ours. The other providers run meanwhile.
type Restart struct {
	Refused    confkit.Duration `yaml:"refused"`     // default 2m
	RefusedMax confkit.Duration `yaml:"refused_max"` // default 10m
}

// RootDir returns the workspace root, relative paths taken from the
// config file's workspace (the folder holding .monoco/) or from cwd.
func (c *Config) RootDir(cwd string) string {
	r := c.Courier.Root
	if filepath.IsAbs(r) {
		return r
	}
	return filepath.Clean(filepath.Join(c.baseDir(cwd), r))
}

// AttachRootDirs returns outbound.attach_roots as absolute, clean paths,
// relative ones taken from the same folder as root's.
func (c *Config) AttachRootDirs(cwd string) []string {
	out := make([]string, 0, len(c.Courier.Outbound.AttachRoots))
	for _, r := range c.Courier.Outbound.AttachRoots {
		if !filepath.IsAbs(r) {
			r = filepath.Join(c.baseDir(cwd), r)
		}
		out = append(out, filepath.Clean(r))
	}
	return out
}

// baseDir is the folder relative paths of the config start from: the
// config file's workspace (the folder holding .monoco/), else the file's
// folder, else cwd (the embedded default).
func (c *Config) baseDir(cwd string) string {
	base := cwd
	if c.Path != "" {
		// .monoco/config/courier.yaml: the workspace is two levels up.
		dir := filepath.Dir(c.Path)
		if filepath.Base(dir) == "config" && filepath.Base(filepath.Dir(dir)) == ".monoco" {
			base = filepath.Dir(filepath.Dir(dir))
		} else {
			base = dir
		}
	}
	return base
}
