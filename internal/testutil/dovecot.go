package testutil

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"
)

// Dovecot is a real Dovecot 2.3 IMAP server for one test: plain IMAP on a
// free 127.0.0.1 port, one passwd-file user, a Maildir++ mailbox, no
// systemd. Start one with StartDovecot.
//
// Running as root (as CI does), Dovecot's master runs as root as usual and
// the mail belongs to the system user MailUser ("couriertest"); otherwise
// everything runs as the current user.
//
// The namespace separator is "/" (on disk "Archive/2024" is the Maildir++
// folder ".Archive.2024"); Sent, Drafts, Trash and Junk carry their
// SPECIAL-USE flags once they exist.
type Dovecot struct {
	Addr     string // 127.0.0.1:PORT
	Host     string // 127.0.0.1
	Port     int
	User     string // the IMAP login ("test")
	Password string // its password ("test"; PLAIN and LOGIN are offered, no TLS)
	Dir      string // config, run, state, log and mail live here
	Maildir  string // the user's Maildir: INBOX, with folders as .Name subdirectories

	t        testing.TB
	acct     account
	dovecot  string // the dovecot binary
	doveadm  string
	conf     string
	logPath  string
	greeting string // unique login greeting, to recognise this instance

	mu      sync.Mutex
	running bool
	seq     int64 // messages delivered, for unique ordered file names
	base    int64 // Unix time of the first delivery name
}

// StartDovecot starts a Dovecot for t and stops it (and removes its
// directory) in t.Cleanup. It skips the test when Dovecot is not
// installed, unless COURIER_REQUIRE_SERVERS=1 is set, then it fails.
//
// Stop, Start and Restart take no t: they report a failure with t.Errorf
// on this t (safe from subtests and other goroutines), and the test goes
// on.
func StartDovecot(t testing.TB) *Dovecot {
	t.Helper()
	d := &Dovecot{
		t:        t,
		dovecot:  NeedCommand(t, "dovecot", "dovecot-imapd"),
		doveadm:  NeedCommand(t, "doveadm", "dovecot-core"),
		Host:     "127.0.0.1",
		User:     "test",
		Password: "test",
		acct:     mailAccount(t),
		base:     time.Now().Unix(),
	}
	d.Dir = serverDir(t, "courier-dovecot-")
	d.conf = filepath.Join(d.Dir, "dovecot.conf")
	d.logPath = filepath.Join(d.Dir, "dovecot.log")
	home := filepath.Join(d.Dir, "mail", d.User)
	d.Maildir = filepath.Join(home, "Maildir")
	var id [6]byte
	rand.Read(id[:])
	d.greeting = "Courier test Dovecot " + hex.EncodeToString(id[:]) + " ready."

	for _, dir := range []string{"run", "state", "mail"} {
		if err := os.Mkdir(filepath.Join(d.Dir, dir), 0o755); err != nil {
			t.Fatalf("testutil: %v", err)
		}
	}
	// The home and an empty INBOX exist before the first login, so that
	// Deliver works at once.
	for _, dir := range []string{home, d.Maildir, d.Maildir + "/cur", d.Maildir + "/new", d.Maildir + "/tmp"} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatalf("testutil: %v", err)
		}
		if err := d.acct.chown(dir); err != nil {
			t.Fatalf("testutil: %v", err)
		}
	}
	// Dovecot's auth process (user dovecot) reads the users file; the
	// password is no secret.
	users := fmt.Sprintf("%s:{PLAIN}%s:%d:%d::%s\n", d.User, d.Password, d.acct.uid, d.acct.gid, home)
	if err := os.WriteFile(filepath.Join(d.Dir, "users"), []byte(users), 0o644); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	t.Cleanup(func() {
		d.kill()
		if t.Failed() {
			t.Logf("dovecot log (%s):\n%s", d.logPath, tail(d.Log(), 40))
		}
	})

	// Another test may take the port between freePort and Dovecot's
	// bind: Dovecot then exits at once with "Address already in use",
	// and we try another.
	onFreePort(t, "dovecot", func(port int) error {
		d.Port = port
		d.Addr = net.JoinHostPort(d.Host, strconv.Itoa(port))
		if err := os.WriteFile(d.conf, []byte(d.config()), 0o644); err != nil {
			return err
		}
		if err := d.start(); err != nil {
			return fmt.Errorf("%w\n%s", err, tail(d.Log(), 20))
		}
		return nil
	})
	return d
}

