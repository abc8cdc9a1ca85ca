package notify

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ntDead is what the hook's dead letters hold: id and attempts by seq.
func ntDead(t *testing.T, r *Runner, hook string) map[string]int {
	t.Helper()
	rows, err := r.mb.DB().QueryContext(context.Background(), `SELECT id, attempts FROM notify_dead WHERE hook = ?`, hook)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	return got
}

// ntWaitLog waits until the log holds n lines with want.
func ntWaitLog(t *testing.T, log *ntLog, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(log.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the log has %d of %d %q:\n%s", strings.Count(log.String(), want), n, want, log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Attack (issue 18, item 3): a sender's 140 KB References id is the
// thread key; in COURIER_THREAD_KEY it made exec fail (argument list too
// long), retried forever. It is cut to 1,024 bytes ending in a hash of
// the whole key, and the hook runs.
func TestExecHookThreadKeyBounded(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	ntStart(t, mb, Hook{Name: "wake", Exec: []string{`printf %s "$COURIER_THREAD_KEY" > "$OUT/key.tmp"; mv "$OUT/key.tmp" "$OUT/key"`}, Shell: true,
		Env: map[string]string{"OUT": dir}})
	long := "email-thread:" + strings.Repeat("x", 140<<10) + "@evil.example"
	other := "email-thread:" + strings.Repeat("x", 140<<10) + "@other.example"
	ntWrite(t, mb, ntMsg("C1_1700000000_001501", long))
	var key []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if key, err = os.ReadFile(filepath.Join(dir, "key")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hook never ran")
		}
	}
	if len(key) > 1024 || !strings.HasPrefix(long, string(key[:1000])) {
		t.Errorf("COURIER_THREAD_KEY is %d bytes: %.80q…%q", len(key), key, key[max(len(key)-40, 0):])
	}
	if boundValue(long, 1024) == boundValue(other, 1024) {
		t.Error("two long keys that differ after the cut are cut alike")
	}
	if s := "email-thread:short@x"; boundValue(s, 1024) != s {
		t.Error("a short key is changed")
	}
}

// A hook that cannot be run (its program not executable: EACCES; absent:
// ENOENT) fails for good at once: the call goes to the hook's dead
// letters, tried once, and the next event of the thread runs.
func TestExecCannotRunIsPermanent(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	prog := filepath.Join(dir, "hook")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log ntLog
	r := New(mb, &Options{Hooks: []Hook{{Name: "noexec", Exec: []string{prog}}, {Name: "absent", Exec: []string{filepath.Join(dir, "absent")}}},
		Root: mb.Root, BackoffBase: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, b := ntMsg("C1_1700000000_001601", "T"), ntMsg("C1_1700000000_001602", "T")
	ntWrite(t, mb, a, b)
	ntWaitLog(t, &log, "set aside in its dead letters", 4)
	time.Sleep(100 * time.Millisecond) // a retry would have run by now
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.Stop(ctx)
	if out := log.String(); strings.Contains(out, "retrying") {
		t.Errorf("retried:\n%s", out)
	}
	for _, hook := range []string{"noexec", "absent"} {
		if got := ntDead(t, r, hook); len(got) != 2 || got[a.ID] != 1 || got[b.ID] != 1 {
			t.Errorf("%s: dead letters %v, want both events after 1 attempt", hook, got)
		}
	}
}

// A call that keeps failing is set aside after max_attempts, and the
// next event of its thread runs.
func TestMaxAttemptsSetsAside(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	var log ntLog
	script := `if [ "$COURIER_MESSAGE_ID" = "$BAD" ]; then exit 3; fi; echo "$COURIER_MESSAGE_ID" >> "$D/ok"`
	first, next := ntMsg("C1_1700000000_001701", "T"), ntMsg("C1_1700000000_001702", "T")
	r := New(mb, &Options{Hooks: []Hook{{Name: "flaky", Exec: []string{script}, Shell: true, MaxAttempts: 3,
		Env: map[string]string{"D": dir, "BAD": first.ID}}},
		Root: mb.Root, BackoffBase: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ntWrite(t, mb, first, next)
	ntWaitLog(t, &log, "notify: hook ran", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.Stop(ctx)
	if got := ntDead(t, r, "flaky"); len(got) != 1 || got[first.ID] != 3 {
		t.Errorf("dead letters %v, want %s after 3 attempts", got, first.ID)
	}
	if n := strings.Count(log.String(), "retrying"); n != 2 {
		t.Errorf("%d retries, want 2", n)
	}
	if ok, _ := os.ReadFile(filepath.Join(dir, "ok")); string(ok) != next.ID+"\n" {
		t.Errorf("the next event of the thread: %q", ok)
	}
}

// The dead letters are counted for `courier status`, and Retry (`courier
// hooks retry`) puts them back: the running service runs them at its
// next poll.
func TestRetryDeadLetters(t *testing.T) {
	mb := ntMailbox(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "fail"), nil, 0o600)
	var log ntLog
	r := New(mb, &Options{Hooks: []Hook{{Name: "h", Exec: []string{`if [ -e "$D/fail" ]; then exit 3; fi; echo "$COURIER_MESSAGE_ID" >> "$D/ok"`}, Shell: true,
		MaxAttempts: 1, Env: map[string]string{"D": dir}}},
		Root: mb.Root, Poll: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.Stop(ctx)
	}()
	m := ntMsg("C1_1700000000_001801", "T")
	ntWrite(t, mb, m)
	ntWaitLog(t, &log, "set aside in its dead letters", 1)
	ctx := context.Background()
	if got, err := DeadCounts(ctx, mb.DB()); err != nil || got["h"] != 1 {
		t.Fatalf("DeadCounts = %v, %v; want h: 1", got, err)
	}
	if n, err := Retry(ctx, mb.DB(), []string{"other"}); err != nil || n != 0 {
		t.Errorf("Retry of another hook moved %d (%v)", n, err)
	}
	os.Remove(filepath.Join(dir, "fail"))
	if n, err := Retry(ctx, mb.DB(), nil); err != nil || n != 1 {
		t.Fatalf("Retry moved %d (%v), want 1", n, err)
	}
	ntWaitLog(t, &log, "notify: hook ran", 1)
	if ok, _ := os.ReadFile(filepath.Join(dir, "ok")); string(ok) != m.ID+"\n" {
		t.Errorf("the hook ran for %q", ok)
	}
	if got, _ := DeadCounts(ctx, mb.DB()); len(got) != 0 {
		t.Errorf("DeadCounts after the retry = %v", got)
	}
}
