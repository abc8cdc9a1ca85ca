package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/internal/daemon"
	"github.com/monoco/courier/internal/testutil"
)

// svRun runs the built binary in workspace ws with env added to the
// environment (start must be a real process: it detaches a serve).
func svRun(t *testing.T, ws string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(courierBin, append([]string{"--root", ws}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%v: %v", args, err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// svCleanup kills whatever serve still holds ws when the test ends, so a
// failed test leaves no daemon behind.
func svCleanup(t *testing.T, ws string) {
	t.Cleanup(func() {
		h, err := daemon.Probe(filepath.Join(ws, ".monoco/mailbox/.state/serve.lock"))
		if err == nil && h.Held && h.PID > 0 {
			unix.Kill(h.PID, unix.SIGKILL)
		}
	})
}

// svGone reports whether the process has ended (gone, or a zombie its new
// parent has not reaped yet).
func svGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

var svStartedRe = regexp.MustCompile(`courier started \(pid (\d+)\)`)

// svStart runs `courier start` in ws and returns the service's pid.
func svStart(t *testing.T, ws string) int {
	t.Helper()
	out, e, code := svRun(t, ws, nil, "start")
	m := svStartedRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("start: exit %d\n%s%s", code, out, e)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

func svPIDFile(ws string) string { return filepath.Join(ws, ".monoco/mailbox/.state/courier.pid") }

func svHealthPID(addr string) (int, error) {
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var rep struct {
		PID     int    `json:"pid"`
		Service string `json:"service"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return 0, err
	}
	return rep.PID, nil
}

// start runs the service detached and reports it once it is ready; a
// second start is a conflict naming the pid; stop waits for the send in
// flight, ends the process and removes the pid file; a stop whose wait
// ends reports it (4), --force kills, and the draft is sent after the
// next start; restart starts a stopped service and replaces a running one.
func TestStartStop(t *testing.T) {
	fake := testutil.StartSMTPFake(t)
	ws := newWorkspace(t)
	svCleanup(t, ws)
	web, recv := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s, shutdown_grace: 20s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %d, tls: none}
`, web, recv, fake.Host(), fake.Port()))

	out, e, code := svRun(t, ws, nil, "start")
	m := svStartedRe.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("start: exit %d\n%s%s", code, out, e)
	}
	pid, _ := strconv.Atoi(m[1])
	for _, want := range []string{"http://" + web, recv + " (receiver)", filepath.Join(ws, ".monoco/run/courier.sock"), filepath.Join(ws, ".monoco/logs/courier.log")} {
		if !strings.Contains(out, want) {
			t.Errorf("start's report lacks %q:\n%s", want, out)
		}
	}
	// Ready means ready: /health answers at once, with the pid start named.
	if got, err := svHealthPID(web); err != nil || got != pid {
		t.Fatalf("/health right after start: pid %d, %v (start said %d)", got, err, pid)
	}
	if got, err := daemon.ReadPIDFile(svPIDFile(ws)); got != pid {
		t.Errorf("pid file names %d (%v), start said %d", got, err, pid)
	}
	out, _, code = svRun(t, ws, nil, "status")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("running (pid %d,", pid)) {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	// Detached: a session of its own, so the terminal's ^C and hang-up
	// do not reach it.
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("serve's session is %d (%v), want its own (%d)", sid, err, pid)
	}
	// What serve logs goes to the log file.
	out, _, code = svRun(t, ws, nil, "logs", "-n", "50")
	if code != 0 || !strings.Contains(out, "courier is serving") {
		t.Errorf("logs after start: exit %d\n%s", code, out)
	}

	_, e, code = svRun(t, ws, nil, "start")
	if code != exitConflict || !strings.Contains(e, fmt.Sprintf("already running (pid %d", pid)) {
		t.Errorf("second start: exit %d %s", code, e)
	}

	// A draft in flight when stop comes: stop waits for its send (the SMTP
	// peer holds the final "." until SIGTERM has been taken), and it is
	// sent once.
	hold := fake.HoldAt(1)
	svSend(t, ws, "Report 1")
	svHeld(t, hold)
	stopCmd := exec.Command(courierBin, "--root", ws, "stop")
	var stopOut bytes.Buffer
	stopCmd.Stdout, stopCmd.Stderr = &stopOut, &stopOut
	if err := stopCmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the service stopping", func() bool {
		return strings.Contains(svLog(t, ws), "stopping: finishing sends in flight")
	})
	if svGone(pid) {
		t.Fatalf("the service ended with a send in flight:\n%s", svLog(t, ws))
	}
	hold.Release()
	stopCmd.Wait()
	if stopCmd.ProcessState.ExitCode() != 0 || !strings.Contains(stopOut.String(), fmt.Sprintf("stopped (pid %d", pid)) {
		t.Fatalf("stop: exit %d %s", stopCmd.ProcessState.ExitCode(), stopOut.String())
	}
	if !svGone(pid) {
		t.Errorf("pid %d still runs after stop said it stopped", pid)
	}
	if _, err := os.Stat(svPIDFile(ws)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after stop: %v", err)
	}
	if _, err := svHealthPID(web); err == nil {
		t.Errorf("/health answers after stop")
	}
	if !strings.Contains(svLog(t, ws), "msg=stopped") {
		t.Errorf("no graceful stop in the log:\n%s", svLog(t, ws))
	}
	if sent := countIDs(t, ws, "--outbound", "--status", "sent"); len(sent) != 1 {
		t.Errorf("after a graceful stop the draft in flight is not filed as sent: %v", sent)
	}
	_, e, code = svRun(t, ws, nil, "stop")
	if code != exitNoService || !strings.Contains(e, "not running") {
		t.Errorf("stop when stopped: exit %d %s", code, e)
	}

	// restart when stopped starts it.
	out, e, code = svRun(t, ws, nil, "restart")
	if code != 0 || !strings.Contains(out, "was not running") || !svStartedRe.MatchString(out) {
		t.Fatalf("restart when stopped: exit %d %s%s", code, out, e)
	}
	pid2, _ := strconv.Atoi(svStartedRe.FindStringSubmatch(out)[1])

	// A send that does not end: stop reports at the end of its wait (4)
	// and leaves the service be; --force kills it; the draft is not lost.
	hold2 := fake.HoldAt(2)
	svSend(t, ws, "Report 2")
	svHeld(t, hold2)
	_, e, code = svRun(t, ws, nil, "stop", "--timeout", "1s")
	if code != exitTimeout || !strings.Contains(e, "still stopping after 1s") || svGone(pid2) {
		t.Fatalf("stop with a send that hangs: exit %d %s (gone %v)", code, e, svGone(pid2))
	}
	out, e, code = svRun(t, ws, nil, "stop", "--timeout", "1s", "--force")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("killed (pid %d)", pid2)) || !svGone(pid2) {
		t.Fatalf("stop --force: exit %d %s%s (gone %v)", code, out, e, svGone(pid2))
	}
	if _, err := os.Stat(svPIDFile(ws)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after stop --force: %v", err)
	}
	out, e, code = svRun(t, ws, nil, "start")
	if code != 0 {
		t.Fatalf("start after a kill: exit %d %s%s", code, out, e)
	}
	testutil.WaitFor(t, 20*time.Second, "the killed send sent again and filed", func() bool {
		return len(countIDs(t, ws, "--outbound", "--status", "sent")) == 2
	})
	subjects := map[string]int{}
	for _, m := range fake.Messages() {
		if msg, err := mail.ReadMessage(bytes.NewReader(m.Raw)); err == nil {
			subjects[msg.Header.Get("Subject")]++
		}
	}
	if subjects["Report 1"] != 1 || subjects["Report 2"] < 1 {
		t.Errorf("sent: %v", subjects)
	}

	// restart when running replaces the process.
	pid3, _ := strconv.Atoi(svStartedRe.FindStringSubmatch(out)[1])
	out, e, code = svRun(t, ws, nil, "restart")
	m = svStartedRe.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, fmt.Sprintf("stopped (pid %d", pid3)) {
		t.Fatalf("restart: exit %d %s%s", code, out, e)
	}
	pid4, _ := strconv.Atoi(m[1])
	if pid4 == pid3 || !svGone(pid3) {
		t.Errorf("restart: old pid %d (gone %v), new %d", pid3, svGone(pid3), pid4)
	}
	if got, err := svHealthPID(web); err != nil || got != pid4 {
		t.Errorf("/health after restart: pid %d %v, want %d", got, err, pid4)
	}
	if _, _, code = svRun(t, ws, nil, "stop"); code != 0 {
		t.Errorf("last stop: exit %d", code)
	}
}

