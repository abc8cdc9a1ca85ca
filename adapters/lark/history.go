package lark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
)

// replayChat is a chat to catch up and the chat_type its events carry.
type replayChat struct{ id, chatType, mode string }

// replayChats are the chats to catch up, in a stable order: the group
// chats im/v1/chats lists (from where the last pass of the round stopped
// listing), then those the receiver knows (p2p chats, and those listed
// by earlier passes of the round). listed is false when the list stopped
// at its bound or failed; err is the list's failure, which leaves the
// known chats to catch up.
func (r *receiver) replayChats(ctx context.Context, sink adapters.Sink, lim replayLimits) (out []replayChat, listed bool, err error) {
	set := &chatSet{seen: map[string]bool{}}
	listed, err = r.listChats(ctx, set, lim)
	if kerr := r.knownChats(ctx, sink, set); kerr != nil && err == nil {
		err = kerr
	}
	return set.list, listed && err == nil, err
}

// chatSet is the chats of a pass, each once, in the order added.
type chatSet struct {
	seen map[string]bool
	list []replayChat
}

// add adds chat id, of chat_mode mode, unless it is in already or is not
// a chat's id.
func (cs *chatSet) add(id, mode string) {
	if cs.seen[id] || !isChatID(id) {
		return
	}
	cs.seen[id] = true
	cs.list = append(cs.list, replayChat{id: id, chatType: eventChatType(mode), mode: mode})
}

// listChats adds the chats im/v1/chats lists, from where the last pass
// of the round stopped listing, lim.chatPages pages at most; listed is
// true when the list was read to its end.
func (r *receiver) listChats(ctx context.Context, set *chatSet, lim replayLimits) (listed bool, err error) {
	st := &r.replay
	token := st.chatToken
	for page := 0; ; page++ {
		if page >= lim.chatPages {
			st.chatToken = token
			r.a.log.Warn("lark: catch-up lists at most this many chats a pass; the rest are listed in the next", "chats", len(set.list))
			return false, nil
		}
		q := url.Values{"page_size": {strconv.Itoa(lim.chatPageSize)}, "sort_type": {"ByCreateTimeAsc"}}
		if token != "" {
			q.Set("page_token", token)
		}
		var data struct {
			Items []struct {
				ChatID   string `json:"chat_id"`
				ChatMode string `json:"chat_mode"`
			} `json:"items"`
			HasMore   bool   `json:"has_more"`
			PageToken string `json:"page_token"`
		}
		err = r.replayGet(ctx, "/open-apis/im/v1/chats?"+q.Encode(), &data, lim)
		var ae *apiError
		if token != "" && errors.As(err, &ae) && !retryable(ae) {
			// A page token Lark no longer takes (they expire): the list
			// starts over; the chats done in the round are skipped.
			token, st.chatToken = "", ""
			page--
			continue
		}
		if err != nil {
			return false, fmt.Errorf("lark: catch-up: list the chats: %w", err)
		}
		for _, c := range data.Items {
			set.add(c.ChatID, c.ChatMode)
		}
		if lastPage(data.HasMore, data.PageToken, token) {
			st.chatToken = ""
			return true, nil
		}
		token = data.PageToken
	}
}

// knownChats adds the chats the receiver knows that the list did not
// name: those met live since it started and the p2p chats saved, each
// one's kind from im/v1/chats/{id} (cached). A p2p chat met for the first
// time is added to those saved.
func (r *receiver) knownChats(ctx context.Context, sink adapters.Sink, set *chatSet) error {
	st := &r.replay
	var known []string
	for _, id := range r.track.Known() {
		if !set.seen[id] {
			known = append(known, id)
		}
	}
	saved, err := r.replayP2P(ctx, sink)
	p2p := slices.Clone(saved)
	isP2P := make(map[string]bool, len(p2p))
	for _, id := range p2p {
		isP2P[id] = true
	}
	for _, id := range slices.Concat(known, saved) {
		// A chat met live, not in the list: a p2p chat (or one the app
		// left).
		if set.seen[id] {
			continue
		}
		_, mode := r.a.chat(ctx, id)
		set.add(id, mode)
		if mode == "p2p" && !isP2P[id] {
			isP2P[id] = true
			p2p = append(p2p, id)
			st.p2pDirty = true
		}
	}
	// A saved list that could not be read is not saved over: the p2p
	// chats met before would be lost. The chats met since are added once
	// it is read (they are still known).
	if st.p2pDirty && err == nil {
		if len(p2p) > maxP2PChats {
			p2p = p2p[len(p2p)-maxP2PChats:]
		}
		return r.saveP2P(ctx, sink, p2p)
	}
	return err
}

