package mailbox

import (
	"context"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WakerPoll is how often a Waker fires when nothing else woke it: a missed
// or coalesced inotify event, a file system without inotify.
const WakerPoll = time.Second

// wakerAgain is when a Waker fires again after a change of the state
// database's files: SQLite writes a commit's frames to the -wal file
// (which inotify reports) before it marks them committed in the -shm
// index (a shared mapping, which it does not), so a reader woken by the
// last write can look before the commit shows, and nothing else wakes it
// before the poll: new-mail notifications over stdio took up to 700 ms.
const wakerAgain = 50 * time.Millisecond

// Waker returns a channel that gets a value (one pending at most) whenever
// the event journal may hold new events, whoever wrote them: on any change
// of the state database's files (a commit of another process, seen by
// inotify, and again wakerAgain after it), on a commit of this process
// (Subscribe), and every WakerPoll. Readers then read the journal from
// their position with Events; a wake-up may find nothing new. `courier
// watch` and the MCP server's notifications follow the journal this way.
// stop ends it (ctx ending stops its goroutine too; stop must still be
// called).
func (mb *Mailbox) Waker(ctx context.Context) (wake <-chan struct{}, stop func()) {
	return mb.WakerEvery(ctx, nil)
}

// WakerEvery is Waker polling every poll() rather than every WakerPoll:
// poll is asked again after each wake-up, so a reader may poll faster
// while someone waits on it (nil: WakerPoll).
func (mb *Mailbox) WakerEvery(ctx context.Context, poll func() time.Duration) (wake <-chan struct{}, stop func()) {
	if poll == nil {
		poll = func() time.Duration { return WakerPoll }
	}
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
		tick := time.NewTimer(poll())
		defer tick.Stop()
		again := time.NewTimer(time.Hour)
		again.Stop()
		defer again.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				again.Reset(wakerAgain)
			case <-again.C:
			case <-sub:
			case <-tick.C:
			}
			tick.Reset(poll())
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
