package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/monoco/courier/adapters"
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
	// done are the channels caught up since the last pass that read
	// everything: a pass after one that stopped at its bounds skips them,
	// so that channels early in the list (each asking up to maxThreads
	// threads) cannot use every pass's budget and starve the rest.
	// Used by the one goroutine that runs the passes.
	done map[string]bool
}

// errPassIncomplete reports a pass that stopped at its bounds; another
// pass is due.
var errPassIncomplete = errors.New("slack: catch-up stopped at its bounds; more to read")

// pass catches up every channel once. It returns errPassIncomplete when a
// bound stopped it before the end.
func (p *replayer) pass(ctx context.Context, sink adapters.Sink) error {
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
		if p.done[ch] {
			continue
		}
		if budget <= 0 {
			incomplete = true
			break
		}
		err := p.channel(ctx, sink, ch, &budget)
		if err == nil {
			if p.done == nil {
				p.done = map[string]bool{}
			}
			p.done[ch] = true
		}
		switch {
		case gone(err):
			// Deleted, archived, or the bot was removed: nothing to
			// read there, and nothing wrong with Courier.
			p.r.a.log.Debug("slack: catch-up skips a channel it cannot read", "channel", ch, "err", err)
		case errors.Is(err, errPassIncomplete):
			incomplete = true
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err == nil && incomplete {
		return errPassIncomplete
	}
	// The round is over (read whole, or failed: the next pass, at the
	// next gap or interval, starts one anew).
	p.done = nil
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
	p.r.mu.Lock()
	var known []string
	for c := range p.r.chans {
		known = append(known, c)
	}
	p.r.mu.Unlock()
	sort.Strings(known)
	for _, c := range known {
		add(c)
	}
	return out, listErr
}

func isMissingScope(err error) bool {
	var se slackapi.SlackErrorResponse
	return errors.As(err, &se) && se.Err == "missing_scope"
}

// channel catches up one channel.
func (p *replayer) channel(ctx context.Context, sink adapters.Sink, ch string, budget *int) error {
	a := p.r.a
	cs := p.r.acquire(ch)
	saved, ok, err := p.r.position(ctx, cs, sink, ch)
	resume, resumeNewest := cs.resume, cs.resumeNewest
	pending := cs.resumeThreads
	// The threads active lately (saved, so a restart knows them too): a
	// reply posted to one during the gap is not in the history read
	// below when its parent is older than from.
	remembered := p.r.activeThreads(cs)
	// Read from where the last catch-up read up to, when that is before
	// the checkpoint: live events moved the checkpoint on, and an event
	// Slack never delivered (it gives up after three tries) is only found
	// by reading history again over what they covered.
	from := saved
	if validTS(cs.passedTo) && tsAfter(saved, cs.passedTo) {
		from = cs.passedTo
	}
	if ok {
		// Until this catch-up completes, what is delivered (by it or
		// live) must not move the checkpoint past what it has not read.
		cs.caughtUp = false
	}
	p.r.release(cs)
	if err != nil {
		return err
	}
	if !ok {
		return p.record(ctx, sink, ch, budget)
	}
	// History comes newest page first, as Slack pages it. It is collected
	// whole (within the bounds) and handed over oldest first, with the
	// thread replies in their place.
	var msgs []slackapi.Message
	threads := map[string]bool{}
	for _, t := range remembered {
		threads[t] = true
	}
	for _, t := range pending {
		threads[t] = true
	}
	cursor, complete := "", false
	for *budget > 0 && len(msgs) < p.limits.messages {
		*budget--
		var h *slackapi.GetConversationHistoryResponse
		err := p.call(ctx, func() error {
			var err error
			h, err = a.api.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{
				ChannelID: ch, Oldest: from, Latest: resume, Limit: p.limits.pageSize, Cursor: cursor})
			return err
		})
		if err != nil {
			return fmt.Errorf("slack: conversations.history of %s: %w", ch, err)
		}
		for _, m := range h.Messages {
			if !tsAfter(m.Timestamp, from) || (resume != "" && !tsAfter(resume, m.Timestamp)) {
				continue // outside the range asked for
			}
			msgs = append(msgs, m)
			if m.ReplyCount > 0 && tsAfter(m.LatestReply, from) {
				threads[m.Timestamp] = true
			}
		}
		cursor = h.ResponseMetaData.NextCursor
		if !h.HasMore || cursor == "" {
			complete = true
			break
		}
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
	sort.SliceStable(msgs, func(i, j int) bool { return tsAfter(msgs[j].Timestamp, msgs[i].Timestamp) })
	newest := ""
	for _, m := range msgs {
		if tsAfter(m.Timestamp, newest) {
			newest = m.Timestamp
		}
		if err := p.message(ctx, sink, ch, m); err != nil {
			return err
		}
	}
	if !complete {
		// The newest part of a gap larger than one pass is durable now;
		// the next pass reads on back from its oldest message. The
		// checkpoint stays where it is until the whole gap is read.
		if len(msgs) > 0 {
			cs := p.r.acquire(ch)
			cs.resume = msgs[0].Timestamp
			if tsAfter(newest, cs.resumeNewest) {
				cs.resumeNewest = newest
			}
			// The threads found in the part read are read once the
			// whole gap is.
			cs.resumeThreads = sortedKeys(threads)
			if len(cs.resumeThreads) > p.limits.messages {
				cs.resumeThreads = cs.resumeThreads[len(cs.resumeThreads)-p.limits.messages:]
			}
			p.r.release(cs)
		}
		a.log.Warn("slack: catch-up of a channel goes on in the next pass", "channel", ch, "messages", len(msgs))
		return errPassIncomplete
	}
	if tsAfter(resumeNewest, newest) {
		newest = resumeNewest // read by the passes that stopped at their bounds
	}
	if newest == "" {
		newest = from
	}
	return p.r.caughtUp(ctx, sink, ch, newest)
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
func (p *replayer) record(ctx context.Context, sink adapters.Sink, ch string, budget *int) error {
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
	return p.r.caughtUp(ctx, sink, ch, ts)
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
		wait := max(rl.RetryAfter, time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
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
// then gives up on it), and one every interval as a safety net.
type replaySource struct {
	p        *replayer
	interval time.Duration
	// afterFailure is how long after a webhook failure the pass runs,
	// giving Slack's own retries their chance first.
	afterFailure time.Duration
}

func newReplaySource(r *receiver) *replaySource {
	return &replaySource{p: &replayer{r: r, limits: defaultReplayLimits}, interval: time.Hour, afterFailure: time.Minute}
}

func (s *replaySource) Name() string { return "slack/replay" }

// Start checks that the webhook can verify requests (signing_secret) and
// the bot token (auth.test): a revoked or wrong token fails the service's
// start with the reason.
func (s *replaySource) Start(ctx context.Context) error {
	if s.p.r.a.cfg.SigningSecret.Reveal() == "" {
		return errors.New("slack: the events mode needs signing_secret: every request is verified with it")
	}
	return startCheck(ctx, s.p.r.a)
}

// Error records on /health an error Run returned.
func (s *replaySource) Error(err error) { s.p.r.a.health.Error(err) }

// Run makes a pass at once, every interval, after a webhook failure, and
// again soon after a pass that stopped at its bounds.
func (s *replaySource) Run(ctx context.Context, sink adapters.Sink) error {
	for {
		err := s.p.pass(ctx, sink)
		wait := s.interval
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errPassIncomplete):
			wait = time.Second
		case err != nil && isFatal(err):
			s.p.r.a.health.Error(err)
			s.p.r.a.log.Error("slack: catch-up stopped: the token was refused", "err", err)
			<-ctx.Done()
			return nil
		case err != nil:
			s.p.r.a.health.Error(err)
			s.p.r.a.log.Warn("slack: catch-up failed; next pass later", "err", err)
		default:
			s.p.r.a.health.Set(adapters.StatusConnected, "")
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		case <-s.p.r.failed:
			// A new gap, maybe in a channel the unfinished round read
			// already: the next pass starts a round anew.
			s.p.done = nil
			t.Reset(s.afterFailure)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
}

var (
	_ adapters.Starter       = (*replaySource)(nil)
	_ adapters.ErrorReporter = (*replaySource)(nil)
)
