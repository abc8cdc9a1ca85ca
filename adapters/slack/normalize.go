package slack

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/internal/chatmsg"
	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// normalize maps one Slack event to the message file it makes (DESIGN
// §2-5). It returns nil, nil for an event that writes nothing on purpose
// (counted in a.ignored, by reason), an adapters.Undeliverable error for
// one it should file but cannot make a message of (the transport sets it
// aside as a dead letter), and any other error only when trying again
// could succeed (auth.test or a file fetch failed for a reason that may
// pass): the transport then does not ack, and Slack delivers the event
// again.
//
// Which events write a file: a "message" whose subtype carries someone's
// words (none, thread_broadcast, file_share, bot_message, me_message,
// slackbot_response, and any subtype Slack adds later that is not a
// notice, so that new kinds of words are not lost), its edits
// (message_changed) and deletions (message_deleted), and "app_mention".
// A message seen both as "message" and as "app_mention" gets the same id
// (slack_<channel>_<ts>), so the pipeline writes it once.
func (a *Adapter) normalize(ctx context.Context, ev event) (*adapters.Event, error) {
	var m message
	if err := json.Unmarshal(ev.Inner, &m); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			// Not JSON: no retry will make it so.
			return nil, adapters.Undeliverable("slack: the event is not a JSON object: " + err.Error())
		}
		// A field of an unexpected type is left empty; the rest is
		// read (encoding/json goes on past it), so the words are kept.
		a.log.Debug("slack: event field of an unexpected type ignored", "event_id", ev.ID, "error", err)
	}
	if m.Type == "" && ev.Channel != "" && m.TS != "" {
		// A message from history as an export writes it, without
		// its type: history holds nothing but messages.
		m.Type = "message"
	}
	if m.Type != "message" && m.Type != "app_mention" {
		a.ignored.Add("event_type") // file_shared, reaction_added, ...: not messages
		return nil, nil
	}
	if m.Channel == "" {
		m.Channel = ev.Channel
	}
	n := &normalizer{a: a, ev: ev, m: &m, look: newLookups()}
	return n.run(ctx)
}

// notices are the subtypes of "message" that are Slack telling what
// happened to a conversation, not anyone's words: they write nothing.
// (An agent is not asked to answer "Ann has joined the channel".)
// message_replied is Slack updating a thread parent's reply count, and
// assistant_app_thread the title Slack gives an assistant thread.
var notices = map[string]bool{
	"channel_join": true, "channel_leave": true, "channel_topic": true, "channel_purpose": true,
	"channel_name": true, "channel_archive": true, "channel_unarchive": true,
	"channel_convert_to_private": true, "channel_convert_to_public": true,
	"channel_posting_permissions": true, "channel_canvas_updated": true,
	"group_join": true, "group_leave": true, "group_topic": true, "group_purpose": true,
	"group_name": true, "group_archive": true, "group_unarchive": true,
	"pinned_item": true, "unpinned_item": true, "bot_add": true, "bot_remove": true,
	"bot_enable": true, "bot_disable": true, "message_replied": true, "reminder_add": true,
	"ekm_access_denied": true, "huddle_thread": true, "assistant_app_thread": true,
	"sh_room_created": true, "joiner_notification": true, "joiner_notification_for_inviter": true,
}

// message is a Slack message event, or the message inside one (the fields
// Courier reads; provider_raw keeps the rest).
type message struct {
	Type        string          `json:"type"`
	Subtype     string          `json:"subtype"`
	Hidden      bool            `json:"hidden"`
	Channel     string          `json:"channel"`
	ChannelType string          `json:"channel_type"`
	User        string          `json:"user"`
	BotID       string          `json:"bot_id"`
	Username    string          `json:"username"`
	Text        string          `json:"text"`
	TS          string          `json:"ts"`
	ThreadTS    string          `json:"thread_ts"`
	EventTS     string          `json:"event_ts"`
	DeletedTS   string          `json:"deleted_ts"`
	Blocks      json.RawMessage `json:"blocks"`
	Attachments []attachment    `json:"attachments"`
	Files       []file          `json:"files"`
	Message     *message        `json:"message"`
	Previous    *message        `json:"previous_message"`
	BotProfile  *struct {
		Name string `json:"name"`
	} `json:"bot_profile"`
	UserProfile *struct {
		DisplayName string `json:"display_name"`
		RealName    string `json:"real_name"`
		Name        string `json:"name"`
	} `json:"user_profile"`
}

