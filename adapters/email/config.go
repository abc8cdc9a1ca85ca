package email

import (
	"strings"
	"time"

	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Config is the email section of the config, courier.adapters.email: an
// embedded receiver and accounts. It is the provider's confkit.Section:
// internal/config decodes the section into it and calls Normalize,
// Defaults and Check (config_check.go).
//
// Upstream's flat single-account keys (imap_server, imap_port,
// smtp_server, smtp_port, username, password, poll_interval) are accepted
// and become one account named "default" (Normalize).
type Config struct {
	Enabled  bool            `yaml:"enabled"`
	Receiver ReceiverConfig  `yaml:"receiver"`
	Accounts []AccountConfig `yaml:"accounts"`
	// AuthservIDs are the authserv-ids of the hosts (your MTA) whose
	// Authentication-Results header fields are trusted for SPF, DKIM and
	// DMARC results; those of any other host may be forged.
	AuthservIDs []string `yaml:"authserv_ids"`
	// TrustUnverified treats senders that could not be verified (no
	// aligned DKIM or SPF pass) as verified: personal_eligible and
	// correlation inheritance no longer require it.
	TrustUnverified bool `yaml:"trust_unverified"`

	// Upstream's flat single-account keys.
	IMAPServer   string           `yaml:"imap_server"`
	IMAPPort     int              `yaml:"imap_port"`
	SMTPServer   string           `yaml:"smtp_server"`
	SMTPPort     int              `yaml:"smtp_port"`
	Username     string           `yaml:"username"`
	Password     confkit.Secret   `yaml:"password"`
	PasswordFile string           `yaml:"password_file"`
	PollInterval confkit.Duration `yaml:"poll_interval"`
	// AllowPlaintextAuth is the flat keys' allow_plaintext_auth (smtp_port
	// 25 means no TLS): see SMTPConfig.AllowPlaintextAuth.
	AllowPlaintextAuth bool `yaml:"allow_plaintext_auth"`
}

// ReceiverConfig is the embedded SMTP/LMTP receiver.
type ReceiverConfig struct {
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
	// and from one address (an IPv6 /64; not on a Unix socket, nor for
	// the lmtp listener's loopback clients, the MTA in front), beyond
	// which it is answered 421 and an MTA retries; a session's whole life;
	// the wait for each command line, and for a DATA or BDAT transfer from
	// its command. 0 takes the default.
	MaxSessions      int              `yaml:"max_sessions"`        // 100
	MaxSessionsPerIP int              `yaml:"max_sessions_per_ip"` // 10
	MaxSessionTime   confkit.Duration `yaml:"max_session_time"`    // 10m
	ReadTimeout      confkit.Duration `yaml:"read_timeout"`        // 5m

	// DedupeWindow: two identical mails without a Message-ID received
	// within it are one message (a client's retry); further apart, two.
	// It applies to IMAP accounts too, by INTERNALDATE.
	DedupeWindow confkit.Duration `yaml:"dedupe_window"` // 10m
}

// AccountConfig is one email account.
type AccountConfig struct {
	Name      string   `yaml:"name"`
	Addresses []string `yaml:"addresses"`
	// DisplayName is the name in the From of mail sent from the account
	// ("Monoco Agent" <agent@example.com>); none by default.
	DisplayName string      `yaml:"display_name"`
	IMAP        *IMAPConfig `yaml:"imap"`
	SMTP        *SMTPConfig `yaml:"smtp"`
}

// IMAPConfig is an account's IMAP server.
type IMAPConfig struct {
	Host               string           `yaml:"host"`
	Port               int              `yaml:"port"`
	TLS                string           `yaml:"tls"` // implicit | starttls | none
	InsecureSkipVerify bool             `yaml:"insecure_skip_verify"`
	Username           string           `yaml:"username"`
	Password           confkit.Secret   `yaml:"password"`
	PasswordFile       string           `yaml:"password_file"`
	Auth               string           `yaml:"auth"` // plain | login
	Folders            []string         `yaml:"folders"`
	Mode               string           `yaml:"mode"` // idle | poll
	PollInterval       confkit.Duration `yaml:"poll_interval"`
	Since              *confkit.Date    `yaml:"since"`
	MarkSeen           bool             `yaml:"mark_seen"`
	MoveTo             string           `yaml:"move_to"`
	SentFolder         string           `yaml:"sent_folder"` // for append_sent

	// AllowPlaintextAuth lets tls: none log in to a host that is not on
	// loopback: the password then crosses the network in clear text.
	AllowPlaintextAuth bool `yaml:"allow_plaintext_auth"`
}

// SMTPConfig is an account's submission server.
type SMTPConfig struct {
	Host               string         `yaml:"host"`
	Port               int            `yaml:"port"`
	TLS                string         `yaml:"tls"` // implicit | starttls | none
	InsecureSkipVerify bool           `yaml:"insecure_skip_verify"`
	Username           string         `yaml:"username"`
	Password           confkit.Secret `yaml:"password"`
	PasswordFile       string         `yaml:"password_file"`
	Auth               string         `yaml:"auth"`        // plain | login | none
	Hostname           string         `yaml:"hostname"`    // EHLO name
	AppendSent         bool           `yaml:"append_sent"` // copy to the IMAP Sent folder

	// AllowPlaintextAuth lets tls: none log in to a host that is not on
	// loopback: the password then crosses the network in clear text.
	AllowPlaintextAuth bool `yaml:"allow_plaintext_auth"`
}

var (
	_ confkit.Section           = (*Config)(nil)
	_ confkit.Normalizer        = (*Config)(nil)
	_ confkit.EmbeddedDefaulter = (*Config)(nil)
)

// ConfigOf returns the email section of a config (internal/config's
// *Config), nil when it has none.
func ConfigOf(s confkit.Sections) *Config { return confkit.SectionOf[*Config](s, schema.Email) }

// Account returns the account named name, or the first when name is "".
func (c *Config) Account(name string) (*AccountConfig, bool) {
	for i := range c.Accounts {
		a := &c.Accounts[i]
		if name == "" || a.Name == name {
			return a, true
		}
	}
	return nil, false
}

// EmbeddedDefault is the section of a workspace without a config file:
// the receiver on 127.0.0.1:2525.
func (c *Config) EmbeddedDefault() {
	c.Enabled = true
	c.Receiver.SMTP = "127.0.0.1:2525"
}

// Normalize turns upstream's flat email keys into the account "default".
// Its secrets were read already: the account takes the password and the
// name of the file it came from.
func (c *Config) Normalize(k *confkit.Checker) {
	if c.IMAPServer == "" && c.SMTPServer == "" {
		return
	}
	if len(c.Accounts) > 0 {
		k.Add(&schema.FieldError{Line: k.Line("imap_server"), Path: k.Path(""),
			Msg: "use either accounts or the flat keys (imap_server, smtp_server, ...), not both"})
		return
	}
	acct := AccountConfig{Name: "default"}
	if c.IMAPServer != "" {
		acct.IMAP = &IMAPConfig{Host: c.IMAPServer, Port: c.IMAPPort, Username: c.Username, Password: c.Password, PasswordFile: c.PasswordFile, PollInterval: c.PollInterval,
			AllowPlaintextAuth: c.AllowPlaintextAuth}
		if c.PollInterval != 0 {
			acct.IMAP.Mode = "poll"
		}
		if c.IMAPPort == 143 {
			acct.IMAP.TLS = "starttls"
		}
	}
	if c.SMTPServer != "" {
		acct.SMTP = &SMTPConfig{Host: c.SMTPServer, Port: c.SMTPPort, Username: c.Username, Password: c.Password, PasswordFile: c.PasswordFile,
			AllowPlaintextAuth: c.AllowPlaintextAuth}
		switch c.SMTPPort {
		case 465:
			acct.SMTP.TLS = "implicit"
		case 25:
			acct.SMTP.TLS = "none"
		}
	}
	c.Accounts = []AccountConfig{acct}
}

// Defaults fills in the receiver's and each account's defaults.
func (c *Config) Defaults() {
	r := &c.Receiver
	if r.Hostname == "" {
		r.Hostname = "localhost"
	}
	if r.MaxSessions == 0 {
		r.MaxSessions = 100
	}
	if r.MaxSessionsPerIP == 0 {
		r.MaxSessionsPerIP = 10
	}
	if r.MaxSessionTime == 0 {
		r.MaxSessionTime = confkit.Duration(10 * time.Minute)
	}
	if r.ReadTimeout == 0 {
		r.ReadTimeout = confkit.Duration(5 * time.Minute)
	}
	if r.DedupeWindow == 0 {
		r.DedupeWindow = confkit.Duration(DefaultDedupeWindow)
	}
	for i := range c.Accounts {
		a := &c.Accounts[i]
		if a.IMAP != nil {
			a.IMAP.defaults()
		}
		if a.SMTP != nil {
			a.SMTP.defaults()
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
}

func (im *IMAPConfig) defaults() {
	if im.TLS == "" {
		im.TLS = "implicit"
	}
	if im.Port == 0 {
		im.Port = map[string]int{"implicit": 993}[im.TLS]
		if im.Port == 0 {
			im.Port = 143
		}
	}
	if len(im.Folders) == 0 {
		im.Folders = []string{"INBOX"}
	}
	if im.Mode == "" {
		im.Mode = "idle"
	}
	if im.PollInterval == 0 {
		im.PollInterval = confkit.Duration(60 * time.Second)
	}
	if im.Auth == "" {
		im.Auth = "plain"
	}
	if im.SentFolder == "" {
		im.SentFolder = "Sent"
	}
}

func (sm *SMTPConfig) defaults() {
	if sm.TLS == "" {
		sm.TLS = "starttls"
	}
	if sm.Port == 0 {
		sm.Port = map[string]int{"implicit": 465, "starttls": 587}[sm.TLS]
		if sm.Port == 0 {
			sm.Port = 25
		}
	}
	if sm.Auth == "" {
		sm.Auth = "plain"
		if sm.Username == "" {
			sm.Auth = "none"
		}
	}
}

func usernameOf(i *IMAPConfig) string {
	if i == nil {
		return ""
	}
	return i.Username
}

func usernameOfSMTP(s *SMTPConfig) string {
	if s == nil {
		return ""
	}
	return s.Username
}
