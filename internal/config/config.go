// Package config reads courier.yaml (DESIGN §8) into typed structs, once,
// for cmd/courier to hand each package its options.
//
// Reading is strict: an unknown key is an error naming the key and its
// line; "${NAME}" in any value is replaced by the environment variable NAME
// (an unset variable is an error); every secret also has a *_file form
// that reads the secret from a file (systemd credentials, Docker secrets).
// Secrets are of type Secret, which never prints its value: not in logs,
// not in errors, not with %v.
//
// Upstream's flat single-account email keys (imap_server, imap_port,
// smtp_server, smtp_port, username, password, poll_interval) are accepted
// and become one account named "default".
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/monoco/courier/schema"
)

// Secret is a credential. It formats as "[redacted]" everywhere; Reveal
// returns the value.
type Secret string

// Reveal returns the secret's value, for the code that uses it.
func (s Secret) Reveal() string { return string(s) }

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the value from %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue hides the value from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON hides the value from JSON (slog's JSON handler, status
// output).
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText hides the value from every text encoder.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalYAML hides the value when a config is written back.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// SecretRef is one secret of a config, as Secrets finds it.
type SecretRef struct {
	// Path is the secret's key, as errors name it:
	// "courier.adapters.email.accounts[0].smtp.password". Its file form
	// is Path+"_file".
	Path string
	// Secret is the secret's field in the config.
	Secret *Secret
	// File is the value of the *_file form, as written ("" when unset):
	// relative to the config file's folder unless absolute.
	File string
}

var secretType = reflect.TypeFor[Secret]()

// Secrets returns every secret of c, in field order, through the accounts
// and sections c has. A secret is declared by its field alone: a field of
// type Secret with YAML key x and, beside it, a string field with key
// x_file for its file form. Reading the files (Parse), leaving secrets out
// for the commands that run without them (LoadOptions.Secrets) and
// doctor's checks all go by this list.
func (c *Config) Secrets() []SecretRef {
	var out []SecretRef
	walkSecrets(reflect.ValueOf(c).Elem(), "", &out)
	return out
}

// walkSecrets appends the secrets in v, an addressable value at path.
// Pointers are followed and lists entered; maps hold no secrets.
func walkSecrets(v reflect.Value, path string, out *[]SecretRef) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkSecrets(v.Elem(), path, out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkSecrets(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			key, inline, ok := yamlKey(t.Field(i))
			if !ok {
				continue
			}
			p := path
			if !inline {
				p = joinKey(path, key)
			}
			if t.Field(i).Type != secretType {
				walkSecrets(v.Field(i), p, out)
				continue
			}
			ref := SecretRef{Path: p, Secret: v.Field(i).Addr().Interface().(*Secret)}
			if j := fileField(t, key); j >= 0 {
				ref.File = v.Field(j).String()
			}
			*out = append(*out, ref)
		}
	}
}

// yamlKey returns the YAML key of f as yaml.v3 reads it; ok is false for a
// field YAML does not see.
func yamlKey(f reflect.StructField) (key string, inline, ok bool) {
	if !f.IsExported() {
		return "", false, false
	}
	key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if key == "-" {
		return "", false, false
	}
	if key == "" {
		key = strings.ToLower(f.Name)
	}
	for o := range strings.SplitSeq(opts, ",") {
		if o == "inline" {
			inline = true
		}
	}
	return key, inline, true
}

