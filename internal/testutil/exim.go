//go:build unix

package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EximEnv names the environment variable that gives the path of an exim
// binary. Debian installs one MTA at a time (exim4 and postfix conflict),
// so scripts/test.sh unpacks exim4-daemon-light's binary without
// installing it and names it here; an exim or exim4 in PATH serves too.
const EximEnv = "COURIER_EXIM"

// Exim is a private Exim daemon in front of the service: its own
// configuration, spool and logs under Dir, SMTP on a free 127.0.0.1 port.
// Start one with StartExim. It runs as root with -C (Exim then keeps no
// privilege it would not have anyway) and delivers as its compiled-in
// user, which StartExim creates when missing (Debian's is Debian-exim).
type Exim struct {
	// Dir holds exim.conf, spool/ and log/ (mainlog, rejectlog, paniclog).
	Dir string

	bin    string
	port   int
	marker string
	proc   *groupProc
}

// EximOptions are the parts of the configuration a test gives: the rest
// is a daemon on 127.0.0.1 that accepts mail for Domains from anyone and
// retries a deferred delivery every 2 s.
type EximOptions struct {
	Domains    string // the relay_to_domains domain list, e.g. "agent.example.com"
	Routers    string // the routers section, after "begin routers"
	Transports string // the transports section, after "begin transports"
}

// StartExim starts Exim for t and stops it in t.Cleanup. It skips the
// test when there is no exim binary (see EximEnv) or the test does not run
// as root, or fails it when COURIER_REQUIRE_SERVERS=1.
func StartExim(t testing.TB, opts EximOptions) *Exim {
	t.Helper()
	e := &Exim{bin: os.Getenv(EximEnv)}
	skip := func(msg string) {
		t.Helper()
		if os.Getenv(RequireServersEnv) == "1" {
			t.Fatalf("%s, and %s=1 forbids skipping", msg, RequireServersEnv)
		}
		t.Skip(msg)
	}
	for _, name := range []string{"exim4", "exim"} {
		if e.bin == "" {
			e.bin, _ = exec.LookPath(name)
		}
	}
	if e.bin == "" {
		skip("testutil: no exim: set " + EximEnv + " to an exim binary (scripts/test.sh unpacks Debian's exim4-daemon-light)")
	}
	if os.Geteuid() != 0 {
		skip("testutil: the private Exim runs only as root")
	}
	if err := openToAll(e.bin); err != nil {
		t.Fatalf("testutil: exim at %s: %v: Exim re-executes itself as its own user, which then cannot (unpack it under /var/cache, as scripts/test.sh does)", e.bin, err)
	}
	e.Dir = serverDir(t, "courier-exim-")
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			t.Logf("exim in %s; its log:\n%s", e.Dir, tail(e.Log(), 30))
		}
	})
	onFreePort(t, "exim", func(port int) error {
		e.port = port
		return e.start(opts)
	})
	return e
}

// openToAll reports a folder on the way to path that other users cannot
// pass through.
func openToAll(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("folder %s is closed to other users (mode %v)", dir, fi.Mode().Perm())
		}
		if dir == "/" {
			return nil
		}
	}
}

// Addr returns the daemon's "127.0.0.1:PORT".
func (e *Exim) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.port)) }

func (e *Exim) config(opts EximOptions) string {
	return fmt.Sprintf(`exim_path = %[1]s
primary_hostname = %[2]s
spool_directory = %[3]s/spool
log_file_path = %[3]s/log/%%slog
pid_file_path = %[3]s/exim.pid
local_interfaces = 127.0.0.1
daemon_smtp_ports = %[4]d
tls_advertise_hosts =
keep_environment =
domainlist relay_to_domains = %[5]s
acl_smtp_rcpt = acl_check_rcpt

begin acl
acl_check_rcpt:
  accept domains = +relay_to_domains
  deny   message = relay not permitted

begin routers
%[6]s
begin transports
%[7]s
begin retry
*   *   F,1h,2s
`, e.bin, e.marker, e.Dir, e.port, opts.Domains, opts.Routers, opts.Transports)
}

// eximUser matches Exim's complaint that its compiled-in user is missing.
var eximUser = regexp.MustCompile(`failed to find uid for user name "([^"]+)"`)

