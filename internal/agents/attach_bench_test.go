package agents

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAttachOpen is the attach policy's cost alone, beside its
// baseline: the plain os.Open and Stat that send did before the policy.
func BenchmarkAttachOpen(b *testing.B) {
	ws := b.TempDir()
	file := filepath.Join(ws, "work", "reports", "report.pdf")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("%PDF-1.4"), 0o644)
	b.Run("policy", func(b *testing.B) {
		p := &attachPolicy{roots: []string{ws}, monoco: filepath.Join(ws, ".monoco")}
		for i := 0; i < b.N; i++ {
			f, err := p.open("reports/report.pdf", filepath.Join(ws, "work"))
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("os.Open", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			f, err := os.Open(filepath.Join(filepath.Join(ws, "work"), "reports/report.pdf"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Stat(); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}
