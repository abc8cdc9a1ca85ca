package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireServersEnv names the environment variable that turns a missing
// server program into a test failure instead of a skip. CI sets
// COURIER_REQUIRE_SERVERS=1: a test that silently skips there proves
// nothing.
const RequireServersEnv = "COURIER_REQUIRE_SERVERS"

// MailUser is the system user that owns test mail and runs the test
// servers' unprivileged parts when the tests run as root. It is created
// (useradd --system) when missing.
const MailUser = "couriertest"

// NeedCommand returns the path of the program name, looked up in PATH and
// then in the sbin directories (dovecot and smtp-sink live in /usr/sbin,
// often outside a user's PATH). When it is missing the test is skipped,
// or fails when COURIER_REQUIRE_SERVERS=1. debianPackage names the package
// that provides it, for the message.
func NeedCommand(t testing.TB, name, debianPackage string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := fmt.Sprintf("testutil: %s is not installed (Debian: apt-get install %s)", name, debianPackage)
	if os.Getenv(RequireServersEnv) == "1" {
		t.Fatalf("%s, and %s=1 forbids skipping", msg, RequireServersEnv)
	}
	t.Skip(msg)
	return ""
}

// account is the user that owns the mail and the servers' files.
type account struct {
	name     string
	group    string
	uid, gid int
	root     bool // the tests run as root: chown files to uid, gid
}

var (
	accountOnce sync.Once
	accountVal  account
	accountErr  error
)

// mailAccount returns MailUser, created if missing, when the tests run as
// root, and the current user otherwise (Dovecot and smtp-sink then run as
// that user too).
func mailAccount(t testing.TB) account {
	t.Helper()
	accountOnce.Do(func() { accountVal, accountErr = lookupAccount() })
	if accountErr != nil {
		t.Fatalf("testutil: %v", accountErr)
	}
	return accountVal
}

func lookupAccount() (account, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return account{}, err
		}
		return toAccount(u, false)
	}
	// Test binaries of several packages run at once and may race to
	// create the user; useradd then fails on its lock or because the
	// user exists. Look again until one of them has made it.
	var acct account
	var err error
	if !Poll(10*time.Second, func() bool {
		u, lerr := user.Lookup(MailUser)
		if lerr == nil {
			acct, err = toAccount(u, true)
			return true
		}
		out, addErr := exec.Command("useradd", "--system", "--no-create-home", "--user-group",
			"--shell", "/usr/sbin/nologin", "--comment", "Courier test mail", MailUser).CombinedOutput()
		if addErr != nil { // another process holds /etc/passwd's lock, or made the user
			err = fmt.Errorf("useradd %s: %v: %s", MailUser, addErr, out)
		}
		return false
	}) {
		if err == nil {
			err = fmt.Errorf("user %s still unknown 10 s after useradd made it", MailUser)
		}
		return account{}, err
	}
	return acct, err
}

func toAccount(u *user.User, root bool) (account, error) {
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return account{}, fmt.Errorf("user %s: %v", u.Username, err)
	}
	group := u.Username
	if g, err := user.LookupGroupId(u.Gid); err == nil {
		group = g.Name
	}
	return account{name: u.Username, group: group, uid: uid, gid: gid, root: root}, nil
}

// chown gives path to the account (a no-op unless running as root).
func (a account) chown(path string) error {
	if !a.root {
		return nil
	}
	return os.Lchown(path, a.uid, a.gid)
}

// serverDir makes a directory for one server outside t.TempDir(): the
// servers' unprivileged processes must traverse it, and t.TempDir()'s
// parents are 0700 and owned by root. It also keeps Dovecot's socket
// paths short (a Unix socket path has at most 107 bytes). It is removed
// by t.Cleanup.
func serverDir(t testing.TB, prefix string) string {
	t.Helper()
	sweepOnce.Do(sweepStale)
	dir, err := os.MkdirTemp(serverBase(), prefix)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	return dir
}

// ServerDir makes a folder for what a test shares with a server's
// unprivileged processes (an LMTP socket its MTA connects to, say), which
// cannot reach into t.TempDir(). It is 0755, owned by the test's user,
// removed by t.Cleanup; prefix is one of the servers' ("courier-postfix-",
// ...), so that a test process that dies leaves nothing behind.
func ServerDir(t testing.TB, prefix string) string {
	t.Helper()
	return serverDir(t, prefix)
}

