package lark

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/internal/chatmsg"
	"github.com/monoco/courier/adapters/lark/internal/content"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Adapter is what the provider's parts share.
type Adapter struct {
	cfg    Config
	limits confkit.Limits
	base   string // the API's scheme and host, no trailing slash
	http   *http.Client
	dz     *dropzone.Store
	log    *slog.Logger
	health adapters.HealthTracker
	// ignored counts the events not filed on purpose, by reason.
	ignored adapters.Ignored
	tok     tokens
	dir     directory
}

// baseURL is the API base of courier.adapters.lark.domain: feishu (the
// default), lark, or a base URL (a private deployment, a test's fake):
// http or https, a host, nothing else (the tenant token goes to it).
func baseURL(domain string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(domain)) {
	case "", "feishu":
		return "https://open.feishu.cn", nil
	case "lark":
		return "https://open.larksuite.com", nil
	}
	d := strings.TrimRight(strings.TrimSpace(domain), "/")
	u, err := url.Parse(d)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		shown := clip(domain, 200)
		if err == nil && u.User != nil {
			shown = "a URL with credentials in it" // never the password
		}
		return "", fmt.Errorf("lark: courier.adapters.lark.domain %q is not feishu, lark or a base URL (https://host[:port], no path, no credentials)", shown)
	}
	return u.Scheme + "://" + u.Host, nil
}

func newAdapter(cfg Config, limits confkit.Limits, dz *dropzone.Store, hc *http.Client, log *slog.Logger) (*Adapter, error) {
	base, err := baseURL(cfg.Domain)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: time.Minute}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Adapter{cfg: cfg, limits: limits, base: base, http: hc, dz: dz, log: log.With("adapter", "lark")}, nil
}

// event is one event as Lark delivers it: a schema 2.0 envelope (header and
// event), or the event body alone (as some exports write it).
type event struct {
	Header struct {
		EventID    string `json:"event_id"`
		EventType  string `json:"event_type"`
		CreateTime string `json:"create_time"`
		AppID      string `json:"app_id"`
	} `json:"header"`
	Event json.RawMessage `json:"event"`
	// lastTry is set by the catch-up on its last try at a message that
	// failed in maxItemFailures passes (history.go): a resource or a
	// forward that still fails to be fetched is noted in the file, not
	// retried. Never read from what Lark sends.
	lastTry bool
	// raw is the event as received (parseEvent's input): what is kept as
	// the dead letter of an event that cannot be filed. via names the
	// transport, for its source: "ws", "webhook"; "" for history.
	raw []byte
	via string
}

// givesUp reports whether a fetch that failed, and might pass if tried
// again, is given up on: on the catch-up's last try at its message, unless
// ctx is done (a fetch cut short by a shutdown is no failure of Lark's).
func givesUp(ctx context.Context, lastTry bool) bool {
	return lastTry && ctx.Err() == nil
}

// body is the event body of im.message.receive_v1 and
// im.message.recalled_v1 (the fields read; provider_raw keeps the rest).
type body struct {
	Message struct {
		MessageID   string `json:"message_id"`
		RootID      string `json:"root_id"`
		ParentID    string `json:"parent_id"`
		ThreadID    string `json:"thread_id"`
		ChatID      string `json:"chat_id"`
		ChatType    string `json:"chat_type"`
		MessageType string `json:"message_type"`
		Content     string `json:"content"`
		CreateTime  string `json:"create_time"`
		Mentions    []struct {
			Key string `json:"key"`
			ID  struct {
				OpenID string `json:"open_id"`
			} `json:"id"`
			Name string `json:"name"`
		} `json:"mentions"`
	} `json:"message"`
	Sender struct {
		SenderID struct {
			OpenID  string `json:"open_id"`
			UnionID string `json:"union_id"`
			UserID  string `json:"user_id"`
			AppID   string `json:"app_id"`
		} `json:"sender_id"`
		SenderType string `json:"sender_type"`
	} `json:"sender"`
	// recalled_v1
	MessageID  string `json:"message_id"`
	ChatID     string `json:"chat_id"`
	RecallTime string `json:"recall_time"`
}