// attachment is a legacy (secondary) attachment: bots still put their
// words there.
type attachment struct {
	Fallback   string `json:"fallback"`
	Pretext    string `json:"pretext"`
	AuthorName string `json:"author_name"`
	Title      string `json:"title"`
	TitleLink  string `json:"title_link"`
	Text       string `json:"text"`
	Fields     []struct {
		Title string `json:"title"`
		Value string `json:"value"`
	} `json:"fields"`
	Footer      string `json:"footer"`
	FromURL     string `json:"from_url"`
	OriginalURL string `json:"original_url"`
	IsAppUnfurl bool   `json:"is_app_unfurl"`
}

// normalizer holds what the steps of one event share.
type normalizer struct {
	a    *Adapter
	ev   event
	m    *message // the event
	look *lookups

	body    *message // the message whose words are written (the event, or the edited message)
	channel string
	ts      string // the file's own ts
	edits   string // the id of the message edited
	recalls string // the id of the message deleted

	users, channels map[string]string // names found for the ids met
	hasWords        bool              // the message has words besides its files
	extra           map[string]any
	msg             *schema.Message
}

func (n *normalizer) run(ctx context.Context) (*adapters.Event, error) {
	m, a := n.m, n.a
	n.channel, n.ts, n.body = m.Channel, m.TS, m
	switch {
	case m.Subtype == "message_changed" || m.Subtype == "message_deleted":
		n.ts = cmp.Or(n.ts, m.EventTS)
		if done, err := n.change(); done || err != nil {
			return nil, err
		}
	case notices[m.Subtype]:
		a.ignored.Add("notice")
		return nil, nil
	case m.Hidden:
		a.ignored.Add("hidden")
		return nil, nil
	}
	id := threading.SlackID(n.channel, n.ts)
	if id == "" {
		kind := m.Type
		if m.Subtype != "" {
			kind += "/" + m.Subtype
		}
		return nil, adapters.Undeliverable(fmt.Sprintf("slack: the event (%.64s) has no %s: it cannot be placed", kind, missing(n.channel, n.ts)))
	}
	if a.allow != nil && !a.allow[n.channel] {
		a.ignored.Add("channel_not_allowed")
		return nil, nil
	}
	self, err := a.Identify(ctx)
	if err != nil {
		return nil, adapters.Temporary(err)
	}
	b := n.body
	if (b.User != "" && b.User == self.UserID) || (b.BotID != "" && b.BotID == self.BotID) {
		// Our own post (or our edit or deletion of one): dropped by
		// the pipeline; no names or files fetched for it.
		return &adapters.Event{Self: true, Message: &schema.Message{ID: id, Provider: schema.Slack, Direction: schema.Inbound}}, nil
	}
	if a.cfg.IgnoreBots && n.fromBot() {
		a.ignored.Add("bot")
		return nil, nil
	}
	return n.build(ctx, id)
}

