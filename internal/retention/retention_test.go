package retention

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

var ctx = context.Background()

// crashEnv makes the test binary a prune that kills itself (SIGKILL) at
// the nth occurrence of a step: "<workspace>\t<step>\t<n>".
const crashEnv = "COURIER_TEST_PRUNE_CRASH"

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashEnv); spec != "" {
		os.Exit(crashMain(spec))
	}
	os.Exit(m.Run())
}

func crashMain(spec string) int {
	parts := strings.Split(spec, "\t")
	n, _ := strconv.Atoi(parts[2])
	mb, dz, err := open(parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	seen := 0
	kill := func(s string) {
		if s == parts[1] {
			if seen++; seen == n {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
		}
	}
	if _, err := Prune(ctx, mb, dz, Options{OlderThan: 30 * 24 * time.Hour, step: kill}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0 // the step never came
}

func open(ws string) (*mailbox.Mailbox, *dropzone.Store, error) {
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		return nil, nil, err
	}
	dz, err := dropzone.Open(mailbox.Layout{Root: ws}.Dropzone(), nil)
	if err != nil {
		mb.Close()
		return nil, nil, err
	}
	return mb, dz, nil
}

// openT opens the workspace ws for the test.
func openT(t *testing.T, ws string) (*mailbox.Mailbox, *dropzone.Store) {
	t.Helper()
	mb, dz, err := open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mb.Close(); dz.Close() })
	return mb, dz
}

// fixture is a workspace of every kind of file, a year old unless said,
// each naming an object of its own (and two sharing one).
type fixture struct {
	ws      string
	objects map[string][]byte // name -> content
	ids     map[string]string // name -> dropzone id
	files   map[string]string // id of a message or draft -> path relative to ws, for those that stay
	gone    []string          // the files a prune of 30 days removes (rel)
	goneObj []string          // the objects it removes (names)
}

var old = time.Now().Add(-400 * 24 * time.Hour).UTC().Truncate(time.Second)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ws: t.TempDir(), objects: map[string][]byte{}, ids: map[string]string{}, files: map[string]string{}}
	if err := mailbox.Init(f.ws); err != nil {
		t.Fatal(err)
	}
	mb, dz := openT(t, f.ws)
	for _, name := range []string{"A", "B", "C", "D", "E", "F", "G", "H", "K"} {
		f.objects[name] = bytes.Repeat([]byte("object "+name+"\n"), 100+len(f.objects)*37)
		o, err := dz.Put(bytes.NewReader(f.objects[name]))
		if err != nil {
			t.Fatal(err)
		}
		f.ids[name] = o.ID
		if name != "G" { // G was used a minute ago
			backdate(t, objPath(f.ws, o.ID))
		}
	}
	// Archived messages (done a year ago): A alone; B, also named by a
	// message still in the inbox; H, done only now.
	f.inbound(t, mb, "old1", "A", "done", true)
	f.inbound(t, mb, "old2", "B", "done", true)
	f.inbound(t, mb, "fresh", "B", "", false)
	f.inbound(t, mb, "claimed", "K", "claim", false)
	f.inbound(t, mb, "recent", "H", "done", false)
	// Drafts: delivered a year ago (C), queued (D), dead (E).
	f.draft(t, mb, "c", "C", mailbox.BoxArchive)
	f.draft(t, mb, "d", "D", mailbox.BoxOutbound)
	f.draft(t, mb, "e", "E", mailbox.BoxDeadletter)
	f.goneObj = []string{"A", "C", "F"}
	return f
}

// objPath is where the object id lives in the workspace ws.
func objPath(ws, id string) string {
	h := strings.TrimPrefix(id, "sha256:")
	return filepath.Join(mailbox.Layout{Root: ws}.Dropzone(), "sha256", h[:2], h)
}

func backdate(t *testing.T, path string) {
	t.Helper()
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) artifact(name string) schema.Artifact {
	return schema.Artifact{ID: f.ids[name], Name: name + ".txt", Type: schema.ArtifactDocument, Size: int64(len(f.objects[name])),
		Path: strings.Replace(f.ids[name], "sha256:", "sha256/"+f.ids[name][7:9]+"/", 1)}
}

