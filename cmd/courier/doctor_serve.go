package main

// doctor's checks of what serve will do with the config: a provider left
// off by omission, hooks that cannot run, and a running service whose
// config is not the file's.

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/service"
)

// doctorServe reports, on cfg and on the running service's report rep
// (live), what serve would meet.
func (a *app) doctorServe(cfg *config.Config, rep service.Report, live bool, report func(string, error, string)) {
	// A section with settings but no enabled key is off: a hand-written
	// config means it on far more often than not. A failure, not a
	// warning: nothing else would say that the provider does not run,
	// and enabled: false says "off on purpose" in two words.
	for _, key := range cfg.Unenabled() {
		section := strings.TrimSuffix(key, ".enabled")
		report("enabled", fmt.Errorf("%s has settings but no enabled key, so the provider is off: set %s: true (or false, if it is off on purpose)", section, key), "")
	}
	for _, h := range cfg.Courier.Notify {
		report("hook "+h.Name, checkHook(h, a.root), hookTarget(h))
	}
	if live {
		report("service config", checkRunningConfig(cfg, rep), "the service runs this file's config")
	}
}

// checkHook says whether hook h can run: its command exists and is
// executable (a relative one is looked up from the workspace, where the
// hooks run, or on PATH), or its URL is an absolute http(s) URL.
func checkHook(h config.Hook, root string) error {
	if h.URL != "" {
		u, err := url.Parse(h.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url %q is not an http(s) URL with a host", h.URL)
		}
		return nil
	}
	if len(h.Exec.Argv) == 0 {
		return errors.New("has neither exec nor url")
	}
	name := h.Exec.Argv[0]
	if h.Shell {
		name = "/bin/sh"
	}
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(root, name)
		}
		fi, err := os.Stat(name)
		switch {
		case err != nil:
			return fmt.Errorf("command %s: %w (the hook would fail at every call)", name, errors.Unwrap(err))
		case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
			return fmt.Errorf("command %s is not executable: chmod +x %s", name, name)
		}
		return nil
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("command %s is not on PATH (the hook would fail at every call)", name)
	}
	return nil
}

func hookTarget(h config.Hook) string {
	if h.URL != "" {
		return h.URL
	}
	return strings.Join(h.Exec.Argv, " ")
}

// checkRunningConfig compares the config the running service runs with
// the file's, by their hashes: a file edited since the service started
// (or last reloaded) is not what runs.
func checkRunningConfig(cfg *config.Config, rep service.Report) error {
	switch {
	case rep.Config == nil:
		return nil // a service too old to say
	case rep.Config.Hash != cfg.Hash:
		return errors.New("the service runs an older config: restart or reload (`courier reload`)")
	case rep.Reload != nil && len(rep.Reload.NeedsRestart) > 0:
		return fmt.Errorf("the service runs this file's config, but %s changed since it started and needs a restart (`courier restart`)", strings.Join(rep.Reload.NeedsRestart, ", "))
	}
	return nil
}
