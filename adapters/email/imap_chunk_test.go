package email

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
)

// chunkSink records how many messages each Deliver carries.
type chunkSink struct {
	*checkingSink
	sizes []int
}

func (c *chunkSink) Deliver(ctx context.Context, events ...adapters.Event) error {
	n := 0
	for _, ev := range events {
		if ev.Message != nil {
			n++
		}
	}
	c.sizes = append(c.sizes, n)
	return c.checkingSink.Deliver(ctx, events...)
}

// A chunk's messages stay in memory until it is durable: a backfill of
// large mails is cut into chunks whose text stays within eight texts of
// the bound, whatever the chunk's count allows (250). Twenty mails of
// 100 KB under a 64 KiB bound are delivered 8, 8 and 4, each chunk with
// its own checkpoint, every mail once.
func TestIMAPChunkBoundedByText(t *testing.T) {
	ctx := context.Background()
	m := startMemIMAP(t, memOptions{})
	body := strings.Repeat("A line of a long report, long enough.\r\n", 100<<10/40)
	for i := 1; i <= 20; i++ {
		raw := strings.Replace(string(testMail(i, fmt.Sprintf("Report %d", i))), fmt.Sprintf("Body of message %d.\r\n", i), body, 1)
		m.append(t, "INBOX", []byte(raw), time.Time{})
	}
	ws := newWorkspace(t)
	src := m.source(t, ws, IMAPOptions{Chunk: 250, Bounds: NewBounds(64<<10, 0)})
	sink := &chunkSink{checkingSink: &checkingSink{Sink: ws.pipe, t: t}}
	if err := src.SyncOnce(ctx, sink); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sink.sizes) != "[8 8 4]" {
		t.Errorf("messages per chunk %v, want [8 8 4]", sink.sizes)
	}
	if got, want := ws.checkpoint(t, "imap/work/INBOX"), fmt.Sprintf("%d:20", m.uidValidity(t, "INBOX")); got != want {
		t.Errorf("checkpoint %q, want %q", got, want)
	}
	if n, w := len(ws.files(t)), ws.written(); n != 20 || w != 20 {
		t.Errorf("%d files, %d written; want 20, 20", n, w)
	}
}
