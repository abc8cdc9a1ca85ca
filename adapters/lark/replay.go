package lark

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
)

// The catch-up: what was posted while Courier was away (a dropped long
// connection, a restart, webhook deliveries that failed) is read back from
// im/v1/messages, chat by chat from its position on, and goes through
// handle like a live event: the mailbox's dedupe by message_id makes what
// both the live stream and the catch-up deliver one file, and the app's
// own messages are dropped the same way.
//
// The chats are those im/v1/chats lists (the group chats the app is in:
// a tenant token lists no p2p chat), those the receiver has met since it
// started, and the p2p chats it ever met (saved under p2pKey, since Lark
// offers an app no way to list them; a p2p chat opened while Courier was
// down is read from its first live message on).
//
// Lark's list is second-granular (start_time in seconds): a pass reads
// from the second of the position, so the messages of that second come
// again and the dedupe by message_id keeps them once. A chat with no
// position is read from replayLimits.window back (a new install does not
// pull years of history).

// replayLimits bound one pass: an outsider who posts a million messages
// during a gap costs at most this much per pass, and the next pass goes on
// from where this one stopped.
type replayLimits struct {
	chatPages    int // im/v1/chats pages per pass
	chatPageSize int // chats per page (Lark's maximum is 100)
	pages        int // im/v1/messages pages per pass, all chats together
	perChat      int // im/v1/messages pages of a chat's container per pass
	threadPages  int // im/v1/messages pages of one thread per pass
	// discoverPages bounds the history read once per chat and process
	// for the threads before its position.
	discoverPages int
	pageSize      int // messages per page (Lark's maximum is 50)
	retries       int // 429s and 5xx retried per call
	// backoff is the first wait after a 429 or a 5xx, doubled after each.
	backoff time.Duration
	// window is how far back a chat without a position is read.
	window time.Duration
}

// defaultReplayLimits: at most 50 pages of 100 chats (5,000 chats, half
// of maxChats) and 1,000 pages of 50 messages (50,000 messages) a pass,
// at most 20 pages (1,000 messages) of one chat, so that one busy chat
// cannot use a pass for itself; of each thread (a group's history lists
// a thread's root, not its replies, so the threads are read on their own)
// at most 5 pages, 250 replies since the position (more: the oldest are not
// read, and a warning says so), of at most maxThreadsPerChat threads, found
// after a restart by 2 pages of the day's roots before the position: a
// chat's reading fits in one pass's budget, so every pass goes forward.
// A chat stopped at its bound keeps what was
// read (its checkpoint moves to the newest message read: everything
// before it was read, in order); the next pass goes on from there, and a
// pass stopped at the chat list's or the pass's bound goes on at the
// first chat it did not finish. The window is 24 h: Lark keeps
// retrying an event for 6 h, so a day back covers what a new install
// could have been sent while it was being set up, and no more.
var defaultReplayLimits = replayLimits{chatPages: 50, chatPageSize: 100, pages: 1000, perChat: 20, threadPages: 5, discoverPages: 2, pageSize: 50,
	retries: 4, backoff: time.Second, window: 24 * time.Hour}

// replayState is what passes remember between them, besides what the
// tracker keeps of each chat. Its mutex is held for a whole pass: the
// long connection and the webhook source never run two at once.
type replayState struct {
	mu     sync.Mutex
	limits replayLimits // the zero value is defaultReplayLimits
	// threads are the threads remembered (noteThread), under tmu: live
	// events note theirs while a pass holds mu.
	tmu     sync.Mutex
	threads map[string]threadSeen
	// chatToken is where the chat list goes on when a pass stopped at
	// its bound ("" at the start of a round: chatsync.Pass.NewRound).
	chatToken string
	// fails counts, per message_id, the passes whose handle of it failed
	// (a resource or a forward Lark keeps failing to serve); at
	// maxItemFailures the next try writes it without what failed
	// (event.lastTry), so that one message cannot hold up its chat for
	// good.
	// Bounded by maxChats.
	fails map[string]int
	// p2p are the p2p chats met (saved under p2pKey); p2pLoaded once
	// read from the Sink, p2pDirty when one was added since saved.
	p2p                 []string
	p2pLoaded, p2pDirty bool
	// scanned are the chats whose threads before their position were
	// looked for (replayDiscover) by this process. Bounded by maxChats.
	scanned map[string]bool
}

func (s *replayState) lim() replayLimits {
	if s.limits.pages == 0 {
		return defaultReplayLimits
	}
	return s.limits
}

// pass is one pass over every chat the app is in: the messages missed
// since each chat's position, ingested through handle, then the chat is
// caught up (chatsync.Pass.CaughtUp); the pass runs inside
// chatsync.Tracker.RunPass, whose round of passes skips the chats an
// earlier pass of it finished. It returns chatsync.ErrIncomplete when a
// bound stopped it (call again), and the errors of the chats it could not
// read (a chat Lark refuses, 230002 or 230027, is logged and skipped: not
// an error).
func (r *receiver) pass(ctx context.Context, sink adapters.Sink) error {
	st := &r.replay
	st.mu.Lock()
	defer st.mu.Unlock()
	return r.track.RunPass(func(ps *chatPass) error {
		if ps.NewRound() {
			st.chatToken = ""
		}
		return r.read(ctx, sink, ps)
	})
}