// change reads what an edit (message_changed) or a deletion
// (message_deleted) is about: the message changed, named by its own ts,
// else by the previous message's (bolt-python's payloads carry an edit's
// target only there), a deletion's by deleted_ts, else by the previous
// message's. done is set for an edit that writes nothing on purpose; an
// event that names no message is Undeliverable.
func (n *normalizer) change() (done bool, err error) {
	m := n.m
	if m.Subtype == "message_deleted" {
		deleted := m.DeletedTS
		n.body = &message{}
		if m.Previous != nil {
			n.body = m.Previous
			deleted = cmp.Or(deleted, m.Previous.TS)
		}
		if n.recalls = threading.SlackID(n.channel, deleted); n.recalls == "" && n.channel != "" {
			return false, adapters.Undeliverable("slack: a message_deleted event that names no message (no deleted_ts, no previous_message.ts)")
		}
		return false, nil
	}
	if m.Message == nil {
		return false, adapters.Undeliverable("slack: a message_changed event without its message")
	}
	if notices[m.Message.Subtype] {
		n.a.ignored.Add("notice")
		return true, nil
	}
	if m.Previous != nil && sameWords(m.Previous, m.Message) {
		// An unfurl added, a reply counted, a reaction: Slack says the
		// message changed, but not its words.
		n.a.ignored.Add("unchanged_edit")
		return true, nil
	}
	body := *m.Message
	if body.TS == "" && m.Previous != nil {
		body.TS = m.Previous.TS
		body.ThreadTS = cmp.Or(body.ThreadTS, m.Previous.ThreadTS)
	}
	n.body = &body
	if n.edits = threading.SlackID(n.channel, body.TS); n.edits == "" && n.channel != "" {
		return false, adapters.Undeliverable("slack: a message_changed event that names no message (no message.ts, no previous_message.ts)")
	}
	return false, nil
}

// missing says which of a message's channel and ts are missing.
func missing(channel, ts string) string {
	switch {
	case strings.TrimSpace(channel) == "" && strings.TrimSpace(ts) == "":
		return "channel and no ts"
	case strings.TrimSpace(channel) == "":
		return "channel"
	}
	return "ts"
}

// fromBot reports whether the words are a bot's (another app's: our own
// were dropped before).
func (n *normalizer) fromBot() bool {
	b := n.body
	return b.Subtype == "bot_message" || n.m.Subtype == "bot_message" || b.BotID != "" || b.BotProfile != nil
}

// sameWords reports whether an edit left the words as they were: the
// same text, blocks and files. Attachments are not compared: Slack adds
// link previews (unfurls) to a message by editing it.
func sameWords(prev, cur *message) bool {
	if prev.Text != cur.Text || !sameJSON(prev.Blocks, cur.Blocks) || len(prev.Files) != len(cur.Files) {
		return false
	}
	for i := range prev.Files {
		if prev.Files[i].ID != cur.Files[i].ID {
			return false
		}
	}
	return true
}

// sameJSON compares two JSON values by value (key order and spacing
// aside); null, absent and [] are the same blocks.
func sameJSON(x, y json.RawMessage) bool {
	empty := func(r json.RawMessage) bool {
		t := bytes.TrimSpace(r)
		return len(t) == 0 || string(t) == "null" || string(t) == "[]"
	}
	if empty(x) || empty(y) {
		return empty(x) && empty(y)
	}
	var vx, vy any
	if json.Unmarshal(x, &vx) != nil || json.Unmarshal(y, &vy) != nil {
		return bytes.Equal(x, y)
	}
	cx, _ := json.Marshal(vx)
	cy, _ := json.Marshal(vy)
	return bytes.Equal(cx, cy)
}

