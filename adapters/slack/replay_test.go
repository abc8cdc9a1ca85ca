package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/internal/testutil/slackfake"
)

// post stores a message in the fake's history (posted, whether or not an
// event for it reaches Courier) and returns its event.
func (w *inWorld) post(channel, ts, thread, text string) json.RawMessage {
	m := map[string]any{"type": "message", "user": "U0ANN", "ts": ts, "text": text}
	if thread != "" {
		m["thread_ts"] = thread
	}
	raw, _ := json.Marshal(m)
	w.fake.AddRawMessage(channel, raw)
	m["channel"], m["event_ts"], m["channel_type"] = channel, ts, "channel"
	ev, _ := json.Marshal(m)
	return ev
}

// Socket Mode: a first start records where a channel is without reading
// its past; after a dropped connection, what was posted meanwhile
// (top-level, replies in a thread seen live, a new thread) is read back
// and written once, and none twice when its live event also comes.
func TestReplayAfterGap(t *testing.T) {
	w := newInWorld(t, "socket")
	const ch = "C0GAP0001"
	w.channel(ch, "gap")
	w.post(ch, "1700002000.000100", "", "before Courier: not backfilled")
	rs := startSocket(t, w, w.pipe)
	testutil.WaitFor(t, 10*time.Second, "the first catch-up to record the channel", func() bool {
		return w.checkpoint(t, ch) == "1700002000.000100"
	})
	if ids := w.ids(t); len(ids) != 0 {
		t.Fatalf("first start backfilled %v", ids)
	}

	// Live: a message and a reply in its thread.
	for i, ev := range []json.RawMessage{
		w.post(ch, "1700002001.000100", "", "live"),
		w.post(ch, "1700002002.000100", "1700002001.000100", "live reply"),
	} {
		waitAck(t, rs, send(t, w.fake, callback(fmt.Sprintf("EvLIVE%d", i), ev)))
	}
	if got := w.checkpoint(t, ch); got != "1700002002.000100" {
		t.Fatalf("checkpoint %q after live events, want 1700002002.000100", got)
	}

	// The gap: posted, no event reaches Courier, then the connection drops.
	gap := []json.RawMessage{
		w.post(ch, "1700002003.000100", "1700002001.000100", "reply in the gap"),
		w.post(ch, "1700002004.000100", "", "top-level in the gap"),
		w.post(ch, "1700002005.000100", "1700002004.000100", "a new thread in the gap"),
	}
	n := w.fake.Connections()
	w.fake.Drop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.fake.WaitConnections(ctx, n+1); err != nil {
		t.Fatal(err)
	}
	want := []string{msgID(ch, "1700002001.000100"), msgID(ch, "1700002002.000100"), msgID(ch, "1700002003.000100"),
		msgID(ch, "1700002004.000100"), msgID(ch, "1700002005.000100")}
	testutil.WaitFor(t, 10*time.Second, "the gap's messages", func() bool { return len(w.ids(t)) >= len(want) })
	testutil.WaitFor(t, 10*time.Second, "the checkpoint after the catch-up", func() bool {
		return w.checkpoint(t, ch) == "1700002005.000100"
	})

	// Slack's late events for the same messages: acked, nothing more.
	for i, ev := range gap {
		waitAck(t, rs, send(t, w.fake, callback(fmt.Sprintf("EvGAP%d", i), ev)))
	}
	if got := w.ids(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
	if m := w.files(t)[msgID(ch, "1700002003.000100")]; m == nil || string(m.ReplyTo) != msgID(ch, "1700002001.000100") {
		t.Errorf("the reply read back is not in its thread: %+v", m)
	}
}

// The Events API's catch-up Source: a pass honours a 429's Retry-After,
// and a gap larger than one pass's bounds is read over several passes,
// all of it once, the checkpoint moving only when the whole gap is in.
func TestReplayBoundsAndRateLimit(t *testing.T) {
	w := newInWorld(t, "events")
	const ch = "C0BOUND01"
	w.channel(ch, "bounds")
	w.post(ch, "1700003000.000100", "", "old")
	ctx := context.Background()
	p := &replayer{r: w.r, limits: replayLimits{pages: 6, messages: 3, pageSize: 2, retries: 2}}
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, ch); got != "1700003000.000100" {
		t.Fatalf("first pass recorded %q", got)
	}
	var want []string
	for i := 1; i <= 7; i++ {
		ts := fmt.Sprintf("17000030%02d.000100", i)
		w.post(ch, ts, "", "gap")
		want = append(want, msgID(ch, ts))
	}
	w.fake.Fail("conversations.history", slackfake.Failure{Status: 429, RetryAfter: 1})
	before := w.fake.Calls("conversations.history")
	passes := 0
	for ; passes < 10; passes++ {
		err := p.pass(ctx, w.pipe)
		if err == nil {
			break
		}
		if !errors.Is(err, chatsync.ErrIncomplete) {
			t.Fatalf("pass %d: %v", passes, err)
		}
		if got := w.checkpoint(t, ch); got != "1700003000.000100" {
			t.Fatalf("pass %d stopped at its bounds and moved the checkpoint to %q", passes, got)
		}
	}
	if passes < 1 || passes >= 10 {
		t.Errorf("%d incomplete passes, want a few", passes)
	}
	if got := w.ids(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
	if got := w.checkpoint(t, ch); got != "1700003007.000100" {
		t.Errorf("checkpoint %q, want 1700003007.000100", got)
	}
	if n := w.fake.Calls("conversations.history") - before; n < 2 {
		t.Errorf("%d history calls: the 429 was not retried", n)
	}
	// The allow-list: a channel outside it is not read.
	w.channel("C0OTHER01", "other")
	w.a.allow = map[string]bool{ch: true}
	before = w.fake.Calls("conversations.history")
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, "C0OTHER01"); got != "" {
		t.Errorf("a channel outside the allow-list was recorded at %q", got)
	}
	if n := w.fake.Calls("conversations.history") - before; n != 1 {
		t.Errorf("%d history calls, want 1 (the allowed channel)", n)
	}
}