// svSend queues a new email through the running service.
func svSend(t *testing.T, ws, subject string) {
	t.Helper()
	out, e, code := svRun(t, ws, nil, "send", "--provider", "email", "--to", "ann@example.com", "--subject", subject, "--text", "Here it is.")
	if code != 0 {
		t.Fatalf("send: exit %d %s%s", code, out, e)
	}
}

func svHeld(t *testing.T, h *testutil.Hold) {
	t.Helper()
	select {
	case <-h.Held():
	case <-time.After(20 * time.Second):
		t.Fatal("the draft was not sent")
	}
}

func svLog(t *testing.T, ws string) string {
	b, _ := os.ReadFile(filepath.Join(ws, ".monoco/logs/courier.log"))
	return string(b)
}

// svMinimal writes a config with free ports and nothing to connect to.
func svMinimal(t *testing.T, ws string) string {
	web := testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, testutil.FreeAddr(t)))
	return web
}

// A pid file left by a crash is cleaned and start goes on: one naming a
// process that is gone, and one whose pid a program other than Courier
// now has (which is left alone).
func TestStartStalePIDFile(t *testing.T) {
	ws := newWorkspace(t)
	svCleanup(t, ws)
	web := svMinimal(t, ws)

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })

	for _, c := range []struct {
		name string
		pid  int
		why  string
	}{
		{"dead", dead.Process.Pid, "no longer running"},
		{"another program", sleeper.Process.Pid, "now another program"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(svPIDFile(ws), []byte(strconv.Itoa(c.pid)+"\n"), 0o640); err != nil {
				t.Fatal(err)
			}
			out, e, code := svRun(t, ws, nil, "start")
			if code != 0 || !strings.Contains(e, fmt.Sprintf("removed a stale pid file (pid %d: %s", c.pid, c.why)) {
				t.Fatalf("start over a stale pid file: exit %d\n%s%s", code, out, e)
			}
			pid, _ := strconv.Atoi(svStartedRe.FindStringSubmatch(out)[1])
			if got, _ := daemon.ReadPIDFile(svPIDFile(ws)); got != pid {
				t.Errorf("pid file names %d, the service is %d", got, pid)
			}
			if got, err := svHealthPID(web); err != nil || got != pid {
				t.Errorf("/health: %d %v", got, err)
			}
			if _, e, code := svRun(t, ws, nil, "stop"); code != 0 {
				t.Fatalf("stop: %d %s", code, e)
			}
		})
	}
	if svGone(sleeper.Process.Pid) {
		t.Errorf("the program whose pid was in the stale file was stopped")
	}
	// stop over a stale file: not running (3), and the file cleaned.
	os.WriteFile(svPIDFile(ws), []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o640)
	_, e, code := svRun(t, ws, nil, "stop")
	if code != exitNoService || !strings.Contains(e, "removed a stale pid file") {
		t.Errorf("stop over a stale pid file: exit %d %s", code, e)
	}
	if _, err := os.Stat(svPIDFile(ws)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale pid file left: %v", err)
	}
	if svGone(sleeper.Process.Pid) {
		t.Errorf("stop signalled the program whose pid was in the stale file")
	}
}