// fileField returns the index of the string field of t holding the file
// form of the secret with key key, or -1.
func fileField(t reflect.Type, key string) int {
	for i := range t.NumField() {
		if k, _, ok := yamlKey(t.Field(i)); ok && k == key+"_file" && t.Field(i).Type.Kind() == reflect.String {
			return i
		}
	}
	return -1
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Duration is a time.Duration written as "60s", "5m" or a number of
// seconds.
type Duration time.Duration

// UnmarshalYAML accepts "90s", "1m30s" or 90 (seconds).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: want a duration such as 60s", n.Line)}}
	}
	if secs, err := strconv.ParseFloat(n.Value, 64); err == nil {
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a duration (want e.g. 60s, 5m, or seconds)", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Date is a day, written 2026-01-01.
type Date struct{ time.Time }

// UnmarshalYAML accepts YYYY-MM-DD or an RFC 3339 time.
func (d *Date) UnmarshalYAML(n *yaml.Node) error {
	for _, layout := range []string{"2006-01-02", time.RFC3339} {
		if t, err := time.Parse(layout, n.Value); err == nil {
			d.Time = t
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is not a date (want YYYY-MM-DD)", n.Line, n.Value)}}
}

// Config is the whole file.
type Config struct {
	Courier Courier `yaml:"courier"`

	// Path is the file it was read from ("" for the embedded default).
	Path string `yaml:"-"`
}

// Courier is the courier: section.
type Courier struct {
	Root     string   `yaml:"root"`
	HTTP     HTTP     `yaml:"http"`
	Socket   Socket   `yaml:"socket"`
	Log      Log      `yaml:"log"`
	Systemd  Systemd  `yaml:"systemd"`
	Debounce Debounce `yaml:"debounce"`
	Limits   Limits   `yaml:"limits"`
	Mailbox  Mailbox  `yaml:"mailbox"`
	MCP      MCP      `yaml:"mcp"`
	Outbound Outbound `yaml:"outbound"`
	Adapters Adapters `yaml:"adapters"`
	Notify   []Hook   `yaml:"notify"` // wake-up hooks (notify.go)
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
const minTextBytes = 4096

// Limits bounds what Courier accepts.
type Limits struct {
	MaxDraftBytes    int64 `yaml:"max_draft_bytes"`
	MaxArtifactBytes int64 `yaml:"max_artifact_bytes"`
	MaxMessageBytes  int64 `yaml:"max_message_bytes"` // a whole inbound email
	// MaxTextBytes is how much decoded text one inbound message file
	// keeps (content.text, content.html, content.markdown and the body
	// together); the rest of each goes on in text artifacts, so a 120 MB
	// HTML mail is a file an agent can read and nothing is lost.
	MaxTextBytes int64 `yaml:"max_text_bytes"`
	// NormalizeConcurrency is how many inbound messages are parsed and
	// rendered at once, across the receivers and IMAP accounts; each takes
	// memory in proportion to max_text_bytes. 0: one a CPU, at most 4.
	NormalizeConcurrency int `yaml:"normalize_concurrency"`
}

// MCP is the Model Context Protocol server's HTTP endpoint, /mcp on the
// HTTP listener (`courier mcp` serves stdio and needs none of it).
type MCP struct {
	// HTTP serves /mcp (default true; false: no /mcp).
	HTTP *bool `yaml:"http"`
	// TokenFile holds a bearer token every request to /mcp must carry
	// (Authorization: Bearer ...), relative to the workspace unless
	// absolute. Without it /mcp refuses every request, unless
	// AllowAnonymous: a TCP port, even on loopback, is open to every
	// local user, who would then read and answer the mailbox that the
	// filesystem keeps from them.
	TokenFile string `yaml:"token_file"`
	// AllowAnonymous serves /mcp without a token: for a machine whose
	// every local user may read and answer this mailbox.
	AllowAnonymous bool `yaml:"allow_anonymous"`
	// MaxSessions bounds the sessions open at once (default 32);
	// SessionTimeout closes one idle for so long (default 30m).
	MaxSessions    int      `yaml:"max_sessions"`
	SessionTimeout Duration `yaml:"session_timeout"`
	// MaxRequestBytes bounds a request's body (default 8 MiB: a draft
	// of limits.max_draft_bytes, escaped, in JSON-RPC).
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
}

// Enabled reports whether /mcp is served.
func (m MCP) Enabled() bool { return m.HTTP == nil || *m.HTTP }

// Mailbox configures claims.
type Mailbox struct {
	ClaimTimeout Duration `yaml:"claim_timeout"`
	MaxFailures  int      `yaml:"max_failures"`
}

// Outbound configures delivery.
type Outbound struct {
	MaxAttempts    int      `yaml:"max_attempts"`
	BackoffBase    Duration `yaml:"backoff_base"`
	BackoffMax     Duration `yaml:"backoff_max"`
	RescanInterval Duration `yaml:"rescan_interval"`
	Concurrency    int      `yaml:"concurrency"`
	SendTimeout    Duration `yaml:"send_timeout"`
	ShutdownGrace  Duration `yaml:"shutdown_grace"`
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
}

// Adapters holds each provider's section.
type Adapters struct {
	Email Email `yaml:"email"`
	Lark  Lark  `yaml:"lark"`
	Slack Slack `yaml:"slack"`
}

// Email is the email adapter: an embedded receiver and accounts.
type Email struct {
	Enabled  bool      `yaml:"enabled"`
	Receiver Receiver  `yaml:"receiver"`
	Accounts []Account `yaml:"accounts"`
	// AuthservIDs are the authserv-ids of the hosts (your MTA) whose
	// Authentication-Results header fields are trusted for SPF, DKIM and
	// DMARC results; those of any other host may be forged.
	AuthservIDs []string `yaml:"authserv_ids"`
	// TrustUnverified treats senders that could not be verified (no
	// aligned DKIM or SPF pass) as verified: personal_eligible and
	// correlation inheritance no longer require it.
	TrustUnverified bool `yaml:"trust_unverified"`

	// Upstream's flat single-account keys.
	IMAPServer   string   `yaml:"imap_server"`
	IMAPPort     int      `yaml:"imap_port"`
	SMTPServer   string   `yaml:"smtp_server"`
	SMTPPort     int      `yaml:"smtp_port"`
	Username     string   `yaml:"username"`
	Password     Secret   `yaml:"password"`
	PasswordFile string   `yaml:"password_file"`
	PollInterval Duration `yaml:"poll_interval"`
	// AllowPlaintextAuth is the flat keys' allow_plaintext_auth (smtp_port
	// 25 means no TLS): see SMTP.AllowPlaintextAuth.
	AllowPlaintextAuth bool `yaml:"allow_plaintext_auth"`
}

// Receiver is the embedded SMTP/LMTP receiver.
type Receiver struct {
	SMTP     string `yaml:"smtp"`     // host:port, "" = off
	LMTP     string `yaml:"lmtp"`     // host:port or unix:/path, "" = off
	Hostname string `yaml:"hostname"` // announced in the greeting
	// Addresses are the receiver's own addresses, dropped from
	// participants like an account's.
	Addresses []string `yaml:"addresses"`
	// AllowFrom are the networks (CIDR, or single addresses) the receiver
	// takes connections from; others get 554 at connect. Empty: any.
	AllowFrom []string `yaml:"allow_from"`
	// What one client may hold of the receiver: sessions at once, in all
	// and from one address (an IPv6 /64; not on a Unix socket), beyond
	// which it is answered 421 and an MTA retries; a session's whole life;
	// the wait for each command line, and for a DATA or BDAT transfer from
	// its command. 0 takes the default.
	MaxSessions      int      `yaml:"max_sessions"`        // 100
	MaxSessionsPerIP int      `yaml:"max_sessions_per_ip"` // 10
	MaxSessionTime   Duration `yaml:"max_session_time"`    // 10m
	ReadTimeout      Duration `yaml:"read_timeout"`        // 5m
}

// Account is one email account.
type Account struct {
	Name      string   `yaml:"name"`
	Addresses []string `yaml:"addresses"`
	// DisplayName is the name in the From of mail sent from the account
	// ("Monoco Agent" <agent@example.com>); none by default.
	DisplayName string `yaml:"display_name"`
	IMAP        *IMAP  `yaml:"imap"`
	SMTP        *SMTP  `yaml:"smtp"`
}

// IMAP is an account's IMAP server.
type IMAP struct {
	Host               string   `yaml:"host"`
	Port               int      `yaml:"port"`
	TLS                string   `yaml:"tls"` // implicit | starttls | none
	InsecureSkipVerify bool     `yaml:"insecure_skip_verify"`
	Username           string   `yaml:"username"`
	Password           Secret   `yaml:"password"`
	PasswordFile       string   `yaml:"password_file"`
	Auth               string   `yaml:"auth"` // plain | login
	Folders            []string `yaml:"folders"`
	Mode               string   `yaml:"mode"` // idle | poll
	PollInterval       Duration `yaml:"poll_interval"`
	Since              *Date    `yaml:"since"`
	MarkSeen           bool     `yaml:"mark_seen"`
	MoveTo             string   `yaml:"move_to"`
	SentFolder         string   `yaml:"sent_folder"` // for append_sent

	// AllowPlaintextAuth lets tls: none log in to a host that is not on
	// loopback: the password then crosses the network in clear text.
	AllowPlaintextAuth bool `yaml:"allow_plaintext_auth"`
}

// SMTP is an account's submission server.
type SMTP struct {
	Host               string `yaml:"host"`
	Port               int    `yaml:"port"`
	TLS                string `yaml:"tls"` // implicit | starttls | none
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
	Username           string `yaml:"username"`
	Password           Secret `yaml:"password"`
	PasswordFile       string `yaml:"password_file"`
	Auth               string `yaml:"auth"`        // plain | login | none
	Hostname           string `yaml:"hostname"`    // EHLO name
	AppendSent         bool   `yaml:"append_sent"` // copy to the IMAP Sent folder

	// AllowPlaintextAuth lets tls: none log in to a host that is not on
	// loopback: the password then crosses the network in clear text.
	AllowPlaintextAuth bool `yaml:"allow_plaintext_auth"`
}

// Lark is the Lark (Feishu) adapter.
type Lark struct {
	Enabled               bool   `yaml:"enabled"`
	AppID                 string `yaml:"app_id"`
	AppSecret             Secret `yaml:"app_secret"`
	AppSecretFile         string `yaml:"app_secret_file"`
	Domain                string `yaml:"domain"` // feishu | lark | a base URL
	Mode                  string `yaml:"mode"`   // ws | webhook
	VerificationToken     Secret `yaml:"verification_token"`
	VerificationTokenFile string `yaml:"verification_token_file"`
	EncryptKey            Secret `yaml:"encrypt_key"`
	EncryptKeyFile        string `yaml:"encrypt_key_file"`
}

// Slack is the Slack adapter.
type Slack struct {
	Enabled           bool   `yaml:"enabled"`
	BotToken          Secret `yaml:"bot_token"`
	BotTokenFile      string `yaml:"bot_token_file"`
	AppToken          Secret `yaml:"app_token"`
	AppTokenFile      string `yaml:"app_token_file"`
	SigningSecret     Secret `yaml:"signing_secret"`
	SigningSecretFile string `yaml:"signing_secret_file"`
	Mode              string `yaml:"mode"`    // socket | events
	APIURL            string `yaml:"api_url"` // Slack's by default; GovSlack, tests
	// IgnoreBots drops messages other bots post (the app's own are always
	// dropped).
	IgnoreBots bool `yaml:"ignore_bots"`
	// Channels, when set, is the allow-list of conversation ids (C..., G...,
	// D...) whose messages are ingested; the others are acknowledged and
	// dropped.
	Channels []string `yaml:"channels"`
}

// Default returns the embedded default: the mailbox in the current
// workspace, the SMTP receiver on 127.0.0.1:2525, nothing else.
func Default() *Config {
	c := &Config{}
	c.Courier.Root = "."
	c.Courier.Adapters.Email.Enabled = true
	c.Courier.Adapters.Email.Receiver.SMTP = "127.0.0.1:2525"
	c.applyDefaults()
	return c
}

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
	if cc.Log.Level == "" {
		cc.Log.Level = "info"
	}
	if cc.Log.File == "" {
		cc.Log.File = DefaultLogFile
	}
	if cc.Log.MaxSizeMB == 0 {
		cc.Log.MaxSizeMB = 10
	}
	if cc.Log.MaxFiles == 0 {
		cc.Log.MaxFiles = 5
	}
	if cc.Debounce.WindowMS == 0 && !cc.Debounce.off {
		cc.Debounce.WindowMS = 5000
	}
	if cc.Debounce.MaxWaitMS == 0 {
		cc.Debounce.MaxWaitMS = 30000
	}
	if cc.Limits.MaxDraftBytes == 0 {
		cc.Limits.MaxDraftBytes = 1 << 20
	}
	if cc.Limits.MaxArtifactBytes == 0 {
		cc.Limits.MaxArtifactBytes = 100 << 20
	}
	if cc.Limits.MaxMessageBytes == 0 {
		cc.Limits.MaxMessageBytes = 150 << 20
	}
	if cc.Limits.MaxTextBytes == 0 {
		cc.Limits.MaxTextBytes = 4 << 20
	}
	if cc.Mailbox.ClaimTimeout == 0 {
		cc.Mailbox.ClaimTimeout = Duration(300 * time.Second)
	}
	if cc.Mailbox.MaxFailures == 0 {
		cc.Mailbox.MaxFailures = 3
	}
	if cc.MCP.MaxSessions == 0 {
		cc.MCP.MaxSessions = 32
	}
	if cc.MCP.SessionTimeout == 0 {
		cc.MCP.SessionTimeout = Duration(30 * time.Minute)
	}
	if cc.MCP.MaxRequestBytes == 0 {
		cc.MCP.MaxRequestBytes = 8 << 20
	}
	o := &cc.Outbound
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 8
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = Duration(2 * time.Second)
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = Duration(10 * time.Minute)
	}
	if o.RescanInterval == 0 {
		o.RescanInterval = Duration(30 * time.Second)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = Duration(2 * time.Minute)
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = Duration(30 * time.Second)
	}
	e := &cc.Adapters.Email
	if e.Receiver.Hostname == "" {
		e.Receiver.Hostname = "localhost"
	}
	if e.Receiver.MaxSessions == 0 {
		e.Receiver.MaxSessions = 100
	}
	if e.Receiver.MaxSessionsPerIP == 0 {
		e.Receiver.MaxSessionsPerIP = 10
	}
	if e.Receiver.MaxSessionTime == 0 {
		e.Receiver.MaxSessionTime = Duration(10 * time.Minute)
	}
	if e.Receiver.ReadTimeout == 0 {
		e.Receiver.ReadTimeout = Duration(5 * time.Minute)
	}
	for i := range e.Accounts {
		a := &e.Accounts[i]
		if a.IMAP != nil {
			if a.IMAP.TLS == "" {
				a.IMAP.TLS = "implicit"
			}
			if a.IMAP.Port == 0 {
				a.IMAP.Port = map[string]int{"implicit": 993}[a.IMAP.TLS]
				if a.IMAP.Port == 0 {
					a.IMAP.Port = 143
				}
			}
			if len(a.IMAP.Folders) == 0 {
				a.IMAP.Folders = []string{"INBOX"}
			}
			if a.IMAP.Mode == "" {
				a.IMAP.Mode = "idle"
			}
			if a.IMAP.PollInterval == 0 {
				a.IMAP.PollInterval = Duration(60 * time.Second)
			}
			if a.IMAP.Auth == "" {
				a.IMAP.Auth = "plain"
			}
			if a.IMAP.SentFolder == "" {
				a.IMAP.SentFolder = "Sent"
			}
		}
		if a.SMTP != nil {
			if a.SMTP.TLS == "" {
				a.SMTP.TLS = "starttls"
			}
			if a.SMTP.Port == 0 {
				a.SMTP.Port = map[string]int{"implicit": 465, "starttls": 587}[a.SMTP.TLS]
				if a.SMTP.Port == 0 {
					a.SMTP.Port = 25
				}
			}
			if a.SMTP.Auth == "" {
				a.SMTP.Auth = "plain"
				if a.SMTP.Username == "" {
					a.SMTP.Auth = "none"
				}
			}
		}
		if len(a.Addresses) == 0 {
			for _, u := range []string{usernameOf(a.IMAP), usernameOfSMTP(a.SMTP)} {
				if strings.Contains(u, "@") {
					a.Addresses = []string{u}
					break
				}
			}
		}
	}
	l := &cc.Adapters.Lark
	if l.Domain == "" {
		l.Domain = "feishu"
	}
	if l.Mode == "" {
		l.Mode = "ws"
	}
	if cc.Adapters.Slack.Mode == "" {
		cc.Adapters.Slack.Mode = "socket"
	}
}

func usernameOf(i *IMAP) string {
	if i == nil {
		return ""
	}
	return i.Username
}

func usernameOfSMTP(s *SMTP) string {
	if s == nil {
		return ""
	}
	return s.Username
}

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
}

// Load reads the config at path.
func Load(path string, opts LoadOptions) (*Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && opts.AllowMissing {
		return Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parse(data, filepath.Dir(path), opts.Secrets)
	if err != nil {
		var errs schema.Errors
		if errors.As(err, &errs) {
			return nil, errs.WithFile(path)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Parse reads a config from data, secrets resolved; relative *_file paths
// are relative to dir.
func Parse(data []byte, dir string) (*Config, error) { return parse(data, dir, true) }

func parse(data []byte, dir string, secrets bool) (*Config, error) {
	root, err := schema.YAMLNode(data)
	if err != nil {
		return nil, err
	}
	if errs := expandEnv(root, "", secrets); len(errs) > 0 {
		return nil, errs
	}
	c := &Config{}
	if err := schema.DecodeNode(root, c); err != nil {
		return nil, err
	}
	c.Courier.Debounce.off = c.Courier.Debounce.WindowMS == 0 && hasKey(root, "courier", "debounce", "window_ms")
	lines := lineFinder(root)
	if errs := c.resolve(dir, lines, secrets); len(errs) > 0 {
		return nil, errs
	}
	c.applyDefaults()
	if errs := c.validate(lines, secrets); len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// secretKey reports whether a config key holds a secret or names one (its
// *_file form): whether path, its indices aside, is the path of a secret in
// a config that had every list and section (see secretPaths).
func secretKey(path string) bool { return secretPaths()[anyIndex(path)] }

// secretPaths are the paths of every secret a config file can hold and of
// their *_file forms, "[]" standing for any index.
var secretPaths = sync.OnceValue(func() map[string]bool {
	var c Config
	fillShape(reflect.ValueOf(&c).Elem())
	out := map[string]bool{}
	for _, s := range c.Secrets() {
		out[anyIndex(s.Path)] = true
		out[anyIndex(s.Path)+"_file"] = true
	}
	return out
})

// fillShape gives every pointer of v a value and every list one item, so
// that Secrets of the result finds every secret field.
func fillShape(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillShape(v.Elem())
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			fillShape(v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fillShape(f)
			}
		}
	}
}

// anyIndex replaces the indices in path by "[]": accounts[2].imap.password
// becomes accounts[].imap.password.
func anyIndex(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '[')
		if i < 0 {
			b.WriteString(path)
			return b.String()
		}
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i])
		b.WriteString("[]")
		path = path[i+j+1:]
	}
}