func (f *fixture) inbound(t *testing.T, mb *mailbox.Mailbox, uid, obj, then string, goes bool) {
	t.Helper()
	m := testutil.Message(schema.Email, uid, old, "message "+uid)
	m.Artifacts = []schema.Artifact{f.artifact(obj)}
	if _, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: m}}, nil); err != nil {
		t.Fatal(err)
	}
	rel := ".monoco/mailbox/inbound/email/" + mailbox.FileName(old, m.ID)
	if then != "" {
		if _, err := mb.Claim(ctx, m.ID, "ann", 0); err != nil {
			t.Fatal(err)
		}
	}
	if then == "done" {
		var err error
		if rel, err = mb.Done(ctx, m.ID, "ann"); err != nil {
			t.Fatal(err)
		}
	}
	if goes {
		backdate(t, filepath.Join(f.ws, rel))
		f.gone = append(f.gone, rel)
		return
	}
	f.files[m.ID] = rel
}

func (f *fixture) draft(t *testing.T, mb *mailbox.Mailbox, uid, obj string, box mailbox.Box) {
	t.Helper()
	d := &schema.Draft{ID: "email_out_" + strings.Repeat(uid, 32), Provider: schema.Email, To: schema.Recipients{"bob@example.com"},
		Subject: "re " + uid, CreatedAt: schema.TimePtr(old), Body: "reply " + uid + "\n",
		Artifacts: []schema.DraftArtifact{{ID: f.ids[obj], Name: obj + ".txt", Size: int64(len(f.objects[obj]))}}}
	rel, err := mb.Queue(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if box != mailbox.BoxOutbound {
		d.Delivery = &schema.Delivery{Status: schema.DeliverySent, Attempts: 1, SentAt: schema.TimePtr(old)}
		if box == mailbox.BoxDeadletter {
			d.Delivery = &schema.Delivery{Status: schema.DeliveryFailed, Attempts: 5, FailedAt: schema.TimePtr(old), Reason: "refused"}
		}
		if rel, err = mb.FinishDelivery(ctx, d, rel, box); err != nil {
			t.Fatal(err)
		}
	}
	backdate(t, filepath.Join(f.ws, rel))
	if box == mailbox.BoxArchive {
		f.gone = append(f.gone, rel)
		return
	}
	f.files[d.ID] = rel
}

// checkKept checks that every file that stays is there and indexed, and
// that every object a remaining file names reads back byte for byte.
func (f *fixture) checkKept(t *testing.T) {
	t.Helper()
	mb, _ := openT(t, f.ws)
	for id, rel := range f.files {
		if _, err := os.Stat(filepath.Join(f.ws, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
		if _, _, err := mb.ReadFile(ctx, id); err != nil {
			t.Errorf("read %s: %v", id, err)
		}
	}
	for name, content := range f.objects {
		if slices.Contains(f.goneObj, name) {
			continue
		}
		got, err := os.ReadFile(objPath(f.ws, f.ids[name]))
		if err != nil || !bytes.Equal(got, content) {
			t.Errorf("object %s: %v (%d bytes, want %d)", name, err, len(got), len(content))
		}
	}
}

// checkDone checks that a prune finished: the old archive and the objects
// only it named are gone, from the disk and the index.
func (f *fixture) checkDone(t *testing.T) {
	t.Helper()
	f.checkKept(t)
	mb, dz := openT(t, f.ws)
	for _, rel := range f.gone {
		if _, err := os.Stat(filepath.Join(f.ws, rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", rel, err)
		}
		_, id, _ := mailbox.ParseFileName(filepath.Base(rel))
		if _, err := mb.Get(ctx, id); !errors.Is(err, mailbox.ErrNotFound) {
			t.Errorf("%s still indexed (%v)", id, err)
		}
	}
	for _, name := range f.goneObj {
		if dz.Has(f.ids[name]) {
			t.Errorf("object %s still there", name)
		}
	}
}

func TestPrune(t *testing.T) {
	f := newFixture(t)
	mb, dz := openT(t, f.ws)
	dry, err := Prune(ctx, mb, dz, Options{OlderThan: 30 * 24 * time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range dry.Files {
		names = append(names, it.Name)
	}
	sort.Strings(names)
	want := slices.Clone(f.gone)
	sort.Strings(want)
	if !slices.Equal(names, want) || dry.Messages != 2 || dry.Drafts != 1 || dry.Objects != 3 || dry.ObjectBytes == 0 || dry.FileBytes == 0 {
		b, _ := json.MarshalIndent(dry, "", " ")
		t.Fatalf("dry run: %s\nwant files %v", b, want)
	}
	f.checkKept(t) // a dry run removes nothing
	for _, rel := range f.gone {
		if _, err := os.Stat(filepath.Join(f.ws, rel)); err != nil {
			t.Errorf("dry run removed %s", rel)
		}
	}
	rep, err := Prune(ctx, mb, dz, Options{OlderThan: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Messages != dry.Messages || rep.Drafts != dry.Drafts || rep.Objects != dry.Objects || rep.ObjectBytes != dry.ObjectBytes {
		t.Errorf("prune %+v, dry run said %+v", rep, dry)
	}
	f.checkDone(t)
	// Nothing more to do.
	again, err := Prune(ctx, mb, dz, Options{OlderThan: 30 * 24 * time.Hour})
	if err != nil || again.Messages+again.Drafts+again.Objects != 0 {
		t.Errorf("second prune: %+v %v", again, err)
	}
	if _, err := Prune(ctx, mb, dz, Options{}); err == nil {
		t.Error("a prune without an age ran")
	}
}

// A prune killed (SIGKILL, a real process) at each of its steps loses
// nothing still referenced, and a second run finishes the job.
func TestPruneKilled(t *testing.T) {
	points := []struct {
		step string
		n    int
	}{{"listed", 1}, {"unindexed", 1}, {"file", 1}, {"file", 2}, {"files", 1}, {"object", 1}, {"object", 2}}
	for _, p := range points {
		t.Run(fmt.Sprintf("%s-%d", p.step, p.n), func(t *testing.T) {
			f := newFixture(t)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+f.ws+"\t"+p.step+"\t"+strconv.Itoa(p.n))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the prune was not killed at %s %d: %v\n%s", p.step, p.n, err, out)
			}
			f.checkKept(t)
			mb, dz, err := open(f.ws)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Prune(ctx, mb, dz, Options{OlderThan: 30 * 24 * time.Hour}); err != nil {
				t.Fatal(err)
			}
			mb.Close()
			dz.Close()
			f.checkDone(t)
		})
	}
}

// A message filed while a prune runs, with an attachment the prune found
// unreferenced (content addressing: the same bytes, the same object),
// keeps it: the Put that reused the object marked it in use.
func TestPruneSparesObjectReusedMeanwhile(t *testing.T) {
	f := newFixture(t)
	mb, dz := openT(t, f.ws)
	reused := false
	step := func(s string) {
		if s != "files" || reused {
			return
		}
		reused = true
		// The service stores an attachment with A's bytes and files a
		// message naming it, between the prune's look and its sweep.
		o, err := dz.Put(bytes.NewReader(f.objects["A"]))
		if err != nil || o.ID != f.ids["A"] {
			t.Fatalf("put: %v %v", o, err)
		}
		m := testutil.Message(schema.Email, "late", time.Now(), "late")
		m.Artifacts = []schema.Artifact{f.artifact("A")}
		if _, err := mb.WriteInbound(ctx, []mailbox.Inbound{{Message: m}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Prune(ctx, mb, dz, Options{OlderThan: 30 * 24 * time.Hour, step: step})
	if err != nil {
		t.Fatal(err)
	}
	if !reused || rep.Objects != 2 {
		t.Errorf("removed %d objects, want 2 (C and F): %+v", rep.Objects, rep.ObjectList)
	}
	got, err := os.ReadFile(objPath(f.ws, f.ids["A"]))
	if err != nil || !bytes.Equal(got, f.objects["A"]) {
		t.Fatalf("the object a new message names was removed: %v", err)
	}
}

// courier.retention.archive: the service's daily run prunes on its own.
func TestDaily(t *testing.T) {
	f := newFixture(t)
	mb, dz := openT(t, f.ws)
	var logs bytes.Buffer
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		Daily(c, mb, dz, 30*24*time.Hour, 10*time.Millisecond, slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)))
		close(done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for dz.Has(f.ids["A"]) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	f.checkDone(t)
	if !strings.Contains(logs.String(), "retention: pruned the archive") {
		t.Errorf("log: %s", logs.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
