package slackfake

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/slack-go/slack"
)

// The Web API methods. Each runs with s.mu held.

func (s *Server) authTest(*request) (map[string]any, error) {
	return map[string]any{
		"url":                   s.base + "/",
		"team":                  "Fake Team",
		"user":                  "courier",
		"team_id":               s.opts.TeamID,
		"user_id":               s.opts.BotUserID,
		"bot_id":                s.opts.BotID,
		"is_enterprise_install": false,
	}, nil
}

func (s *Server) usersInfo(r *request) (map[string]any, error) {
	id := r.args.Get("user")
	if id == "" {
		return nil, fail("invalid_arguments", "[ERROR] missing required field: user")
	}
	u, ok := s.users[id]
	if !ok {
		return nil, fail("user_not_found")
	}
	return map[string]any{"user": u}, nil
}

func (c *conv) member() bool { return c.ch.IsIM || c.ch.IsMember }

// public is a channel anyone in the workspace may read.
func (c *conv) public() bool {
	return c.ch.ID[0] == 'C' && !c.ch.IsPrivate && !c.ch.IsIM && !c.ch.IsMpIM
}

// visible finds a conversation the bot may see: a public one, or one it
// is in. Slack answers channel_not_found for a private one it is not in.
func (s *Server) visible(id string) (*conv, error) {
	c := s.convs[id]
	if c == nil || (!c.public() && !c.member()) {
		return nil, fail("channel_not_found")
	}
	return c, nil
}

// readable finds a conversation whose messages the bot may read.
func (s *Server) readable(id string) (*conv, error) {
	c, err := s.visible(id)
	if err != nil {
		return nil, err
	}
	if !c.member() {
		return nil, fail("not_in_channel")
	}
	return c, nil
}

func (s *Server) conversationsInfo(r *request) (map[string]any, error) {
	c, err := s.visible(r.args.Get("channel"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"channel": c.ch}, nil
}

func (s *Server) conversationsOpen(r *request) (map[string]any, error) {
	var c *conv
	already := false
	if id := r.args.Get("channel"); id != "" {
		c = s.convs[id]
		if c == nil || !(c.ch.IsIM || c.ch.IsMpIM) || !c.member() {
			return nil, fail("channel_not_found")
		}
		already = true
	} else {
		var users []string
		for u := range strings.SplitSeq(r.args.Get("users"), ",") {
			if u = strings.TrimSpace(u); u != "" && u != s.opts.BotUserID && !slices.Contains(users, u) {
				users = append(users, u)
			}
		}
		if len(users) == 0 {
			return nil, fail("users_list_not_supplied")
		}
		if len(users) > 8 {
			return nil, fail("too_many_users")
		}
		for _, u := range users {
			if _, ok := s.users[u]; !ok {
				return nil, fail("user_not_found")
			}
		}
		c, already = s.openDM(users)
	}
	ch := any(map[string]string{"id": c.ch.ID})
	if b, _ := strconv.ParseBool(r.args.Get("return_im")); b {
		ch = c.ch
	}
	return map[string]any{"channel": ch, "no_op": already, "already_open": already}, nil
}

// openDM opens the bot's IM with one user, or a group DM with several; the
// same users get the same conversation.
func (s *Server) openDM(users []string) (c *conv, already bool) {
	slices.Sort(users)
	key := strings.Join(users, ",")
	if id, ok := s.dms[key]; ok {
		return s.convs[id], true
	}
	var ch slack.Channel
	if len(users) == 1 {
		ch.ID = s.nextID("D")
		ch.IsIM, ch.User = true, users[0]
	} else {
		ch.ID = s.nextID("G")
		ch.IsMpIM, ch.IsPrivate = true, true
		ch.Members = append(slices.Clone(users), s.opts.BotUserID)
	}
	ch.IsOpen, ch.IsMember, ch.ContextTeamID = true, true, s.opts.TeamID
	c = &conv{ch: ch}
	s.convs[ch.ID] = c
	s.dms[key] = ch.ID
	return c, false
}

// bounds are a history call's oldest/latest/inclusive, in micro-seconds.
type bounds struct {
	oldest, latest int64
	inclusive      bool
}

func parseBounds(r *request) (bounds, error) {
	b := bounds{latest: math.MaxInt64}
	b.inclusive = r.args.Get("inclusive") == "1" || r.args.Get("inclusive") == "true"
	for _, p := range []struct {
		name string
		to   *int64
	}{{"oldest", &b.oldest}, {"latest", &b.latest}} {
		v := r.args.Get(p.name)
		if v == "" || v == "0" {
			continue
		}
		// A bound is a number of seconds, its fraction any length
		// ("1700000000", "1700000000.5"); a message's ts is exact.
		sec, frac, _ := strings.Cut(v, ".")
		if len(frac) < 6 {
			frac += strings.Repeat("0", 6-len(frac))
		}
		ts, ok := parseTS(sec + "." + frac)
		if !ok {
			return b, fail("invalid_ts_" + p.name)
		}
		*p.to = ts
	}
	return b, nil
}

func (b bounds) in(ts int64) bool {
	if b.inclusive {
		return ts >= b.oldest && ts <= b.latest
	}
	return ts > b.oldest && ts < b.latest
}

func parseLimit(r *request, def, most int) (int, error) {
	v := r.args.Get("limit")
	if v == "" || v == "0" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fail("invalid_limit")
	}
	return min(n, most), nil
}

