package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Attack: the file of a message is replaced by a link to a secret. Before,
// `read --raw` printed the link's target. Every form of read now refuses
// it (exit 65), names the link, and prints nothing of the target.
func TestReadRefusesLinkedFile(t *testing.T) {
	ws := newWorkspace(t)
	m := testutil.Message(schema.Lark, "om_raw", testutil.Time("2026-04-02T08:00:00Z"), "hello")
	seed(t, ws, m)
	secret := filepath.Join(t.TempDir(), "id_ed25519")
	os.WriteFile(secret, []byte("TOP-SECRET key material\n"), 0o600)
	path := filepath.Join(ws, ".monoco/mailbox/inbound/lark", mailbox.FileName(m.Timestamp.Time, m.ID))
	os.Remove(path)
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--raw"}, {}, {"--content"}, {"--format", "json"}} {
		out, e, code := cli(t, ws, "", append([]string{"read", m.ID}, args...)...)
		if code != exitDataErr || strings.Contains(out+e, "TOP-SECRET") || !strings.Contains(e, "is a symbolic link") {
			t.Errorf("read %v: exit %d, stdout %q, stderr %q; want 65, the link named, nothing of its target", args, code, out, e)
		}
	}
}

// evil holds what a terminal acts on: a window title (OSC), BEL, a screen
// clear (CSI), the 8-bit CSI, DEL and the right-to-left override.
const evil = "\x1b]0;owned\x07\x1b[2J\u009b31m\x7f\u202eexe.pdf"

