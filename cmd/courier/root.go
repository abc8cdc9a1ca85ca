package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/approval"
	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/daemon"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/mailbox"
)

// app holds what every command shares: the streams, the global flags, and
// the workspace, config and mailbox, opened on first use.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	rootFlag   string
	configFlag string
	agentFlag  string
	// secrets makes loadConfig resolve secrets; only the commands that
	// connect to providers (serve, fetch, doctor) set it.
	secrets bool

	// providers is the provider table; nil is Courier's (providerTable).
	providers providers.Table

	cfg  *config.Config
	root string
	mb   *mailbox.Mailbox
	dz   *dropzone.Store
	log  *slog.Logger
}

func (a *app) rootCommand(name string) *cobra.Command {
	root := &cobra.Command{
		Use:   name,
		Short: "Courier connects agents to email, Lark and Slack through a filesystem mailbox",
		Long: `Courier connects agents to email, Lark and Slack through a protected
filesystem mailbox: inbound messages are Markdown files under
.monoco/mailbox/inbound/<provider>/, drafts are queued with ` + "`send`" + `.

Exit codes: 0 ok, 1 not found, 2 claim conflict, 3 service needed but not
running, 4 timeout, 64 usage, 65 invalid input, 66 missing input, 69
service unavailable, 70 internal error, 77 no permission to use the
service's socket, 78 bad configuration.

While the service runs it is the only writer of the mailbox: send, claim,
done and fail go to it over its socket (courier.socket.path), which tells
it the caller's user.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&a.rootFlag, "root", "C", "", "workspace (the folder holding .monoco/); default: found upward from the current folder, or $COURIER_ROOT")
	pf.StringVar(&a.configFlag, "config", "", "config file (default <workspace>/.monoco/config/courier.yaml, or $COURIER_CONFIG)")
	pf.StringVar(&a.agentFlag, "agent", "", "agent identity for claims (default $COURIER_AGENT, else the user name)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return fault.Wrap(fault.Usage, err) })
	root.AddGroup(&cobra.Group{ID: "mail", Title: "Mailbox:"}, &cobra.Group{ID: "service", Title: "Service:"}, &cobra.Group{ID: "maint", Title: "Maintenance:"})
	for _, c := range []*cobra.Command{a.listCommand(), a.readCommand(), a.sendCommand(), a.claimCommand(), a.doneCommand(),
		a.failCommand(), a.threadCommand(), a.contextCommand(), a.watchCommand(), a.mcpCommand()} {
		c.GroupID = "mail"
		root.AddCommand(c)
	}
	for _, c := range append(a.serviceCommands(), a.daemonCommands()...) {
		c.GroupID = "service"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.initCommand(), a.validateCommand(), a.reindexCommand(), a.hooksCommand(), a.outboundCommand(), a.pruneCommand(), a.backupCommand()} {
		c.GroupID = "maint"
		root.AddCommand(c)
	}
	for _, c := range a.approvalCommands() {
		c.GroupID = "maint"
		root.AddCommand(c)
	}
	root.AddCommand(a.versionCommand())
	root.AddCommand(a.slackCommand())
	return root
}

// loadConfig finds the workspace and reads the config, once.
func (a *app) loadConfig() (*config.Config, error) {
	if a.cfg != nil {
		return a.cfg, nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	cfgPath := a.configFlag
	if cfgPath == "" {
		cfgPath = os.Getenv("COURIER_CONFIG")
	}
	rootDir := a.rootFlag
	if rootDir == "" {
		rootDir = os.Getenv("COURIER_ROOT")
	}
	var cfg *config.Config
	switch {
	case cfgPath != "":
		cfg, err = config.Load(cfgPath, config.LoadOptions{Secrets: a.secrets, Adapters: a.providerTable().Adapters()})
		if err != nil {
			return nil, configError(err, cfgPath)
		}
		if rootDir == "" {
			rootDir = cfg.RootDir(cwd)
		}
	default:
		if rootDir == "" {
			rootDir = findWorkspace(cwd)
		}
		cfg, err = config.Load(mailbox.Layout{Root: rootDir}.Config(), config.LoadOptions{AllowMissing: true, Secrets: a.secrets, Adapters: a.providerTable().Adapters()})
		if err != nil {
			return nil, configError(err, mailbox.Layout{Root: rootDir}.Config())
		}
	}
	abs, err := filepath.Abs(rootDir)
	if err != nil {
		return nil, err
	}
	a.cfg, a.root = cfg, abs
	return cfg, nil
}

// findWorkspace walks up from dir to the first folder holding .monoco/; it
// returns dir itself when there is none (so `init` makes one there).
func findWorkspace(dir string) string {
	for d := dir; ; {
		if fi, err := os.Stat(filepath.Join(d, ".monoco")); err == nil && fi.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// Mailbox opens the workspace's mailbox (once).
func (a *app) Mailbox() (*mailbox.Mailbox, error) {
	if a.mb != nil {
		return a.mb, nil
	}
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	mb, err := mailbox.Open(a.root, &mailbox.Options{
		Logger:          a.logger(),
		ClaimTimeout:    cfg.Courier.Mailbox.ClaimTimeout.D(),
		MaxClaimTimeout: cfg.Courier.Claims.MaxTimeout.D(),
		MaxFailures:     cfg.Courier.Mailbox.MaxFailures,
		// An agent in the workspace's group reads a mailbox only the
		// service writes (package agents).
		ReadOnly: agents.ReadOnly(a.root),
		// The approval gate decides as a draft is queued.
		Hold: approval.NewPolicy(&cfg.Courier.Outbound).Hold,
	})
	if errors.Is(err, mailbox.ErrNotInitialized) {
		return nil, fault.Wrap(fault.NoInput, fmt.Errorf("no mailbox in %s: run `courier init` there, or point --root at the workspace", a.root))
	}
	if errors.Is(err, mailbox.ErrReadOnlyRebuild) {
		return nil, fault.Wrap(fault.NoService, err)
	}
	if err != nil {
		return nil, err
	}
	a.mb = mb
	return mb, nil
}

// Dropzone opens the workspace's dropzone (once), held to limits.max_artifact_bytes.
func (a *app) Dropzone() (*dropzone.Store, error) {
	if a.dz != nil {
		return a.dz, nil
	}
	if _, err := a.Mailbox(); err != nil {
		return nil, err
	}
	dz, err := dropzone.Open(mailbox.Layout{Root: a.root}.Dropzone(), &dropzone.Options{MaxSize: a.cfg.Courier.Limits.MaxArtifactBytes})
	if err != nil {
		return nil, err
	}
	a.dz = dz
	return dz, nil
}

// dropzoneFor opens the dropzone for the service: raw inbound messages
// are stored there too, so its limit is the larger of the artifact and
// message limits (attachments are held to the artifact limit as they are
// parsed).
func (a *app) dropzoneFor(l confkit.Limits) (*dropzone.Store, error) {
	if a.dz != nil {
		return a.dz, nil
	}
	dz, err := dropzone.Open(mailbox.Layout{Root: a.root}.Dropzone(), &dropzone.Options{MaxSize: max(l.MaxArtifactBytes, l.MaxMessageBytes)})
	if err != nil {
		return nil, err
	}
	a.dz = dz
	return dz, nil
}

// openExclusive prepares the workspace for the one process that syncs it
// (`serve`, `fetch`): the layout, the single-instance lock, the mailbox and
// the service's dropzone. The caller releases the lock.
func (a *app) openExclusive(cfg *config.Config) (*daemon.Lock, *mailbox.Mailbox, *dropzone.Store, error) {
	if err := mailbox.Init(a.root); err != nil {
		return nil, nil, nil, fault.Wrap(fault.CantCreate, err)
	}
	lock, err := daemon.AcquireLock(daemon.LockPath(a.root))
	if errors.Is(err, daemon.ErrLocked) {
		return nil, nil, nil, fault.Wrap(fault.Conflict, err)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	mb, err := a.Mailbox()
	if err == nil {
		var dz *dropzone.Store
		if dz, err = a.dropzoneFor(cfg.Courier.Limits); err == nil {
			return lock, mb, dz, nil
		}
	}
	lock.Release()
	return nil, nil, nil, err
}

func (a *app) logger() *slog.Logger {
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return a.log
}

func (a *app) close() {
	if a.mb != nil {
		a.mb.Close()
	}
	if a.dz != nil {
		a.dz.Close()
	}
}

// explicitAgent is the agent name the command line was given (--agent,
// $COURIER_AGENT), or "" for the default: the user's name, which the
// service takes from the socket.
func (a *app) explicitAgent() string {
	if a.agentFlag != "" {
		return a.agentFlag
	}
	return os.Getenv("COURIER_AGENT")
}

// userAgent is the name claims are made under directly when the command
// line was given none: the user's.
func userAgent() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if v := os.Getenv("USER"); v != "" {
		return v
	}
	return "agent"
}

// local is the workspace's writing verbs as the command line runs them
// (package agents): through the service while it runs, directly without.
func (a *app) local() (*agents.Local, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	return &agents.Local{Root: a.root, Config: cfg, User: userAgent(), Workspace: a}, nil
}

// Providers builds the providers of the config to resolve drafts: Local
// asks for them when it acts directly.
func (a *app) Providers() (providers.Set, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	set, err := a.providerTable().Build(cfg, providers.Env{})
	return set, fault.Wrap(fault.Config, err)
}

// configError is a config that cannot be read. Permission denied is the
// workspace telling this user it is not one of its agents: say which group
// they are in (exit 77) rather than call the config bad.
func configError(err error, path string) error {
	if errors.Is(err, fs.ErrPermission) {
		u, g := agents.UserName(), agents.GroupOf(path)
		return fault.Wrap(fault.NoPermission, fmt.Errorf("%w: user %s may not read this workspace; its agents are in group %s (usermod -aG %s %s, then log in again)", err, u, g, g, u))
	}
	return fault.Wrap(fault.Config, err)
}

// ids returns the ids named on the command line; "-" reads more from
// standard input, one per line (blank lines and # comments skipped).
func (a *app) ids(args []string) ([]string, error) {
	var out []string
	for _, arg := range args {
		if arg != "-" {
			out = append(out, arg)
			continue
		}
		sc := bufio.NewScanner(a.stdin)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			// Accept the first field, so that `list --format compact` pipes too.
			out = append(out, strings.Fields(line)[0])
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, usageError("no message id given")
	}
	return out, nil
}
