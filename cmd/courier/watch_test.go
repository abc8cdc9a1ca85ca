package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// ntWatch runs `courier watch` in ws with args and returns its lines.
func ntWatch(t *testing.T, ws string, env []string, args ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(courierBin, append([]string{"--root", ws, "watch"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, lines
}

// ntWatchID reads the next line of a watch and returns its entry's id.
func ntWatchID(t *testing.T, lines <-chan string, what string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("watch ended before %s", what)
		}
		var e mailbox.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.ID == "" {
			t.Fatalf("not an entry: %q (%v)", l, err)
		}
		return e.ID
	case <-time.After(10 * time.Second):
		t.Fatalf("watch printed nothing for %s", what)
	}
	return ""
}

func ntSeed(t *testing.T, ws string, msgs ...*schema.Message) {
	t.Helper()
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	in := make([]mailbox.Inbound, len(msgs))
	for i, m := range msgs {
		in[i] = mailbox.Inbound{Message: m}
	}
	if _, err := mb.WriteInbound(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
}

func ntInterrupt(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch ended on SIGINT with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end on SIGINT")
	}
}

// Without the service: a message another process writes is printed; one
// written at the instant between watch's position in the journal and its
// first listing (the gate holds watch there) is printed exactly once,
// though both the listing and the journal hold it.
func TestWatchWithoutService(t *testing.T) {
	ws := newWorkspace(t)
	old := testutil.Message(schema.Lark, "om_w0", time.Now().Add(-time.Minute), "before")
	ntSeed(t, ws, old)
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, lines := ntWatch(t, ws, []string{watchGateEnv + "=" + gate}, "--since", "1h")
	// Opening the gate for writing waits for watch to open it: watch has
	// its position now, and has listed nothing.
	g, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	during := testutil.Message(schema.Lark, "om_w1", time.Now(), "during the start")
	ntSeed(t, ws, during)
	g.WriteString("go\n")
	g.Close()
	got := []string{ntWatchID(t, lines, "the first listing"), ntWatchID(t, lines, "the message written during the start")}
	if got[0] != old.ID || got[1] != during.ID {
		t.Fatalf("printed %v, want %s then %s", got, old.ID, during.ID)
	}
	after := testutil.Message(schema.Lark, "om_w2", time.Now(), "after")
	ntSeed(t, ws, after)
	if id := ntWatchID(t, lines, "a message written later"); id != after.ID {
		t.Fatalf("printed %s (again?), want %s", id, after.ID)
	}
	ntInterrupt(t, cmd)
	for l := range lines {
		t.Errorf("more printed: %s", l)
	}
}

// With the service: mail handed to the receiver is printed as it
// arrives; filters apply to what arrives.
func TestWatchWithService(t *testing.T) {
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf("courier:\n  http: {listen: %s}\n  adapters:\n    email:\n      enabled: true\n      receiver: {smtp: %s}\n", web, recv))
	s := startServe(t, ws, web)
	defer s.Stop(t)
	cmd, lines := ntWatch(t, ws, nil, "--since", "1h", "--provider", "email")
	ntSeed(t, ws, testutil.Message(schema.Lark, "om_filtered", time.Now(), "not email")) // --provider email leaves it out
	if err := sendMail(recv, "ann@example.com", "agent@example.com", "w-1@example.com", "first", "one"); err != nil {
		t.Fatal(err)
	}
	first := ntWatchID(t, lines, "the first mail")
	if err := sendMail(recv, "ann@example.com", "agent@example.com", "w-2@example.com", "second", "two"); err != nil {
		t.Fatal(err)
	}
	second := ntWatchID(t, lines, "the second mail")
	ids := countIDs(t, ws, "--provider", "email")
	if len(ids) != 2 || first == second || !strings.Contains(strings.Join(ids, " "), first) || !strings.Contains(strings.Join(ids, " "), second) {
		t.Fatalf("watch printed %s, %s; the mailbox holds %v", first, second, ids)
	}
	ntInterrupt(t, cmd)
}

