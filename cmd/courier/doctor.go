package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/internal/providers"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

func (a *app) doctorCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the config, the layout, permissions, the database and each adapter's connection and credentials",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format, []string{"text", "json"}); err != nil {
				return err
			}
			checks := a.doctor(cmd.Context(), format == "text")
			failed := 0
			for _, c := range checks {
				if !c.OK {
					failed++
				}
			}
			switch {
			case format == "json":
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"ok": failed == 0, "failed": failed, "checks": checks}); err != nil {
					return err
				}
			case failed > 0:
				fmt.Fprintf(a.stdout, "\n%d check(s) failed.\n", failed)
			default:
				fmt.Fprintln(a.stdout, "\nall checks passed.")
			}
			switch {
			case failed > 0 && !checks[0].OK && checks[0].Check == "config":
				// A config the service would refuse: what every verb
				// exits with for it.
				return silentExit(fault.Config)
			case failed > 0:
				return silentExit(fault.Unavailable)
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text or json")
	return c
}

// doctorCheck is the outcome of one check.
type doctorCheck struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"` // what was found, or what is wrong and how to fix it
	// Warning marks a check that passed with something to look at (a
	// weak secret): printed with "!", it fails nothing.
	Warning bool `json:"warning,omitempty"`
}

// doctor runs every check, printing one line each as it goes when print is
// set, and returns their outcomes.
func (a *app) doctor(ctx context.Context, print bool) []doctorCheck {
	var checks []doctorCheck
	report := func(name string, err error, ok string) {
		c := doctorCheck{Check: name, OK: err == nil, Detail: ok}
		mark := "✓"
		if err != nil {
			c.Detail, mark = mailview.OneLine(err.Error()), "✗"
		}
		checks = append(checks, c)
		if print {
			fmt.Fprintf(a.stdout, "%s %-22s %s\n", mark, name, c.Detail)
		}
	}
	// The secrets first: they may live where only the service can read
	// them (a systemd credential). If so, say how to check them and go on
	// with what can be checked without them.
	a.secrets = true
	cfg, err := a.loadConfig()
	if err != nil {
		report("config", err, "")
		a.secrets, a.cfg = false, nil
		if cfg, err = a.loadConfig(); err != nil {
			return checks
		}
		const hint = "secrets are checked inside the service's environment, e.g.: systemd-run -P --wait -p User=courier -p LoadCredential=... courier doctor"
		checks[len(checks)-1].Detail += " (" + hint + ")"
		if print {
			fmt.Fprintln(a.stdout, "  ("+hint+")")
		}
	} else {
		report("config", nil, configName(cfg))
	}
	l := mailbox.Layout{Root: a.root}
	report("layout", checkLayout(l), l.Mailbox()+" (every folder present and writable)")
	for _, msg := range checkPermissions(cfg, l) {
		report("permissions", errors.New(msg), "")
	}
	for _, msg := range weakSecrets(cfg) {
		checks = append(checks, doctorCheck{Check: "secrets", OK: true, Warning: true, Detail: msg})
		if print {
			fmt.Fprintf(a.stdout, "! %-22s %s\n", "secrets", msg)
		}
	}
	if mb, err := a.Mailbox(); err != nil {
		report("database", err, "")
	} else {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := mb.Check(cctx)
		cancel()
		report("database", err, "integrity ok: "+l.DB())
	}
	rep, live := a.fetchHealth(ctx, cfg.Courier.HTTP.Listen)
	if live {
		report("service", nil, fmt.Sprintf("running (pid %d), health %s at http://%s", rep.PID, rep.Status, cfg.Courier.HTTP.Listen))
		// What the service itself meets (a token revoked while it runs),
		// which doctor's own checks may not (run without the secrets).
		for _, d := range degradedAdapters(rep) {
			report(d.name+" (service)", errors.New(d.String()), "")
		}
	} else {
		report("service", nil, "not running (`courier start` starts it)")
		// serve would listen there: an address that cannot be bound
		// (no such interface, a name that does not resolve, a port
		// another program holds) fails here rather than at start.
		report("http listen", checkListen(ctx, cfg.Courier.HTTP.Listen), cfg.Courier.HTTP.Listen+" can be bound")
	}
	a.doctorServe(cfg, rep, live, report) // doctor_serve.go
	a.doctorAdapters(ctx, cfg, live, rep.PID, report)
	return checks
}