// A start that cannot succeed says why: a bad config before anything
// runs (78, naming the key), and a serve that dies at once with the log's
// last lines (69); nothing is left running and no pid file either.
func TestStartFailures(t *testing.T) {
	ws := newWorkspace(t)
	svCleanup(t, ws)
	writeConfig(t, ws, "courier:\n  http: {listen: 127.0.0.1:1}\n  outbond: {max_attempts: 3}\n")
	_, e, code := svRun(t, ws, nil, "start")
	if code != exitConfig || !strings.Contains(e, "outbond") {
		t.Errorf("start of a bad config: exit %d %s", code, e)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", testutil.FreeAddr(t), busy.Addr()))
	_, e, code = svRun(t, ws, nil, "start")
	if code != exitUnavailable || !strings.Contains(e, "exited at start (exit 69)") || !strings.Contains(e, "listen on "+busy.Addr().String()) {
		t.Errorf("start of a serve that dies: exit %d\n%s", code, e)
	}
	if h, _ := daemon.Probe(filepath.Join(ws, ".monoco/mailbox/.state/serve.lock")); h.Held {
		t.Errorf("something holds the workspace after a failed start: pid %d", h.PID)
	}
	if _, err := os.Stat(svPIDFile(ws)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after a failed start: %v", err)
	}
	// A secret others can read: serve refuses (78) and start says so.
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    slack: {enabled: true, bot_token: xoxb-svsecret, app_token: xapp-svsecret}\n", testutil.FreeAddr(t)))
	os.Chmod(filepath.Join(ws, ".monoco/config/courier.yaml"), 0o644)
	_, e, code = svRun(t, ws, nil, "start")
	if code != exitConfig || strings.Contains(e, "svsecret") {
		t.Errorf("start with a readable inline secret: exit %d\n%s", code, e)
	}
}

// logs -n prints exactly the last lines, reaching into the rotated file
// when the current one is shorter.
func TestLogsLast(t *testing.T) {
	ws := newWorkspace(t)
	dir := filepath.Join(ws, ".monoco/logs")
	os.MkdirAll(dir, 0o750)
	var cur strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&cur, "line %d\n", i)
	}
	os.WriteFile(filepath.Join(dir, "courier.log"), []byte(cur.String()), 0o640)
	out, e, code := cli(t, ws, "", "logs", "-n", "3")
	if code != 0 || out != "line 18\nline 19\nline 20\n" {
		t.Errorf("logs -n 3: exit %d %q %s", code, out, e)
	}
	out, _, _ = cli(t, ws, "", "logs")
	if !strings.HasPrefix(out, "line 11\n") || strings.Count(out, "\n") != 10 {
		t.Errorf("logs (default 10): %q", out)
	}
	out, _, _ = cli(t, ws, "", "logs", "-n", "0")
	if out != "" {
		t.Errorf("logs -n 0: %q", out)
	}

	// Rotated: the older lines are in courier-<time>.log (lumberjack's
	// names), the current file has two, the last without its line break.
	os.WriteFile(filepath.Join(dir, "courier-2026-01-01T00-00-00.000.log"), []byte("ancient\n"), 0o640)
	os.WriteFile(filepath.Join(dir, "courier-2026-01-02T00-00-00.000.log"), []byte("old 1\nold 2\nold 3\n"), 0o640)
	os.WriteFile(filepath.Join(dir, "courier.log"), []byte("new 1\nnew 2"), 0o640)
	out, _, _ = cli(t, ws, "", "logs", "-n", "4")
	if out != "old 2\nold 3\nnew 1\nnew 2" {
		t.Errorf("logs -n 4 across a rotation: %q", out)
	}
	out, _, _ = cli(t, ws, "", "logs", "-n", "100")
	if out != "ancient\nold 1\nold 2\nold 3\nnew 1\nnew 2" {
		t.Errorf("logs -n 100, everything: %q", out)
	}

	os.RemoveAll(dir)
	_, e, code = cli(t, ws, "", "logs")
	if code != exitNoInput || !strings.Contains(e, "no log at") {
		t.Errorf("logs without a log: exit %d %s", code, e)
	}
}