// The Events API's catch-up Source refuses to start without the signing
// secret (the webhook could verify nothing) and with a revoked token;
// running, its first pass records each channel and says connected.
func TestReplaySource(t *testing.T) {
	w := newInWorld(t, "events")
	const ch = "C0SOURCE1"
	w.channel(ch, "source")
	w.post(ch, "1700004000.000100", "", "old")

	cfg := w.a.cfg
	cfg.SigningSecret = ""
	noSecret := newAdapter(Options{Config: cfg})
	if err := newReplaySource(newReceiver(noSecret)).Start(context.Background()); err == nil || !strings.Contains(err.Error(), "signing_secret") {
		t.Errorf("Start without signing_secret: %v", err)
	}

	s := newReplaySource(w.r)
	s.c.AfterFailure = time.Millisecond
	if s.Name() != "slack/replay" {
		t.Errorf("name %q", s.Name())
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, w.pipe) }()
	testutil.WaitFor(t, 10*time.Second, "the first pass", func() bool { return w.checkpoint(t, ch) == "1700004000.000100" })
	testutil.WaitFor(t, 10*time.Second, "connected", func() bool { return w.a.health.Health().Status == adapters.StatusConnected })
	if ids := w.ids(t); len(ids) != 0 {
		t.Errorf("first start backfilled %v", ids)
	}
	// A webhook failure is a possible gap: a pass soon after reads it.
	w.post(ch, "1700004001.000100", "", "Slack gave up on its event")
	failing := &countingSink{Sink: w.pipe, fail: errors.New("ingest: disk full")}
	body := callback("EvGIVEUP", msgEvent(ch, "U0ANN", "1700004002.000100", "failed here"))
	if code, _ := post(t, w.r.webhook(failing), "POST", sign(inSecret, time.Now(), body), body); code != 503 {
		t.Fatalf("status %d, want 503", code)
	}
	testutil.WaitFor(t, 10*time.Second, "the pass after the failure", func() bool { return w.hasFile(t, msgID(ch, "1700004001.000100")) })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}

	w.fake.RevokeTokens()
	w.a.mu.Lock()
	w.a.self = nil
	w.a.mu.Unlock()
	if err := newReplaySource(w.r).Start(context.Background()); !adapters.IsRefused(err) || !strings.Contains(err.Error(), "token_revoked") {
		t.Errorf("Start with a revoked token: %v, want a refusal naming token_revoked", err)
	}
	// A pass refused ends Run with the refusal: the service runs it again
	// minutes later, and the webhook goes on meanwhile.
	if err := newReplaySource(w.r).Run(context.Background(), w.pipe); !adapters.IsRefused(err) || !strings.Contains(err.Error(), "token_revoked") {
		t.Errorf("Run with a revoked token: %v, want a refusal naming token_revoked", err)
	}
}

