package lark

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
)

// replayThreads reads the replies in the chat's threads since from: a
// group's chat container lists a thread's root, not its replies, so the
// threads read are those whose roots were just read (read) and those
// active lately (live or in earlier passes; the first time this process
// reads a chat with a position (saved), those whose roots are in the
// window before it). It returns the newest create_time read.
func (r *receiver) replayThreads(ctx context.Context, sink adapters.Sink, c replayChat, saved, from int64, read map[string]bool, budget *int, lim replayLimits, fail *itemFailure) (int64, error) {
	st := &r.replay
	if saved > 0 && !st.scanned[c.id] {
		if err := r.replayDiscover(ctx, c, from, budget, lim); err != nil {
			return 0, err
		}
	}
	newest := int64(0)
	for _, t := range st.threadsOf(c.id, from-threadMemory.Milliseconds(), read) {
		ms, err := r.replayThread(ctx, sink, c, t, from, budget, lim, fail)
		if err != nil {
			return 0, err
		}
		newest = max(newest, ms)
	}
	return newest, nil
}

// replayDiscover notes the threads whose roots are in the window before
// from, the newest first, lim.discoverPages pages at most: the threads a
// restarted receiver has no memory of, whose replies during the downtime
// the chat's history does not list. Once per chat and process.
func (r *receiver) replayDiscover(ctx context.Context, c replayChat, from int64, budget *int, lim replayLimits) error {
	st := &r.replay
	token := ""
	for pages := 0; pages < lim.discoverPages && *budget > 0; pages++ {
		*budget--
		q := url.Values{"container_id_type": {"chat"}, "container_id": {c.id},
			"start_time": {strconv.FormatInt(max(0, from-lim.window.Milliseconds())/1000, 10)}, "end_time": {strconv.FormatInt(from/1000, 10)},
			"sort_type": {"ByCreateTimeDesc"}, "page_size": {strconv.Itoa(lim.pageSize)}}
		data, err := r.listMessages(ctx, q, token, lim)
		if err != nil {
			return fmt.Errorf("lark: catch-up of %s: the threads before its position: %w", c.id, err)
		}
		for _, it := range data.Items {
			if it.ThreadID != "" {
				ms, _ := strconv.ParseInt(strings.TrimSpace(it.CreateTime), 10, 64)
				st.noteThread(c.id, it.ThreadID, ms)
			}
		}
		if lastPage(data.HasMore, data.PageToken, token) {
			break
		}
		token = data.PageToken
	}
	if st.scanned == nil || len(st.scanned) >= maxChats {
		st.scanned = map[string]bool{}
	}
	st.scanned[c.id] = true
	return nil
}

// replayThread reads a thread's replies back to from (the thread
// container has no time range: newest first, until older than from's
// second), oldest handed over first. Past lim.threadPages the oldest
// replies of the gap are not read, and a warning says so: a thread
// anyone can fill must not hold up the chat for good. A thread Lark will
// not list (deleted, no permission) is skipped.
func (r *receiver) replayThread(ctx context.Context, sink adapters.Sink, c replayChat, thread string, from int64, budget *int, lim replayLimits, fail *itemFailure) (int64, error) {
	floor := from / 1000 * 1000
	var got []histItem
	token := ""
	complete := false
	for pages := 0; pages < lim.threadPages; pages++ {
		if *budget <= 0 {
			// The pass's budget is spent: what was read is delivered
			// below; the chat is read again from its position next pass.
			break
		}
		*budget--
		q := url.Values{"container_id_type": {"thread"}, "container_id": {thread}, "sort_type": {"ByCreateTimeDesc"},
			"page_size": {strconv.Itoa(lim.pageSize)}}
		data, err := r.listMessages(ctx, q, token, lim)
		var ae *apiError
		if errors.As(err, &ae) && !retryable(ae) {
			r.a.log.Debug("lark: catch-up skips a thread Lark does not list", "chat", c.id, "thread", clip(thread, 128), "code", ae.Code)
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("lark: catch-up of thread %s in %s: %w", clip(thread, 128), c.id, err)
		}
		older := false
		for _, it := range data.Items {
			if ms, _ := strconv.ParseInt(strings.TrimSpace(it.CreateTime), 10, 64); ms > 0 && ms < floor {
				older = true
				break
			}
			got = append(got, it)
		}
		if older || lastPage(data.HasMore, data.PageToken, token) {
			complete = true
			break
		}
		token = data.PageToken
	}
	newest := int64(0)
	for i := len(got) - 1; i >= 0; i-- {
		ms, err := r.replayItem(ctx, sink, c, got[i])
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			fail.note(ms, err)
		}
		newest = max(newest, ms)
	}
	switch {
	case complete:
	case *budget <= 0:
		return newest, chatsync.ErrIncomplete
	default:
		r.a.log.Warn("lark: a thread has more replies since the chat's position than a catch-up reads; the oldest are not read",
			"chat", c.id, "thread", clip(thread, 128), "read", len(got))
	}
	return newest, nil
}

// Threads remembered, so that a reply posted during a gap in a thread
// whose root is older than the chat's position is read: at most
// maxThreads in all (a thread is an outsider's to start), those active in
// the threadMemory before a chat's position, maxThreadsPerChat a chat a
// pass, the most recently active first. In memory only: after a restart,
// threads are known again as their messages arrive.
const (
	maxThreads        = 10000
	maxThreadsPerChat = 50
	threadMemory      = 7 * 24 * time.Hour
)

// threadIDs are Lark's thread ids (omt_...), as far as a map key and a
// query need them.
var threadIDs = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

type threadSeen struct {
	chat string
	last int64 // the newest create_time seen in it
}

// noteThread records that thread of chat was active at ms. Safe for
// concurrent use (handle calls it for live events during a pass).
func (s *replayState) noteThread(chat, thread string, ms int64) {
	if !threadIDs.MatchString(thread) {
		return
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if s.threads == nil {
		s.threads = map[string]threadSeen{}
	}
	if t, ok := s.threads[thread]; ok {
		s.threads[thread] = threadSeen{chat: t.chat, last: max(t.last, ms)}
		return
	}
	if len(s.threads) >= maxThreads {
		// Forget the least recently active half.
		lasts := make([]int64, 0, len(s.threads))
		for _, t := range s.threads {
			lasts = append(lasts, t.last)
		}
		slices.Sort(lasts)
		cut := lasts[len(lasts)/2]
		for k, t := range s.threads {
			if t.last <= cut {
				delete(s.threads, k)
			}
		}
	}
	s.threads[thread] = threadSeen{chat: chat, last: ms}
}

// threadsOf are the threads of chat to read: those in read first, then
// those active since since, the most recent first; maxThreadsPerChat at
// most.
func (s *replayState) threadsOf(chat string, since int64, read map[string]bool) []string {
	out := make([]string, 0, len(read))
	for t := range read {
		out = append(out, t)
	}
	slices.Sort(out)
	s.tmu.Lock()
	var known []string
	for t, seen := range s.threads {
		if seen.chat == chat && seen.last >= since && !read[t] {
			known = append(known, t)
		}
	}
	slices.SortFunc(known, func(a, b string) int {
		if c := cmp.Compare(s.threads[b].last, s.threads[a].last); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	s.tmu.Unlock()
	out = append(out, known...)
	if len(out) > maxThreadsPerChat {
		out = out[:maxThreadsPerChat]
	}
	return out
}