// parseEvent reads an event as received.
func parseEvent(data []byte) (event, error) {
	ev := event{raw: data}
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, fmt.Errorf("lark: event is not JSON: %w", err)
	}
	if len(ev.Event) == 0 {
		// The body alone: a message event without its envelope.
		ev.Event = json.RawMessage(data)
		ev.Header.EventType = "im.message.receive_v1"
	}
	return ev, nil
}

// resourceOnly are the message types that carry a file and no words.
var resourceOnly = map[string]bool{"image": true, "file": true, "audio": true, "media": true, "sticker": true}

// maxLookups bounds the names looked up for the ids one message names.
const maxLookups = 20

// maxContent bounds a message's content: Lark's own limit is 150 KB for
// text and 30 KB for a post or a card; more is not Lark's.
const maxContent = 1 << 20

// normalize maps one event to the message file it makes (DESIGN §2-5). It
// returns nil, nil for an event that writes nothing on purpose (counted in
// a.ignored), an adapters.Undeliverable error for a message event it
// cannot make a message of (the transport sets it aside as a dead
// letter), and any other error only when trying again could succeed (a
// resource fetch that may pass).
func (a *Adapter) normalize(ctx context.Context, ev event) (*adapters.Event, error) {
	switch ev.Header.EventType {
	case "im.message.receive_v1", "im.message.recalled_v1":
	default:
		a.ignored.Add("event_type")
		return nil, nil
	}
	var b body
	if err := json.Unmarshal(ev.Event, &b); err != nil {
		return nil, adapters.Undeliverable(fmt.Sprintf("lark: the body of an %s event is not readable: %s", ev.Header.EventType, clip(err.Error(), 200)))
	}
	if ev.Header.EventType == "im.message.recalled_v1" {
		return a.recalled(ctx, ev, &b)
	}
	return a.received(ctx, ev, &b)
}

// newMessage is an inbound Lark message with its session and thread
// fields, every list empty, timestamped now until the event says when.
func (a *Adapter) newMessage(id string, th threading.IMThread) *schema.Message {
	now := time.Now()
	return &schema.Message{
		ID: id, Provider: schema.Lark, Direction: schema.Inbound,
		Session:    schema.Session{ID: schema.CleanText(th.SessionID), Type: th.SessionType, ThreadKey: schema.NullString(th.ThreadKey)},
		ThreadRoot: schema.NullString(th.ThreadRoot), ReplyTo: schema.NullString(th.ReplyTo),
		Timestamp: schema.NewTime(now), ReceivedAt: schema.NewTime(now),
		Metadata:     schema.Metadata{SchemaVersion: schema.SchemaVersion, ProtocolVersion: schema.ProtocolVersion},
		Artifacts:    []schema.Artifact{},
		Participants: schema.Participants{To: []schema.Participant{}, Cc: []schema.Participant{}, Bcc: []schema.Participant{}, Mentions: []schema.Mention{}},
	}
}