// build makes the message file of a message that is written.
func (n *normalizer) build(ctx context.Context, id string) (*adapters.Event, error) {
	a := n.a
	n.extra = map[string]any{}
	m := &schema.Message{
		ID: id, Provider: schema.Slack, Direction: schema.Inbound,
		Metadata:  schema.Metadata{SchemaVersion: schema.SchemaVersion, ProtocolVersion: schema.ProtocolVersion},
		Artifacts: []schema.Artifact{},
	}
	n.msg = m
	n.session(ctx)
	n.sender(ctx)
	n.times()
	n.names(ctx)
	text, md := n.words()
	n.hasWords = strings.TrimSpace(text) != "" || strings.TrimSpace(md) != ""
	var batch *dropzone.Batch
	if a.dz != nil {
		batch = a.dz.NewBatch()
		defer batch.Abort() // does nothing once committed
	}
	if err := n.files(ctx, batch, &text, &md); err != nil {
		return nil, err
	}
	if err := n.content(batch, text, md); err != nil {
		return nil, err
	}
	m.Metadata.ProviderRaw = providerRaw(n.ev.Inner)
	if n.recalls != "" {
		// A deletion keeps no word of what was deleted, not even
		// here: only which message it was.
		if prev, ok := m.Metadata.ProviderRaw["previous_message"].(map[string]any); ok {
			kept := map[string]any{}
			for _, k := range []string{"type", "subtype", "user", "bot_id", "ts", "thread_ts"} {
				if v, ok := prev[k]; ok {
					kept[k] = v
				}
			}
			m.Metadata.ProviderRaw["previous_message"] = kept
		}
	}
	x := &m.Metadata.Extra
	x.EventID = n.ev.ID
	x.Edits, x.Recalls = n.edits, n.recalls
	if len(n.extra) > 0 {
		x.Other = n.extra
	}
	if batch != nil {
		if err := batch.Commit(); err != nil {
			return nil, adapters.Temporary(fmt.Errorf("slack: store the files of %s: %w", id, err))
		}
	}
	// A reply in a Slack thread names the thread, not the message it
	// answers: it stays with the task of the thread's latest message.
	ev := &adapters.Event{Message: m, Debounce: n.edits == "" && n.recalls == "", ThreadCorrelation: m.Session.ThreadKey != ""}
	if n.ev.ID != "" {
		// An event redelivered is dropped by its event_id even when
		// it is an edit, whose id is its own ts.
		ev.Keys = []string{schema.EventKey(schema.Slack, n.ev.ID)}
	}
	return ev, nil
}

// session sets the session, thread_key, thread_root and reply_to (DESIGN
// §3): the channel is the session, direct for a DM and group otherwise.
// The type comes from channel_type when the event has it (app_mention
// and history messages do not), else from conversations.info, else from
// the id (D... is a DM).
func (n *normalizer) session(ctx context.Context) {
	a, m := n.a, n.msg
	conv, known := a.conversation(ctx, n.channel, n.look)
	ctype := n.m.ChannelType
	if ctype == "" {
		switch {
		case known && conv.IsIM:
			ctype = "im"
		case known && conv.IsMPIM:
			ctype = "mpim"
		case !known && strings.HasPrefix(n.channel, "D"):
			ctype = "im"
		}
	}
	threadTS, ts := n.body.ThreadTS, n.body.TS
	if n.recalls != "" || n.edits != "" {
		// The file is about the message changed: it belongs where
		// that message is.
		ts = n.body.TS
		if ts == "" {
			ts = n.ts
		}
	}
	th := threading.Slack(threading.SlackRef{Channel: n.channel, ChannelType: ctype, TS: ts, ThreadTS: threadTS})
	m.Session = schema.Session{ID: th.SessionID, Type: th.SessionType, ThreadKey: schema.NullString(th.ThreadKey),
		Name: schema.CleanText(a.sessionName(ctx, n.channel, conv, n.look))}
	m.ThreadRoot = schema.NullString(th.ThreadRoot)
	m.ReplyTo = schema.NullString(th.ReplyTo)
}