// The p2p chats the receiver has met are saved (under p2pKey, the newest
// maxP2PChats), since Lark lists no p2p chat to a tenant token: after a
// restart, a p2p chat silent since is caught up too.
const (
	p2pKey      = "lark/p2p-chats"
	maxP2PChats = 1000
)

// replayP2P returns the p2p chats saved, read from the Sink once per
// process.
func (r *receiver) replayP2P(ctx context.Context, sink adapters.Sink) ([]string, error) {
	st := &r.replay
	if st.p2pLoaded {
		return st.p2p, nil
	}
	v, ok, err := sink.Checkpoint(ctx, p2pKey)
	if err != nil {
		return nil, fmt.Errorf("lark: catch-up: the p2p chats saved: %w", err)
	}
	var list []string
	if ok && json.Unmarshal([]byte(v), &list) != nil {
		r.a.log.Warn("lark: the saved list of p2p chats is unreadable; the chats are known again as they speak", "key", p2pKey)
	}
	st.p2p = nil
	in := map[string]bool{}
	for _, id := range list {
		if isChatID(id) && !in[id] && len(st.p2p) < maxP2PChats {
			in[id] = true
			st.p2p = append(st.p2p, id)
		}
	}
	st.p2pLoaded = true
	return st.p2p, nil
}

// saveP2P saves the list of p2p chats.
func (r *receiver) saveP2P(ctx context.Context, sink adapters.Sink, list []string) error {
	b, _ := json.Marshal(list)
	if err := sink.Deliver(ctx, adapters.Event{Checkpoint: &adapters.Checkpoint{Key: p2pKey, Value: string(b)}}); err != nil {
		return fmt.Errorf("lark: catch-up: save the p2p chats: %w", err)
	}
	r.replay.p2p, r.replay.p2pDirty = list, false
	return nil
}

// isChatID reports whether id is a chat's id the catch-up reads: oc_...,
// 128 bytes at most.
func isChatID(id string) bool {
	return strings.HasPrefix(id, "oc_") && ids.MatchString(id) && len(id) <= 128
}

// eventChatType is the chat_type an event carries for a chat of chat_mode
// mode: p2p, else group.
func eventChatType(mode string) string {
	if mode == "p2p" {
		return "p2p"
	}
	return "group"
}

// replayChat reads one chat's messages since its position and hands each
// to handle; then the chat is caught up. Stopped at a bound, it saves
// the newest read and returns chatsync.ErrIncomplete.
func (r *receiver) replayChat(ctx context.Context, sink adapters.Sink, ps *chatPass, c replayChat, budget *int, lim replayLimits) error {
	rd, err := ps.Begin(ctx, sink, c.id, nil)
	if err != nil {
		return err
	}
	saved, from := rd.Saved, replayFrom(rd, lim, time.Now())
	var fail itemFailure
	// listed is the newest create_time of the chat's history read;
	// newest, the newest read (threads may hold newer replies than the
	// part of the history a bounded pass read).
	listed, threads, bounded, err := r.replayHistory(ctx, sink, c, from, budget, lim, &fail)
	if err != nil {
		return err
	}
	newest := listed
	if c.mode != "topic" {
		ms, err := r.replayThreads(ctx, sink, c, saved, from, threads, budget, lim, &fail)
		if err != nil {
			return err
		}
		newest = max(newest, ms)
	}
	if bounded {
		newest = listed // the history after it is unread
	}
	if fail.err != nil {
		// The messages after the one that failed are in; the position
		// stays before it, which the next pass reads again.
		if fail.ms > 0 {
			if err := ps.Advance(ctx, sink, c.id, min(newest, fail.ms-1)); err != nil {
				return err
			}
		}
		return fmt.Errorf("lark: catch-up of %s: %w", c.id, fail.err)
	}
	if bounded {
		// What was read is durable, and everything before the newest
		// read was read (the chat's list is in create_time order, and
		// each thread was read back to the position): the next pass, or
		// a restart, goes on from there.
		if err := ps.Advance(ctx, sink, c.id, newest); err != nil {
			return err
		}
		r.a.log.Warn("lark: catch-up of a chat goes on in the next pass", "chat", c.id)
		return chatsync.ErrIncomplete
	}
	// Read up to the newer of the newest read and the position (the
	// next pass reads from here, when live events moved the checkpoint
	// on meanwhile: chatsync.Reading.PassedTo).
	return ps.CaughtUp(ctx, sink, c.id, max(newest, saved))
}