var errPortInUse = errors.New("address already in use")

// config is dovecot.conf, after ../shared/notes/dovecot-and-peers.md (beside the checkout).
func (d *Dovecot) config() string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Courier test Dovecot (internal/testutil). Start: dovecot -c %[1]s
protocols = imap
listen = 127.0.0.1
base_dir = %[2]s/run
state_dir = %[2]s/state
log_path = %[3]s
info_log_path = %[3]s
login_greeting = %[4]s
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_verbose = yes
first_valid_uid = %[5]d
first_valid_gid = %[6]d
mail_location = maildir:~/Maildir
# fsync as shipped (optimized): fsync only guards against an OS crash or
# power loss, which no test simulates (Stop is a clean shutdown, and tests
# kill Courier, not the kernel); "always" would only slow saves down, and
# "never" would make the benchmarks against mbsync unlike a real server.
mail_fsync = optimized
# IDLE learns of new mail through inotify; poll once a second as well, in
# case inotify instances run out with many parallel tests.
mailbox_idle_check_interval = 1 secs
namespace inbox {
  inbox = yes
  separator = /
  mailbox Sent {
    special_use = \Sent
  }
  mailbox Drafts {
    special_use = \Drafts
  }
  mailbox Trash {
    special_use = \Trash
  }
  mailbox Junk {
    special_use = \Junk
  }
}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[2]s/users
}
userdb {
  driver = passwd-file
  args = username_format=%%u %[2]s/users
}
protocol imap {
  # A client may hold a connection per folder plus one for IDLE.
  mail_max_userip_connections = 100
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[7]d
  }
  inet_listener imaps {
    port = 0
  }