// sender sets participants.from: the user with the name Slack shows, or
// the bot by its name. The other lists stay empty, a DM's included: the
// bot is the account itself, which the email rules leave out of the
// participants (DESIGN §3), and a channel's members are not the message's
// recipients; whom it names is in participants.mentions.
func (n *normalizer) sender(ctx context.Context) {
	a, b := n.a, n.body
	p := schema.Participant{ID: b.User, PlatformID: b.User}
	fallback := ""
	if b.UserProfile != nil {
		for _, s := range []string{b.UserProfile.DisplayName, b.UserProfile.RealName, b.UserProfile.Name} {
			if strings.TrimSpace(s) != "" {
				fallback = strings.TrimSpace(s)
				break
			}
		}
	}
	switch {
	case b.User != "":
		if fallback == "" {
			fallback = b.User
		}
		p.Name = a.userNameOr(ctx, b.User, fallback, n.look)
	case b.BotID != "":
		// A classic bot_message names no user: the bot is the sender,
		// under the name it posted with.
		p.ID, p.PlatformID = b.BotID, b.BotID
		p.Name = b.BotID
		if b.BotProfile != nil && strings.TrimSpace(b.BotProfile.Name) != "" {
			p.Name = strings.TrimSpace(b.BotProfile.Name)
		}
		if strings.TrimSpace(b.Username) != "" {
			p.Name = strings.TrimSpace(b.Username)
		}
	default:
		// A deletion whose message Slack did not send, a message
		// without a sender: said plainly rather than invented.
		p = schema.Participant{ID: "unknown", Name: "(unknown sender)"}
	}
	p.ID, p.Name, p.PlatformID = schema.CleanText(p.ID), schema.CleanText(p.Name), schema.CleanText(p.PlatformID)
	if p.Name == "" {
		p.Name = p.ID
	}
	n.msg.Participants = schema.Participants{From: p, To: []schema.Participant{}, Cc: []schema.Participant{}, Bcc: []schema.Participant{}, Mentions: []schema.Mention{}}
}

// times sets timestamp (the file's ts: seconds and microseconds since the
// epoch) and received_at (now).
func (n *normalizer) times() {
	now := time.Now()
	at, ok := tsTime(n.ts)
	if !ok {
		at = now
		n.extra["ts_unparsed"] = n.ts
	}
	n.msg.Timestamp = schema.NewTime(at)
	n.msg.ReceivedAt = schema.NewTime(now)
}

// tsTime reads a Slack ts ("1355517523.000005").
func tsTime(ts string) (time.Time, bool) {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s < 0 || s > 1<<40 {
		return time.Time{}, false
	}
	var us int64
	if frac != "" {
		if len(frac) > 6 {
			frac = frac[:6]
		}
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil || f < 0 {
			return time.Time{}, false
		}
		for i := len(frac); i < 6; i++ {
			f *= 10
		}
		us = f
	}
	return time.Unix(s, us*1000).UTC(), true
}

// names looks up the users and channels the message mentions, records
// the mentions, and keeps the names for the conversion to Markdown.
func (n *normalizer) names(ctx context.Context) {
	a, b := n.a, n.body
	n.users, n.channels = map[string]string{}, map[string]string{}
	if n.recalls != "" {
		return // a deletion says nothing of the words deleted
	}
	texts := []string{b.Text}
	for _, at := range b.Attachments {
		texts = append(texts, at.Pretext, at.Text, at.Footer)
		for _, f := range at.Fields {
			texts = append(texts, f.Value)
		}
	}
	users, channels := refs(strings.Join(texts, "\n"), b.Blocks)
	var ids []string
	for _, u := range users {
		name := a.userNameOr(ctx, u, "", n.look)
		if name != "" {
			n.users[u] = name
		}
		if len(n.msg.Participants.Mentions) < 100 {
			n.msg.Participants.Mentions = append(n.msg.Participants.Mentions, schema.Mention{Type: schema.MentionUser, Target: schema.CleanText(u), Name: schema.CleanText(name)})
			ids = append(ids, schema.CleanText(u))
		}
	}
	for _, c := range channels {
		if conv, ok := a.conversation(ctx, c, n.look); ok && conv.Name != "" {
			n.channels[c] = conv.Name
		}
	}
	for _, r := range broadcasts(b.Text, b.Blocks) {
		n.msg.Participants.Mentions = append(n.msg.Participants.Mentions, schema.Mention{Type: schema.MentionAll, Target: r})
	}
	if len(ids) > 0 {
		n.extra["mentions"] = ids
	}
}