// A catch-up pass and live events of the same channel at once, some of
// them the same messages: every message is one file, none lost, and the
// checkpoint ends at the newest.
func TestReplayConcurrentWithLive(t *testing.T) {
	w := newInWorld(t, "events")
	const ch = "C0CONCUR1"
	w.channel(ch, "concurrent")
	w.post(ch, "1700005000.000100", "", "old")
	ctx := context.Background()
	p := &replayer{r: w.r, limits: defaultReplayLimits}
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	var want []string
	var live []json.RawMessage
	for i := 1; i <= 60; i++ {
		ts := fmt.Sprintf("1700005%03d.000100", i)
		ev := w.post(ch, ts, "", fmt.Sprintf("message %d", i))
		want = append(want, msgID(ch, ts))
		if i > 20 { // the last 40 also come live, in the gap's pass
			live = append(live, ev)
		}
	}
	errs := make(chan error, 2)
	go func() { errs <- p.pass(ctx, w.pipe) }()
	go func() {
		for i, ev := range live {
			if err := w.r.handleOnce(ctx, w.pipe, event{ID: fmt.Sprintf("EvCC%d", i), Inner: ev}); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := w.ids(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%d files, want %d: %v", len(got), len(want), got)
	}
	if got := w.checkpoint(t, ch); got != "1700005060.000100" {
		t.Errorf("checkpoint %q, want 1700005060.000100", got)
	}
}

// Without the scopes to list memberships, the channels seen live are
// still caught up, and the pass says what is missing.
func TestReplayMissingScope(t *testing.T) {
	w := newInWorld(t, "events")
	const ch = "C0SCOPE01"
	w.channel(ch, "scope")
	ctx := context.Background()
	p := &replayer{r: w.r, limits: defaultReplayLimits}
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	if err := w.r.handle(ctx, w.pipe, event{ID: "EvSC1", Inner: w.post(ch, "1700006001.000100", "", "live")}); err != nil {
		t.Fatal(err)
	}
	w.post(ch, "1700006002.000100", "", "missed")
	w.fake.Fail("users.conversations", slackfake.Failure{Error: "missing_scope"})
	err := p.pass(ctx, w.pipe)
	if err == nil || !strings.Contains(err.Error(), "missing_scope") {
		t.Errorf("pass: %v, want the missing scope named", err)
	}
	if !w.hasFile(t, msgID(ch, "1700006002.000100")) {
		t.Errorf("the channel seen live was not caught up: %v", w.ids(t))
	}
}

// tsAt is the Slack ts of a second.
func tsAt(sec int64) string { return fmt.Sprintf("%d.000100", sec) }

// restart replaces the adapter and its receiver with new ones on the same
// mailbox, as a new process would have: nothing in memory, only what the
// mailbox saved. The new receiver's clock is clock.
func (w *inWorld) restart(clock *testutil.Clock) {
	w.a = newAdapter(Options{Config: w.a.cfg, Dropzone: w.a.dz})
	w.r = newReceiver(w.a)
	w.r.now = clock.Now
}

// A restart: a reply posted while Courier was down, in a thread whose
// parent is older than the checkpoint (so not in the history read back),
// is found because the thread's activity was saved with the mailbox; a
// top-level message of the gap too; each once, and Slack's late events
// for them then write nothing.
func TestReplayAfterRestart(t *testing.T) {
	w := newInWorld(t, "socket")
	const ch = "C0RESTART"
	base := int64(1700007000)
	clock := &testutil.Clock{T: time.Unix(base+3600, 0)}
	w.r.now = clock.Now
	w.channel(ch, "restart")
	w.post(ch, tsAt(base), "", "before Courier")
	rs := startSocket(t, w, w.pipe)
	testutil.WaitFor(t, 10*time.Second, "the first catch-up to record the channel", func() bool {
		return w.checkpoint(t, ch) == tsAt(base)
	})
	parent, reply := tsAt(base+1), tsAt(base+2)
	live := []json.RawMessage{w.post(ch, parent, "", "a question"), w.post(ch, reply, parent, "a first answer")}
	for i, ev := range live {
		waitAck(t, rs, send(t, w.fake, callback(fmt.Sprintf("EvRS%d", i), ev)))
	}
	if got := w.checkpoint(t, ch); got != reply {
		t.Fatalf("checkpoint %q after live events, want %s", got, reply)
	}
	rs.close()

	// Courier is down: a reply in the old thread, and a new top-level.
	late, top := tsAt(base+3), tsAt(base+4)
	gap := []json.RawMessage{w.post(ch, late, parent, "answered while Courier was down"), w.post(ch, top, "", "top-level while down")}

	w.restart(clock)
	repliesBefore, historyBefore := w.fake.Calls("conversations.replies"), w.fake.Calls("conversations.history")
	rs = startSocket(t, w, w.pipe)
	want := []string{msgID(ch, parent), msgID(ch, reply), msgID(ch, late), msgID(ch, top)}
	testutil.WaitFor(t, 10*time.Second, "the gap's messages", func() bool { return len(w.ids(t)) >= len(want) })
	testutil.WaitFor(t, 10*time.Second, "the checkpoint after the catch-up", func() bool { return w.checkpoint(t, ch) == top })
	// One pass reads the channel's history once and the thread saved as
	// active once. A second pass (a reconnect on a loaded machine, which
	// asks for one) reads both again: the replies are counted a pass.
	passes := w.fake.Calls("conversations.history") - historyBefore
	if n := w.fake.Calls("conversations.replies") - repliesBefore; passes < 1 || n != passes {
		t.Errorf("%d conversations.replies calls in %d passes, want one a pass (the one thread saved as active)", n, passes)
	}
	// Slack's events for all of them, late: acked, nothing written.
	for i, ev := range append(live, gap...) {
		waitAck(t, rs, send(t, w.fake, callback(fmt.Sprintf("EvRSLATE%d", i), ev)))
	}
	if got := w.ids(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
	if m := w.files(t)[msgID(ch, late)]; m == nil || string(m.ReplyTo) != msgID(ch, parent) {
		t.Errorf("the reply read back is not in its thread: %+v", m)
	}
	if got := w.checkpoint(t, ch); got != top {
		t.Errorf("checkpoint %q, want %s", got, top)
	}
}

// savedThreads reads a channel's saved active threads.
func (w *inWorld) savedThreads(t testing.TB, channel string) []activeThread {
	t.Helper()
	v, ok, err := w.pipe.Checkpoint(context.Background(), threadsKey(channel))
	if err != nil || !ok {
		t.Fatalf("threads of %s: saved %v, %v", channel, ok, err)
	}
	threads, err := decodeThreads(v)
	if err != nil {
		t.Fatal(err)
	}
	return threads
}

// The remembered threads are bounded: past maxThreads the least recently
// active are dropped, a thread idle for threadIdle is not asked any more,
// and a catch-up after a restart asks at most maxThreads threads.
func TestReplayThreadsBound(t *testing.T) {
	w := newInWorld(t, "events")
	const ch = "C0THREADS"
	const n = maxThreads + 5
	base := int64(1700100000)
	clock := &testutil.Clock{T: time.Unix(base+n*3600, 0)}
	w.r.now = clock.Now
	w.channel(ch, "threads")
	ctx := context.Background()
	p := &replayer{r: w.r, limits: defaultReplayLimits}
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	// Thread i: a parent, and a reply an hour later than thread i-1's.
	parent := func(i int) string { return tsAt(base + int64(i)*3600) }
	reply := func(i int) string { return tsAt(base + int64(i)*3600 + 60) }
	for i := range n {
		w.post(ch, parent(i), "", "parent")
		ev := w.post(ch, reply(i), parent(i), "reply")
		if err := w.r.handle(ctx, w.pipe, event{ID: fmt.Sprintf("EvTB%d", i), Inner: ev}); err != nil {
			t.Fatal(err)
		}
	}
	// An old thread answered again is the most recent once more.
	revived := tsAt(base + n*3600)
	if err := w.r.handle(ctx, w.pipe, event{ID: "EvTBREV", Inner: w.post(ch, revived, parent(7), "back to thread 7")}); err != nil {
		t.Fatal(err)
	}
	saved := w.savedThreads(t, ch)
	if len(saved) != maxThreads {
		t.Fatalf("%d threads saved, want %d", len(saved), maxThreads)
	}
	if saved[0] != (activeThread{TS: parent(7), Last: revived}) {
		t.Errorf("most recent %+v, want thread 7 at %s", saved[0], revived)
	}
	kept := map[string]bool{}
	for i, th := range saved {
		kept[th.TS] = true
		if i > 0 && !tsAfter(saved[i-1].Last, th.Last) {
			t.Errorf("threads not most recent first at %d: %+v", i, saved[i-1:i+1])
		}
	}
	for i := range n {
		// 0-4 pushed out by the 100 newer; 7, revived, was in already.
		if wantKept := i >= 5; kept[parent(i)] != wantKept {
			t.Errorf("thread %d kept %v, want %v", i, kept[parent(i)], wantKept)
		}
	}

	// A restart, then replies posted meanwhile: one in the least recent
	// thread kept (found), one in a thread dropped (the bound's price).
	w.post(ch, tsAt(base+n*3600+10), parent(5), "in the oldest thread kept")
	w.post(ch, tsAt(base+n*3600+20), parent(4), "in a thread dropped")
	w.restart(clock)
	p = &replayer{r: w.r, limits: defaultReplayLimits}
	before := w.fake.Calls("conversations.replies")
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	if got := w.fake.Calls("conversations.replies") - before; got != maxThreads {
		t.Errorf("%d conversations.replies calls, want %d", got, maxThreads)
	}
	if !w.hasFile(t, msgID(ch, tsAt(base+n*3600+10))) {
		t.Error("the reply in the oldest thread kept was not read back")
	}
	if w.hasFile(t, msgID(ch, tsAt(base+n*3600+20))) {
		t.Error("a thread past the bound was asked")
	}

	// Idle: 30 days after thread 54's last reply, threads 6-54 are not
	// asked; 55-104, 7 and 5 (answered since) are.
	clock.T = time.Unix(base+54*3600+60, 0).Add(threadIdle + time.Second)
	before = w.fake.Calls("conversations.replies")
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	if got, want := w.fake.Calls("conversations.replies")-before, n-55+2; got != want {
		t.Errorf("%d conversations.replies calls after the idle ones aged out, want %d", got, want)
	}
}

// Channels that each ask many threads cannot starve the others: a pass
// after one that stopped at its bounds skips the channels caught up
// meanwhile, so the round ends.
func TestReplayRoundProgress(t *testing.T) {
	w := newInWorld(t, "events")
	ctx := context.Background()
	now := time.Now()
	w.r.now = func() time.Time { return now }
	p := &replayer{r: w.r, limits: replayLimits{pages: 150, messages: 5000, pageSize: 200, retries: 2}}
	chans := []string{"C0ROUND01", "C0ROUND02"}
	for _, ch := range chans {
		w.channel(ch, strings.ToLower(ch))
	}
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	// Each channel remembers maxThreads threads, as saved before a
	// restart: 2 × (1 history + 100 replies) calls exceed a pass's 150.
	for _, ch := range chans {
		var threads []activeThread
		for i := range maxThreads {
			ts := tsAt(now.Unix() - int64(i) - 10)
			threads = append(threads, activeThread{TS: ts, Last: ts})
			w.post(ch, ts, "", "parent")
		}
		v, _ := json.Marshal(threads)
		if err := w.pipe.Deliver(ctx, adapters.Event{Checkpoint: &adapters.Checkpoint{Key: threadsKey(ch), Value: string(v)}}); err != nil {
			t.Fatal(err)
		}
	}
	late := tsAt(now.Unix())
	w.post(chans[1], late, tsAt(now.Unix()-10), "a reply in the second channel's newest thread")
	w.restart(&testutil.Clock{T: now})
	p = &replayer{r: w.r, limits: p.limits}
	passes := 0
	for ; passes < 5; passes++ {
		err := p.pass(ctx, w.pipe)
		if err == nil {
			break
		}
		if !errors.Is(err, chatsync.ErrIncomplete) {
			t.Fatal(err)
		}
	}
	if passes != 1 {
		t.Errorf("%d incomplete passes before the round ended, want 1", passes)
	}
	if !w.hasFile(t, msgID(chans[1], late)) {
		t.Error("the second channel's reply was not read back")
	}
}

// A webhook failure during a catch-up that spans passes starts a new
// round: the channel it happened in is read again even though the round
// had caught it up already.
func TestReplaySourceFailureMidRound(t *testing.T) {
	w := newInWorld(t, "events")
	const a, b = "C0MIDRNDA", "C0MIDRNDB"
	w.channel(a, "a")
	w.channel(b, "b")
	// Named, so that no page of a pass goes to listing memberships.
	w.a.allow = map[string]bool{a: true, b: true}
	ctx := context.Background()
	s := newReplaySource(w.r)
	s.c.AfterFailure = time.Millisecond
	if err := s.p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	// One page a call, two a pass: a's one message completes a; b's two
	// need a second pass.
	s.p.limits = replayLimits{pages: 2, messages: 5000, pageSize: 1, retries: 2}
	w.post(a, "1700300001.000100", "", "a")
	w.post(b, "1700300002.000100", "", "b1")
	w.post(b, "1700300003.000100", "", "b2")
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, w.pipe) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testutil.WaitFor(t, 10*time.Second, "the first pass to stop at its bounds", func() bool {
		return w.hasFile(t, msgID(a, "1700300001.000100")) && w.hasFile(t, msgID(b, "1700300003.000100"))
	})
	// Slack gives up on an event of a, which the round read already.
	w.post(a, "1700300004.000100", "", "a's event Slack gave up on")
	w.r.catchUp.Failed()
	testutil.WaitFor(t, 10*time.Second, "a read again after the failure", func() bool {
		return w.hasFile(t, msgID(a, "1700300004.000100"))
	})
	testutil.WaitFor(t, 10*time.Second, "b's whole gap", func() bool { return w.hasFile(t, msgID(b, "1700300002.000100")) })
}

// A webhook event that could not be stored (answered 503), a later event
// of its channel stored, then a restart before any catch-up: the first
// pass after the restart reads the message of the failed event. The
// failure marked a gap, so the later event did not move the checkpoint
// past it (before chatsync, it did, and the message was lost).
func TestWebhookFailureThenRestart(t *testing.T) {
	w := newInWorld(t, "events")
	const ch = "C0WHFAIL1"
	w.channel(ch, "failure")
	w.post(ch, "1700600000.000100", "", "before Courier")
	ctx := context.Background()
	if err := (&replayer{r: w.r, limits: defaultReplayLimits}).pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	send := func(sink adapters.Sink, id string, ev json.RawMessage) int {
		body := callback(id, ev)
		code, _ := post(t, w.r.webhook(sink), "POST", sign(inSecret, time.Now(), body), body)
		return code
	}
	if code := send(w.pipe, "EvWF1", w.post(ch, "1700600001.000100", "", "live")); code != 200 {
		t.Fatalf("status %d", code)
	}
	if got := w.checkpoint(t, ch); got != "1700600001.000100" {
		t.Fatalf("checkpoint %q, want the live event's: caught up", got)
	}
	failing := &countingSink{Sink: w.pipe, fail: errors.New("ingest: disk full")}
	if code := send(failing, "EvWF2", w.post(ch, "1700600002.000100", "", "not stored")); code != 503 {
		t.Fatalf("status %d, want 503", code)
	}
	if code := send(w.pipe, "EvWF3", w.post(ch, "1700600003.000100", "", "stored after")); code != 200 {
		t.Fatalf("status %d", code)
	}
	if got := w.checkpoint(t, ch); got != "1700600001.000100" {
		t.Errorf("checkpoint %q after the failure, want 1700600001.000100 (not past the message not stored)", got)
	}

	w.restart(&testutil.Clock{T: time.Now()})
	if err := (&replayer{r: w.r, limits: defaultReplayLimits}).pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	if !w.hasFile(t, msgID(ch, "1700600002.000100")) {
		t.Errorf("the message of the failed event was lost: files %v", w.ids(t))
	}
}

// seenHook is a Sink that calls on the first time Seen is asked for id:
// the catch-up asks it just before it hands that message to handle.
type seenHook struct {
	adapters.Sink
	id   string
	once sync.Once
	on   func()
}

func (s *seenHook) Seen(ctx context.Context, key string) (bool, error) {
	if key == s.id {
		s.once.Do(s.on)
	}
	return s.Sink.Seen(ctx, key)
}

// A new connection (Socket Mode's hello, a gap) while a catch-up pass
// reads a channel, a message posted meanwhile that no event brings, a
// live event after, then a restart before the next pass: the first pass
// after the restart reads that message. The pass that began before the
// gap saved only what it read and left the channel not caught up, so the
// live event did not move the checkpoint past the window (before
// chatsync, it did, and the message was lost).
func TestHelloDuringPassThenRestart(t *testing.T) {
	w := newInWorld(t, "socket")
	const ch = "C0HELLO01"
	w.channel(ch, "hello")
	w.post(ch, "1700700000.000100", "", "before Courier")
	ctx := context.Background()
	p := &replayer{r: w.r, limits: defaultReplayLimits}
	if err := p.pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	w.post(ch, "1700700001.000100", "", "missed before the pass")
	gap := func() { w.r.track.Gap() }
	sink := &seenHook{Sink: w.pipe, id: msgID(ch, "1700700001.000100"), on: func() {
		gap()
		w.post(ch, "1700700002.000100", "", "posted while the connection was down")
	}}
	if err := p.pass(ctx, sink); err != nil {
		t.Fatal(err)
	}
	if err := w.r.handle(ctx, w.pipe, event{ID: "EvHL1", Inner: w.post(ch, "1700700003.000100", "", "live, new connection")}); err != nil {
		t.Fatal(err)
	}
	if got := w.checkpoint(t, ch); got != "1700700001.000100" {
		t.Errorf("checkpoint %q, want 1700700001.000100 (what the pass read), not past the window", got)
	}

	w.restart(&testutil.Clock{T: time.Now()})
	if err := (&replayer{r: w.r, limits: defaultReplayLimits}).pass(ctx, w.pipe); err != nil {
		t.Fatal(err)
	}
	if !w.hasFile(t, msgID(ch, "1700700002.000100")) {
		t.Errorf("the message posted while the connection was down was lost: files %v", w.ids(t))
	}
}