// --since ID prints what arrived after that message, in arrival order
// (the journal's), then what arrives.
func TestWatchSinceID(t *testing.T) {
	ws := newWorkspace(t)
	a := testutil.Message(schema.Lark, "om_s1", time.Now(), "a")
	b := testutil.Message(schema.Lark, "om_s2", time.Now().Add(-time.Hour), "b: older timestamp, arrived later")
	c := testutil.Message(schema.Lark, "om_s3", time.Now(), "c")
	ntSeed(t, ws, a)
	ntSeed(t, ws, b)
	ntSeed(t, ws, c)
	cmd, lines := ntWatch(t, ws, nil, "--since", a.ID)
	got := []string{ntWatchID(t, lines, "b"), ntWatchID(t, lines, "c")}
	if got[0] != b.ID || got[1] != c.ID {
		t.Fatalf("printed %v, want %s, %s", got, b.ID, c.ID)
	}
	d := testutil.Message(schema.Lark, "om_s4", time.Now(), "d")
	ntSeed(t, ws, d)
	if id := ntWatchID(t, lines, "d"); id != d.ID {
		t.Fatalf("printed %s, want %s", id, d.ID)
	}
	ntInterrupt(t, cmd)
	if _, e, code := cli(t, ws, "", "watch", "--since", "lark_om_nope"); code != exitUsage || !strings.Contains(e, "lark_om_nope") {
		t.Errorf("--since of an unknown id: %d %s", code, e)
	}
}

// `courier watch | head -1` ends once head has its line, without waiting
// for another message to write.
func TestWatchPipeClosed(t *testing.T) {
	ws := newWorkspace(t)
	sh := exec.Command("/bin/sh", "-c", fmt.Sprintf("%q --root %q watch --since 1h --format id | head -1", courierBin, ws))
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) })
	m := testutil.Message(schema.Lark, "om_p1", time.Now(), "one")
	ntSeed(t, ws, m)
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != m.ID {
		t.Fatalf("head got %q", line)
	}
	done := make(chan error, 1)
	go func() { done <- sh.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the pipeline ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("courier watch | head -1 did not end once head had its line")
	}
	// watch itself is gone, not orphaned.
	if out, _ := exec.Command("pgrep", "-f", "--", ws+" watch").Output(); len(out) > 0 {
		t.Errorf("watch still runs: pids %s", out)
	}
}

// --outbound prints drafts as they are delivered or dead-lettered, with
// their status, and no inbound message.
func TestWatchOutbound(t *testing.T) {
	ws := newWorkspace(t)
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, lines := ntWatch(t, ws, []string{watchGateEnv + "=" + gate}, "--outbound")
	g, err := os.OpenFile(gate, os.O_WRONLY, 0) // watch has its position
	if err != nil {
		t.Fatal(err)
	}
	g.WriteString("go\n")
	g.Close()
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	ctx := context.Background()
	in := testutil.Message(schema.Lark, "om_o1", time.Now(), "inbound: not printed")
	if _, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: in}}, nil); err != nil {
		t.Fatal(err)
	}
	d := &schema.Draft{ID: "lark_out_" + strings.Repeat("a", 32), Provider: schema.Lark, To: schema.Recipients{"oc_1"}, CreatedAt: schema.TimePtr(time.Now()), Body: "x\n"}
	rel, err := mb.Queue(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	d.Delivery = &schema.Delivery{Status: schema.DeliveryFailed, Attempts: 8, Reason: "230002 bot not in chat"}
	if _, err := mb.FinishDelivery(ctx, d, rel, mailbox.BoxDeadletter); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		var e mailbox.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.ID != d.ID || e.Status != mailbox.StatusDead {
			t.Errorf("printed %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dead-lettered draft was not printed")
	}
	ntInterrupt(t, cmd)
}
