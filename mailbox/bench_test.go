package mailbox_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// BenchmarkWriteInbound measures the durable inbound write path: batches of
// 256 messages staged, fsynced, renamed, directories fsynced, then indexed
// with their checkpoint in one transaction.
func BenchmarkWriteInbound(b *testing.B) {
	for _, batch := range []int{1, 32, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			root := b.TempDir()
			mailbox.Init(root)
			mb, err := mailbox.Open(root, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer mb.Close()
			at := testutil.Time("2026-01-01T00:00:00Z")
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += batch {
				var in []mailbox.Inbound
				for j := i; j < min(i+batch, b.N); j++ {
					in = append(in, mailbox.Inbound{Message: testutil.Message(schema.Lark, fmt.Sprintf("om_%d", j), at.Add(time.Duration(j)*time.Second), "benchmark message text")})
				}
				if _, err := mb.WriteInbound(ctx, in, []mailbox.Checkpoint{{Key: "bench", Value: fmt.Sprint(i)}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// BenchmarkListJSON measures `list --format json` over 10,000 messages
// (bench/mailbox.sh does 100,000 through the binary).
func BenchmarkListJSON(b *testing.B) {
	root := b.TempDir()
	mailbox.Init(root)
	mb, err := mailbox.Open(root, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer mb.Close()
	at := testutil.Time("2026-01-01T00:00:00Z")
	const n = 10000
	for i := 0; i < n; i += 500 {
		var in []mailbox.Inbound
		for j := i; j < i+500; j++ {
			in = append(in, mailbox.Inbound{Message: testutil.Message(schema.Slack, fmt.Sprintf("C1_%d_000001", j), at.Add(time.Duration(j)*time.Second), "listed")})
		}
		if _, err := mb.WriteInbound(ctx, in, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if got, err := mb.ListJSON(ctx, mailbox.Filter{All: true}, io.Discard); err != nil || got != n {
			b.Fatal(got, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
}