// received is the file of an im.message.receive_v1 event: who, where
// and when, the content, the files and forwarded messages it carries.
func (a *Adapter) received(ctx context.Context, ev event, b *body) (*adapters.Event, error) {
	m := &b.Message
	id := threading.LarkID(m.MessageID)
	if id == "" || strings.TrimSpace(m.ChatID) == "" {
		what := "a message_id"
		switch {
		case id == "" && strings.TrimSpace(m.ChatID) == "":
			what = "a message_id or a chat_id"
		case id != "":
			what = "a chat_id"
		}
		return nil, adapters.Undeliverable("lark: an im.message.receive_v1 event without " + what + ": it cannot be placed")
	}
	if b.Sender.SenderType == "app" && a.cfg.AppID != "" && (b.Sender.SenderID.OpenID == a.cfg.AppID || b.Sender.SenderID.AppID == a.cfg.AppID) {
		// Our own message: dropped by the pipeline; nothing fetched.
		return &adapters.Event{Self: true, Message: &schema.Message{ID: id, Provider: schema.Lark, Direction: schema.Inbound}}, nil
	}
	th := threading.Lark(threading.LarkRef{ChatID: m.ChatID, ChatType: m.ChatType, MessageID: m.MessageID, ThreadID: m.ThreadID, RootID: m.RootID, ParentID: m.ParentID})
	msg := a.newMessage(id, th)
	extra := map[string]any{}
	stamp(msg, extra, m.CreateTime, ev.Header.CreateTime)
	from, known := a.sender(ctx, b)
	msg.Participants.From = from
	// The session's name: the chat's, else (a p2p chat has none) the
	// other person's, else the id.
	msg.Session.Name, _ = a.chat(ctx, m.ChatID)
	if msg.Session.Name == "" && th.SessionType == schema.Direct && known {
		msg.Session.Name = from.Name
	}
	if msg.Session.Name == "" {
		msg.Session.Name = msg.Session.ID
	}
	r := a.parseContent(ctx, b, extra)
	addMentions(msg, r.Mentions)

	var batch *dropzone.Batch
	if a.dz != nil {
		batch = a.dz.NewBatch()
		defer batch.Abort() // does nothing once committed
	}
	if err := a.attach(ctx, b, msg, &r, extra, batch, ev.lastTry); err != nil {
		return nil, err
	}
	if err := a.putContent(msg, batch, extra, r, m.MessageType); err != nil {
		return nil, err
	}
	msg.Metadata.ProviderRaw = providerRaw(ev.Event)
	x := &msg.Metadata.Extra
	x.EventID = clip(ev.Header.EventID, 200)
	extra["message_type"] = clip(m.MessageType, 64)
	x.Other = extra
	if batch != nil {
		if err := batch.Commit(); err != nil {
			return nil, adapters.Temporary(fmt.Errorf("lark: store the resources of %s: %w", id, err))
		}
	}
	out := &adapters.Event{Message: msg, Debounce: true, ThreadCorrelation: th.ThreadKey != ""}
	if ev.Header.EventID != "" {
		out.Keys = []string{schema.EventKey(schema.Lark, ev.Header.EventID)}
	}
	return out, nil
}

// stamp sets when the message was posted: its create_time, else (noted
// in extra) when the event was made, the nearest Lark says, else now.
func stamp(msg *schema.Message, extra map[string]any, createTime, eventTime string) {
	if at, ok := millis(createTime); ok {
		msg.Timestamp = schema.NewTime(at)
		return
	}
	extra["create_time_unparsed"] = clip(createTime, 64)
	if at, ok := millis(eventTime); ok {
		msg.Timestamp = schema.NewTime(at)
	}
}

// sender is who sent the message, named from the contact API; known is
// false when the event gives no id for the sender.
func (a *Adapter) sender(ctx context.Context, b *body) (p schema.Participant, known bool) {
	// The open_id, else (an app without the scope to see it) the
	// union_id or user_id: a sender is never left without an id.
	sid := b.Sender.SenderID
	from := schema.CleanText(clip(cmpOr(sid.OpenID, sid.UnionID, sid.UserID), 128))
	if from == "" {
		return schema.Participant{ID: "unknown", Name: "(unknown sender)"}, false
	}
	p = schema.Participant{ID: from, PlatformID: from, Name: from}
	if n := a.userName(ctx, from); n != "" {
		p.Name = schema.CleanText(n)
	}
	return p, true
}