// replayFrom is where a pass reads a chat from: its position, or where
// the last pass read it up to when that is older (a live event may have
// moved the checkpoint past a message that never arrived) by at most a
// window, or a window back from now for a chat with no position.
func replayFrom(rd chatsync.Reading[int64], lim replayLimits, now time.Time) int64 {
	from := rd.Saved
	if p := rd.PassedTo; p > 0 && p < from && from-p <= lim.window.Milliseconds() {
		from = p
	}
	if from <= 0 {
		from = now.Add(-lim.window).UnixMilli()
	}
	return from
}

// replayHistory reads the chat's history from from's second on, in
// create_time order, lim.perChat pages at most, and hands each message
// to handle; a message that fails is noted in fail, and the reading goes
// on. It returns the newest create_time read, the threads whose roots
// were read, and whether a bound stopped it.
func (r *receiver) replayHistory(ctx context.Context, sink adapters.Sink, c replayChat, from int64, budget *int, lim replayLimits, fail *itemFailure) (listed int64, threads map[string]bool, bounded bool, err error) {
	threads = map[string]bool{}
	token := ""
	for pages := 0; ; pages++ {
		if pages >= lim.perChat || *budget <= 0 {
			return listed, threads, true, nil
		}
		*budget--
		q := url.Values{"container_id_type": {"chat"}, "container_id": {c.id}, "start_time": {strconv.FormatInt(from/1000, 10)},
			"sort_type": {"ByCreateTimeAsc"}, "page_size": {strconv.Itoa(lim.pageSize)}}
		data, err := r.listMessages(ctx, q, token, lim)
		if err != nil {
			return 0, nil, false, fmt.Errorf("lark: catch-up of %s: %w", c.id, err)
		}
		for _, it := range data.Items {
			ms, err := r.replayItem(ctx, sink, c, it)
			if err != nil {
				if ctx.Err() != nil {
					return 0, nil, false, ctx.Err()
				}
				fail.note(ms, err)
			}
			listed = max(listed, ms)
			if it.ThreadID != "" && len(threads) < maxThreadsPerChat {
				threads[it.ThreadID] = true
			}
		}
		if lastPage(data.HasMore, data.PageToken, token) {
			return listed, threads, false, nil
		}
		token = data.PageToken
	}
}

// replayItem hands one message read back to handle, unless it is recalled
// or not the chat's own; ms is its create_time (0 when unreadable). A
// message that failed in maxItemFailures passes is tried a last time, its
// event's lastTry set.
func (r *receiver) replayItem(ctx context.Context, sink adapters.Sink, c replayChat, it histItem) (ms int64, err error) {
	ms, _ = strconv.ParseInt(strings.TrimSpace(it.CreateTime), 10, 64)
	if ms <= 0 || ms > 1<<50 {
		ms = 0
	}
	if it.Deleted || it.UpperMessageID != "" || (it.ChatID != "" && it.ChatID != c.id) {
		return ms, nil // recalled; or not a message of this chat's own
	}
	if it.ThreadID != "" {
		r.replay.noteThread(c.id, it.ThreadID, ms)
	}
	st := &r.replay
	ev := it.event(c.id, c.chatType)
	ev.lastTry = st.fails[it.MessageID] >= maxItemFailures
	err = r.handle(ctx, sink, ev)
	switch {
	case err == nil:
		delete(st.fails, it.MessageID)
	case ctx.Err() == nil:
		if st.fails == nil || len(st.fails) >= maxChats {
			st.fails = map[string]int{}
		}
		st.fails[it.MessageID]++
	}
	return ms, err
}

// maxItemFailures is how many passes may fail on one message before it is
// written without what keeps failing (at the pass interval, a few minutes
// to an hour: a passing outage of Lark's resource store is waited out).
const maxItemFailures = 3

// itemFailure is the first message of a chat whose handle failed in a
// pass: the chat's position stays before it (so the next pass tries it
// again), while the messages after it are still delivered.
type itemFailure struct {
	err error
	ms  int64
}

func (f *itemFailure) note(ms int64, err error) {
	if f.err == nil {
		f.err, f.ms = err, ms
	} else if ms > 0 && ms < f.ms {
		f.ms = ms
	}
}

// histPage is one page of im/v1/messages list.
type histPage struct {
	Items     []histItem `json:"items"`
	HasMore   bool       `json:"has_more"`
	PageToken string     `json:"page_token"`
}

// lastPage reports whether the page read with token is a list's last:
// Lark says there is no more, or gives no token that goes on (the same
// token again would read the same page for ever).
func lastPage(hasMore bool, next, token string) bool {
	return !hasMore || next == "" || next == token
}

