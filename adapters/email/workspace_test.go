package email

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/wstest"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// workspace is a real mailbox with the real ingest pipeline in front of it:
// what the IMAP source and the receiver deliver to in production. Tests
// assert on its files, not on what a fake recorded.
type workspace struct {
	root string
	mb   *mailbox.Mailbox
	pipe *ingest.Pipeline
	dz   *dropzone.Store
}

func newWorkspace(t testing.TB) *workspace {
	t.Helper()
	w := wstest.New(t, nil)
	return &workspace{root: w.Root, mb: w.MB, pipe: w.Pipe, dz: w.DZ}
}

// dir is inbound/email.
func (w *workspace) dir() string { return w.mb.Dir(mailbox.BoxInbound, schema.Email) }

// files returns the names of the inbound email files, sorted.
func (w *workspace) files(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(w.dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".md") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// receiveOne hands raw to the receiver at addr over SMTP and returns the
// one file it wrote: its name and its bytes.
func (w *workspace) receiveOne(t *testing.T, addr, raw string) (string, []byte) {
	t.Helper()
	if err := sendSMTP(t, addr, raw); err != nil {
		t.Fatalf("DATA: %v", err)
	}
	names := w.files(t)
	if len(names) != 1 {
		t.Fatalf("files %v", names)
	}
	data, err := os.ReadFile(filepath.Join(w.dir(), names[0]))
	if err != nil {
		t.Fatal(err)
	}
	return names[0], data
}

// waitFiles polls the inbound folder until it holds at least n files, or
// fails the test after timeout.
func (w *workspace) waitFiles(t testing.TB, n int, timeout time.Duration) []string {
	t.Helper()
	var names []string
	if !testutil.Poll(timeout, func() bool { names = w.files(t); return len(names) >= n }) {
		t.Fatalf("%d inbound files after %v, want %d: %v", len(names), timeout, n, names)
	}
	return names
}

// messages decodes every inbound file, by id.
func (w *workspace) messages(t testing.TB) map[string]*schema.Message {
	t.Helper()
	out := map[string]*schema.Message{}
	for _, name := range w.files(t) {
		data, err := os.ReadFile(filepath.Join(w.dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		m, err := schema.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, dup := out[m.ID]; dup {
			t.Errorf("two files for %s", m.ID)
		}
		out[m.ID] = m
	}
	return out
}

// subjects returns the subjects of the inbound files, sorted.
func (w *workspace) subjects(t testing.TB) []string {
	t.Helper()
	var s []string
	for _, m := range w.messages(t) {
		s = append(s, m.Session.Name)
	}
	sort.Strings(s)
	return s
}

// checkpoint returns the value saved under key ("" when none).
func (w *workspace) checkpoint(t testing.TB, key string) string {
	t.Helper()
	v, _, err := w.mb.Checkpoint(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitCheckpoint polls until the checkpoint under key is want.
func (w *workspace) waitCheckpoint(t testing.TB, key, want string, timeout time.Duration) {
	t.Helper()
	var got string
	if !testutil.Poll(timeout, func() bool { got = w.checkpoint(t, key); return got == want }) {
		t.Fatalf("checkpoint %s = %q after %v, want %q", key, got, timeout, want)
	}
}

// written is how many email files the pipeline has written.
func (w *workspace) written() uint64 { return w.pipe.Stats()[schema.Email].Written }

// runSource runs src.Run in a goroutine until the returned stop is called
// (also at cleanup); stop fails the test if Run does not return promptly.
func runSource(t testing.TB, src adapters.Source, sink adapters.Sink) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, sink) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: Run: %v", src.Name(), err)
				}
			case <-time.After(15 * time.Second):
				t.Errorf("%s: Run did not return 15 s after its context ended", src.Name())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// testMail is a small message with a Message-ID of its own, CRLF line ends.
func testMail(n int, subject string) []byte {
	return []byte(fmt.Sprintf("From: Ann Example <ann@example.com>\r\n"+
		"To: Agent <agent@example.com>\r\n"+
		"Subject: %s\r\n"+
		"Date: Fri, 06 Feb 2026 %02d:%02d:00 +0000\r\n"+
		"Message-ID: <msg-%d@test.example>\r\n"+
		"MIME-Version: 1.0\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n"+
		"\r\n"+
		"Body of message %d.\r\n", subject, 8+n/60%12, n%60, n, n))
}

// mailID is the mailbox id of testMail(n, ...).
func mailID(n int) string { return threading.EmailID(fmt.Sprintf("<msg-%d@test.example>", n)) }

// read returns the content of a dropzone object.
func (w *workspace) read(t testing.TB, id string) []byte {
	t.Helper()
	f, err := w.dz.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