func serverBase() string {
	base := os.TempDir()
	if len(base) > 40 || !traversable(base) {
		base = "/tmp"
	}
	return base
}

// ownerFile, in a server's directory, holds the pid of the test process
// that made it.
const ownerFile = "owner.pid"

// The pid files of a private Postfix's master and Exim's daemon, in their
// directories.
const (
	postfixPIDFile = "master.pid"
	eximPIDFile    = "exim-daemon.pid"
)

var sweepOnce sync.Once

// sweepStale cleans up after test processes that died without running
// their cleanups (a panic, go test -timeout): it stops the servers they
// left running and removes their directories. A server is killed only if
// /proc shows it is still the program started with that directory (a pid
// file may name a recycled pid).
func sweepStale() {
	var dirs []string
	for _, server := range []string{"courier-dovecot-*", "courier-smtp-sink-*", "courier-postfix-*", "courier-exim-*"} {
		more, _ := filepath.Glob(filepath.Join(serverBase(), server))
		dirs = append(dirs, more...)
	}
	for _, dir := range dirs {
		owner := readPID(filepath.Join(dir, ownerFile))
		if owner <= 0 || processExists(owner) {
			continue
		}
		for _, pidFile := range []string{filepath.Join(dir, "run", "master.pid"), filepath.Join(dir, sinkPIDFile), filepath.Join(dir, postfixPIDFile),
			filepath.Join(dir, eximPIDFile)} {
			pid := readPID(pidFile)
			if pid <= 0 {
				continue
			}
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err == nil && strings.Contains(string(cmdline), dir+"/") {
				killGroup(pid)
			}
		}
		os.RemoveAll(dir)
	}
}

// readPID reads a pid file; 0 if there is none.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// processExists reports whether pid is a process (signal 0 reaches it or
// is refused).
func processExists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// traversable reports whether every directory from / to dir may be
// searched by others.
func traversable(dir string) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// The caller starts its server on it and picks another when the bind
// fails: another test may have taken it in between.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// onFreePort calls start with a 127.0.0.1 port that was free a moment
// ago until it returns nil, or fails t (what names the server). Another
// test may take the port before the server binds it: start then returns
// errPortInUse (or an error wrapping it), and another port is tried.
func onFreePort(t testing.TB, what string, start func(port int) error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("testutil: %v", err)
		}
		err = start(port)
		if err == nil {
			return
		}
		if !errors.Is(err, errPortInUse) || attempt == 5 {
			t.Fatalf("testutil: %s: %v", what, err)
		}
	}
}

// FreeAddr returns a 127.0.0.1 address nobody listens on now, for a
// server the test starts next.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// errExited is returned by waitGreeting when the server process is gone.
var errExited = errors.New("server exited")

// waitGreeting polls addr until a connection opens and its first line
// contains marker (a token unique to this server instance, so that a
// stranger who took the port is not mistaken for it), until timeout. exited
// reports whether the server process has died, to stop waiting early.
func waitGreeting(addr, marker string, timeout time.Duration, exited func() bool) error {
	var last, final error
	ok := Poll(timeout, func() bool {
		if exited != nil && exited() {
			final = errExited
			return true
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			last = err
			return false
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			last = err
			return false
		}
		if !strings.Contains(line, marker) {
			final = fmt.Errorf("%s answers %q, not the server just started (port taken by another test?)", addr, strings.TrimSpace(line))
		}
		return true
	})
	if !ok {
		return fmt.Errorf("%s: no greeting within %v: %v", addr, timeout, last)
	}
	return final
}

// waitClosed polls addr until connections are refused, until timeout.
func waitClosed(addr string, timeout time.Duration) error {
	if !Poll(timeout, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}) {
		return fmt.Errorf("%s still accepts connections after %v", addr, timeout)
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n+1 {
		lines = append([]string{"...\n"}, lines[len(lines)-n-1:]...)
	}
	return strings.Join(lines, "")
}

// Buffer is a log or a child's output that may be written from several
// goroutines and read while it is written.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