`, d.conf, d.Dir, d.logPath, d.greeting, d.acct.uid, d.acct.gid, d.Port)
	if !d.acct.root {
		// Unprivileged: every service runs as the current user.
		b.WriteString("  chroot =\n}\n")
		fmt.Fprintf(&b, "default_internal_user = %s\ndefault_internal_group = %s\ndefault_login_user = %s\n",
			d.acct.name, d.acct.group, d.acct.name)
	} else {
		b.WriteString("}\n")
	}
	b.WriteString("service anvil {\n  chroot =\n}\n")
	return b.String()
}

// start runs dovecot, which daemonises once its listeners are bound (or
// exits non-zero if they cannot be), and waits for its greeting.
func (d *Dovecot) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return nil
	}
	// The daemon inherits stdout and stderr: give it a file, not a
	// pipe, or waiting for the output would wait for the daemon.
	outPath := filepath.Join(d.Dir, "dovecot.out")
	f, err := os.Create(outPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(d.dovecot, "-c", d.conf)
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	f.Close()
	if err != nil {
		out, _ := os.ReadFile(outPath)
		if strings.Contains(string(out), "Address already in use") {
			return errPortInUse
		}
		return fmt.Errorf("dovecot -c %s: %v: %s", d.conf, err, out)
	}
	d.running = true
	if err := waitGreeting(d.Addr, d.greeting, 15*time.Second, nil); err != nil {
		return err
	}
	return nil
}

// Start starts a stopped Dovecot again, on the same port with the same
// mail. It waits until Dovecot greets.
func (d *Dovecot) Start() {
	d.t.Helper()
	if err := d.start(); err != nil {
		d.t.Errorf("testutil: dovecot start: %v\n%s", err, tail(d.Log(), 20))
	}
}

// Stop stops Dovecot as "dovecot -c CONF stop" does (SIGTERM to the
// master, which ends every IMAP session and shuts down cleanly) and waits
// until the master has removed its pid file and the port is closed.
// Dovecot's shutdown takes about a second (the master gives its log
// process one). Stopping a stopped Dovecot does nothing.
//
// (It signals the master itself rather than running "dovecot stop", which
// also waits for the exited master to be reaped: under an init that reaps
// slowly that adds a second or more to every stop.)
func (d *Dovecot) Stop() {
	d.t.Helper()
	if err := d.stop(); err != nil {
		d.t.Errorf("testutil: dovecot stop: %v\n%s", err, tail(d.Log(), 20))
	}
}

func (d *Dovecot) pidFile() string { return filepath.Join(d.Dir, "run", "master.pid") }

// masterPID returns the master's pid from its pid file, 0 if none.
func (d *Dovecot) masterPID() int { return readPID(d.pidFile()) }

func (d *Dovecot) stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return nil
	}
	pid := d.masterPID()
	if pid <= 0 {
		return fmt.Errorf("no pid in %s", d.pidFile())
	}
	p, err := os.FindProcess(pid)
	if err == nil {
		err = p.Signal(syscall.SIGTERM)
	}
	if err != nil {
		return fmt.Errorf("signal master %d: %v", pid, err)
	}
	d.running = false
	deadline := time.Now().Add(15 * time.Second)
	if !Poll(15*time.Second, func() bool {
		_, err := os.Stat(d.pidFile())
		return errors.Is(err, os.ErrNotExist)
	}) {
		return fmt.Errorf("master %d has not exited after 15 s", pid)
	}
	return waitClosed(d.Addr, time.Until(deadline))
}

// kill ends Dovecot at once, at the end of a test: SIGKILL to its process
// group (the master is a session leader; every Dovecot process is in its
// group), then a wait for the port to close. Nothing of its state matters
// any more, and a clean stop costs a second per test.
func (d *Dovecot) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return
	}
	d.running = false
	if pid := d.masterPID(); pid > 0 {
		killGroup(pid)
	}
	waitClosed(d.Addr, 10*time.Second)
}

// Restart stops and starts Dovecot: IMAP sessions are cut, the mail stays.
func (d *Dovecot) Restart() {
	d.t.Helper()
	d.Stop()
	d.Start()
}

// Running reports whether Dovecot is started.
func (d *Dovecot) Running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running
}

// Log returns Dovecot's log, for failure messages.
func (d *Dovecot) Log() string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(b)
}

// Doveadm runs "doveadm -c CONF args..." and returns its standard output;
// it fails the test when doveadm fails. Dovecot must be running (doveadm
// looks the user up through it). Mail commands need "-u", d.User, e.g.
//
//	d.Doveadm(t, "fetch", "-u", d.User, "uid hdr.subject", "mailbox", "INBOX", "all")
//	d.Doveadm(t, "expunge", "-u", d.User, "mailbox", "INBOX", "uid", "2")
//	d.Doveadm(t, "mailbox", "status", "-u", d.User, "messages unseen", "INBOX")
func (d *Dovecot) Doveadm(t testing.TB, args ...string) string {
	t.Helper()
	out, err := d.doveadmRun(args...)
	if err != nil {
		t.Fatalf("testutil: %v\n%s", err, tail(d.Log(), 20))
	}
	return out
}

func (d *Dovecot) doveadmRun(args ...string) (string, error) {
	cmd := exec.Command(d.doveadm, append([]string{"-c", d.conf}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("doveadm %s: %v: %s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// CreateFolder creates the folder name ("Archive/2024", UTF-8 allowed) and
// subscribes it, through doveadm, so Dovecot's indexes know it; on disk it
// is the Maildir++ folder ".Archive.2024". Dovecot must be running.
func (d *Dovecot) CreateFolder(t testing.TB, name string) {
	t.Helper()
	d.Doveadm(t, "mailbox", "create", "-s", "-u", d.User, name)
}

// FolderDir returns the Maildir directory of folder: d.Maildir for INBOX,
// d.Maildir/.A.B for "A/B" (names in modified UTF-7, as Dovecot stores
// them).
func (d *Dovecot) FolderDir(folder string) string {
	if strings.EqualFold(folder, "INBOX") {
		return d.Maildir
	}
	return filepath.Join(d.Maildir, "."+strings.ReplaceAll(encodeMUTF7(folder), "/", "."))
}

// Deliver puts one message into folder ("INBOX" or a folder made with
// CreateFolder) the way an MDA does: written to tmp/, owned by the mail
// user, renamed into new/. No IMAP is involved, and Dovecot need not be
// running; an IDLE session sees it at once (inotify). The message's
// INTERNALDATE is now. Lines may end in LF or CRLF.
func (d *Dovecot) Deliver(t testing.TB, folder string, raw []byte) {
	t.Helper()
	d.DeliverAt(t, folder, raw, time.Time{})
}

// DeliverAt is Deliver with the INTERNALDATE (the file's mtime, which
// Dovecot reports as the received date) set to at; the zero time means
// now.
func (d *Dovecot) DeliverAt(t testing.TB, folder string, raw []byte, at time.Time) {
	t.Helper()
	dir := d.folderDirOrFail(t, folder)
	if err := d.deliver(dir, raw, at); err != nil {
		t.Fatalf("testutil: deliver to %s: %v", folder, err)
	}
}

// DeliverMany delivers n messages, msgs(0) to msgs(n-1), to folder, in
// that order: Dovecot gives them increasing UIDs in the same order (it
// sorts new files by the time stamp in their names, which Deliver makes
// increase). 5,000 take a fraction of a second.
func (d *Dovecot) DeliverMany(t testing.TB, folder string, msgs func(i int) []byte, n int) {
	t.Helper()
	dir := d.folderDirOrFail(t, folder)
	for i := 0; i < n; i++ {
		if err := d.deliver(dir, msgs(i), time.Time{}); err != nil {
			t.Fatalf("testutil: deliver message %d to %s: %v", i, folder, err)
		}
	}
}

func (d *Dovecot) folderDirOrFail(t testing.TB, folder string) string {
	t.Helper()
	dir := d.FolderDir(folder)
	if _, err := os.Stat(filepath.Join(dir, "new")); err != nil {
		t.Fatalf("testutil: folder %q has no Maildir (%v); call CreateFolder first", folder, err)
	}
	return dir
}

func (d *Dovecot) deliver(dir string, raw []byte, at time.Time) error {
	d.mu.Lock()
	n := d.seq
	d.seq++
	d.mu.Unlock()
	// Maildir name: seconds, then a uniqueness part whose M field is the
	// microseconds. Dovecot assigns UIDs to new files sorted by seconds,
	// then microseconds, so these increase with n. S= is the size,
	// which Dovecot trusts.
	name := fmt.Sprintf("%d.M%dP%dQ%d.courier-test,S=%d", d.base+n/1_000_000, n%1_000_000, os.Getpid(), n, len(raw))
	tmp := filepath.Join(dir, "tmp", name)
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	if err := d.acct.chown(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if !at.IsZero() {
		if err := os.Chtimes(tmp, at, at); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	return os.Rename(tmp, filepath.Join(dir, "new", name))
}

// UIDValidity returns folder's UIDVALIDITY, through doveadm (Dovecot must
// be running).
func (d *Dovecot) UIDValidity(t testing.TB, folder string) uint32 {
	t.Helper()
	v, err := d.uidValidity(folder)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	return v
}

func (d *Dovecot) uidValidity(folder string) (uint32, error) {
	out, err := d.doveadmRun("mailbox", "status", "-u", d.User, "uidvalidity", folder)
	if err != nil {
		return 0, err
	}
	_, v, ok := strings.Cut(strings.TrimSpace(out), "uidvalidity=")
	if !ok {
		return 0, fmt.Errorf("doveadm mailbox status: unexpected output %q", out)
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("doveadm mailbox status: unexpected output %q", out)
	}
	return uint32(n), nil
}

// ResetUIDValidity makes Dovecot give folder a new UIDVALIDITY while
// keeping its messages, as after a server's index was rebuilt: it stops
// Dovecot (cutting every IMAP session), deletes the folder's
// dovecot-uidlist and index files and the mailbox list index, and starts
// Dovecot again, which rescans the Maildir, renumbers the messages from
// UID 1 in the same order and takes the next value of its
// dovecot-uidvalidity counter. It checks that the value really changed and
// returns the values before and after. A stopped Dovecot is left stopped.
func (d *Dovecot) ResetUIDValidity(t testing.TB, folder string) (before, after uint32) {
	t.Helper()
	dir := d.folderDirOrFail(t, folder)
	wasRunning := d.Running()
	if !wasRunning {
		d.Start()
	}
	before = d.UIDValidity(t, folder)
	d.Stop()
	var patterns []string
	for _, p := range []string{"dovecot-uidlist", "dovecot.index*"} {
		patterns = append(patterns, filepath.Join(dir, p))
	}
	// The list index caches every folder's UIDVALIDITY for STATUS and
	// LIST-STATUS; it is rebuilt from the folders.
	patterns = append(patterns, filepath.Join(d.Maildir, "dovecot.list.index*"))
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				t.Fatalf("testutil: %v", err)
			}
		}
	}
	d.Start()
	after = d.UIDValidity(t, folder)
	if after == before {
		t.Fatalf("testutil: UIDVALIDITY of %s is still %d after the reset", folder, before)
	}
	if !wasRunning {
		d.Stop()
	}
	return before, after
}

// WriteMbsyncConfig writes an mbsync (isync) rc file that pulls INBOX from
// this Dovecot into the Maildir localDir/INBOX (sync state kept beside
// the mail, default FSync), and returns its path. Run it with
//
//	mbsync -q -c RC -a
func (d *Dovecot) WriteMbsyncConfig(t testing.TB, localDir string) string {
	t.Helper()
	localDir, err := filepath.Abs(localDir)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	if err := os.MkdirAll(localDir, 0o755); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	// mbsync wants sections separated by blank lines.
	rc := fmt.Sprintf(`IMAPAccount courier