// Cursors are opaque to clients; Slack's are base64 of "next_ts:..." and
// the like, and so are these.
func cursor(kind, at string) string {
	return base64.StdEncoding.EncodeToString([]byte(kind + ":" + at))
}

func parseCursor(r *request, kind string) (string, error) {
	v := r.args.Get("cursor")
	if v == "" {
		return "", nil
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return "", fail("invalid_cursor")
	}
	at, ok := strings.CutPrefix(string(b), kind+":")
	if !ok || at == "" {
		return "", fail("invalid_cursor")
	}
	return at, nil
}

func (m *stored) reply() bool { return m.threadTS != 0 && m.threadTS != m.ts }

// render is a message as Slack answers it: a thread's parent with its
// thread_ts, reply_count, reply_users and latest_reply.
func (c *conv) render(m *stored) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m.fields)+4)
	for k, v := range m.fields {
		out[k] = v
	}
	if m.reply() {
		return out
	}
	var n int
	var users []string
	var latest int64
	for _, r := range c.msgs {
		if r.threadTS != m.ts || r == m {
			continue
		}
		n++
		latest = max(latest, r.ts)
		var u string
		json.Unmarshal(r.fields["user"], &u)
		if u != "" && !slices.Contains(users, u) {
			users = append(users, u)
		}
	}
	if n > 0 {
		out["thread_ts"] = mustJSON(formatTS(m.ts))
		out["reply_count"] = mustJSON(n)
		out["reply_users_count"] = mustJSON(len(users))
		out["reply_users"] = mustJSON(users)
		out["latest_reply"] = mustJSON(formatTS(latest))
	}
	return out
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (s *Server) conversationsHistory(r *request) (map[string]any, error) {
	c, err := s.readable(r.args.Get("channel"))
	if err != nil {
		return nil, err
	}
	b, err := parseBounds(r)
	if err != nil {
		return nil, err
	}
	limit, err := parseLimit(r, 100, 999)
	if err != nil {
		return nil, err
	}
	at, err := parseCursor(r, "next_ts")
	if err != nil {
		return nil, err
	}
	from := int64(math.MaxInt64)
	if at != "" {
		var ok bool
		if from, ok = parseTS(at); !ok {
			return nil, fail("invalid_cursor")
		}
	}
	// Newest first: a channel's top-level messages and the replies also
	// sent to the channel.
	var page []map[string]json.RawMessage
	more, next := false, ""
	for i := len(c.msgs) - 1; i >= 0; i-- {
		m := c.msgs[i]
		if (m.reply() && !m.bcast) || !b.in(m.ts) || m.ts > from {
			continue
		}
		if len(page) == limit {
			more, next = true, cursor("next_ts", formatTS(m.ts))
			break
		}
		page = append(page, c.render(m))
	}
	res := map[string]any{"messages": nonNil(page), "has_more": more, "pin_count": 0,
		"response_metadata": map[string]any{"next_cursor": next}}
	if v := r.args.Get("latest"); v != "" {
		res["latest"] = v
	}
	return res, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) conversationsReplies(r *request) (map[string]any, error) {
	c, err := s.readable(r.args.Get("channel"))
	if err != nil {
		return nil, err
	}
	ts, ok := parseTS(r.args.Get("ts"))
	if !ok {
		return nil, fail("thread_not_found")
	}
	m := c.find(ts)
	if m == nil {
		return nil, fail("thread_not_found")
	}
	parent := m
	if m.reply() {
		if parent = c.find(m.threadTS); parent == nil {
			// A reply whose parent is gone: Slack answers the reply alone.
			return map[string]any{"messages": []any{c.render(m)}, "has_more": false,
				"response_metadata": map[string]any{"next_cursor": ""}}, nil
		}
	}
	b, err := parseBounds(r)
	if err != nil {
		return nil, err
	}
	limit, err := parseLimit(r, 1000, 1000)
	if err != nil {
		return nil, err
	}
	at, err := parseCursor(r, "next_ts")
	if err != nil {
		return nil, err
	}
	var from int64
	var page []map[string]json.RawMessage
	if at == "" {
		page = append(page, c.render(parent))
	} else if from, ok = parseTS(at); !ok {
		return nil, fail("invalid_cursor")
	}
	more, next := false, ""
	for _, x := range c.msgs {
		if x.threadTS != parent.ts || x == parent || !b.in(x.ts) || x.ts < from {
			continue
		}
		if len(page) >= limit {
			more, next = true, cursor("next_ts", formatTS(x.ts))
			break
		}
		page = append(page, c.render(x))
	}
	return map[string]any{"messages": page, "has_more": more,
		"response_metadata": map[string]any{"next_cursor": next}}, nil
}