// words renders the message's words: the Markdown (from the blocks when
// they convert, for they are what the person typed; else from the text)
// and a plain text, each followed by the legacy attachments' words.
func (n *normalizer) words() (text, md string) {
	b := n.body
	switch {
	case n.recalls != "":
		s := "This message was deleted: " + n.recalls + "."
		return s, "*" + s + "*"
	}
	md, ok := blocksToMarkdown(b.Blocks, n.users, n.channels)
	if !ok {
		md = toMarkdown(b.Text, n.users, n.channels)
	}
	text = plainText(b.Text, n.users, n.channels)
	if strings.TrimSpace(text) == "" {
		text = md
	}
	if atText, atMD := attachmentsWords(b.Attachments, n.users, n.channels); atMD != "" {
		text = joinPara(text, atText)
		md = joinPara(md, atMD)
	}
	if b.Subtype == "me_message" || n.m.Subtype == "me_message" {
		who := n.msg.Participants.From.Name
		text, md = who+" "+text, "_"+who+"_ "+md
	}
	return text, md
}

func joinPara(a, b string) string {
	a, b = strings.TrimRight(a, "\n"), strings.TrimRight(b, "\n")
	switch {
	case strings.TrimSpace(a) == "":
		return b
	case strings.TrimSpace(b) == "":
		return a
	}
	return a + "\n\n" + b
}

// attachmentsWords renders legacy attachments (a bot's title, text and
// fields) as quoted paragraphs. Link previews (unfurls) are left out:
// they repeat a link of the message, and Slack adds them later by an
// edit that writes nothing.
func attachmentsWords(atts []attachment, users, channels map[string]string) (text, md string) {
	var ts, ms []string
	for i, at := range atts {
		if i >= 50 {
			break
		}
		if at.FromURL != "" || at.OriginalURL != "" || at.IsAppUnfurl {
			continue
		}
		var tl, ml []string
		add := func(t, m string) {
			if strings.TrimSpace(t) != "" {
				tl = append(tl, t)
				ml = append(ml, m)
			}
		}
		add(plainText(at.Pretext, users, channels), toMarkdown(at.Pretext, users, channels))
		add(at.AuthorName, toMarkdown(at.AuthorName, users, channels))
		title := at.Title
		if at.TitleLink != "" && title != "" {
			add(title+" ("+at.TitleLink+")", "**"+toMarkdown("<"+at.TitleLink+"|"+at.Title+">", users, channels)+"**")
		} else {
			add(title, "**"+toMarkdown(title, users, channels)+"**")
		}
		add(plainText(at.Text, users, channels), toMarkdown(at.Text, users, channels))
		for j, f := range at.Fields {
			if j >= 50 {
				break
			}
			add(f.Title+": "+plainText(f.Value, users, channels), "**"+toMarkdown(f.Title, users, channels)+":** "+toMarkdown(f.Value, users, channels))
		}
		add(plainText(at.Footer, users, channels), toMarkdown(at.Footer, users, channels))
		if len(tl) == 0 {
			add(plainText(at.Fallback, users, channels), toMarkdown(at.Fallback, users, channels))
		}
		if len(tl) == 0 {
			continue
		}
		ts = append(ts, strings.Join(tl, "\n"))
		ms = append(ms, mrkdwn.Quote(strings.Join(ml, "\n\n")))
	}
	return strings.Join(ts, "\n\n"), strings.Join(ms, "\n\n")
}

