package mailbox

import (
	"context"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WakerPoll is how often a Waker fires when nothing else woke it: a missed
// or coalesced inotify event, a file system without inotify.
const WakerPoll = time.Second

// Waker returns a channel that gets a value (one pending at most) whenever
// the event journal may hold new events, whoever wrote them: on any change
// of the state database's files (a commit of another process, seen by
// inotify), on a commit of this process (Subscribe), and every WakerPoll.
// Readers then read the journal from their position with Events; a
// wake-up may find nothing new. `courier watch` and the MCP server's
// notifications follow the journal this way. stop ends it (ctx ending
// stops its goroutine too; stop must still be called).
func (mb *Mailbox) Waker(ctx context.Context) (wake <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{}, 1)
	sub, unsub := mb.Subscribe()
	var events <-chan fsnotify.Event
	fw, err := fsnotify.NewWatcher()
	if err == nil {
		if err := fw.Add(mb.State()); err != nil {
			fw.Close()
			fw = nil
		} else {
			events = fw.Events
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(WakerPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-events:
				if !ok {
					events = nil
					continue
				}
			case <-sub:
			case <-tick.C:
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, func() {
		cancel()
		<-done
		unsub()
		if fw != nil {
			fw.Close()
		}
	}
}