// parseContent reads the message's content, its mentions named. A
// content over maxContent is not read, one that cannot be read is a
// placeholder, each noted in extra: kept, never dropped (the content is
// in provider_raw).
func (a *Adapter) parseContent(ctx context.Context, b *body, extra map[string]any) content.Result {
	m := &b.Message
	var ms []content.Mention
	for _, x := range m.Mentions {
		ms = append(ms, content.Mention{Key: x.Key, ID: x.ID.OpenID, Name: x.Name})
	}
	raw := m.Content
	if len(raw) > maxContent {
		extra["content_truncated"] = fmt.Sprintf("the content is %d bytes, over the %d read", len(raw), maxContent)
		raw = ""
	}
	// Names for ids the event does not name: at most maxLookups calls
	// for one message, which anyone can fill with @s of strangers.
	lookups := 0
	names := content.Names{User: func(id string) string {
		if lookups >= maxLookups {
			return ""
		}
		lookups++
		return a.userName(ctx, id)
	}}
	r, err := content.Parse(m.MessageType, raw, ms, names)
	if err != nil {
		extra["parse_error"] = clip(err.Error(), 500)
		r.Text = "[" + clip(schema.CleanText(m.MessageType), 64) + " message that could not be read]"
		r.Markdown = strings.NewReplacer("[", "\\[", "]", "\\]", "*", "\\*", "_", "\\_", "`", "\\`", "<", "\\<").Replace(r.Text)
	}
	return r
}

// addMentions adds the users (and @all) the content mentions, 100 at
// most.
func addMentions(msg *schema.Message, mentions []content.Mention) {
	for _, x := range mentions {
		if len(msg.Participants.Mentions) >= 100 {
			break
		}
		if x.ID == content.AllID {
			msg.Participants.Mentions = append(msg.Participants.Mentions, schema.Mention{Type: schema.MentionAll, Target: "all"})
			continue
		}
		if x.ID == "" {
			continue
		}
		msg.Participants.Mentions = append(msg.Participants.Mentions, schema.Mention{Type: schema.MentionUser, Target: schema.CleanText(x.ID), Name: schema.CleanText(x.Name)})
	}
}

// attach fetches the message's files into batch and, for a merge_forward,
// the messages forwarded (into r); what is not stored is noted in extra.
// The error is one worth retrying.
func (a *Adapter) attach(ctx context.Context, b *body, msg *schema.Message, r *content.Result, extra map[string]any, batch *dropzone.Batch, lastTry bool) error {
	m := &b.Message
	if len(r.Resources) > 0 {
		arts, notes, err := a.fetchResources(ctx, m.MessageID, r.Resources, batch, lastTry)
		if err != nil {
			return err
		}
		msg.Artifacts = append(msg.Artifacts, arts...)
		noteResources(extra, notes)
	}
	if m.MessageType == "merge_forward" {
		// The event carries no forwarded message: they are fetched
		// (forward.go), shown as an email forward, their files stored.
		return a.mergeForward(ctx, m.MessageID, msg, r, extra, batch, lastTry)
	}
	return nil
}

// noteResources adds to extra["resources"] the resources not stored.
func noteResources(extra map[string]any, notes []resourceNote) {
	if len(notes) == 0 {
		return
	}
	// Plain maps: metadata.extra holds only what YAML and JSON write as
	// they are.
	list, _ := extra["resources"].([]any)
	for _, n := range notes {
		list = append(list, map[string]any{"key": schema.CleanText(n.Key), "kind": n.Kind, "reason": schema.CleanText(n.Reason)})
	}
	extra["resources"] = list
}

// putContent sets the message's text, Markdown, body and type from r,
// within courier.limits.max_text_bytes (the Markdown counts twice:
// content.markdown and the body; the rest of each goes on in a text
// artifact, so that nothing is lost: chatmsg.Fit): a body cut says where
// it goes on.
func (a *Adapter) putContent(msg *schema.Message, batch *dropzone.Batch, extra map[string]any, r content.Result, msgType string) error {
	text, md := strings.TrimRight(schema.CleanText(r.Text), "\n"), strings.TrimRight(schema.CleanText(r.Markdown), "\n")
	files := len(msg.Artifacts)
	fullMD := md
	text, md, rests, err := chatmsg.Fit(msg, batch, extra, "lark", a.limits.MaxTextBytes, text, md)
	if err != nil {
		return err
	}
	msg.Content = schema.Content{Text: schema.NullString(text), Markdown: schema.NullString(md)}
	msg.Body = md
	if md != "" {
		msg.Body += "\n"
	}
	if len(md) < len(fullMD) {
		msg.Body = strings.TrimRight(msg.Body, "\n") + restLine(rests) + "\n"
	}
	// A message of a file alone has only its bracketed note as text.
	hasWords := strings.TrimSpace(text) != "" && !resourceOnly[msgType]
	msg.Type = schema.TypeOf(hasWords, msg.Artifacts[:files])
	if msgType == "interactive" {
		// A card, whatever it shows: the protocol has a type for it.
		msg.Type = schema.TypeCard
	}
	return nil
}

