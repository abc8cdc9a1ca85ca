package main

// Under systemd, start, stop, restart and logs say so and act through
// systemctl and journalctl: a unit's service started or stopped behind
// systemd's back would be restarted by it (Restart=on-failure) or
// reported failed, and its log is in the journal, not in a file.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/mailbox"
)

// unit is a systemd unit that runs the service.
type unit struct {
	name string
	user bool // the user's manager (systemctl --user)
}

func (u unit) args(verb ...string) []string {
	if u.user {
		return append([]string{"--user"}, verb...)
	}
	return verb
}

// systemdUnit says whether systemd runs the workspace's service, and as
// which unit: the one courier.systemd.unit names, else the unit whose
// main process is the running service (from its cgroup, checked with
// systemctl). A service `courier start` ran is no unit's main process,
// even when start ran inside one.
func (a *app) systemdUnit(ctx context.Context, cfg *config.Config) (unit, bool, error) {
	if u := cfg.Courier.Systemd.Unit; u != "" {
		return unit{name: u, user: cfg.Courier.Systemd.User}, true, nil
	}
	if !mailbox.Initialized(a.root) {
		return unit{}, false, nil
	}
	h, err := service.Probe(a.lockPath())
	if err != nil || !h.Held || h.PID == 0 {
		return unit{}, false, nil
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", h.PID))
	if err != nil {
		// Another user's process under ProtectProc=invisible: stop says
		// what it can do; the config key makes it systemd's.
		return unit{}, false, nil
	}
	u, ok := unitOfCgroup(string(cg))
	if !ok {
		return unit{}, false, nil
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		return unit{}, false, nil
	}
	out, err := exec.CommandContext(ctx, "systemctl", u.args("show", "--property=MainPID", "--value", u.name)...).Output()
	if err != nil {
		return unit{}, false, nil
	}
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(out))); pid != h.PID {
		return unit{}, false, nil
	}
	return u, true, nil
}

// unitOfCgroup returns the service unit of a /proc/PID/cgroup (cgroup v2:
// "0::/system.slice/courier.service"; v1: the name=systemd line), if the
// process is in one: a scope (a login session, a terminal's) is not.
func unitOfCgroup(cg string) (unit, bool) {
	sc := bufio.NewScanner(strings.NewReader(cg))
	for sc.Scan() {
		id, rest, _ := strings.Cut(sc.Text(), ":")
		ctrl, path, ok := strings.Cut(rest, ":")
		if !ok || !(id == "0" && ctrl == "") && ctrl != "name=systemd" {
			continue
		}
		parts := strings.Split(strings.Trim(path, "/"), "/")
		// The innermost .service: under the user manager, the path runs
		// through user@UID.service to the user's unit.
		for i := len(parts) - 1; i >= 0; i-- {
			p := parts[i]
			if !strings.HasSuffix(p, ".service") {
				if strings.HasSuffix(p, ".scope") {
					return unit{}, false
				}
				continue
			}
			if strings.HasPrefix(p, "user@") {
				return unit{}, false // the user manager itself, not a unit of it
			}
			user := slices.ContainsFunc(parts[:i], func(s string) bool { return strings.HasPrefix(s, "user@") })
			return unit{name: p, user: user}, true
		}
	}
	return unit{}, false
}

// systemctlVerb runs `systemctl VERB UNIT`, saying so, after checking the
// unit's state as start and stop do without systemd: starting an active
// unit is a conflict (2), stopping an inactive one says it is not running
// (3).
func (a *app) systemctlVerb(ctx context.Context, u unit, verb string) error {
	fmt.Fprintf(a.stdout, "courier runs under systemd as %s: systemctl %s\n", u.name, strings.Join(u.args(verb, u.name), " "))
	state, _ := a.systemctlOutput(ctx, u, "is-active", u.name)
	active := state == "active" || state == "activating" || state == "reloading"
	switch {
	case verb == "start" && active:
		return withCode(exitConflict, fmt.Errorf("the service is already running (%s is %s%s)", u.name, state, a.mainPID(ctx, u)))
	case verb == "stop" && !active:
		return withCode(exitNoService, fmt.Errorf("the service is not running (%s is %s)", u.name, orUnknown(state)))
	}
	if err := a.systemctl(ctx, u, verb, u.name); err != nil {
		return withCode(exitUnavailable, fmt.Errorf("systemctl %s %s: %w (see journalctl -u %s)", verb, u.name, err, u.name))
	}
	if verb == "stop" {
		fmt.Fprintln(a.stdout, "courier stopped")
	} else {
		fmt.Fprintf(a.stdout, "courier %sed%s\n", verb, a.mainPID(ctx, u))
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// mainPID is ", pid N" for the unit's main process, or "".
func (a *app) mainPID(ctx context.Context, u unit) string {
	out, err := a.systemctlOutput(ctx, u, "show", "--property=MainPID", "--value", u.name)
	if pid, _ := strconv.Atoi(out); err == nil && pid > 0 {
		return fmt.Sprintf(" (pid %d)", pid)
	}
	return ""
}

func (a *app) systemctlOutput(ctx context.Context, u unit, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemctl", u.args(args...)...)
	cmd.Stdout = &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// systemctl runs systemctl with the command line's streams: its own
// messages (and polkit's questions) reach the user.
func (a *app) systemctl(ctx context.Context, u unit, args ...string) error {
	cmd := exec.CommandContext(ctx, "systemctl", u.args(args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("exit %d", ee.ExitCode())
		}
		return err
	}
	return nil
}

// journalctl prints the unit's journal: its last n lines, and with follow
// what comes after.
func (a *app) journalctl(ctx context.Context, u unit, n int, follow bool) error {
	args := []string{"-u", u.name, "-n", strconv.Itoa(n)}
	if u.user {
		args = []string{"--user-unit", u.name, "-n", strconv.Itoa(n)}
	}
	if follow {
		args = append(args, "-f")
	} else {
		args = append(args, "--no-pager")
	}
	fmt.Fprintf(a.stderr, "courier runs under systemd as %s: journalctl %s\n", u.name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "journalctl", args...)
	cmd.Stdout, cmd.Stderr = a.stdout, a.stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while following: the normal end
		}
		return withCode(exitUnavailable, fmt.Errorf("journalctl: %w", err))
	}
	return nil
}