// expandEnv replaces ${NAME} in every scalar value. Without secrets, the
// values of secret keys are emptied instead.
func expandEnv(n *yaml.Node, path string, secrets bool) schema.Errors {
	var errs schema.Errors
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			errs = append(errs, expandEnv(n.Content[i+1], p, secrets)...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			errs = append(errs, expandEnv(c, fmt.Sprintf("%s[%d]", path, i), secrets)...)
		}
	case yaml.ScalarNode:
		if !secrets && secretKey(path) {
			n.Value, n.Tag, n.Style = "", "!!str", 0
			return nil
		}
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		var missing []string
		v := expand(n.Value, func(name string) (string, bool) {
			val, ok := os.LookupEnv(name)
			if !ok {
				missing = append(missing, name)
			}
			return val, ok
		})
		if len(missing) > 0 {
			errs = append(errs, &schema.FieldError{Line: n.Line, Path: path,
				Msg: "environment variable " + strings.Join(missing, ", ") + " is not set"})
			return errs
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = resolveTag(v) // a plain ${PORT} becomes the number it holds
		}
	}
	return errs
}

// expand replaces ${NAME} only (a bare $ is left alone: passwords have
// them).
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		name := s[i+2 : i+j]
		v, _ := lookup(name)
		b.WriteString(v)
		s = s[i+j+1:]
	}
}