// doctorAdapters checks the outbound queues against the providers, and
// runs every provider's checks (a listener the running service, pid,
// holds is its).
func (a *app) doctorAdapters(ctx context.Context, cfg *config.Config, live bool, pid int, report func(string, error, string)) {
	set, err := a.providerTable().Build(cfg, providers.Env{Log: a.logger()})
	if err != nil {
		report("adapters", err, "")
		return
	}
	if mb, err := a.Mailbox(); err == nil {
		for _, q := range a.stuckDrafts(ctx, mb, set) {
			report("outbound/"+string(q.provider), q.err, "")
		}
	}
	provChecks := set.Checks()
	if len(provChecks) == 0 {
		report("adapters", nil, "none enabled")
	}
	for _, c := range provChecks {
		if c.Listen && live {
			report(c.Name, nil, fmt.Sprintf("listening in the running service (pid %d)", pid))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.Run(cctx)
		cancel()
		report(c.Name, err, "ok")
	}
}

func checkLayout(l mailbox.Layout) error {
	if !mailbox.Initialized(l.Root) {
		return fmt.Errorf("no mailbox in %s: run `courier init --root %s`", l.Root, l.Root)
	}
	var missing []string
	dirs := []string{l.Tmp(), l.State(), l.Dropzone()}
	for _, b := range mailbox.Boxes {
		for _, p := range schema.Implemented {
			dirs = append(dirs, l.Dir(b, p))
		}
	}
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			missing = append(missing, l.Rel(d))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing folders %s: run `courier init` to create them", strings.Join(missing, ", "))
	}
	writable := []string{l.Tmp(), l.State(), l.Dropzone()}
	for _, p := range schema.Implemented {
		writable = append(writable, l.Dir(mailbox.BoxInbound, p))
	}
	for _, d := range writable {
		f, err := os.CreateTemp(d, ".doctor-*")
		if err != nil {
			return fmt.Errorf("cannot write in %s as this user (%v): the service must own the workspace (chown -R courier: %s)", l.Rel(d), errors.Unwrap(err), l.Monoco())
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}

// checkPermissions looks for secrets others can read and agent-facing files
// that can be written.
func checkPermissions(cfg *config.Config, l mailbox.Layout) []string {
	out := readableSecrets(cfg, l.Root)
	writable := 0
	example := ""
	for _, b := range []mailbox.Box{mailbox.BoxInbound, mailbox.BoxArchive} {
		filepath.WalkDir(filepath.Join(l.Mailbox(), string(b)), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || writable > 0 {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o222 != 0 {
				writable++
				example = l.Rel(p)
			}
			return nil
		})
	}
	if writable > 0 {
		out = append(out, fmt.Sprintf("message files must be read-only (0440), %s is writable: chmod a-w under %s", example, l.Mailbox()))
	}
	return out
}

// weakSecrets names the secrets shorter than confkit.StrongSecretLen: a
// guess away, and redacted from the log only where they stand alone as a
// word (a token "v" would otherwise blank out every v of the log).
func weakSecrets(cfg *config.Config) []string {
	var out []string
	for _, s := range cfg.Secrets() {
		if n := len(s.Secret.Reveal()); n > 0 && n < confkit.StrongSecretLen {
			out = append(out, fmt.Sprintf("%s is weak: %d byte(s), under %d; the log redacts it only where it stands alone as a word: use a long random value", s.Path, n, confkit.StrongSecretLen))
		}
	}
	return out
}

// secretFiles returns the files the config's secrets are read from, each
// once (the flat email keys' password_file is also their account's), and
// courier.mcp.token_file (which Load made absolute, from the config's
// folder; root is for a config without a file): the bearer token of /mcp
// answers all mail as much as any provider's.
func secretFiles(cfg *config.Config, root string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range cfg.Secrets() {
		f := s.File
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) && cfg.Path != "" {
			f = filepath.Join(filepath.Dir(cfg.Path), f)
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	if f := cfg.Courier.MCP.TokenFile; f != "" {
		if !filepath.IsAbs(f) {
			f = filepath.Join(root, f)
		}
		if !seen[f] {
			out = append(out, f)
		}
	}
	return out
}

// checkListen binds addr and lets it go.
func checkListen(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("courier.http.listen %s cannot be bound: %w", addr, err)
	}
	return l.Close()
}

// stuckDraft is a provider with drafts queued that nothing will deliver.
type stuckDraft struct {
	provider schema.Provider
	err      error
}

// stuckDrafts finds the drafts queued for a provider that cannot send as
// configured (email without SMTP, a provider not enabled): they would
// wait forever, and the agent that wrote them is waiting too.
func (a *app) stuckDrafts(ctx context.Context, mb *mailbox.Mailbox, set providers.Set) []stuckDraft {
	qs, err := mb.Outbound(ctx)
	if err != nil {
		return []stuckDraft{{provider: "", err: err}}
	}
	var out []stuckDraft
	for _, q := range qs {
		if q.Queued == 0 {
			continue
		}
		if why := set.Undelivered(q.Provider); why != "" {
			out = append(out, stuckDraft{q.Provider, fmt.Errorf("%d draft(s) queued that nothing will deliver: %s", q.Queued, why)})
		}
	}
	return out
}