// Attack: control characters in a file written by an older Courier or
// another program reach the terminal through list and read. The text
// formats print none of them (tab and newline stay), JSON escapes them and
// still decodes to the file's text, and read --raw into a pipe is the file
// byte for byte.
func TestListReadSanitiseOldFiles(t *testing.T) {
	ws := newWorkspace(t)
	m := testutil.Message(schema.Email, "ectl", testutil.Time("2026-04-02T09:00:00Z"), "body "+evil+" end\n\tindented")
	m.Session.Name = "Subject " + evil
	m.Participants.From.Name = "Ann " + evil
	seed(t, ws, m)
	clean := func(what, s string) {
		t.Helper()
		if i := strings.IndexFunc(s, schema.IsStrippedControl); i >= 0 {
			t.Errorf("%s prints %q:\n%q", what, []rune(s[i:])[0], s)
		}
	}
	for _, args := range [][]string{{"list"}, {"list", "--format", "compact"}, {"read", m.ID}, {"read", m.ID, "--content"}, {"thread", m.ID}} {
		out, e, code := cli(t, ws, "", args...)
		if code != 0 {
			t.Fatalf("%v: %d %s", args, code, e)
		}
		clean(strings.Join(args, " "), out)
	}
	out, _, _ := cli(t, ws, "", "read", m.ID, "--content")
	if want := "body ]0;owned[2J31mexe.pdf end\n\tindented\n"; out != want {
		t.Errorf("read --content = %q, want %q", out, want)
	}
	for _, args := range [][]string{{"list", "--format", "json"}, {"read", m.ID, "--format", "json"}} {
		out, _, _ := cli(t, ws, "", args...)
		clean(strings.Join(args, " "), strings.ReplaceAll(out, "\n", ""))
		if !strings.Contains(out, `\u001b`) || !strings.Contains(out, `\u009b`) || !strings.Contains(out, `\u202e`) || !strings.Contains(out, `\u007f`) {
			t.Errorf("%v does not escape the controls: %s", args, out)
		}
	}
	out, _, _ = cli(t, ws, "", "read", m.ID, "--format", "json")
	var got struct {
		Message *schema.Message `json:"message"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Message == nil || got.Message.Session.Name != m.Session.Name {
		t.Errorf("read --format json is not lossless: %v %+v", err, got.Message)
	}
	file, _ := os.ReadFile(filepath.Join(ws, ".monoco/mailbox/inbound/email", mailbox.FileName(m.Timestamp.Time, m.ID)))
	if out, _, _ := cli(t, ws, "", "read", m.ID, "--raw"); out != string(file) {
		t.Error("read --raw into a pipe is not the file byte for byte")
	}
	if got := mailview.VisibleControls([]byte("a\x1bb\u202ec\td\n")); string(got) != `a\x1bb\u202ec`+"\td\n" {
		t.Errorf("visibleControls = %q", got)
	}
}

// The same mail through the real service: the file written, list and read
// show no control characters; the raw message keeps them.
func TestServeStripsControls(t *testing.T) {
	ws := newWorkspace(t)
	web, rcv := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, rcv))
	startServe(t, ws, web)
	raw := "From: =?utf-8?q?Ann=1B[8m=E2=80=AE?= <ann@example.com>\r\nTo: agent@example.com\r\n" +
		"Subject: Pay =?utf-8?q?=1B]0;owned=07now?=\r\nMessage-ID: <ctl@example.com>\r\nDate: Thu, 02 Apr 2026 09:00:00 +0000\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\nThe \x1b[31mbody\x1b[0m \u009b2J here.\r\n"
	if err := smtp.SendMail(rcv, nil, "ann@example.com", []string{"agent@example.com"}, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	var id string
	testutil.WaitFor(t, 20*time.Second, "the mail listed", func() bool {
		out, _, _ := cli(t, ws, "", "list", "--format", "id")
		id = strings.TrimSpace(out)
		return id != ""
	})
	for _, args := range [][]string{{"list"}, {"read", id}, {"read", id, "--raw"}} {
		out, _, _ := cli(t, ws, "", args...)
		if i := strings.IndexFunc(out, schema.IsStrippedControl); i >= 0 {
			t.Errorf("%v prints %q", args, out[i:])
		}
	}
	out, _, _ := cli(t, ws, "", "read", id, "--format", "json")
	var got struct {
		Message *schema.Message `json:"message"`
	}
	json.Unmarshal([]byte(out), &got)
	if got.Message == nil || got.Message.Metadata.Extra.Raw == nil {
		t.Fatalf("read --format json: %s", out)
	}
	if got.Message.Body != "The [31mbody[0m 2J here.\n" {
		t.Errorf("body %q", got.Message.Body)
	}
	stored, err := os.ReadFile(filepath.Join(ws, ".monoco/dropzone", got.Message.Metadata.Extra.Raw.Path))
	if err != nil || string(stored) != raw {
		t.Errorf("the raw message is not kept byte for byte (%v)", err)
	}
}

// Modes do not depend on the umask of whoever runs Courier: after `courier
// init` and `serve` under umask 022, folders are 0750, messages and
// dropzone objects 0440, the config, the state database (with its -wal and
// -shm) and the lock 0640; nothing is readable by others.
func TestModesAfterInitAndServe(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	ws := t.TempDir()
	if _, e, code := cli(t, ws, "", "init"); code != 0 {
		t.Fatalf("init: %s", e)
	}
	web, rcv := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, rcv))
	s := startServe(t, ws, web)
	msg := "From: ann@example.com\r\nTo: agent@example.com\r\nSubject: modes\r\nMessage-ID: <modes@example.com>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n" +
		"--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\n\r\n%PDF-1.4\r\n--b--\r\n"
	if err := smtp.SendMail(rcv, nil, "ann@example.com", []string{"agent@example.com"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.Log())
	}
	want := map[string]fs.FileMode{
		".monoco/config/courier.yaml":       0o640,
		".monoco/mailbox/.state/courier.db": 0o640,
		".monoco/mailbox/.state/serve.lock": 0o640,
	}
	seen := map[string]bool{}
	filepath.WalkDir(filepath.Join(ws, ".monoco"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(ws, p)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		mode := fi.Mode().Perm()
		switch {
		case want[rel] != 0:
			seen[rel] = true
			if mode != want[rel] {
				t.Errorf("%s: mode %v, want %v", rel, mode, want[rel])
			}
		case d.IsDir() && rel == ".monoco/dropzone/.tmp":
			if mode != 0o700 {
				t.Errorf("%s: mode %v, want 0700", rel, mode)
			}
		case d.IsDir():
			if mode != 0o750 {
				t.Errorf("%s: mode %v, want 0750", rel, mode)
			}
		case strings.HasPrefix(rel, ".monoco/mailbox/inbound/") || strings.HasPrefix(rel, ".monoco/dropzone/sha256/"):
			seen[filepath.Dir(filepath.Dir(rel))] = true
			if mode != 0o440 {
				t.Errorf("%s: mode %v, want 0440", rel, mode)
			}
		case mode&0o007 != 0:
			t.Errorf("%s: mode %v is open to others", rel, mode)
		}
		return nil
	})
	for _, p := range []string{".monoco/config/courier.yaml", ".monoco/mailbox/.state/courier.db", ".monoco/mailbox/.state/serve.lock", ".monoco/mailbox/inbound", ".monoco/dropzone/sha256"} {
		if !seen[p] {
			t.Errorf("%s: not found", p)
		}
	}
}

