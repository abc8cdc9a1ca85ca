package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A new user's email reply with no SMTP configured: send queues it and
// says at once that nothing will deliver it; doctor then fails on it,
// naming the count and the reason, with exit 69.
func TestFrontDoorUndeliverableDraft(t *testing.T) {
	ws := newWorkspace(t)
	if out, e, code := cli(t, ws, "", "doctor"); code != 0 {
		t.Fatalf("doctor of a fresh workspace: %d\n%s%s", code, out, e)
	}
	draft := filepath.Join(t.TempDir(), "d.md")
	os.WriteFile(draft, []byte("---\nto: [ann@example.com]\nsubject: hi\n---\nhello\n"), 0o600)
	out, e, code := cli(t, ws, "", "send", draft)
	if code != 0 || !strings.HasPrefix(out, "queued email_out_") {
		t.Fatalf("send: %d %q %q", code, out, e)
	}
	if !strings.HasPrefix(e, "courier: warning: nothing will deliver email_out_") || !strings.Contains(e, "smtp") {
		t.Errorf("send's stderr %q: want a warning naming why nothing delivers it", e)
	}
	out, e, code = cli(t, ws, "", "doctor")
	if code != exitUnavailable || !strings.Contains(out, "✗ outbound/email") || !strings.Contains(out, "1 draft(s) queued that nothing will deliver") {
		t.Errorf("doctor with a stuck draft: %d\n%s%s", code, out, e)
	}
	// A provider that is not enabled: the same, naming the key.
	os.WriteFile(draft, []byte("---\nto: [C0ABCDEFG]\n---\nhello\n"), 0o600)
	if _, e, code := cli(t, ws, "", "send", draft); code != 0 || !strings.Contains(e, "courier.adapters.slack is not enabled") {
		t.Errorf("send to slack, not enabled: %d %q", code, e)
	}
}

// doctor exits 78 on a config error, as every other verb does, and checks
// the HTTP listen address serve would bind: out of range is a config
// error, one that cannot be bound fails its check.
func TestFrontDoorDoctorConfig(t *testing.T) {
	ws := newWorkspace(t)
	cfgPath := filepath.Join(ws, ".monoco/config/courier.yaml")
	for _, bad := range []string{"courier:\n  bogus: 1\n", "courier:\n  http: {listen: \"127.0.0.1:70000\"}\n", "courier:\n  http: {listen: \"127.0.0.1:-1\"}\n"} {
		os.WriteFile(cfgPath, []byte(bad), 0o640)
		out, e, code := cli(t, ws, "", "doctor")
		if code != exitConfig || !strings.Contains(out, "✗ config") {
			t.Errorf("doctor of %q: %d\n%s%s", bad, code, out, e)
		}
		if _, e, code := cli(t, ws, "", "list"); code != exitConfig {
			t.Errorf("list of %q: %d %s", bad, code, e)
		}
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	os.WriteFile(cfgPath, []byte("courier:\n  http: {listen: \""+held.Addr().String()+"\"}\n"), 0o640)
	out, e, code := cli(t, ws, "", "doctor")
	if code != exitUnavailable || !strings.Contains(out, "✗ http listen") || !strings.Contains(out, held.Addr().String()) {
		t.Errorf("doctor with the listen port held by another program: %d\n%s%s", code, out, e)
	}
}

// Every error the command line prints starts "courier: ", whatever the
// binary is called and whichever verb failed.
func TestFrontDoorErrorPrefix(t *testing.T) {
	ws := newWorkspace(t)
	renamed := filepath.Join(t.TempDir(), "courier-renamed")
	if err := os.Link(courierBin, renamed); err != nil {
		renamed = courierBin
	}
	for _, args := range [][]string{
		{"read", "nosuch"},
		{"claim", "nosuch"},
		{"list", "--bogus"},
		{"send", "/nonexistent/draft.md"},
		{"done"},
	} {
		_, e, code := cli(t, ws, "", args...)
		if code == 0 || !strings.HasPrefix(e, "courier: ") || strings.Contains(e, "Error:") {
			t.Errorf("%v: %d %q", args, code, e)
		}
		cmd := exec.Command(renamed, append([]string{"--root", ws}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil || !strings.HasPrefix(stderr.String(), "courier: ") {
			t.Errorf("%s %v: %v %q", filepath.Base(renamed), args, err, stderr.String())
		}
	}
}