// read is one pass over the chats.
func (r *receiver) read(ctx context.Context, sink adapters.Sink, ps *chatPass) error {
	lim := r.replay.lim()
	// Credentials Lark refuses fail the pass at once, not after every
	// call's retries.
	if _, err := r.a.tenantToken(ctx, false); err != nil {
		return err
	}
	chats, listed, listErr := r.replayChats(ctx, sink, lim)
	if listErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	budget := lim.pages
	incomplete := !listed
	var errs []error
	if listErr != nil {
		errs = append(errs, listErr)
	}
	for _, c := range chats {
		if ps.Done(c.id) {
			continue
		}
		if budget <= 0 {
			incomplete = true
			break
		}
		err := r.replayChat(ctx, sink, ps, c, &budget, lim)
		var ae *apiError
		switch {
		case err == nil:
		case errors.Is(err, chatsync.ErrIncomplete):
			incomplete = true
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &ae) && !retryable(ae):
			// Not in the chat any more (230002), no permission to read
			// it (230027), gone: nothing Courier can do, nothing lost
			// that it could have read.
			r.a.log.Warn("lark: catch-up skips a chat Lark does not let it read", "chat", c.id, "code", ae.Code, "msg", ae.Msg)
			ps.Finish(c.id)
		default:
			r.a.log.Warn("lark: catch-up of a chat failed; it is read again in the next pass", "chat", c.id, "error", err)
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 && incomplete {
		return chatsync.ErrIncomplete
	}
	// The round is over: read whole, or failed (the next pass starts a
	// round anew).
	return errors.Join(errs...)
}

// newReplaySource is the catch-up of webhook mode, which has no
// connection whose start marks a gap: a pass at start (what was posted
// while Courier was down), one soon after the webhook could not store an
// event (chatsync.CatchUp.Failed), and one every replayInterval as a
// safety net for what never reached the webhook (Lark gives up after four
// tries).
// Credentials Lark refuses end its Run (marked adapters.Refused, as the
// tenant token's refusal is), and the service runs it again minutes later.
func newReplaySource(r *receiver) adapters.Source {
	c := r.catchUp
	c.Interval, c.AfterFailure, c.Again = replayInterval, replayAfterFailure, replayAgain
	c.Healthy = func() { r.a.health.Set(adapters.StatusConnected, "") }
	c.Refused = adapters.IsRefused
	return &replaySource{r: r, c: c}
}

// replayInterval: Lark retries an event the webhook did not take after
// 15 s, 5 min, 1 h and 6 h, and the webhook signals its own failures at
// once; the interval only catches what never reached it (Lark's own
// failures, a network cut). Each pass costs a chat-list page per 100 chats
// and a list call per chat: half an hour keeps that far under Lark's
// rate limits for thousands of chats, and a message Lark never delivered
// still arrives within the half hour. replayAfterFailure is how long
// after a webhook failure the pass runs (Lark's own first retry comes
// after 15 s); replayAgain is the pause after a pass that stopped at its
// bounds.
const (
	replayInterval     = 30 * time.Minute
	replayAfterFailure = 30 * time.Second
	replayAgain        = 5 * time.Second
)

// replaySource runs the receiver's catch-up (chatsync.CatchUp) as a Source
// of its own.
type replaySource struct {
	r *receiver
	c *chatsync.CatchUp
}

func (s *replaySource) Name() string { return "lark catch-up" }

// Start asks Lark for a tenant token: app keys Lark refuses are an error
// naming them, marked adapters.Refused (the service starts without the
// Source, shows why on /health and tries again later; the webhook is
// served meanwhile); Lark out of reach is none (Run's passes retry).
func (s *replaySource) Start(ctx context.Context) error {
	_, err := s.r.a.tenantToken(ctx, true)
	switch {
	case err == nil:
		s.r.a.noteScopes(ctx)
	case adapters.IsRefused(err):
		s.r.a.health.Error(err)
		return err
	default:
		s.r.a.health.Error(err)
		s.r.a.log.Warn("lark: no tenant token at start; the catch-up retries", "err", err)
	}
	return nil
}

// Error records on /health an error Run returned.
func (s *replaySource) Error(err error) { s.r.a.health.Error(err) }

// Run makes a pass at once, every interval, after a webhook failure, and
// again soon after a pass that stopped at its bounds, until ctx is done. A
// pass that failed is tried again after a minute, then two, four... up to
// the interval.
func (s *replaySource) Run(ctx context.Context, sink adapters.Sink) error { return s.c.Run(ctx, sink) }

// errFetchIncomplete is what `courier fetch` says of a gap larger than
// chatsync.MaxFetchPasses passes read.
var errFetchIncomplete = errors.New("lark: catch-up stopped at its bounds; more to read")

// FetchOnce is `courier fetch`: passes until every chat is caught up.
func (s *replaySource) FetchOnce(ctx context.Context, sink adapters.Sink) error {
	err := s.c.FetchOnce(ctx, sink)
	if errors.Is(err, chatsync.ErrIncomplete) {
		return errFetchIncomplete
	}
	return err
}

var (
	_ adapters.Fetcher       = (*replaySource)(nil)
	_ adapters.Starter       = (*replaySource)(nil)
	_ adapters.ErrorReporter = (*replaySource)(nil)
)