// listMessages reads one page of im/v1/messages list for q, from token
// ("" for the first page).
func (r *receiver) listMessages(ctx context.Context, q url.Values, token string, lim replayLimits) (histPage, error) {
	if token != "" {
		q.Set("page_token", token)
	}
	var data histPage
	err := r.replayGet(ctx, "/open-apis/im/v1/messages?"+q.Encode(), &data, lim)
	return data, err
}

// replayGet is apiGet that waits out Lark's rate limit or failure (a 429,
// a 5xx in Lark's JSON) lim.retries times at most, the wait doubling
// from lim.backoff. Any other failure (the network, a gateway's page, an
// answer not as documented) is tried once more: the next pass reads again
// whatever this one could not.
func (r *receiver) replayGet(ctx context.Context, path string, out any, lim replayLimits) error {
	wait := lim.backoff
	for i := 0; ; i++ {
		err := r.a.apiGet(ctx, path, out)
		var ae *apiError
		isAPI := errors.As(err, &ae)
		if err == nil || i >= lim.retries || (isAPI && !retryable(ae)) || (!isAPI && i >= 1) {
			return err
		}
		if err := chatsync.Sleep(ctx, wait); err != nil {
			return err
		}
		wait *= 2
	}
}

// histItem is a message as im/v1/messages (list and get) answers it. Its
// fields differ from the event's: msg_type for message_type, body.content
// for content, sender {id, id_type} for sender_id {open_id, ...}, a
// mention's id and id_type for its id {open_id, ...}, no chat_type.
type histItem struct {
	MessageID      string `json:"message_id"`
	RootID         string `json:"root_id"`
	ParentID       string `json:"parent_id"`
	ThreadID       string `json:"thread_id"`
	MsgType        string `json:"msg_type"`
	CreateTime     string `json:"create_time"`
	UpdateTime     string `json:"update_time"`
	Deleted        bool   `json:"deleted"`
	ChatID         string `json:"chat_id"`
	UpperMessageID string `json:"upper_message_id"`
	Sender         struct {
		ID         string `json:"id"`
		IDType     string `json:"id_type"`
		SenderType string `json:"sender_type"`
		TenantKey  string `json:"tenant_key"`
	} `json:"sender"`
	Body struct {
		Content string `json:"content"`
	} `json:"body"`
	Mentions []struct {
		Key       string `json:"key"`
		ID        string `json:"id"`
		IDType    string `json:"id_type"`
		Name      string `json:"name"`
		TenantKey string `json:"tenant_key"`
	} `json:"mentions"`
}

// idKey is the key of an event's id object (sender_id, a mention's id)
// that holds an id of idType: open_id, union_id, user_id or app_id, else
// what the id's prefix says.
func idKey(idType, id string) string {
	switch idType {
	case "open_id", "union_id", "user_id", "app_id":
		return idType
	}
	switch {
	case strings.HasPrefix(id, "ou_"):
		return "open_id"
	case strings.HasPrefix(id, "on_"):
		return "union_id"
	case strings.HasPrefix(id, "cli_"):
		return "app_id"
	}
	return "user_id"
}

// event is the im.message.receive_v1 event of a message read from the
// API, as normalize reads it: the same file as the live event's but for
// provider_raw (this event) and metadata.extra.event_id (none).
func (it *histItem) event(chat, chatType string) event {
	m := map[string]any{"message_id": it.MessageID, "chat_id": cmpOr(it.ChatID, chat), "chat_type": chatType,
		"message_type": it.MsgType, "content": it.Body.Content, "create_time": it.CreateTime}
	for k, v := range map[string]string{"root_id": it.RootID, "parent_id": it.ParentID, "thread_id": it.ThreadID, "update_time": it.UpdateTime} {
		if v != "" {
			m[k] = v
		}
	}
	if len(it.Mentions) > 0 {
		ms := make([]any, 0, len(it.Mentions))
		for _, x := range it.Mentions {
			mm := map[string]any{"key": x.Key, "name": x.Name, "id": map[string]any{idKey(x.IDType, x.ID): x.ID}}
			if x.TenantKey != "" {
				mm["tenant_key"] = x.TenantKey
			}
			ms = append(ms, mm)
		}
		m["mentions"] = ms
	}
	sender := map[string]any{"sender_type": it.Sender.SenderType, "sender_id": map[string]any{}}
	if it.Sender.ID != "" {
		sender["sender_id"] = map[string]any{idKey(it.Sender.IDType, it.Sender.ID): it.Sender.ID}
	}
	if it.Sender.TenantKey != "" {
		sender["tenant_key"] = it.Sender.TenantKey
	}
	raw, _ := json.Marshal(map[string]any{"message": m, "sender": sender})
	var ev event
	ev.Header.EventType = "im.message.receive_v1"
	ev.Event = raw
	return ev
}
