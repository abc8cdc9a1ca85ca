package daemon

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

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/mailbox"
)

// Unit is a systemd unit that runs the service.
type Unit struct {
	name string
	user bool // the user's manager (systemctl --user)
}

func (u Unit) args(verb ...string) []string {
	if u.user {
		return append([]string{"--user"}, verb...)
	}
	return verb
}

// SystemdUnit says whether systemd runs the workspace's service, and as
// which unit: the one courier.systemd.unit names, else the unit whose
// main process is the running service (from its cgroup, checked with
// systemctl). A service `courier start` ran is no unit's main process,
// even when start ran inside one.
func (d *Daemon) SystemdUnit(ctx context.Context) (Unit, bool, error) {
	cfg := d.Config
	if u := cfg.Courier.Systemd.Unit; u != "" {
		return Unit{name: u, user: cfg.Courier.Systemd.User}, true, nil
	}
	if !mailbox.Initialized(d.Root) {
		return Unit{}, false, nil
	}
	h, err := Probe(LockPath(d.Root))
	if err != nil || !h.Held || h.PID == 0 {
		return Unit{}, false, nil
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", h.PID))
	if err != nil {
		// Another user's process under ProtectProc=invisible: stop says
		// what it can do; the config key makes it systemd's.
		return Unit{}, false, nil
	}
	u, ok := unitOfCgroup(string(cg))
	if !ok {
		return Unit{}, false, nil
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		return Unit{}, false, nil
	}
	out, err := exec.CommandContext(ctx, "systemctl", u.args("show", "--property=MainPID", "--value", u.name)...).Output()
	if err != nil {
		return Unit{}, false, nil
	}
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(out))); pid != h.PID {
		return Unit{}, false, nil
	}
	return u, true, nil
}

// unitOfCgroup returns the service unit of a /proc/PID/cgroup (cgroup v2:
// "0::/system.slice/courier.service"; v1: the name=systemd line), if the
// process is in one: a scope (a login session, a terminal's) is not.
func unitOfCgroup(cg string) (Unit, bool) {
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
					return Unit{}, false
				}
				continue
			}
			if strings.HasPrefix(p, "user@") {
				return Unit{}, false // the user manager itself, not a unit of it
			}
			user := slices.ContainsFunc(parts[:i], func(s string) bool { return strings.HasPrefix(s, "user@") })
			return Unit{name: p, user: user}, true
		}
	}
	return Unit{}, false
}

// Systemctl runs `systemctl VERB UNIT`, saying so, after checking the
// unit's state as start and stop do without systemd: starting an active
// unit is a Conflict, stopping an inactive one says it is not running
// (NoService).
func (d *Daemon) Systemctl(ctx context.Context, u Unit, verb string) error {
	fmt.Fprintf(d.Stdout, "courier runs under systemd as %s: systemctl %s\n", u.name, strings.Join(u.args(verb, u.name), " "))
	state, _ := d.systemctlOutput(ctx, u, "is-active", u.name)
	active := state == "active" || state == "activating" || state == "reloading"
	switch {
	case verb == "start" && active:
		return fault.Wrap(fault.Conflict, fmt.Errorf("the service is already running (%s is %s%s)", u.name, state, d.mainPID(ctx, u)))
	case (verb == "stop" || verb == "reload") && !active:
		return fault.Wrap(fault.NoService, fmt.Errorf("the service is not running (%s is %s)", u.name, orUnknown(state)))
	}
	if err := d.systemctl(ctx, u, verb, u.name); err != nil {
		return fault.Wrap(fault.Unavailable, fmt.Errorf("systemctl %s %s: %w (see journalctl -u %s)", verb, u.name, err, u.name))
	}
	if verb == "stop" {
		fmt.Fprintln(d.Stdout, "courier stopped")
	} else {
		fmt.Fprintf(d.Stdout, "courier %sed%s\n", verb, d.mainPID(ctx, u))
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
func (d *Daemon) mainPID(ctx context.Context, u Unit) string {
	out, err := d.systemctlOutput(ctx, u, "show", "--property=MainPID", "--value", u.name)
	if pid, _ := strconv.Atoi(out); err == nil && pid > 0 {
		return fmt.Sprintf(" (pid %d)", pid)
	}
	return ""
}

func (d *Daemon) systemctlOutput(ctx context.Context, u Unit, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "systemctl", u.args(args...)...)
	cmd.Stdout = &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// systemctl runs systemctl with the command line's streams: its own
// messages (and polkit's questions) reach the user.
func (d *Daemon) systemctl(ctx context.Context, u Unit, args ...string) error {
	cmd := exec.CommandContext(ctx, "systemctl", u.args(args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = d.Stdin, d.Stdout, d.Stderr
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
func (d *Daemon) journalctl(ctx context.Context, u Unit, n int, follow bool) error {
	args := []string{"-u", u.name, "-n", strconv.Itoa(n)}
	if u.user {
		args = []string{"--user-unit", u.name, "-n", strconv.Itoa(n)}
	}
	if follow {
		args = append(args, "-f")
	} else {
		args = append(args, "--no-pager")
	}
	fmt.Fprintf(d.Stderr, "courier runs under systemd as %s: journalctl %s\n", u.name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "journalctl", args...)
	cmd.Stdout, cmd.Stderr = d.Stdout, d.Stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while following: the normal end
		}
		return fault.Wrap(fault.Unavailable, fmt.Errorf("journalctl: %w", err))
	}
	return nil
}
