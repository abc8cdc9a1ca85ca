package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/daemon"
	"github.com/monoco/courier/internal/service"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
)

// health reads the service's /health.
func health(t *testing.T, web string) service.Report {
	t.Helper()
	return laneHealth(t, "http://"+web+"/health")
}

// waitLog waits for the service's log to hold want: the log comes
// through a pipe, after what /health and `courier reload` already say.
func waitLog(t *testing.T, s *testutil.Serve, want string) bool {
	t.Helper()
	return testutil.Poll(10*time.Second, func() bool { return strings.Contains(s.Log(), want) })
}

func fileHash(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// reloadConfig is a config with the email receiver taking mail from
// allow, and one exec hook, name, that writes a file named after itself.
func reloadConfig(web, recv, allow, name, script, dir string) string {
	return fmt.Sprintf(`courier:
  http: {listen: %s}
  debounce: {window_ms: 0}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s, allow_from: [%s]}
  notify:
    - {name: %s, exec: [%s], env: {OUT: %s, HOOK: %s}}
`, web, recv, allow, name, script, dir, name)
}

// SIGHUP through `courier reload` applies a changed hook and a changed
// allow-list to the running service, the same process: mail it refused
// before it takes after, and the new hook runs for it, the old one not
// (issue 19, item 7). The pid file stays; /health shows the new config's
// hash.
func TestReloadEndToEnd(t *testing.T) {
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "hook.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$COURIER_MESSAGE_ID\" >> \"$OUT/$HOOK\"\n"), 0o755)
	writeConfig(t, ws, reloadConfig(web, recv, "10.99.0.0/16", "old", script, dir))
	s := startServe(t, ws, web)
	pid, _ := daemon.ReadPIDFile(daemon.PIDPath(ws))

	if err := sendMail(recv, "ann@example.com", "agent@example.com", "r1@example.com", "one", "1"); err == nil || !strings.Contains(err.Error(), "554") {
		t.Fatalf("mail from outside allow_from: %v", err)
	}
	cfgPath := filepath.Join(ws, ".monoco/config/courier.yaml")
	writeConfig(t, ws, reloadConfig(web, recv, "127.0.0.1/32", "new", script, dir))
	out, e, code := cli(t, ws, "", "reload")
	if code != 0 || !strings.Contains(out, "courier.adapters.email") || !strings.Contains(out, "courier.notify") {
		t.Fatalf("reload: exit %d\n%s%s\n%s", code, out, e, s.Log())
	}
	if err := sendMail(recv, "ann@example.com", "agent@example.com", "r2@example.com", "two", "2"); err != nil {
		t.Fatalf("mail from 127.0.0.1 after the reload: %v\n%s", err, s.Log())
	}
	testutil.WaitFor(t, 10*time.Second, "the new hook's run", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "new"))
		return len(strings.Fields(string(b))) == 1
	})
	if _, err := os.Stat(filepath.Join(dir, "old")); err == nil {
		t.Error("the removed hook ran after the reload")
	}
	rep := health(t, web)
	if rep.PID != pid || rep.Config == nil || rep.Config.Hash != fileHash(t, cfgPath) || rep.Reload == nil || rep.Reload.Outcome != "applied" {
		t.Errorf("after the reload: pid %d (was %d), config %+v, reload %+v", rep.PID, pid, rep.Config, rep.Reload)
	}
	if p, err := daemon.ReadPIDFile(daemon.PIDPath(ws)); err != nil || p != pid {
		t.Errorf("pid file after SIGHUP: %d %v, want %d", p, err, pid)
	}
	if !waitLog(t, s, "reload applied") {
		t.Errorf("no log line of the reload:\n%s", s.Log())
	}
	if code := s.Stop(t); code != 0 {
		t.Errorf("stop after a reload: exit %d", code)
	}
}