// logs -f prints what is written after it started, and goes on in the
// new file after a rotation, losing nothing the old file got last.
func TestLogsFollow(t *testing.T) {
	ws := newWorkspace(t)
	dir := filepath.Join(ws, ".monoco/logs")
	os.MkdirAll(dir, 0o750)
	path := filepath.Join(dir, "courier.log")
	os.WriteFile(path, []byte("before 1\nbefore 2\n"), 0o640)

	cmd := exec.Command(courierBin, "--root", ws, "logs", "-f", "-n", "1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case got, ok := <-lines:
			if !ok || got != want {
				t.Fatalf("logs -f printed %q (open %v), want %q; stderr %s", got, ok, want, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("logs -f did not print %q; stderr %s", want, stderr.String())
		}
	}
	appendLine := func(p, line string) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(line + "\n")
		f.Close()
	}
	expect("before 2")
	appendLine(path, "after 1")
	expect("after 1")
	// A rotation as lumberjack makes it: a last line in the old file,
	// renamed, then a new file.
	appendLine(path, "old last")
	if err := os.Rename(path, filepath.Join(dir, "courier-2026-01-01T00-00-00.000.log")); err != nil {
		t.Fatal(err)
	}
	appendLine(path, "new first")
	expect("old last")
	expect("new first")
	appendLine(path, "new second")
	expect("new second")

	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("logs -f after ^C: %v %s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("logs -f did not end on SIGINT")
	}
}