func (e *Exim) start(opts EximOptions) error {
	var id [6]byte
	rand.Read(id[:])
	e.marker = "exim-" + hex.EncodeToString(id[:]) + ".test"
	conf := filepath.Join(e.Dir, "exim.conf")
	if err := os.WriteFile(conf, []byte(e.config(opts)), 0o644); err != nil {
		return err
	}
	// Exim checks its configuration (-bV) once its user exists.
	out, err := exec.Command(e.bin, "-C", conf, "-bV").CombinedOutput()
	if m := eximUser.FindSubmatch(out); err != nil && m != nil {
		if err := ensureUser(string(m[1])); err != nil {
			return err
		}
		out, err = exec.Command(e.bin, "-C", conf, "-bV").CombinedOutput()
	}
	if err != nil {
		return fmt.Errorf("exim -bV: %v: %s", err, out)
	}
	owner, err := e.owner()
	if err != nil {
		return err
	}
	for _, d := range []string{"spool", "log"} {
		p := filepath.Join(e.Dir, d)
		if err := os.MkdirAll(p, 0o750); err != nil {
			return err
		}
		if err := owner.chown(p); err != nil {
			return err
		}
	}
	// -bdf: the daemon stays the test's child, in a process group of its
	// own that Stop ends whole; -q2s: a queue run every 2 s.
	proc, err := startGroup(filepath.Join(e.Dir, eximPIDFile), e.bin, "-C", conf, "-bdf", "-q2s")
	if err != nil {
		return err
	}
	e.proc = proc
	err = waitGreeting(e.Addr(), e.marker, 20*time.Second, proc.gone)
	if err != nil {
		e.stop()
		if strings.Contains(proc.output.String()+e.Log(), "ddress already in use") {
			return errPortInUse
		}
		return fmt.Errorf("%v\n%s%s", err, proc.output.String(), tail(e.Log(), 20))
	}
	return nil
}

// owner is the user Exim runs as (its exim_user).
func (e *Exim) owner() (account, error) {
	out, err := exec.Command(e.bin, "-C", filepath.Join(e.Dir, "exim.conf"), "-bP", "exim_user").CombinedOutput()
	if err != nil {
		return account{}, fmt.Errorf("exim -bP exim_user: %v: %s", err, out)
	}
	_, name, _ := strings.Cut(strings.TrimSpace(string(out)), "=")
	u, err := user.Lookup(strings.TrimSpace(name))
	if err != nil {
		return account{}, fmt.Errorf("exim's user: %v (exim -bP said %q)", err, out)
	}
	return toAccount(u, true)
}

// ensureUser makes the system user name (and its group) unless it exists.
func ensureUser(name string) error {
	if _, err := user.Lookup(name); err == nil {
		return nil
	}
	out, err := exec.Command("useradd", "--system", "--no-create-home", "--user-group",
		"--shell", "/usr/sbin/nologin", "--comment", "Courier test Exim", name).CombinedOutput()
	if err != nil {
		if _, lerr := user.Lookup(name); lerr == nil { // another test process made it
			return nil
		}
		return fmt.Errorf("useradd %s: %v: %s", name, err, out)
	}
	return nil
}

// Log is Exim's main log so far, then its panic log, without the line
// each process run with -C writes ("exim user lost privilege for using
// -C option").
func (e *Exim) Log() string {
	main, _ := os.ReadFile(filepath.Join(e.Dir, "log", "mainlog"))
	panicked, _ := os.ReadFile(filepath.Join(e.Dir, "log", "paniclog"))
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(main)+string(panicked), "\n") {
		if !strings.HasSuffix(strings.TrimSpace(line), "lost privilege for using -C option") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// Queued returns how many messages wait in the queue (exim -bpc).
func (e *Exim) Queued(t testing.TB) int {
	t.Helper()
	out, err := exec.Command(e.bin, "-C", filepath.Join(e.Dir, "exim.conf"), "-bpc").Output()
	if err != nil {
		t.Fatalf("testutil: exim -bpc: %v: %s", err, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("testutil: exim -bpc said %q", out)
	}
	return n
}

// Flush delivers what waits in the queue now, retry times regardless
// (exim -qff).
func (e *Exim) Flush(t testing.TB) {
	t.Helper()
	if out, err := exec.Command(e.bin, "-C", filepath.Join(e.Dir, "exim.conf"), "-qff").CombinedOutput(); err != nil {
		t.Fatalf("testutil: exim -qff: %v: %s", err, out)
	}
}

// Stop stops the daemon and the processes it started.
func (e *Exim) Stop() { e.stop() }

func (e *Exim) stop() {
	e.proc.stop()
	e.proc = nil
}