Host %s
Port %d
User %s
Pass %s
SSLType None
AuthMechs PLAIN

IMAPStore courier-remote
Account courier

MaildirStore courier-local
Path %s/
Inbox %s/INBOX

Channel courier-inbox
Far :courier-remote:INBOX
Near :courier-local:INBOX
Create Near
Sync Pull
SyncState *
Expunge None
`, d.Host, d.Port, d.User, d.Password, localDir, localDir)
	path := filepath.Join(t.TempDir(), "mbsyncrc")
	if err := os.WriteFile(path, []byte(rc), 0o600); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	return path
}

// mutf7 is IMAP's modified base64 (RFC 3501 §5.1.3): "," for "/", no
// padding.
var mutf7 = base64.NewEncoding("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,").WithPadding(base64.NoPadding)

// encodeMUTF7 encodes a mailbox name in modified UTF-7, as Dovecot names
// its Maildir++ folders.
func encodeMUTF7(s string) string {
	var b strings.Builder
	var run []uint16
	flush := func() {
		if len(run) == 0 {
			return
		}
		buf := make([]byte, 2*len(run))
		for i, u := range run {
			binary.BigEndian.PutUint16(buf[2*i:], u)
		}
		b.WriteByte('&')
		b.WriteString(mutf7.EncodeToString(buf))
		b.WriteByte('-')
		run = run[:0]
	}
	for _, r := range s {
		if r >= 0x20 && r <= 0x7e {
			flush()
			if r == '&' {
				b.WriteString("&-")
			} else {
				b.WriteRune(r)
			}
			continue
		}
		run = utf16.AppendRune(run, r)
	}
	flush()
	return b.String()
}
