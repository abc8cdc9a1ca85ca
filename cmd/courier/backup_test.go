package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// courier backup, a real process, while mail keeps arriving (each with an
// attachment) and agents mark messages done: the tar, extracted into a new
// folder, holds every message filed before the backup began with its
// attachment byte for byte, a database SQLite finds intact, and a
// workspace doctor passes.
func TestBackupUnderLoad(t *testing.T) {
	ws := newWorkspace(t)
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	dz, err := dropzone.Open(mailbox.Layout{Root: ws}.Dropzone(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dz.Close()
	n := 0
	file := func() string { // one more message, with an attachment of its own
		n++
		body := bytes.Repeat([]byte(fmt.Sprintf("attachment %d\n", n)), 200)
		o, err := dz.Put(bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return ""
		}
		m := testutil.Message(schema.Email, fmt.Sprintf("b%05d", n), time.Now(), fmt.Sprintf("message %d", n))
		m.Artifacts = []schema.Artifact{{ID: o.ID, Name: "a.txt", Type: schema.ArtifactDocument, Size: o.Size, Path: o.Path}}
		if _, err := mb.WriteInbound(context.Background(), []mailbox.Inbound{{Message: m}}, nil); err != nil {
			t.Error(err)
		}
		return m.ID
	}
	var before []string
	for range 300 {
		before = append(before, file())
	}
	// The load: new mail, and the earlier mail marked done (moved to
	// archive/), until the backup has ended.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	var filed atomic.Int64
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			file()
			filed.Add(1)
			if i < len(before) {
				id := before[i]
				if _, err := mb.Claim(context.Background(), id, "ann", 0); err == nil {
					mb.Done(context.Background(), id, "ann")
				}
			}
		}
	}()
	for filed.Load() < 20 { // the load is under way
		time.Sleep(5 * time.Millisecond)
	}
	tarPath := filepath.Join(t.TempDir(), "courier.tar")
	out, err := exec.Command(courierBin, "--root", ws, "backup", tarPath).CombinedOutput()
	stop.Store(true)
	wg.Wait()
	if err != nil || !strings.Contains(string(out), "wrote "+tarPath) {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	t.Logf("%s(%d messages filed meanwhile)", out, filed.Load())
	if fi, err := os.Stat(tarPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tar mode: %v %v", fi.Mode(), err)
	}
	listing, err := exec.Command("tar", "-tf", tarPath).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, never := range []string{".monoco/run/", "courier.sock", "courier.pid", ".db-wal", ".db-shm", "/.tmp/put-", "/.tmp/w-"} {
		if strings.Contains(string(listing), never) {
			t.Errorf("the tar holds %s", never)
		}
	}

	checkRestore(t, tarPath, before)
	// A backup never overwrites.
	if _, e, code := cli(t, ws, "", "backup", tarPath); code == 0 || !strings.Contains(e, "exists") {
		t.Errorf("backup over an existing file: %d %s", code, e)
	}
}

// checkRestore extracts the backup at tarPath into a new folder and checks
// it: a database SQLite finds intact, every message of before there after
// reindex with the objects it names (attachments, raw source) byte for
// byte, and doctor passing.
func checkRestore(t *testing.T, tarPath string, before []string) {
	t.Helper()
	restored := t.TempDir()
	if out, err := exec.Command("tar", "-xpf", tarPath, "-C", restored).CombinedOutput(); err != nil {
		t.Fatalf("extract: %v %s", err, out)
	}
	db, err := sql.Open("sqlite", filepath.Join(restored, ".monoco/mailbox/.state/courier.db"))
	if err != nil {
		t.Fatal(err)
	}
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q %v", check, err)
	}
	db.Close()
	if _, e, code := cli(t, restored, "", "reindex"); code != 0 {
		t.Fatalf("reindex: %d %s", code, e)
	}
	got, _, _ := cli(t, restored, "", "list", "--all", "--format", "id")
	have := map[string]bool{}
	for _, id := range strings.Fields(got) {
		have[id] = true
	}
	rmb, err := mailbox.Open(restored, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rmb.Close()
	for _, id := range before {
		if !have[id] {
			t.Errorf("%s, filed before the backup, is not in the restored mailbox", id)
			continue
		}
		m, _, err := rmb.Message(context.Background(), id)
		if err != nil {
			t.Errorf("read %s: %v", id, err)
			continue
		}
		arts := m.Artifacts
		if r := m.Metadata.Extra.Raw; r != nil {
			arts = append(arts, *r)
		}
		if len(arts) == 0 {
			t.Errorf("%s names no object", id)
		}
		for _, a := range arts {
			data, err := os.ReadFile(filepath.Join(restored, ".monoco/dropzone", a.Path))
			if err != nil || fmt.Sprintf("sha256:%x", sha256.Sum256(data)) != a.ID {
				t.Errorf("%s: object %s: %v", id, a.ID, err)
			}
		}
	}
	if out, e, code := cli(t, restored, "", "doctor"); code != 0 {
		t.Errorf("doctor on the restored workspace: %d\n%s%s", code, out, e)
	}
}

// courier backup beside a real `courier serve` taking mail over SMTP and
// agents marking it done through its socket.
func TestBackupWhileServing(t *testing.T) {
	ws := newWorkspace(t)
	recv, web := testutil.FreeAddr(t), testutil.FreeAddr(t)
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  retention: {archive: 365d}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s, addresses: [agent@corp.example]}
`, web, recv))
	s := startServe(t, ws, web)
	var before []string
	for i := range 60 {
		if err := sendMail(recv, "ann@example.com", "agent@corp.example", fmt.Sprintf("pre%d@example.com", i), "before", "filed before the backup"); err != nil {
			t.Fatalf("send: %v\n%s", err, s.Log())
		}
	}
	before = countIDs(t, ws, "--all")
	if len(before) != 60 {
		t.Fatalf("filed %d of 60", len(before))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			if err := sendMail(recv, "ann@example.com", "agent@corp.example", fmt.Sprintf("load%d@example.com", i), "load", "during the backup"); err != nil {
				t.Error(err)
				return
			}
			if i < len(before) {
				exec.Command(courierBin, "--root", ws, "claim", before[i]).Run()
				exec.Command(courierBin, "--root", ws, "done", before[i]).Run()
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	tarPath := filepath.Join(t.TempDir(), "serving.tar")
	out, err := exec.Command(courierBin, "--root", ws, "backup", tarPath).CombinedOutput()
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if !strings.Contains(s.Log(), "retention: the archive is pruned daily") {
		t.Errorf("serve did not say it prunes daily:\n%s", s.Log())
	}
	checkRestore(t, tarPath, before)
}
