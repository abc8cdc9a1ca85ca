package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
)

// doctor fails on what serve would meet (issue 19, item 6): an email
// section without enabled (email off while doctor passed), an SMTP
// account with no address to send from (every reply dead-lettered; send
// --dry-run refuses it too), a hook whose command does not exist or
// cannot run.
func TestDoctorWhatServeWillDo(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws := newWorkspace(t)
	web, recv := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      receiver: {smtp: %s}\n", web, recv))
	out, _, code := cli(t, ws, "", "doctor")
	if code != exitUnavailable || !strings.Contains(out, "✗ enabled") || !strings.Contains(out, "set courier.adapters.email.enabled: true") || strings.Contains(out, "all checks passed") {
		t.Errorf("email without enabled: exit %d\n%s", code, out)
	}
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email: {enabled: false, receiver: {smtp: %s}}\n", web, recv))
	if out, _, code := cli(t, ws, "", "doctor"); code != 0 || strings.Contains(out, "✗ enabled") {
		t.Errorf("email off on purpose: exit %d\n%s", code, out)
	}

	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec.sh")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
      accounts:
        - name: work
          smtp: {host: %s, port: %d, tls: none, username: agent, password: x}
  notify:
    - {name: gone, exec: [%s]}
    - {name: noexec, exec: [%s]}
    - {name: onpath, exec: [true]}
`, web, recv, sink.Host(), sink.Port(), filepath.Join(dir, "no-such-hook"), notExec))
	out, _, code = cli(t, ws, "", "doctor")
	for _, want := range []string{"✗ email/work from", `account "work" has no address to send from`,
		"✗ hook gone", "no-such-hook: no such file", "✗ hook noexec", "chmod +x " + notExec, "✓ hook onpath"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q: exit %d\n%s", want, code, out)
		}
	}
	out, e, code := cli(t, ws, "", "send", "--dry-run", "--to", "ann@example.com", "--provider", "email", "--subject", "hi", "--text", "x")
	if code != exitDataErr || !strings.Contains(e, "has no address to send from") {
		t.Errorf("send --dry-run from an account with no address: exit %d\n%s%s", code, out, e)
	}
}

// doctor compares the running service's config with the file's: edited
// since, it says to restart or reload; after `courier reload`, it passes.
func TestDoctorRunningConfig(t *testing.T) {
	ws := newWorkspace(t)
	web, recv := testutil.FreeAddr(t), testutil.FreeAddr(t)
	cfg := fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email: {enabled: true, receiver: {smtp: %s}}\n", web, recv)
	writeConfig(t, ws, cfg)
	startServe(t, ws, web)
	if out, _, code := cli(t, ws, "", "doctor"); code != 0 || !strings.Contains(out, "✓ service config") {
		t.Errorf("doctor with the service on the file's config: exit %d\n%s", code, out)
	}
	writeConfig(t, ws, cfg+"  notify:\n    - {name: h, exec: [true]}\n")
	out, _, code := cli(t, ws, "", "doctor")
	if code != exitUnavailable || !strings.Contains(out, "the service runs an older config: restart or reload") {
		t.Errorf("doctor after an edit: exit %d\n%s", code, out)
	}
	if out, e, code := cli(t, ws, "", "reload"); code != 0 {
		t.Fatalf("reload: exit %d\n%s%s", code, out, e)
	}
	if out, _, code := cli(t, ws, "", "doctor"); code != 0 || !strings.Contains(out, "✓ service config") {
		t.Errorf("doctor after the reload: exit %d\n%s", code, out)
	}
}
