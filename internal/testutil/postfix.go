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
	"strconv"
	"strings"
	"testing"
	"time"
)

// Postfix is a private Postfix instance, a real MTA in front of the
// service: its own config directory, queue and log under Dir, smtpd on a
// free 127.0.0.1 port, nothing of the machine's Postfix touched. Start one
// with StartPostfix.
//
// Postfix's master and postfix commands run only as root (they refuse
// anyone else), so StartPostfix skips the test when not root, or fails it
// when COURIER_REQUIRE_SERVERS=1. Its daemons run as Postfix's own
// mail_owner (postfix) and setgid_group (postdrop), which the Debian
// package creates.
type Postfix struct {
	// Dir holds etc/ (main.cf, master.cf and the files of
	// PostfixOptions.Files), spool/ (the queue), lib/ and postfix.log.
	Dir string

	t      testing.TB
	bin    string // the postfix command; postqueue and postmap beside it
	master string
	port   int
	marker string // unique myhostname, in the greeting
	proc   *groupProc
}

// PostfixOptions is what a test adds to the instance's own configuration:
// smtpd on 127.0.0.1 relaying for clients on loopback, the services that
// needs and an lmtp service, no local delivery, anything not routed by
// the test's settings bounced, retries after 2 s (Postfix's default is
// 300 s). Everything else is at Postfix's defaults.
type PostfixOptions struct {
	// Main are main.cf lines, after the instance's own: a parameter set
	// twice takes the last value. $config_directory names Dir/etc.
	Main string
	// Master are master.cf lines, after the instance's own services.
	Master string
	// Files are written to Dir/etc before the start (name → content).
	Files map[string]string
	// Postmap names files of Files to run postmap on (a hash: map).
	Postmap []string
}

// StartPostfix starts a private Postfix for t and stops it, its daemons
// included, in t.Cleanup.
func StartPostfix(t testing.TB, opts PostfixOptions) *Postfix {
	t.Helper()
	p := &Postfix{t: t, bin: NeedCommand(t, "postfix", "postfix")}
	if os.Geteuid() != 0 {
		msg := "testutil: Postfix runs only as root (its master refuses anyone else)"
		if os.Getenv(RequireServersEnv) == "1" {
			t.Fatalf("%s, and %s=1 forbids skipping", msg, RequireServersEnv)
		}
		t.Skip(msg)
	}
	if _, err := user.Lookup("postfix"); err != nil {
		t.Fatalf("testutil: Postfix's user postfix: %v (is the package installed whole?)", err)
	}
	if _, err := user.LookupGroup("postdrop"); err != nil {
		t.Fatalf("testutil: Postfix's group postdrop: %v (is the package installed whole?)", err)
	}
	out, err := exec.Command(p.tool("postconf"), "-d", "-h", "daemon_directory").Output()
	if err != nil {
		t.Fatalf("testutil: postconf -d -h daemon_directory: %v", err)
	}
	p.master = filepath.Join(strings.TrimSpace(string(out)), "master")
	p.Dir = serverDir(t, "courier-postfix-")
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("postfix in %s; its log:\n%s", p.Dir, tail(p.Log(), 30))
		}
	})
	if err := p.prepare(opts); err != nil {
		t.Fatalf("testutil: postfix: %v", err)
	}
	onFreePort(t, "postfix", func(port int) error {
		p.port = port
		return p.start(opts)
	})
	return p
}

// Addr returns smtpd's "127.0.0.1:PORT".
func (p *Postfix) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// ConfigDir is Dir/etc, what postfix -c takes.
func (p *Postfix) ConfigDir() string { return filepath.Join(p.Dir, "etc") }

