package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// BenchmarkWritingVerbs is each writing verb of the command line (in
// process, without the process start), acting on the mailbox itself
// ("direct", the baseline: what every verb did before the service became
// the only writer) beside the same verb through the service's socket
// ("service"): what the socket, the peer credentials and the second
// parse cost. send/16MiB also shows that an artifact is streamed: its
// B/op (client and service together) stays far below its size.
func BenchmarkWritingVerbs(b *testing.B) {
	for _, mode := range []string{"direct", "service"} {
		b.Run("claim+done/"+mode, func(b *testing.B) {
			ws := benchWorkspace(b, mode)
			msgs := make([]*schema.Message, b.N)
			at := testutil.Time("2026-01-01T00:00:00Z")
			for i := range msgs {
				msgs[i] = testutil.Message(schema.Lark, fmt.Sprintf("om_b%d", i), at.Add(time.Duration(i)*time.Second), "x")
			}
			benchSeed(b, ws, msgs)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchRun(b, ws, "claim", msgs[i].ID, "--agent", "bench")
				benchRun(b, ws, "done", msgs[i].ID, "--agent", "bench")
			}
		})
	}
	for _, mode := range []string{"direct", "service"} {
		b.Run("send-text/"+mode, func(b *testing.B) {
			ws := benchWorkspace(b, mode)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				benchRun(b, ws, "send", "--provider", "lark", "--to", "oc_1", "--text", "Deployed.")
			}
		})
	}
	for _, mode := range []string{"direct", "service"} {
		b.Run("send-16MiB/"+mode, func(b *testing.B) {
			ws := benchWorkspace(b, mode)
			dir := filepath.Join(ws, "work")
			os.Mkdir(dir, 0o755)
			content := make([]byte, 16<<20)
			rand.Read(content)
			file := filepath.Join(dir, "report.bin")
			if err := os.WriteFile(file, content, 0o644); err != nil {
				b.Fatal(err)
			}
			draft := filepath.Join(dir, "d.md")
			os.WriteFile(draft, []byte("---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: report.bin\n---\nSee attached.\n"), 0o644)
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A new attachment each time, so that every one is stored.
				b.StopTimer()
				var n [8]byte
				binary.LittleEndian.PutUint64(n[:], uint64(i))
				f.WriteAt(n[:], 0)
				b.StartTimer()
				benchRun(b, ws, "send", draft)
			}
		})
	}
}

func benchWorkspace(b *testing.B, mode string) string {
	b.Helper()
	ws := b.TempDir()
	if code := run([]string{"courier", "--root", ws, "init"}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
		b.Fatalf("init: %d", code)
	}
	if mode == "service" {
		serveAgents(b, ws)
	}
	return ws
}

func benchSeed(b *testing.B, ws string, msgs []*schema.Message) {
	b.Helper()
	mb, err := mailbox.Open(ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer mb.Close()
	for len(msgs) > 0 {
		n := min(len(msgs), 500)
		in := make([]mailbox.Inbound, n)
		for i, m := range msgs[:n] {
			in[i] = mailbox.Inbound{Message: m}
		}
		if _, err := mb.WriteInbound(context.Background(), in, nil); err != nil {
			b.Fatal(err)
		}
		msgs = msgs[n:]
	}
}

func benchRun(b *testing.B, ws string, args ...string) {
	var stderr bytes.Buffer
	if code := run(append([]string{"courier", "--root", ws}, args...), strings.NewReader(""), io.Discard, &stderr); code != 0 {
		b.Fatalf("%v: %d %s", args, code, stderr.String())
	}
}