// kind is a conversation's type as users.conversations names them.
func (c *conv) kind() string {
	switch {
	case c.ch.IsIM:
		return "im"
	case c.ch.IsMpIM:
		return "mpim"
	case c.public():
		return "public_channel"
	}
	return "private_channel"
}

func (s *Server) usersConversations(r *request) (map[string]any, error) {
	types := r.args.Get("types")
	if types == "" {
		types = "public_channel"
	}
	want := map[string]bool{}
	for t := range strings.SplitSeq(types, ",") {
		switch t = strings.TrimSpace(t); t {
		case "public_channel", "private_channel", "mpim", "im":
			want[t] = true
		default:
			return nil, fail("invalid_types")
		}
	}
	user := r.args.Get("user")
	if user != "" && user != s.opts.BotUserID {
		if _, ok := s.users[user]; !ok {
			return nil, fail("user_not_found")
		}
	}
	limit, err := parseLimit(r, 100, 1000)
	if err != nil {
		return nil, err
	}
	after, err := parseCursor(r, "next_id")
	if err != nil {
		return nil, err
	}
	archived := r.args.Get("exclude_archived") == "true" || r.args.Get("exclude_archived") == "1"
	ids := make([]string, 0, len(s.convs))
	for id := range s.convs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var page []slack.Channel
	next := ""
	for _, id := range ids {
		c := s.convs[id]
		in := c.member()
		if user != "" && user != s.opts.BotUserID {
			in = slices.Contains(c.ch.Members, user) || (c.ch.IsIM && c.ch.User == user)
		}
		if !in || !want[c.kind()] || (archived && c.ch.IsArchived) || id < after {
			continue
		}
		if len(page) == limit {
			next = cursor("next_id", id)
			break
		}
		page = append(page, c.ch)
	}
	return map[string]any{"channels": nonNil(page), "response_metadata": map[string]any{"next_cursor": next}}, nil
}

