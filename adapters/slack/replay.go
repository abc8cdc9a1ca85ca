package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
)

// The catch-up: what was posted while Courier was away (a dropped
// socket, a restart, webhook deliveries Slack gave up on) is read back
// from conversations.history and conversations.replies, from each
// channel's checkpoint on, and goes through handle like a live event. The
// mailbox's dedupe by message id makes what both the live stream and the
// catch-up deliver one file.
//
// A channel seen for the first time (no checkpoint) is not backfilled:
// its newest message's ts, as Slack gives it, is recorded as where it is
// now. Slack's own ts is used rather than this machine's clock, so a clock
// off by a few seconds loses nothing.

// replayLimits bound one pass: an outsider who posts a million messages
// during a gap costs at most this much per pass, and the next pass goes on
// from where this one stopped.
type replayLimits struct {
	pages    int // API pages (history, replies, memberships) per pass
	messages int // messages collected per channel per pass
	pageSize int
	retries  int // 429s honoured per call before the pass gives up
}

var defaultReplayLimits = replayLimits{pages: 200, messages: 5000, pageSize: 200, retries: 5}

// replayer runs catch-up passes.
type replayer struct {
	r      *receiver
	limits replayLimits
	// resume is, per channel, where a catch-up stopped at its bounds goes
	// on in the next pass of the round. Used by the one goroutine that
	// runs the passes; dropped with the round (a gap starts a new one,
	// which reads from the checkpoint up to now again).
	resume map[string]*resumeState
}

// resumeState is what the passes of a round that stopped at their bounds
// read of a channel: history is read newest first, so the next pass goes
// on reading back from the oldest message read.
type resumeState struct {
	latest  string   // where the next pass reads history back from
	newest  string   // the newest ts the passes that stopped read
	threads []string // threads found by the passes that stopped
}

// pass catches up every channel once. It returns chatsync.ErrIncomplete
// when a bound stopped it before the end. A pass after one that stopped
// at its bounds skips the channels caught up since the round began, so
// that channels early in the list (each asking up to maxThreads threads)
// cannot use every pass's budget and starve the rest.
func (p *replayer) pass(ctx context.Context, sink adapters.Sink) error {
	return p.r.track.RunPass(func(ps *chatsync.Pass[string, channelState]) error {
		if ps.NewRound() {
			p.resume = nil
		}
		return p.read(ctx, sink, ps)
	})
}