// recalled writes a file of its own saying which message was recalled; it
// keeps no word of it.
func (a *Adapter) recalled(ctx context.Context, ev event, b *body) (*adapters.Event, error) {
	rid := threading.LarkID(b.MessageID)
	if rid == "" {
		return nil, adapters.Undeliverable("lark: an im.message.recalled_v1 event that names no message (no message_id)")
	}
	// The recall event says which chat, not what kind: the chat API
	// does (a p2p chat is a direct session, as its messages were).
	name, mode := a.chat(ctx, b.ChatID)
	th := threading.Lark(threading.LarkRef{ChatID: b.ChatID, ChatType: mode, MessageID: b.MessageID})
	if th.SessionID == "" {
		th.SessionID = "unknown"
	}
	msg := a.newMessage(rid+"_recall", th)
	msg.Session.Name = name
	if at, ok := millis(b.RecallTime); ok {
		msg.Timestamp = schema.NewTime(at)
	}
	msg.Participants.From = schema.Participant{ID: "unknown", Name: "(unknown sender)"}
	s := "This message was recalled: " + rid + "."
	msg.Content = schema.Content{Text: schema.NullString(s), Markdown: schema.NullString("*" + s + "*")}
	msg.Body = "*" + s + "*\n"
	msg.Type = schema.TypeOf(true, nil)
	msg.Metadata.ProviderRaw = providerRaw(ev.Event)
	msg.Metadata.Extra.EventID = clip(ev.Header.EventID, 200)
	msg.Metadata.Extra.Recalls = rid
	out := &adapters.Event{Message: msg}
	if ev.Header.EventID != "" {
		out.Keys = []string{schema.EventKey(schema.Lark, ev.Header.EventID)}
	}
	return out, nil
}

// restLine ends a body that was cut: where it goes on.
func restLine(arts []schema.Artifact) string {
	var where []string
	for _, a := range arts {
		if a.Name == chatmsg.MarkdownRest {
			where = append(where, fmt.Sprintf("%s (%d bytes, .monoco/dropzone/%s)", a.Name, a.Size, a.Path))
		}
	}
	return "\n\n[… this message goes on beyond what its file keeps, in " + strings.Join(where, ", ") + "]"
}

func cmpOr(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return strings.TrimSpace(x)
		}
	}
	return ""
}

// millis reads a Lark time (milliseconds since the epoch, as a string).
func millis(s string) (time.Time, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n > 1<<50 {
		return time.Time{}, false
	}
	return time.UnixMilli(n).UTC(), true
}

// maxRaw bounds metadata.provider_raw, in bytes of JSON.
const maxRaw = 32 << 10

// providerRaw is the event body minus anything secret (any key named token
// or ending in _token); over maxRaw, only the message's ids are kept.
func providerRaw(inner json.RawMessage) map[string]any {
	v, fits := adapters.RawEvent(inner, maxRaw, nil)
	if v == nil || fits {
		return v
	}
	small := map[string]any{"truncated": fmt.Sprintf("the event is over %d bytes: only its ids are kept", maxRaw)}
	if msg, ok := v["message"].(map[string]any); ok {
		keep := map[string]any{}
		for _, k := range []string{"message_id", "root_id", "parent_id", "thread_id", "chat_id", "chat_type", "message_type", "create_time"} {
			if s, ok := msg[k].(string); ok && len(s) < 1024 {
				keep[k] = s
			}
		}
		small["message"] = keep
	}
	return small
}