// files fetches the message's files into batch and notes those left out,
// in the text and Markdown too so that a reader of the body knows.
func (n *normalizer) files(ctx context.Context, batch *dropzone.Batch, text, md *string) error {
	fs := n.body.Files
	if n.recalls != "" || len(fs) == 0 {
		return nil
	}
	var arts []schema.Artifact
	var notes []fileNote
	if batch == nil {
		for _, f := range fs {
			notes = append(notes, fileNote{ID: f.ID, Name: dropzone.SanitizeName(f.Name), Reason: "no dropzone: files are not stored"})
		}
	} else {
		var err error
		arts, notes, err = n.a.fetchFiles(ctx, fs, batch)
		if err != nil {
			return err
		}
	}
	n.msg.Artifacts = append(n.msg.Artifacts, arts...)
	var tl, ml []string
	for _, at := range arts {
		tl = append(tl, "Attached: "+at.Name)
		ml = append(ml, "Attached: ["+escapeLinkText(at.Name)+"]("+dropzonePrefix+at.Path+")")
	}
	var noted []any
	for _, nt := range notes {
		name := nt.Name
		if name == "" {
			name = "file"
		}
		tl = append(tl, "Not stored: "+name+" ("+nt.Reason+")")
		ml = append(ml, "Not stored: "+escapeLinkText(name)+" ("+nt.Reason+")")
		noted = append(noted, map[string]any{"id": schema.CleanText(nt.ID), "name": schema.CleanText(nt.Name), "reason": nt.Reason})
	}
	if len(noted) > 0 {
		n.extra["files_not_stored"] = noted
	}
	*text = joinPara(*text, strings.Join(tl, "\n"))
	*md = joinPara(*md, strings.Join(ml, "  \n"))
	return nil
}

// dropzonePrefix is the dropzone's workspace-relative directory (as the
// email adapter's DropzonePrefix): the body links files from the root.
const dropzonePrefix = ".monoco/dropzone/"