// postable finds where the bot may post: a conversation it is in, or a
// user's DM (opened as Slack does for channel=U...).
func (s *Server) postable(id string) (*conv, error) {
	if userID.MatchString(id) {
		if _, ok := s.users[id]; !ok {
			return nil, fail("channel_not_found")
		}
		c, _ := s.openDM([]string{id})
		return c, nil
	}
	c, err := s.readable(id)
	if err != nil {
		return nil, err
	}
	if c.ch.IsArchived {
		return nil, fail("is_archived")
	}
	return c, nil
}

// thread checks a thread_ts: the thread's parent, 0 without one.
func (c *conv) thread(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	ts, ok := parseTS(v)
	if !ok {
		return 0, fail("invalid_thread_ts", "[ERROR] "+strconv.Quote(v)+" is not a valid thread_ts")
	}
	m := c.find(ts)
	if m == nil {
		return 0, fail("thread_not_found")
	}
	if m.reply() {
		// A reply's ts goes to its thread.
		return m.threadTS, nil
	}
	return ts, nil
}

func (s *Server) chatPostMessage(r *request) (map[string]any, error) {
	c, err := s.postable(r.args.Get("channel"))
	if err != nil {
		return nil, err
	}
	text := r.args.Get("text")
	var blocks json.RawMessage
	if v := r.args.Get("blocks"); v != "" {
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(v), &raw); err != nil {
			return nil, fail("invalid_blocks_format")
		}
		var parsed slack.Blocks
		if err := json.Unmarshal([]byte(v), &parsed); err != nil || len(raw) > 50 {
			return nil, fail("invalid_blocks")
		}
		if len(raw) > 0 {
			blocks = json.RawMessage(v)
		}
	}
	if text == "" && blocks == nil && r.args.Get("attachments") == "" {
		return nil, fail("no_text")
	}
	parent, err := c.thread(r.args.Get("thread_ts"))
	if err != nil {
		return nil, err
	}
	bcast := parent != 0 && (r.args.Get("reply_broadcast") == "true" || r.args.Get("reply_broadcast") == "1")
	ts := s.nextTS()
	fields := map[string]json.RawMessage{
		"type": mustJSON("message"), "user": mustJSON(s.opts.BotUserID), "bot_id": mustJSON(s.opts.BotID),
		"app_id": mustJSON("A0FAKE"), "text": mustJSON(text), "ts": mustJSON(formatTS(ts)), "team": mustJSON(s.opts.TeamID),
	}
	if blocks != nil {
		fields["blocks"] = blocks
	}
	if parent != 0 {
		fields["thread_ts"] = mustJSON(formatTS(parent))
		fields["parent_user_id"] = mustJSON(s.userOf(c, parent))
	}
	if bcast {
		fields["subtype"] = mustJSON("thread_broadcast")
	}
	m := &stored{ts: ts, threadTS: parent, bcast: bcast, fields: fields}
	c.insert(m)
	raw := make(map[string][]string, len(r.args))
	for k, v := range r.args {
		raw[k] = slices.Clone(v)
	}
	s.posts = append(s.posts, Post{Channel: c.ch.ID, Text: text, ThreadTS: r.args.Get("thread_ts"),
		ReplyBroadcast: bcast, Blocks: blocks, Mrkdwn: r.args.Get("mrkdwn") != "false",
		TS: formatTS(ts), Raw: raw})
	return map[string]any{"channel": c.ch.ID, "ts": formatTS(ts), "message": c.render(m)}, nil
}

func (s *Server) userOf(c *conv, ts int64) string {
	var u string
	if m := c.find(ts); m != nil {
		json.Unmarshal(m.fields["user"], &u)
	}
	return u
}
