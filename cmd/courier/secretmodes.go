package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
)

// checkSecretModes refuses to start a process that holds the secrets
// (serve, fetch) when another user of the machine could read them: the
// config file with secrets written into it (config.InlineSecrets), or a
// *_file secret or courier.mcp.token_file, readable by others. doctor
// reported it, but nothing made anyone run doctor; a config left 0644 by
// an editor or by `courier init` under umask 022 exposed the password to
// every account on the host. Exit 78, naming the file and the chmod to
// run.
func checkSecretModes(cfg *config.Config, root string) error {
	bad := readableSecrets(cfg, root)
	if len(bad) == 0 {
		return nil
	}
	return fault.Wrap(fault.Config, fmt.Errorf("refusing to start: %s", strings.Join(bad, "; ")))
}

// readableSecrets names the config file when it holds secrets and every
// user can read it, and each secret file every user can read, with the
// chmod to run: what serve and fetch refuse to start on and doctor
// fails, in the same words.
func readableSecrets(cfg *config.Config, root string) []string {
	var bad []string
	if cfg.Path != "" {
		if fi, err := os.Stat(cfg.Path); err == nil && fi.Mode().Perm()&0o004 != 0 {
			if keys, err := cfg.InlineSecrets(); err == nil && len(keys) > 0 {
				bad = append(bad, fmt.Sprintf("%s holds secrets (%s) and every user can read it: run `chmod o-rwx %s` (or move them to *_file or ${NAME})",
					cfg.Path, strings.Join(keys, ", "), cfg.Path))
			}
		}
	}
	for _, f := range secretFiles(cfg, root) {
		if fi, err := os.Stat(f); err == nil && fi.Mode().Perm()&0o004 != 0 {
			bad = append(bad, fmt.Sprintf("secret file %s is readable by every user: run `chmod o-rwx %s`", f, f))
		}
	}
	return bad
}