func escapeLinkText(s string) string {
	return strings.NewReplacer(`\`, `\\`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// content sets content.text, content.markdown, the body and the type,
// bounded as the email adapter bounds them (courier.limits.max_text_bytes
// for text, Markdown and body together; the rest of each in text
// artifacts, named in metadata.extra.overflow).
func (n *normalizer) content(batch *dropzone.Batch, text, md string) error {
	m := n.msg
	files := slices.Clone(m.Artifacts) // before the text's overflow joins them
	text, md = schema.CleanText(text), schema.CleanText(md)
	text, md = strings.TrimRight(text, "\n"), strings.TrimRight(md, "\n")
	fullMD := md
	text, md, rests, err := chatmsg.Fit(m, batch, n.extra, "slack", n.a.limits.MaxTextBytes, text, md)
	if err != nil {
		return err
	}
	m.Content = schema.Content{Text: schema.NullString(text), Markdown: schema.NullString(md)}
	m.Body = md
	if m.Body != "" {
		m.Body += "\n"
	}
	if len(md) < len(fullMD) {
		m.Body = strings.TrimRight(m.Body, "\n") + restLine(rests)
	}
	m.Type = schema.TypeOf(n.hasWords, files)
	return nil
}

// restLine ends a body that was cut: where it goes on.
func restLine(arts []schema.Artifact) string {
	var where []string
	for _, a := range arts {
		where = append(where, fmt.Sprintf("%s (%d bytes, %s%s)", a.Name, a.Size, dropzonePrefix, a.Path))
	}
	return "\n\n[… this message goes on beyond what its file keeps, in " + strings.Join(where, ", ") + "]\n"
}

// maxRaw bounds metadata.provider_raw, in bytes of JSON: the event as
// received, for a reader who needs what the file does not say. A larger
// event keeps its identifying fields only (rawKeep).
const maxRaw = 32 << 10

var rawKeep = []string{"type", "subtype", "channel", "channel_type", "user", "bot_id", "ts", "thread_ts", "event_ts", "deleted_ts", "client_msg_id", "team", "edited"}

// rawValue keeps a scalar of an event as a file can hold it: strings
// cleaned; whole numbers (JSON decodes them as float64: sizes, times) as
// integers, as the event had them.
func rawValue(v any) any {
	switch t := v.(type) {
	case string:
		return schema.CleanText(t)
	case float64:
		if t == float64(int64(t)) && t < 1<<53 && t > -(1<<53) {
			return int64(t)
		}
	}
	return v
}

// providerRaw is the event minus anything secret: Events API envelopes
// carry a verification token, assistant threads an action_token; any key
// named token or ending in _token is removed, at every depth.
func providerRaw(inner json.RawMessage) map[string]any {
	v, fits := adapters.RawEvent(inner, maxRaw, rawValue)
	if v == nil || fits {
		return v
	}
	small := map[string]any{"truncated": fmt.Sprintf("the event is over %d bytes: only its identifying fields are kept", maxRaw)}
	for _, k := range rawKeep {
		if x, ok := v[k]; ok {
			if s, ok := x.(string); !ok || len(s) < 1024 {
				small[k] = x
			}
		}
	}
	return small
}

// The conversion of Slack's text to Markdown is the mrkdwn package's;
// these give it the names found.

var refRE = regexp.MustCompile(`<([^<>\n]{1,1000})>`)

func mdNames(users, channels map[string]string) mrkdwn.Names {
	return mrkdwn.Names{
		User:    func(id string) string { return users[id] },
		Channel: func(id string) string { return channels[id] },
	}
}

func toMarkdown(text string, users, channels map[string]string) string {
	return mrkdwn.ToMarkdown(text, mdNames(users, channels))
}

func blocksToMarkdown(blocks json.RawMessage, users, channels map[string]string) (string, bool) {
	if len(bytes.TrimSpace(blocks)) == 0 {
		return "", false
	}
	return mrkdwn.BlocksToMarkdown(blocks, mdNames(users, channels))
}

// refs lists the user and channel ids the text and blocks mention, at
// most maxRefs of each (the lookups are bounded besides).
func refs(text string, blocks json.RawMessage) (users, channels []string) {
	users, channels = mrkdwn.Refs(text, blocks)
	return users[:min(len(users), maxRefs)], channels[:min(len(channels), maxRefs)]
}

const maxRefs = 200

func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) || len(list) >= maxRefs {
		return list
	}
	return append(list, s)
}

var broadcastRE = regexp.MustCompile(`<!(here|channel|everyone)(\|[^>]*)?>`)

// broadcasts lists the @here, @channel and @everyone of a message.
func broadcasts(text string, blocks json.RawMessage) []string {
	var out []string
	for _, mt := range broadcastRE.FindAllStringSubmatch(text, 10) {
		out = appendNew(out, mt[1])
	}
	for _, r := range []string{"here", "channel", "everyone"} {
		if bytes.Contains(blocks, []byte(`"range":"`+r+`"`)) || bytes.Contains(blocks, []byte(`"range": "`+r+`"`)) {
			out = appendNew(out, r)
		}
	}
	return out
}

// plainText renders mrkdwn as plain text: references by name, links as
// "label (url)", entities unescaped; emphasis marks are left as typed.
func plainText(text string, users, channels map[string]string) string {
	out := refRE.ReplaceAllStringFunc(text, func(s string) string {
		ref, label, _ := strings.Cut(s[1:len(s)-1], "|")
		switch {
		case strings.HasPrefix(ref, "@"):
			if name := users[ref[1:]]; name != "" {
				return "@" + name
			}
			if label != "" {
				return "@" + strings.TrimPrefix(label, "@")
			}
			return ref
		case strings.HasPrefix(ref, "#"):
			if name := channels[ref[1:]]; name != "" {
				return "#" + name
			}
			if label != "" {
				return "#" + label
			}
			return ref
		case strings.HasPrefix(ref, "!"):
			if label != "" {
				return label
			}
			cmd, _, _ := strings.Cut(ref[1:], "^")
			return "@" + cmd
		case strings.HasPrefix(ref, "mailto:"):
			if label != "" {
				return label
			}
			return strings.TrimPrefix(ref, "mailto:")
		}
		if label != "" && label != ref {
			return label + " (" + ref + ")"
		}
		return ref
	})
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(out)
}