// svFakeSystemd puts a systemctl and a journalctl on PATH that record
// their arguments, one call a line, and keep a unit's state in a file.
func svFakeSystemd(t *testing.T) (env []string, calls func() []string) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	state := filepath.Join(dir, "state")
	os.WriteFile(state, []byte("inactive\n"), 0o644)
	systemctl := `#!/bin/sh
echo "systemctl $*" >> ` + log + `
for a in "$@"; do last="$a"; done
case " $* " in
  *" is-active "*) s=$(cat ` + state + `); echo "$s"; [ "$s" = active ] && exit 0; exit 3 ;;
  *" show "*) echo 4242 ;;
  *" start "*|*" restart "*) echo active > ` + state + ` ;;
  *" stop "*) echo inactive > ` + state + ` ;;
esac
exit 0
`
	journalctl := "#!/bin/sh\necho \"journalctl $*\" >> " + log + "\necho 'a journal line'\n"
	os.WriteFile(filepath.Join(dir, "systemctl"), []byte(systemctl), 0o755)
	os.WriteFile(filepath.Join(dir, "journalctl"), []byte(journalctl), 0o755)
	return []string{"PATH=" + dir + ":" + os.Getenv("PATH")}, func() []string {
		b, _ := os.ReadFile(log)
		os.Remove(log)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}

// Under systemd the verbs say so and act through systemctl and
// journalctl, with the exit codes they have without it; no process of
// their own is started.
func TestSystemdVerbs(t *testing.T) {
	ws := newWorkspace(t)
	svCleanup(t, ws)
	env, calls := svFakeSystemd(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  systemd: {unit: courier-sv.service}\n", testutil.FreeAddr(t)))
	same := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s ran\n  %q\nwant\n  %q", what, got, want)
		}
	}

	out, e, code := svRun(t, ws, env, "start")
	if code != 0 || !strings.Contains(out, "under systemd as courier-sv.service") || !strings.Contains(out, "courier started (pid 4242)") {
		t.Errorf("start: exit %d %s%s", code, out, e)
	}
	same("start", calls(), []string{"systemctl is-active courier-sv.service", "systemctl start courier-sv.service", "systemctl show --property=MainPID --value courier-sv.service"})
	if h, _ := daemon.Probe(filepath.Join(ws, ".monoco/mailbox/.state/serve.lock")); h.Held {
		t.Errorf("start under systemd started a serve of its own (pid %d)", h.PID)
	}
	_, e, code = svRun(t, ws, env, "start")
	if code != exitConflict || !strings.Contains(e, "already running (courier-sv.service is active (pid 4242))") {
		t.Errorf("start of an active unit: exit %d %s", code, e)
	}
	same("second start", calls(), []string{"systemctl is-active courier-sv.service", "systemctl show --property=MainPID --value courier-sv.service"})

	out, e, code = svRun(t, ws, env, "restart")
	if code != 0 || !strings.Contains(out, "courier restarted (pid 4242)") {
		t.Errorf("restart: exit %d %s%s", code, out, e)
	}
	same("restart", calls(), []string{"systemctl is-active courier-sv.service", "systemctl restart courier-sv.service", "systemctl show --property=MainPID --value courier-sv.service"})

	if out, e, code = svRun(t, ws, env, "stop"); code != 0 || !strings.Contains(out, "courier stopped") {
		t.Errorf("stop: exit %d %s%s", code, out, e)
	}
	same("stop", calls(), []string{"systemctl is-active courier-sv.service", "systemctl stop courier-sv.service"})
	if _, e, code = svRun(t, ws, env, "stop"); code != exitNoService || !strings.Contains(e, "courier-sv.service is inactive") {
		t.Errorf("stop of an inactive unit: exit %d %s", code, e)
	}
	same("second stop", calls(), []string{"systemctl is-active courier-sv.service"})

	out, e, code = svRun(t, ws, env, "logs", "-n", "3")
	if code != 0 || out != "a journal line\n" || !strings.Contains(e, "under systemd") {
		t.Errorf("logs: exit %d %q %s", code, out, e)
	}
	same("logs -n 3", calls(), []string{"journalctl -u courier-sv.service -n 3 --no-pager"})
	svRun(t, ws, env, "logs", "-f")
	same("logs -f", calls(), []string{"journalctl -u courier-sv.service -n 10 -f"})

	// A unit of the user's manager.
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  systemd: {unit: courier-sv.service, user: true}\n", testutil.FreeAddr(t)))
	svRun(t, ws, env, "start")
	same("start --user", calls(), []string{"systemctl --user is-active courier-sv.service", "systemctl --user start courier-sv.service", "systemctl --user show --property=MainPID --value courier-sv.service"})
	svRun(t, ws, env, "logs", "-n", "2")
	same("logs --user", calls(), []string{"journalctl --user-unit courier-sv.service -n 2 --no-pager"})
}