func resolveTag(v string) string {
	var x any
	if err := yaml.Unmarshal([]byte(v), &x); err != nil {
		return "!!str"
	}
	switch x.(type) {
	case int, int64, uint64:
		return "!!int"
	case bool:
		return "!!bool"
	case float64:
		return "!!float"
	}
	return "!!str"
}

// lineFinder returns a function giving the line of a dotted path.
// hasKey reports whether the document root has the key at path, whatever
// its value.
func hasKey(root *yaml.Node, path ...string) bool {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, k := range path {
		if n.Kind != yaml.MappingNode {
			return false
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return false
		}
		n = next
	}
	return true
}

func lineFinder(root *yaml.Node) func(path string) int {
	lines := map[string]int{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
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

// resolve reads *_file secrets and turns the flat email keys into an
// account.
func (c *Config) resolve(dir string, line func(string) int, secrets bool) schema.Errors {
	var errs schema.Errors
	if secrets {
		for _, s := range c.Secrets() {
			if err := readSecret(s, dir, line); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return append(errs, c.flatAccount(line)...)
}

// readSecret reads the file form of secret s, if it has one, into s.
func readSecret(s SecretRef, dir string, line func(string) int) *schema.FieldError {
	if s.File == "" {
		return nil
	}
	if *s.Secret != "" {
		return &schema.FieldError{Line: line(s.Path), Path: s.Path, Msg: "set either the secret or its _file, not both"}
	}
	file := s.File
	if !filepath.IsAbs(file) {
		file = filepath.Join(dir, file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return &schema.FieldError{Line: line(s.Path + "_file"), Path: s.Path + "_file", Msg: "cannot read the secret file: " + pathError(err)}
	}
	*s.Secret = Secret(strings.TrimRight(string(b), "\r\n"))
	return nil
}

// flatAccount turns upstream's flat email keys into the account "default".
// Its secrets were read already: the account takes the password and the
// name of the file it came from.
func (c *Config) flatAccount(line func(string) int) schema.Errors {
	e := &c.Courier.Adapters.Email
	if e.IMAPServer == "" && e.SMTPServer == "" {
		return nil
	}
	if len(e.Accounts) > 0 {
		return schema.Errors{{Line: line(emailPath + ".imap_server"), Path: emailPath,
			Msg: "use either accounts or the flat keys (imap_server, smtp_server, ...), not both"}}
	}
	acct := Account{Name: "default"}
	if e.IMAPServer != "" {
		acct.IMAP = &IMAP{Host: e.IMAPServer, Port: e.IMAPPort, Username: e.Username, Password: e.Password, PasswordFile: e.PasswordFile, PollInterval: e.PollInterval,
			AllowPlaintextAuth: e.AllowPlaintextAuth}
		if e.PollInterval != 0 {
			acct.IMAP.Mode = "poll"
		}
		if e.IMAPPort == 143 {
			acct.IMAP.TLS = "starttls"
		}
	}
	if e.SMTPServer != "" {
		acct.SMTP = &SMTP{Host: e.SMTPServer, Port: e.SMTPPort, Username: e.Username, Password: e.Password, PasswordFile: e.PasswordFile,
			AllowPlaintextAuth: e.AllowPlaintextAuth}
		switch e.SMTPPort {
		case 465:
			acct.SMTP.TLS = "implicit"
		case 25:
			acct.SMTP.TLS = "none"
		}
	}
	e.Accounts = []Account{acct}
	return nil
}

func pathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// validate checks values, section by section. Without secrets, the
// sections whose checks are about secrets being there are left out.
func (c *Config) validate(line func(string) int, secrets bool) schema.Errors {
	k := &checker{line: line}
	cc := &c.Courier
	k.service(cc)
	k.receiver(&cc.Adapters.Email.Receiver)
	k.authservIDs(cc.Adapters.Email.AuthservIDs)
	k.accounts(cc.Adapters.Email.Accounts)
	k.notify(cc.Notify, secrets)
	if secrets {
		k.plaintextAuth(&cc.Adapters.Email)
		k.lark(&cc.Adapters.Lark)
		k.slack(&cc.Adapters.Slack)
	}
	return k.errs
}

// listenAddr checks an address a server of Courier's listens on: host:port
// with a port from 1 to 65535 (0 would pick one at random, which nobody
// could then reach) and a host that is empty (every interface), an IP
// address or a name (resolved when the service starts; doctor tries to
// bind it).
func listenAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: the port %q is not a number from 1 to 65535", addr, port)
	}
	if strings.ContainsAny(host, " /\\@") {
		return fmt.Errorf("%q: the host %q is not an address or a name", addr, host)
	}
	return nil
}

// checker collects what validate finds, each at its key's line.
type checker struct {
	line func(string) int
	errs schema.Errors
}

func (k *checker) bad(path, format string, args ...any) {
	k.errs = append(k.errs, &schema.FieldError{Line: k.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// service checks the service's own sections: http, log, debounce, limits
// and outbound.
func (k *checker) service(cc *Courier) {
	if err := listenAddr(cc.HTTP.Listen); err != nil {
		k.bad("courier.http.listen", "%v", err)
	}
	if m := cc.MCP; m.MaxSessions < 0 || m.SessionTimeout < 0 || m.MaxRequestBytes < 0 {
		k.bad("courier.mcp", "max_sessions, session_timeout and max_request_bytes must not be negative")
	}
	if p := cc.MCP.TokenFile; strings.HasPrefix(p, "~") {
		k.bad("courier.mcp.token_file", "%q: ~ is not expanded here; write the absolute path", p)
	}
	switch p := cc.Socket.Path; {
	case strings.HasPrefix(p, "~"):
		k.bad("courier.socket.path", "%q: ~ is not expanded here; write the absolute path", p)
	case strings.HasSuffix(p, "/") || strings.ContainsRune(p, 0):
		k.bad("courier.socket.path", "%q is not a file path", p)
	}
	switch cc.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		k.bad("courier.log.level", "%q is not one of debug, info, warn, error", cc.Log.Level)
	}
	switch cc.Log.Format {
	case "", "text", "json":
	default:
		k.bad("courier.log.format", "%q is not one of text, json", cc.Log.Format)
	}
	if cc.Log.MaxSizeMB < 0 || cc.Log.MaxFiles < 0 {
		k.bad("courier.log", "max_size_mb and max_files must not be negative (the log is always bounded)")
	}
	if strings.HasPrefix(cc.Log.File, "~") || strings.HasSuffix(cc.Log.File, "/") || strings.ContainsRune(cc.Log.File, 0) {
		k.bad("courier.log.file", "%q is not a file path (~ is not expanded)", cc.Log.File)
	}
	if u := cc.Systemd.Unit; u != "" && (strings.ContainsAny(u, "/ \\") || strings.HasPrefix(u, "-")) {
		k.bad("courier.systemd.unit", "%q is not a unit name (such as courier.service)", u)
	}
	if cc.Debounce.WindowMS < 0 || cc.Debounce.MaxWaitMS < 0 {
		k.bad("courier.debounce", "times must not be negative")
	}
	if cc.Limits.MaxDraftBytes < 0 || cc.Limits.MaxArtifactBytes < 0 || cc.Limits.MaxMessageBytes < 0 {
		k.bad("courier.limits", "limits must not be negative")
	}
	if t := cc.Limits.MaxTextBytes; t < minTextBytes || t > schema.MaxReadText {
		// Above the bound, `read`, reindex and `send` would cut the text
		// of new files as they do that of files written before it.
		k.bad("courier.limits.max_text_bytes", "%d is not between %d and %d (what every reader of a message file takes from it)", t, minTextBytes, schema.MaxReadText)
	}
	if cc.Limits.NormalizeConcurrency < 0 {
		k.bad("courier.limits.normalize_concurrency", "must not be negative (0: one a CPU, at most 4)")
	}
	if cc.Outbound.MaxAttempts < 1 {
		k.bad("courier.outbound.max_attempts", "must be at least 1")
	}
	if cc.Outbound.Concurrency < 1 {
		k.bad("courier.outbound.concurrency", "must be at least 1")
	}
	for i, r := range cc.Outbound.AttachRoots {
		k.attachRoot(fmt.Sprintf("courier.outbound.attach_roots[%d]", i), r)
	}
}

// attachRoot checks one folder of outbound.attach_roots. Lexically only:
// `courier send` opens it, and says so if it cannot.
func (k *checker) attachRoot(path, r string) {
	switch {
	case strings.TrimSpace(r) == "":
		k.bad(path, "empty folder")
	case strings.HasPrefix(r, "~"):
		k.bad(path, "%q: ~ is not expanded here; write the folder's absolute path", r)
	default:
		for _, sys := range []string{"/proc", "/sys", "/dev"} {
			if c := filepath.Clean(r); c == sys || strings.HasPrefix(c, sys+"/") {
				k.bad(path, "%q is under %s, whose files are never attached", r, sys)
			}
		}
	}
}

const emailPath = "courier.adapters.email"

// receiver checks the email adapter's embedded SMTP/LMTP receiver.
func (k *checker) receiver(r *Receiver) {
	if r.SMTP != "" {
		if err := listenAddr(r.SMTP); err != nil {
			k.bad(emailPath+".receiver.smtp", "%v", err)
		}
	}
	if l := r.LMTP; l != "" && !strings.HasPrefix(l, "unix:") {
		if err := listenAddr(l); err != nil {
			k.bad(emailPath+".receiver.lmtp", "%v (or unix:/path)", err)
		}
	}
	for i, a := range r.Addresses {
		if !schema.ValidEmail(a) {
			k.bad(fmt.Sprintf("%s.receiver.addresses[%d]", emailPath, i), "%q is not an email address", a)
		}
	}
	for i, n := range r.AllowFrom {
		if _, err := ParsePrefix(n); err != nil {
			k.bad(fmt.Sprintf("%s.receiver.allow_from[%d]", emailPath, i), "%v", err)
		}
	}
	if r.MaxSessions < 0 {
		k.bad(emailPath+".receiver.max_sessions", "%d: must be at least 1 (or 0 for the default, 100)", r.MaxSessions)
	}
	if r.MaxSessionsPerIP < 0 {
		k.bad(emailPath+".receiver.max_sessions_per_ip", "%d: must be at least 1 (or 0 for the default, 10)", r.MaxSessionsPerIP)
	}
	// Under a second no real client keeps up; a negative one is a typo.
	if d := r.MaxSessionTime.D(); d != 0 && d < time.Second {
		k.bad(emailPath+".receiver.max_session_time", "%v: must be at least 1s (or 0 for the default, 10m)", d)
	}
	if d := r.ReadTimeout.D(); d != 0 && d < time.Second {
		k.bad(emailPath+".receiver.read_timeout", "%v: must be at least 1s (or 0 for the default, 5m)", d)
	}
}

// ParsePrefix reads one network of receiver.allow_from: a CIDR prefix
// ("192.0.2.0/24", "2001:db8::/32") or a single address (a /32 or /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is neither a network (192.0.2.0/24) nor an address", s)
}

// authservIDs checks courier.adapters.email.authserv_ids: each one token,
// as RFC 8601 §2.5 writes an authserv-id (a host name, usually).
func (k *checker) authservIDs(ids []string) {
	for i, id := range ids {
		if id == "" || strings.ContainsAny(id, " \t;()\"") {
			k.bad(fmt.Sprintf("%s.authserv_ids[%d]", emailPath, i), "%q is not an authserv-id (one token, such as mx.example.com)", id)
		}
	}
}

// accounts checks the email accounts: names present and distinct, and
// each account.
func (k *checker) accounts(accounts []Account) {
	names := map[string]bool{}
	for i := range accounts {
		a := &accounts[i]
		ap := fmt.Sprintf("%s.accounts[%d]", emailPath, i)
		if a.Name == "" {
			k.bad(ap+".name", "an account needs a name")
		} else if names[a.Name] {
			k.bad(ap+".name", "account name %q is used twice", a.Name)
		}
		names[a.Name] = true
		k.account(ap, a)
	}
}

// account checks one email account at path ap: its addresses and its imap
// and smtp sections.
func (k *checker) account(ap string, a *Account) {
	if a.IMAP == nil && a.SMTP == nil {
		k.bad(ap, "an account needs imap, smtp or both")
	}
	for j, addr := range a.Addresses {
		if _, err := mail.ParseAddress(addr); err != nil || !schema.ValidEmail(addr) {
			k.bad(fmt.Sprintf("%s.addresses[%d]", ap, j), "%q is not an email address", addr)
		}
	}
	if a.IMAP != nil {
		k.imap(ap+".imap", a.IMAP)
	}
	if a.SMTP != nil {
		k.smtp(ap+".smtp", a.SMTP, a.IMAP != nil)
	}
}

func (k *checker) imap(p string, i *IMAP) {
	checkServer(k.bad, p, i.Host, i.Port, i.TLS)
	switch i.Mode {
	case "idle", "poll":
	default:
		k.bad(p+".mode", "%q is not one of idle, poll", i.Mode)
	}
	switch i.Auth {
	case "plain", "login":
	default:
		k.bad(p+".auth", "%q is not one of plain, login", i.Auth)
	}
	if i.Username == "" {
		k.bad(p+".username", "required")
	}
}

// smtp checks an account's smtp section; hasIMAP says whether the account
// has an imap section too (append_sent needs one).
func (k *checker) smtp(p string, s *SMTP, hasIMAP bool) {
	checkServer(k.bad, p, s.Host, s.Port, s.TLS)
	switch s.Auth {
	case "plain", "login", "none":
	default:
		k.bad(p+".auth", "%q is not one of plain, login, none", s.Auth)
	}
	if s.AppendSent && !hasIMAP {
		k.bad(p+".append_sent", "needs the account's imap section to append to")
	}
}

// lark checks the Lark adapter when it is enabled, its secrets included.
func (k *checker) lark(l *Lark) {
	if !l.Enabled {
		return
	}
	if l.AppID == "" {
		k.bad("courier.adapters.lark.app_id", "required when lark is enabled")
	}
	if l.AppSecret == "" {
		k.bad("courier.adapters.lark.app_secret", "required when lark is enabled")
	}
	switch l.Mode {
	case "ws", "webhook":
	default:
		k.bad("courier.adapters.lark.mode", "%q is not one of ws, webhook", l.Mode)
	}
	if l.Mode == "webhook" && l.VerificationToken == "" && l.EncryptKey == "" {
		k.bad("courier.adapters.lark.verification_token", "webhook mode needs verification_token or encrypt_key to verify requests")
	}
}

// slack checks the Slack adapter when it is enabled, its tokens included.
func (k *checker) slack(s *Slack) {
	if !s.Enabled {
		return
	}
	if s.BotToken == "" {
		k.bad("courier.adapters.slack.bot_token", "required when slack is enabled")
	}
	switch s.Mode {
	case "socket":
		if s.AppToken == "" {
			k.bad("courier.adapters.slack.app_token", "socket mode needs an app-level token (xapp-...)")
		}
	case "events":
		if s.SigningSecret == "" {
			k.bad("courier.adapters.slack.signing_secret", "events mode needs the signing secret to verify requests")
		}
	default:
		k.bad("courier.adapters.slack.mode", "%q is not one of socket, events", s.Mode)
	}
	if s.APIURL != "" {
		if u, err := url.Parse(s.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			k.bad("courier.adapters.slack.api_url", "%q is not an http(s) URL", s.APIURL)
		}
	}
	for i, c := range s.Channels {
		if !slackConversation.MatchString(c) {
			k.bad(fmt.Sprintf("courier.adapters.slack.channels[%d]", i), "%q is not a conversation id (C..., G... or D...)", c)
		}
	}
}

// slackConversation is a Slack conversation id: a channel, a private
// channel or group DM, a DM.
var slackConversation = regexp.MustCompile(`^[CGD][A-Z0-9]{6,}$`)

func checkServer(bad func(string, string, ...any), path, host string, port int, tls string) {
	if host == "" {
		bad(path+".host", "required")
	}
	if port < 1 || port > 65535 {
		bad(path+".port", "%d is not a port", port)
	}
	switch tls {
	case "implicit", "starttls", "none":
	default:
		bad(path+".tls", "%q is not one of implicit, starttls, none", tls)
	}
}

// Account returns the account named name, or the first when name is "".
func (c *Config) Account(name string) (*Account, bool) {
	for i := range c.Courier.Adapters.Email.Accounts {
		a := &c.Courier.Adapters.Email.Accounts[i]
		if name == "" || a.Name == name {
			return a, true
		}
	}
	return nil, false
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
