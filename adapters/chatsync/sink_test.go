package chatsync_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/schema"
)

// memSink is a Sink in memory, as the mailbox behaves: what Deliver was
// given is durable once it returns nil, checkpoints included, in one
// call; fail makes it refuse everything. It outlives the trackers of a
// test, as the mailbox outlives a crash.
type memSink struct {
	mu          sync.Mutex
	fail        error
	messages    map[string]bool
	checkpoints map[string]string
	// history is every value saved under each key, in order.
	history map[string][]string
}

func newSink() *memSink {
	return &memSink{messages: map[string]bool{}, checkpoints: map[string]string{}, history: map[string][]string{}}
}

func (s *memSink) Deliver(_ context.Context, evs ...adapters.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, ev := range evs {
		if ev.Message != nil {
			s.messages[ev.Message.ID] = true
		}
		if cp := ev.Checkpoint; cp != nil {
			s.checkpoints[cp.Key] = cp.Value
			s.history[cp.Key] = append(s.history[cp.Key], cp.Value)
		}
	}
	return nil
}

func (s *memSink) Checkpoint(_ context.Context, key string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.checkpoints[key]
	return v, ok, nil
}

func (s *memSink) Seen(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messages[key], nil
}

func (s *memSink) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *memSink) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messages[id]
}

func (s *memSink) saved(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpoints[key]
}

// tracker is a Tracker of Lark-like positions (milliseconds) with an
// extra state that counts its loads.
type extra struct{ loads int }

func newTracker(max int) *chatsync.Tracker[int64, extra] {
	return chatsync.NewTracker(chatsync.Config[int64, extra]{
		Name:   "test",
		Key:    func(c string) string { return "test/" + c },
		Format: func(p int64) string { return strconv.FormatInt(p, 10) },
		Parse: func(_, v string) int64 {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0
			}
			return n
		},
		Compare: func(a, b int64) int {
			switch {
			case a < b:
				return -1
			case a > b:
				return 1
			}
			return 0
		},
		Max:  max,
		Load: func(_ context.Context, _ adapters.Sink, _ string, x *extra) error { x.loads++; return nil },
	})
}

// chat is a conversation of the provider: what was posted in it, in
// order, whether or not an event of it reached Courier.
type chat struct {
	id     string
	posted []int64
}

func msgID(conv string, pos int64) string { return fmt.Sprintf("%s_%d", conv, pos) }

func (c *chat) post(pos ...int64) { c.posted = append(c.posted, pos...) }

// live hands the message at pos to the tracker as a live event does.
func live(t *testing.T, tr *chatsync.Tracker[int64, extra], sink adapters.Sink, conv string, pos int64) error {
	t.Helper()
	return tr.Live(context.Background(), sink, conv, pos, func(cp *adapters.Checkpoint, _ *extra) error {
		return sink.Deliver(context.Background(), adapters.Event{Message: &schema.Message{ID: msgID(conv, pos)}, Checkpoint: cp})
	})
}

// read is a catch-up of c within pass p: every message after the
// position Begin gives, delivered as the pass would (through Live); then,
// after mid when set, CaughtUp at the newest read, or at from when none.
func read(t *testing.T, p *chatsync.Pass[int64, extra], tr *chatsync.Tracker[int64, extra], sink adapters.Sink, c *chat, mid func()) {
	t.Helper()
	ctx := context.Background()
	rd, err := p.Begin(ctx, sink, c.id, nil)
	if err != nil {
		t.Fatal(err)
	}
	newest := rd.From
	for _, pos := range c.posted {
		if pos <= rd.From {
			continue
		}
		if err := live(t, tr, sink, c.id, pos); err != nil {
			t.Fatal(err)
		}
		newest = max(newest, pos)
	}
	if mid != nil {
		mid()
	}
	if err := p.CaughtUp(ctx, sink, c.id, newest); err != nil {
		t.Fatal(err)
	}
}

// lost returns what was posted in c and is not in the mailbox.
func lost(s *memSink, c *chat) []int64 {
	var out []int64
	for _, pos := range c.posted {
		if !s.has(msgID(c.id, pos)) {
			out = append(out, pos)
		}
	}
	return out
}

// passOver makes one whole pass of tr over the chats.
func passOver(t *testing.T, tr *chatsync.Tracker[int64, extra], sink adapters.Sink, chats ...*chat) {
	t.Helper()
	if err := tr.RunPass(func(p *chatsync.Pass[int64, extra]) error {
		for _, c := range chats {
			read(t, p, tr, sink, c, nil)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

var errDisk = errors.New("ingest: disk full")

// monotonic reports whether the values saved under key never went back.
func (s *memSink) monotonic(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	vals := make([]int64, 0, len(s.history[key]))
	for _, v := range s.history[key] {
		n, _ := strconv.ParseInt(v, 10, 64)
		vals = append(vals, n)
	}
	return slices.IsSorted(vals)
}