// stop stops a serve started in the foreground too (it writes the pid
// file as well): gracefully, exit 0.
func TestStopForegroundServe(t *testing.T) {
	ws := newWorkspace(t)
	web := svMinimal(t, ws)
	s := startServe(t, ws, web)
	out, e, code := svRun(t, ws, nil, "stop")
	if code != 0 || !strings.Contains(out, "stopped (pid") {
		t.Fatalf("stop: exit %d %s%s", code, out, e)
	}
	if code := s.Stop(t); code != 0 || !strings.Contains(s.Log(), "msg=stopped") {
		t.Errorf("the foreground serve ended with exit %d:\n%s", code, s.Log())
	}
}

// Two starts at once: one starts the service, the other is a conflict;
// one service runs.
func TestStartTwiceAtOnce(t *testing.T) {
	ws := newWorkspace(t)
	svCleanup(t, ws)
	web := svMinimal(t, ws)
	type result struct {
		out, e string
		code   int
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			cmd := exec.Command(courierBin, "--root", ws, "start")
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			cmd.Run()
			results <- result{o.String(), e.String(), cmd.ProcessState.ExitCode()}
		}()
	}
	codes := map[int]int{}
	var started int
	for range 2 {
		r := <-results
		codes[r.code]++
		if m := svStartedRe.FindStringSubmatch(r.out); m != nil {
			started, _ = strconv.Atoi(m[1])
		}
		// The loser sees the winner's serve running, or, when it looks
		// before that serve has written its pid file, holding the lock.
		if r.code != 0 && (r.code != exitConflict || !strings.Contains(r.e, "running") && !strings.Contains(r.e, "holds the workspace")) {
			t.Errorf("start: exit %d %s%s", r.code, r.out, r.e)
		}
	}
	if codes[0] != 1 || codes[exitConflict] != 1 {
		t.Fatalf("two starts at once: exit codes %v", codes)
	}
	if got, err := svHealthPID(web); err != nil || got != started {
		t.Errorf("/health: pid %d %v, start said %d", got, err, started)
	}
	if _, e, code := svRun(t, ws, nil, "stop"); code != 0 {
		t.Errorf("stop: exit %d %s", code, e)
	}
}

// root does not start the service in a workspace another user owns: its
// files would be root's.
func TestStartAsRootInOthersWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ws := newWorkspace(t)
	svCleanup(t, ws)
	svMinimal(t, ws)
	if err := os.Chown(filepath.Join(ws, ".monoco"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, e, code := svRun(t, ws, nil, "start")
	if code != exitNoPerm || !strings.Contains(e, "start the service as that user") {
		t.Errorf("root's start in another user's workspace: exit %d %s", code, e)
	}
	if h, _ := daemon.Probe(filepath.Join(ws, ".monoco/mailbox/.state/serve.lock")); h.Held {
		t.Errorf("a serve started anyway (pid %d)", h.PID)
	}
}