// A config that does not load is refused: `courier reload` exits 78 with
// the reason (a tab here, named as such), the log says why, and the
// service runs on with the config it had. A key that cannot change live
// is named as needing a restart, and the rest is applied.
func TestReloadRefusedAndNeedsRestart(t *testing.T) {
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "hook.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$COURIER_MESSAGE_ID\" >> \"$OUT/$HOOK\"\n"), 0o755)
	good := reloadConfig(web, recv, "127.0.0.1/32", "h", script, dir)
	writeConfig(t, ws, good)
	s := startServe(t, ws, web)
	cfgPath := filepath.Join(ws, ".monoco/config/courier.yaml")
	hash := fileHash(t, cfgPath)

	// A tab: courier reload reads the file first, and refuses it itself.
	writeConfig(t, ws, strings.Replace(good, "  debounce:", "\tdebounce:", 1))
	out, e, code := cli(t, ws, "", "reload")
	if code != exitConfig || !strings.Contains(e, "reload refused") || !strings.Contains(e, "indented with a tab") {
		t.Errorf("reload of a config with a tab: exit %d\n%s%s", code, out, e)
	}
	// SIGHUP itself, as systemctl reload sends it: the service refuses.
	pid, _ := daemon.ReadPIDFile(daemon.PIDPath(ws))
	syscall.Kill(pid, syscall.SIGHUP)
	testutil.WaitFor(t, 10*time.Second, "the refusal on /health", func() bool { r := health(t, web).Reload; return r != nil && r.Outcome == "refused" })
	if !waitLog(t, s, "reload refused") || !waitLog(t, s, "indented with a tab") {
		t.Errorf("the log does not say why the reload was refused:\n%s", s.Log())
	}
	// A secret file that is missing: only the service reads secrets, and
	// courier reload gives its reason.
	writeConfig(t, ws, good+"    - {name: web, url: http://127.0.0.1:9/x, secret_file: no-such-secret}\n")
	out, e, code = cli(t, ws, "", "reload")
	if code != exitConfig || !strings.Contains(e, "reload refused") || !strings.Contains(e, "no-such-secret") {
		t.Errorf("reload with a missing secret file: exit %d\n%s%s\n%s", code, out, e, s.Log())
	}
	if rep := health(t, web); rep.Config == nil || rep.Config.Hash != hash || rep.Reload.Outcome != "refused" || rep.Reload.Count != 2 {
		t.Errorf("after refused reloads: %+v %+v", rep.Config, rep.Reload)
	}
	if err := sendMail(recv, "ann@example.com", "agent@example.com", "f1@example.com", "one", "1"); err != nil {
		t.Fatalf("the service after a refused reload: %v\n%s", err, s.Log())
	}

	other := testutil.FreeAddr(t)
	writeConfig(t, ws, strings.Replace(strings.Replace(good, "listen: "+web, "listen: "+other, 1), "name: h,", "name: h2,", 1))
	out, e, code = cli(t, ws, "", "reload")
	if code != 0 || !strings.Contains(out, "applied courier.notify") || !strings.Contains(out, "needs a restart: courier.http.listen") {
		t.Errorf("reload with a new listen address: exit %d\n%s%s", code, out, e)
	}
	if !waitLog(t, s, "needs a restart: courier.http.listen") {
		t.Errorf("the log does not name the key that needs a restart:\n%s", s.Log())
	}
	if rep := health(t, web); len(rep.Reload.NeedsRestart) != 1 {
		t.Errorf("reload on /health: %+v", rep.Reload)
	}
	// A provider turned off runs until a restart, and every reload says
	// so, not only the first.
	off := strings.Replace(strings.Replace(good, "listen: "+web, "listen: "+other, 1), "enabled: true", "enabled: false", 1)
	writeConfig(t, ws, off)
	for i := range 2 {
		out, e, code = cli(t, ws, "", "reload")
		if code != 0 || !strings.Contains(out, "needs a restart: courier.adapters.email.enabled") || strings.Contains(out, "applied courier.adapters.email") {
			t.Errorf("reload %d with email turned off: exit %d\n%s%s", i+1, code, out, e)
		}
	}
	if err := sendMail(recv, "ann@example.com", "agent@example.com", "f2@example.com", "two", "2"); err != nil {
		t.Errorf("email, turned off in the file, stops before a restart: %v", err)
	}
}

// A provider's credential changed on disk restarts that provider alone:
// Slack, refused with the old token, connects with the new one after
// `courier reload`, while an SMTP session opened on the email receiver
// before the reload finishes after it (the receiver was not restarted).
func TestReloadRestartsOneProvider(t *testing.T) {
	fake := slackfake.New(t, slackfake.Options{PingInterval: time.Second})
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	ws := slackWorkspace(t, fake, "socket", web, "")
	cfgPath := filepath.Join(ws, ".monoco/config/courier.yaml")
	b, _ := os.ReadFile(cfgPath)
	cfg := strings.Replace(string(b), "    email: {enabled: false}\n", "    email: {enabled: true, receiver: {smtp: "+recv+"}}\n", 1)
	writeConfig(t, ws, cfg)
	botFile := cfg[strings.Index(cfg, "bot_token_file: ")+len("bot_token_file: "):]
	botFile = botFile[:strings.Index(botFile, "\n")]
	os.WriteFile(botFile, []byte("xoxb-not-ours\n"), 0o600)
	s := startServe(t, ws, web)
	testutil.WaitFor(t, 10*time.Second, "slack refused", func() bool { return health(t, web).Adapters["slack"].Status == "error" })

	c, w := openData(t, recv, "ann@example.com", "agent@example.com", "held@example.com", "held")
	os.WriteFile(botFile, []byte(fake.Options().BotToken+"\n"), 0o600)
	out, e, code := cli(t, ws, "", "reload")
	if code != 0 || strings.TrimSpace(out) != "reloaded: applied courier.adapters.slack" {
		t.Fatalf("reload: exit %d\n%s%s\n%s", code, out, e, s.Log())
	}
	testutil.WaitFor(t, 10*time.Second, "slack connected", func() bool { return health(t, web).Adapters["slack"].Status == "connected" })
	if err := w.Close(); err != nil {
		t.Fatalf("the SMTP session opened before the reload: %v", err)
	}
	c.Quit()
	waitLog(t, s, "provider restarted with the new config")
	if n := strings.Count(s.Log(), "provider restarted with the new config"); n != 1 || !strings.Contains(s.Log(), "provider=slack") {
		t.Errorf("%d provider restarts, want slack's alone:\n%s", n, s.Log())
	}
	if rep := health(t, web); rep.Adapters["email"].Status != "connected" {
		t.Errorf("email after slack's restart: %+v", rep.Adapters["email"])
	}
}

// courier reload's exit codes: 3 with no service running.
func TestReloadNotRunning(t *testing.T) {
	ws := newWorkspace(t)
	if out, e, code := cli(t, ws, "", "reload"); code != exitNoService || !strings.Contains(e, "not running") {
		t.Errorf("reload without a service: exit %d\n%s%s", code, out, e)
	}
}