// serveExit runs `courier serve` in ws and returns its exit code and
// output; the caller expects it to refuse, so it must exit by itself.
func serveExit(t *testing.T, ws string) (int, string) {
	t.Helper()
	cmd := exec.Command(courierBin, "--root", ws, "serve")
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("serve did not refuse to start:\n%s", out)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// A config that holds a secret and that every user can read, or a secret
// file every user can read, stops serve at start (exit 78, the file and
// the chmod named, the secret not printed). A ${NAME} reference is no
// secret in the file; a config that others cannot read is fine.
func TestServeRefusesReadableSecrets(t *testing.T) {
	ws := newWorkspace(t)
	web := testutil.FreeAddr(t)
	cfgPath := filepath.Join(ws, ".monoco/config/courier.yaml")
	base := fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: \"\"}\n", web)

	writeConfig(t, ws, base+"    slack: {enabled: false, bot_token: xoxb-not-for-others}\n")
	os.Chmod(cfgPath, 0o644)
	code, out := serveExit(t, ws)
	if code != exitConfig || !strings.Contains(out, cfgPath) || !strings.Contains(out, "chmod o-rwx "+cfgPath) ||
		!strings.Contains(out, "courier.adapters.slack.bot_token") || strings.Contains(out, "xoxb-not-for-others") {
		t.Errorf("world-readable inline secret: exit %d:\n%s", code, out)
	}

	secret := filepath.Join(t.TempDir(), "bot")
	os.WriteFile(secret, []byte("xoxb-in-a-file"), 0o644)
	writeConfig(t, ws, base+"    slack: {enabled: false, bot_token_file: "+secret+"}\n")
	code, out = serveExit(t, ws)
	if code != exitConfig || !strings.Contains(out, "chmod o-rwx "+secret) || strings.Contains(out, "xoxb-in-a-file") {
		t.Errorf("world-readable secret file: exit %d:\n%s", code, out)
	}
	os.Chmod(secret, 0o600)

	// courier.mcp.token_file is a secret file too (relative to the
	// config's folder, as every *_file key): at 0644 any local user
	// answers all mail over /mcp. serve refuses it and doctor fails on it.
	tok := filepath.Join(filepath.Dir(cfgPath), "mcp.token")
	os.WriteFile(tok, []byte("mcp-token-not-for-others"), 0o644)
	writeConfig(t, ws, base+"  mcp: {token_file: mcp.token}\n")
	os.Chmod(cfgPath, 0o640)
	code, out = serveExit(t, ws)
	if code != exitConfig || !strings.Contains(out, "chmod o-rwx "+tok) || strings.Contains(out, "mcp-token-not-for-others") {
		t.Errorf("world-readable courier.mcp.token_file: exit %d:\n%s", code, out)
	}
	out, _, code = cli(t, ws, "", "doctor")
	if code != exitUnavailable || !strings.Contains(out, "✗ permissions") || !strings.Contains(out, "secret file "+tok) {
		t.Errorf("doctor on a world-readable courier.mcp.token_file: exit %d:\n%s", code, out)
	}
	os.Chmod(tok, 0o600)
	s := startServe(t, ws, web)
	s.Stop(t)

	// Not readable by others: it starts.
	writeConfig(t, ws, base+"    slack: {enabled: false, bot_token: xoxb-not-for-others}\n")
	os.Chmod(cfgPath, 0o640)
	s = startServe(t, ws, web)
	s.Stop(t)

	// Readable by all, but only ${NAME}: it starts.
	t.Setenv("COURIER_TEST_BOT", "xoxb-from-env")
	writeConfig(t, ws, base+"    slack: {enabled: false, bot_token: \"${COURIER_TEST_BOT}\"}\n")
	os.Chmod(cfgPath, 0o644)
	s = startServe(t, ws, web)
	s.Stop(t)
}
