package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkSendArtifact is `courier send` (in process) of a draft with one
// artifact in the workspace: resolve the path under the attach policy,
// copy the file into the dropzone, queue the draft. Each iteration's file
// differs (its first bytes are the iteration number), so every copy is
// stored, as a new attachment is. Compare it with the same benchmark on
// the commit before the attach policy to see what the checks cost.
func BenchmarkSendArtifact(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			ws := b.TempDir()
			if code := run([]string{"courier", "--root", ws, "init"}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
				b.Fatalf("init: %d", code)
			}
			dir := filepath.Join(ws, "work")
			os.Mkdir(dir, 0o755)
			content := make([]byte, size)
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
			var stderr bytes.Buffer
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var n [8]byte
				binary.LittleEndian.PutUint64(n[:], uint64(i))
				f.WriteAt(n[:], 0)
				b.StartTimer()
				if code := run([]string{"courier", "--root", ws, "send", draft}, strings.NewReader(""), io.Discard, &stderr); code != 0 {
					b.Fatalf("send: %d %s", code, stderr.String())
				}
			}
		})
	}
}
