package lark

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil/larkfake"
)

// errOtherChats ends the pass of caughtUp.
var errOtherChats = errors.New("test: the pass read one chat only")

// caughtUp records that a catch-up read chat up to ms, as a pass that
// read that chat and failed on the others does: the chat is caught up,
// the round is over, and no chat first met since is caught up for it.
func caughtUp(ctx context.Context, r *receiver, sink adapters.Sink, chat string, ms int64) error {
	p := r.track.StartPass()
	err := p.CaughtUp(ctx, sink, chat, ms)
	r.track.EndPass(p, errOtherChats)
	return err
}

// A pass that read a chat, then the connection dropped, then a live event
// of the chat came, then the pass reported the chat caught up: the
// checkpoint is what the pass read, not the live event's time (what was
// posted during the new gap lies between), and live events move it only
// after the next pass.
func TestInboundGapAfterPassRead(t *testing.T) {
	w := rpNew(t)
	ctx := context.Background()
	w.fake.AddChat(larkfake.Chat{ChatID: "oc_a", Name: "A"})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	read := w.add("oc_a", "ou_ann", "read by the pass", base)

	p := w.r.track.StartPass()
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, read, "group")); err != nil {
		t.Fatal(err)
	}
	w.r.track.Gap() // the connection dropped after the pass read oc_a
	w.add("oc_a", "ou_bob", "posted during the gap", base.Add(time.Second))
	live := w.add("oc_a", "ou_ann", "live after the reconnect", base.Add(2*time.Second))
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, live, "group")); err != nil {
		t.Fatal(err)
	}
	if err := p.CaughtUp(ctx, w.ws.Pipe, "oc_a", read.CreateTime.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	w.r.track.EndPass(p, nil)
	if got, want := w.checkpoint(t, "oc_a"), rpMillis(read.CreateTime); got != want {
		t.Fatalf("checkpoint %s after a gap during the pass, want %s (what the pass read)", got, want)
	}
	later := w.add("oc_a", "ou_ann", "another live one", base.Add(3*time.Second))
	if err := w.r.handle(ctx, w.ws.Pipe, rpEvent(t, later, "group")); err != nil {
		t.Fatal(err)
	}
	if got, want := w.checkpoint(t, "oc_a"), rpMillis(read.CreateTime); got != want {
		t.Errorf("a live event before the next pass moved the checkpoint to %s (want %s)", got, want)
	}
	// The next pass reads the gap, and the chat is live again.
	if err := w.r.pass(ctx, w.ws.Pipe); err != nil {
		t.Fatal(err)
	}
	if n := len(w.files(t)); n != 4 {
		t.Errorf("%d files after the next pass, want 4", n)
	}
	if got, want := w.checkpoint(t, "oc_a"), rpMillis(later.CreateTime); got != want {
		t.Errorf("checkpoint %s after the next pass, want %s", got, want)
	}
}