// read is one pass over the channels.
func (p *replayer) read(ctx context.Context, sink adapters.Sink, ps *chatsync.Pass[string, channelState]) error {
	budget := p.limits.pages
	channels, err := p.channels(ctx, &budget)
	if err != nil && channels == nil {
		return err
	}
	incomplete := false
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, ch := range channels {
		if ps.Done(ch) {
			continue
		}
		if budget <= 0 {
			incomplete = true
			break
		}
		err := p.channel(ctx, sink, ps, ch, &budget)
		switch {
		case gone(err):
			// Deleted, archived, or the bot was removed: nothing to
			// read there, and nothing wrong with Courier.
			p.r.a.log.Debug("slack: catch-up skips a channel it cannot read", "channel", ch, "err", err)
		case errors.Is(err, chatsync.ErrIncomplete):
			incomplete = true
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err == nil && incomplete {
		return chatsync.ErrIncomplete
	}
	// The round is over (read whole, or failed: the next pass, at the
	// next gap or interval, starts one anew).
	return errors.Join(errs...)
}

// channels are the conversations to catch up: those the bot is a member
// of (users.conversations) and those with a position in memory, only the
// allow-list's when one is set.
func (p *replayer) channels(ctx context.Context, budget *int) ([]string, error) {
	a := p.r.a
	seen := map[string]bool{}
	var out []string
	add := func(c string) {
		if c == "" || seen[c] || !ids.MatchString(c) || (a.allow != nil && !a.allow[c]) {
			return
		}
		seen[c] = true
		out = append(out, c)
	}
	// An allow-list names the channels: no need to list memberships (a
	// channel the bot is not in answers not_in_channel and is skipped).
	var listErr error
	if a.allow != nil {
		allowed := make([]string, 0, len(a.allow))
		for c := range a.allow {
			allowed = append(allowed, c)
		}
		sort.Strings(allowed)
		for _, c := range allowed {
			add(c)
		}
	}
	cursor := ""
	for a.allow == nil && *budget > 0 {
		*budget--
		var chans []slackapi.Channel
		var next string
		err := p.call(ctx, func() error {
			var err error
			chans, next, err = a.api.GetConversationsForUserContext(ctx, &slackapi.GetConversationsForUserParameters{
				Cursor: cursor, Types: []string{"public_channel", "private_channel", "mpim", "im"},
				Limit: p.limits.pageSize, ExcludeArchived: true})
			return err
		})
		if err != nil {
			// A missing scope (channels:read, groups:read, im:read,
			// mpim:read) still leaves the channels seen live to catch up.
			listErr = fmt.Errorf("slack: users.conversations: %w", err)
			if isFatal(err) && !isMissingScope(err) {
				return nil, listErr
			}
			break
		}
		for _, c := range chans {
			add(c.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for _, c := range p.r.track.Known() {
		add(c)
	}
	return out, listErr
}

// refusedPass reports whether a catch-up pass failed on refused
// credentials: the Source's Run then ends with it, and the service tries
// the Source again minutes later. A missing scope is not one: it keeps
// some channels from being read (a DM without im:history), not the
// others, and the pass is tried again later like any failed one, while
// live events go on.
func refusedPass(err error) bool { return isFatal(err) && !isMissingScope(err) }

func isMissingScope(err error) bool {
	var se slackapi.SlackErrorResponse
	return errors.As(err, &se) && se.Err == "missing_scope"
}

// channel catches up one channel: reads its history since its position,
// the replies of its threads active lately, and hands what it read to
// handle, oldest first; then the channel is caught up.
func (p *replayer) channel(ctx context.Context, sink adapters.Sink, ps *chatsync.Pass[string, channelState], ch string, budget *int) error {
	var remembered []string
	rd, err := ps.Begin(ctx, sink, ch, func(cs *channelState) {
		// The threads active lately (saved, so a restart knows them
		// too): a reply posted to one during the gap is not in the
		// history read below when its parent is older than from.
		remembered = p.r.activeThreads(cs)
	})
	if err != nil {
		return err
	}
	if rd.Saved == "" {
		return p.record(ctx, sink, ps, ch, budget)
	}
	// Read from where the last catch-up read up to, when that is before
	// the checkpoint (rd.From): live events moved the checkpoint on, and
	// an event Slack never delivered (it gives up after three tries) is
	// only found by reading history again over what they covered.
	from := rd.From
	rs := p.resume[ch]
	if rs == nil {
		rs = &resumeState{}
	}
	threads := map[string]bool{}
	for _, t := range slices.Concat(remembered, rs.threads) {
		threads[t] = true
	}
	msgs, complete, err := p.history(ctx, ch, from, rs.latest, threads, budget)
	if err != nil {
		return err
	}
	if complete {
		for _, t := range sortedKeys(threads) {
			replies, ok, err := p.replies(ctx, ch, t, from, budget)
			if err != nil {
				return err
			}
			if !ok {
				complete = false
				break
			}
			msgs = append(msgs, replies...)
		}
	}
	newest, err := p.messages(ctx, sink, ch, msgs)
	if err != nil {
		return err
	}
	if !complete {
		p.stopped(ch, rs, msgs, newest, threads)
		p.r.a.log.Warn("slack: catch-up of a channel goes on in the next pass", "channel", ch, "messages", len(msgs))
		return chatsync.ErrIncomplete
	}
	if tsAfter(rs.newest, newest) {
		newest = rs.newest // read by the passes that stopped at their bounds
	}
	if newest == "" {
		newest = from
	}
	if err := ps.CaughtUp(ctx, sink, ch, newest); err != nil {
		return err
	}
	delete(p.resume, ch)
	return nil
}

// history reads a channel's top-level messages after from (and before
// latest, when set), as many as the bounds let it; complete is false when
// they stopped it. History comes newest page first, as Slack pages it.
// The threads with replies after from are added to threads.
func (p *replayer) history(ctx context.Context, ch, from, latest string, threads map[string]bool, budget *int) ([]slackapi.Message, bool, error) {
	var msgs []slackapi.Message
	cursor := ""
	for *budget > 0 && len(msgs) < p.limits.messages {
		*budget--
		var h *slackapi.GetConversationHistoryResponse
		err := p.call(ctx, func() error {
			var err error
			h, err = p.r.a.api.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{
				ChannelID: ch, Oldest: from, Latest: latest, Limit: p.limits.pageSize, Cursor: cursor})
			return err
		})
		if err != nil {
			return nil, false, fmt.Errorf("slack: conversations.history of %s: %w", ch, err)
		}
		for _, m := range h.Messages {
			if !tsAfter(m.Timestamp, from) || (latest != "" && !tsAfter(latest, m.Timestamp)) {
				continue // outside the range asked for
			}
			msgs = append(msgs, m)
			if m.ReplyCount > 0 && tsAfter(m.LatestReply, from) {
				threads[m.Timestamp] = true
			}
		}
		cursor = h.ResponseMetaData.NextCursor
		if !h.HasMore || cursor == "" {
			return msgs, true, nil
		}
	}
	return msgs, false, nil
}

// messages hands what was read of a channel to handle, oldest first (the
// thread replies in their place), and returns the newest ts among them.
func (p *replayer) messages(ctx context.Context, sink adapters.Sink, ch string, msgs []slackapi.Message) (string, error) {
	sort.SliceStable(msgs, func(i, j int) bool { return tsAfter(msgs[j].Timestamp, msgs[i].Timestamp) })
	newest := ""
	for _, m := range msgs {
		if tsAfter(m.Timestamp, newest) {
			newest = m.Timestamp
		}
		if err := p.message(ctx, sink, ch, m); err != nil {
			return "", err
		}
	}
	return newest, nil
}

// stopped keeps where the catch-up of a channel stopped at its bounds:
// the newest part of a gap larger than one pass is durable now, and the
// next pass reads on back from its oldest message. The checkpoint stays
// where it is until the whole gap is read.
func (p *replayer) stopped(ch string, rs *resumeState, msgs []slackapi.Message, newest string, threads map[string]bool) {
	if len(msgs) == 0 {
		return
	}
	rs.latest = msgs[0].Timestamp
	if tsAfter(newest, rs.newest) {
		rs.newest = newest
	}
	// The threads found in the part read are read once the whole gap is.
	rs.threads = sortedKeys(threads)
	if len(rs.threads) > p.limits.messages {
		rs.threads = rs.threads[len(rs.threads)-p.limits.messages:]
	}
	if p.resume == nil || len(p.resume) >= maxChannels {
		p.resume = map[string]*resumeState{}
	}
	p.resume[ch] = rs
}

// message hands one message from history to handle, unless the mailbox
// has it (written live, or by an earlier pass): that skips normalising it
// again (users.info, files).
func (p *replayer) message(ctx context.Context, sink adapters.Sink, ch string, m slackapi.Message) error {
	id := "slack_" + ch + "_" + strings.ReplaceAll(m.Timestamp, ".", "_")
	if seen, err := sink.Seen(ctx, id); err == nil && seen {
		return nil
	}
	inner, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("slack: catch-up of %s: %w", ch, err)
	}
	return p.r.handle(ctx, sink, event{Channel: ch, Inner: inner})
}

// replies reads a thread's replies newer than saved; ok is false when the
// bounds stopped it.
func (p *replayer) replies(ctx context.Context, ch, thread, saved string, budget *int) ([]slackapi.Message, bool, error) {
	var out []slackapi.Message
	cursor := ""
	for *budget > 0 {
		*budget--
		var msgs []slackapi.Message
		var more bool
		var next string
		err := p.call(ctx, func() error {
			var err error
			msgs, more, next, err = p.r.a.api.GetConversationRepliesContext(ctx, &slackapi.GetConversationRepliesParameters{
				ChannelID: ch, Timestamp: thread, Oldest: saved, Limit: p.limits.pageSize, Cursor: cursor})
			return err
		})
		if err != nil {
			var se slackapi.SlackErrorResponse
			if errors.As(err, &se) && se.Err == "thread_not_found" {
				return nil, true, nil // deleted meanwhile
			}
			return nil, false, fmt.Errorf("slack: conversations.replies of %s in %s: %w", thread, ch, err)
		}
		for _, m := range msgs {
			if m.Timestamp != thread && tsAfter(m.Timestamp, saved) {
				out = append(out, m)
			}
		}
		if !more || next == "" {
			return out, true, nil
		}
		cursor = next
	}
	return nil, false, nil
}

// record saves a channel's current position without reading its past.
func (p *replayer) record(ctx context.Context, sink adapters.Sink, ps *chatsync.Pass[string, channelState], ch string, budget *int) error {
	*budget--
	var h *slackapi.GetConversationHistoryResponse
	err := p.call(ctx, func() error {
		var err error
		h, err = p.r.a.api.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{ChannelID: ch, Limit: 1})
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: conversations.history of %s: %w", ch, err)
	}
	ts := "0" // an empty channel: everything posted from now on is new
	if len(h.Messages) > 0 && validTS(h.Messages[0].Timestamp) {
		ts = h.Messages[0].Timestamp
	}
	return ps.CaughtUp(ctx, sink, ch, ts)
}

// call runs one Web API call, waiting out a 429's Retry-After a bounded
// number of times.
func (p *replayer) call(ctx context.Context, f func() error) error {
	for i := 0; ; i++ {
		err := f()
		var rl *slackapi.RateLimitedError
		if !errors.As(err, &rl) || i >= p.limits.retries {
			return err
		}
		if err := chatsync.Sleep(ctx, max(rl.RetryAfter, time.Second)); err != nil {
			return err
		}
	}
}

// gone reports a channel the bot cannot read any more.
func gone(err error) bool {
	var se slackapi.SlackErrorResponse
	return errors.As(err, &se) && (se.Err == "channel_not_found" || se.Err == "not_in_channel" || se.Err == "is_archived")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return tsAfter(out[j], out[i]) })
	return out
}

// replaySource is the catch-up as a Source of its own, for the Events API,
// whose gaps have no connection to mark them: a pass at start (what was
// posted while Courier was down), one soon after the webhook could not
// store an event (Slack retries three times within about five minutes,
// then gives up on it), and one every interval as a safety net. It runs
// the receiver's catch-up (chatsync.CatchUp), which the webhook tells of
// its failures.
type replaySource struct {
	p *replayer
	c *chatsync.CatchUp
}

// replayInterval is between the Events API's catch-up passes when all is
// read; afterFailure is how long after a webhook failure the pass runs,
// giving Slack's own retries their chance first.
const (
	replayInterval = time.Hour
	afterFailure   = time.Minute
)

func newReplaySource(r *receiver) *replaySource {
	c := r.catchUp
	c.Interval = replayInterval
	c.Healthy = func() { r.a.health.Set(adapters.StatusConnected, "") }
	return &replaySource{p: r.replay, c: c}
}

func (s *replaySource) Name() string { return "slack/replay" }

// Start checks that the webhook can verify requests (signing_secret) and
// the bot token (auth.test): a revoked or wrong token is an error marked
// adapters.Refused (the service starts without the Source and tries it
// again later; /health says why).
func (s *replaySource) Start(ctx context.Context) error {
	if s.p.r.a.cfg.SigningSecret.Reveal() == "" {
		return errors.New("slack: the events mode needs signing_secret: every request is verified with it")
	}
	return startCheck(ctx, s.p.r.a)
}

// Error records on /health an error Run returned.
func (s *replaySource) Error(err error) { s.p.r.a.health.Error(err) }

// Run makes a pass at once, every interval, after a webhook failure, soon
// after a pass that stopped at its bounds, and after a failed one once a
// minute has passed, doubling up to the interval. A refused token ends it
// (marked adapters.Refused: the service runs it again minutes later).
func (s *replaySource) Run(ctx context.Context, sink adapters.Sink) error { return s.c.Run(ctx, sink) }

var (
	_ adapters.Starter       = (*replaySource)(nil)
	_ adapters.ErrorReporter = (*replaySource)(nil)
)