// prepare makes the directories and writes the files of opts; the queue's
// own folders are made by postfix check-fatal, once main.cf is there.
func (p *Postfix) prepare(opts PostfixOptions) error {
	for _, d := range []string{"etc", "spool", "lib"} {
		if err := os.Mkdir(filepath.Join(p.Dir, d), 0o755); err != nil {
			return err
		}
	}
	owner, err := user.Lookup("postfix")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(owner.Gid)
	if err := os.Chown(filepath.Join(p.Dir, "lib"), uid, gid); err != nil {
		return err
	}
	for name, content := range opts.Files {
		if err := os.WriteFile(filepath.Join(p.ConfigDir(), name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// mainCF is the instance's main.cf, then opts.Main.
func (p *Postfix) mainCF(opts PostfixOptions) string {
	return fmt.Sprintf(`compatibility_level = 3.6
queue_directory = %[1]s/spool
data_directory = %[1]s/lib
mail_owner = postfix
setgid_group = postdrop
maillog_file = %[1]s/postfix.log
maillog_file_prefixes = %[1]s
myhostname = %[2]s
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
local_transport = error:local delivery is disabled here
default_transport = error:this test Postfix delivers only where the test routes mail
smtputf8_enable = yes
minimal_backoff_time = 2s
maximal_backoff_time = 10s
queue_run_delay = 2s
%[3]s
`, p.Dir, p.marker, opts.Main)
}

// masterCF is the instance's master.cf: the services smtpd and the queue
// need, none chrooted (the test's queue is no chroot jail), then
// opts.Master.
func (p *Postfix) masterCF(opts PostfixOptions) string {
	return fmt.Sprintf(`127.0.0.1:%d inet n - n - - smtpd
pickup    unix  n - n 60  1 pickup
cleanup   unix  n - n -   0 cleanup
qmgr      unix  n - n 300 1 qmgr
rewrite   unix  - - n -   - trivial-rewrite
bounce    unix  - - n -   0 bounce
defer     unix  - - n -   0 bounce
trace     unix  - - n -   0 bounce
flush     unix  n - n 1000? 0 flush
showq     unix  n - n -   - showq
error     unix  - - n -   - error
retry     unix  - - n -   - error
anvil     unix  - - n -   1 anvil
scache    unix  - - n -   1 scache
postlog   unix-dgram n - n - 1 postlogd
lmtp      unix  - - n -   - lmtp
%s
`, p.port, opts.Master)
}

func (p *Postfix) start(opts PostfixOptions) error {
	var id [6]byte
	rand.Read(id[:])
	p.marker = "postfix-" + hex.EncodeToString(id[:]) + ".test"
	etc := p.ConfigDir()
	if err := os.WriteFile(filepath.Join(etc, "main.cf"), []byte(p.mainCF(opts)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(etc, "master.cf"), []byte(p.masterCF(opts)), 0o644); err != nil {
		return err
	}
	for _, m := range opts.Postmap {
		if out, err := exec.Command(p.tool("postmap"), "-c", etc, "hash:"+filepath.Join(etc, m)).CombinedOutput(); err != nil {
			return fmt.Errorf("postmap %s: %v: %s", m, err, out)
		}
	}
	// What postfix start checks and makes (the queue's folders), without
	// its slow ownership walk; then master in the foreground, as the
	// test's child, in a process group of its own that Stop ends whole.
	if out, err := exec.Command(p.bin, "-c", etc, "check-fatal").CombinedOutput(); err != nil {
		return fmt.Errorf("postfix check-fatal: %v: %s\n%s", err, out, tail(p.Log(), 10))
	}
	proc, err := startGroup(filepath.Join(p.Dir, postfixPIDFile), p.master, "-c", etc, "-d")
	if err != nil {
		return err
	}
	p.proc = proc
	err = waitGreeting(p.Addr(), p.marker, 20*time.Second, proc.gone)
	if err != nil {
		p.stop()
		if strings.Contains(p.Log(), "ddress already in use") {
			return errPortInUse
		}
		return fmt.Errorf("%v\n%s%s", err, proc.output.String(), tail(p.Log(), 20))
	}
	return nil
}

// tool is the path of Postfix's command name (postqueue, postmap, ...),
// beside the postfix command.
func (p *Postfix) tool(name string) string {
	return filepath.Join(filepath.Dir(p.bin), name)
}

// Log is what Postfix has logged so far (maillog_file).
func (p *Postfix) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, "postfix.log"))
	return string(b)
}

// Queued returns how many messages wait in the queue (postqueue -p).
func (p *Postfix) Queued(t testing.TB) int {
	t.Helper()
	out, err := exec.Command(p.tool("postqueue"), "-c", p.ConfigDir(), "-p").CombinedOutput()
	if err != nil {
		t.Fatalf("testutil: postqueue -p: %v: %s", err, out)
	}
	s := strings.TrimSpace(string(out))
	if strings.HasSuffix(s, "Mail queue is empty") {
		return 0
	}
	// "-- 24 Kbytes in 73 Requests." (or "1 Request.")
	f := strings.Fields(s[strings.LastIndex(s, "\n")+1:])
	if len(f) < 5 || f[0] != "--" {
		t.Fatalf("testutil: postqueue -p: cannot read %q", s)
	}
	n, err := strconv.Atoi(f[4])
	if err != nil {
		t.Fatalf("testutil: postqueue -p: cannot read %q", s)
	}
	return n
}

// Flush asks Postfix to deliver the deferred mail now (postqueue -f),
// destinations it took for dead included.
func (p *Postfix) Flush(t testing.TB) {
	t.Helper()
	if out, err := exec.Command(p.tool("postqueue"), "-c", p.ConfigDir(), "-f").CombinedOutput(); err != nil {
		t.Fatalf("testutil: postqueue -f: %v: %s", err, out)
	}
}

// Stop stops Postfix: master and every daemon it started.
func (p *Postfix) Stop() { p.stop() }

func (p *Postfix) stop() {
	p.proc.stop()
	p.proc = nil
}
