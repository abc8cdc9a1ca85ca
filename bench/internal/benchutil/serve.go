package benchutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
)

// ServeEvents starts `courier serve` (bin) on the workspace ws, whose HTTP
// listener is web, has send deliver n events to it, stops it and checks
// that inbound/<provider>/ holds n files: a chat benchmark's courier run.
// It returns what send measured.
func ServeEvents(b *testing.B, bin, ws, web, provider string, n int, send func() []time.Duration) []time.Duration {
	b.Helper()
	s := testutil.StartServe(b, bin, web, "--root", ws, "serve")
	lat := send()
	s.Stop(b)
	if files, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/inbound", provider, "*.md")); len(files) != n {
		b.Fatalf("%d files in inbound/%s for %d events", len(files), provider, n)
	}
	return lat
}

// ServeReplies queues n drafts (draft(i) is the i-th) with `courier send`
// while the service is down, then times `courier serve` from its start
// until delivered() says n went out, and waits for archive/<provider>/ to
// hold them all: a chat benchmark's replies run.
func ServeReplies(b *testing.B, bin, ws, web, provider string, n int, draft func(i int) string, delivered func() int) time.Duration {
	b.Helper()
	drafts := filepath.Join(ws, "drafts")
	if err := os.Mkdir(drafts, 0o700); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		d := filepath.Join(drafts, fmt.Sprintf("r%d.md", i))
		if err := os.WriteFile(d, []byte(draft(i)), 0o600); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command(bin, "--root", ws, "send", d).CombinedOutput(); err != nil {
			b.Fatalf("send %d: %v\n%s", i, err, out)
		}
	}
	start := time.Now()
	s := testutil.StartServe(b, bin, web, "--root", ws, "serve")
	if !testutil.Poll(10*time.Minute, func() bool { return delivered() >= n }) {
		b.Fatalf("%d of %d delivered:\n%s", delivered(), n, s.Log())
	}
	took := time.Since(start)
	if !testutil.Poll(time.Minute, func() bool {
		a, _ := filepath.Glob(filepath.Join(ws, ".monoco/mailbox/archive", provider, "*.md"))
		return len(a) == n
	}) {
		b.Fatal("not every draft archived")
	}
	s.Stop(b)
	return took
}
