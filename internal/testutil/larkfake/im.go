package larkfake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// User is a contact the fake knows (contact/v3/users).
type User struct {
	OpenID, UnionID, UserID string
	Name, EnName, Email     string
}

// Chat is a chat the bot is in (im/v1/chats).
type Chat struct {
	ChatID      string
	Name        string
	ChatMode    string // "group" (default), "topic" or "p2p"
	ChatType    string // "private" (default) or "public"
	Description string
	OwnerID     string // an open_id
}

// Mention is one @ in a message, as im/v1/messages answers it.
type Mention struct {
	Key    string `json:"key"` // "@_user_1"
	ID     string `json:"id"`  // an open_id
	IDType string `json:"id_type"`
	Name   string `json:"name"`
}

// Message is one message in a chat's history.
type Message struct {
	MessageID string // assigned ("om_...") when empty
	RootID    string
	ParentID  string
	ThreadID  string
	ChatID    string
	MsgType   string // default "text"
	Content   string // the JSON content string, as Lark keeps it
	// CreateTime defaults to the fake's clock; list filters and sorts by
	// it.
	CreateTime time.Time
	SenderID   string // an open_id, or the app id for the bot's own
	SenderType string // "user" (default) or "app"
	Mentions   []Mention
	Deleted    bool
	UUID       string // the uuid the message was created with, if any
	// UpperMessageID makes the message a child of that merge_forward
	// message (the one it was forwarded in): it is not in the chat's
	// history (list, Messages), and get of the merge_forward answers it
	// after the merge_forward, with upper_message_id set, as Lark does.
	// Its ChatID and CreateTime are those of the original it copies.
	UpperMessageID string
}

// Sent is one message create or reply that made a new message (a create
// the uuid dedupes is not one).
type Sent struct {
	Route         string // RouteCreate or RouteReply
	ReceiveIDType string // create only
	ReceiveID     string // create only
	ParentID      string // reply only: the message replied to
	ReplyInThread bool
	MsgType       string
	Content       string
	UUID          string
	MessageID     string // assigned
	ChatID        string
	ThreadID      string
}

// Upload is one image or file uploaded.
type Upload struct {
	Route     string // RouteImageUpload or RouteFileUpload
	Key       string // image_key or file_key
	Type      string // image_type or file_type
	FileName  string // file_name (files), the part's filename (images)
	Duration  int    // files: duration in ms, 0 when not sent
	Content   []byte
	Timestamp time.Time
}

type resource struct {
	typ     string // "image" or "file"
	name    string
	content []byte
}

var (
	msgTypes = []string{"text", "post", "image", "file", "audio", "media", "sticker",
		"interactive", "share_chat", "share_user", "system"}
	idPrefix = map[string]string{"chat_id": "oc_", "open_id": "ou_", "union_id": "on_"}
	idRe     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

// AddUser makes u known to contact/v3/users and a valid receive_id.
func (s *Server) AddUser(u User) {
	s.t.Helper()
	if !strings.HasPrefix(u.OpenID, "ou_") || !idRe.MatchString(u.OpenID) {
		s.t.Fatalf("larkfake: AddUser: %q is not an open_id (ou_...)", u.OpenID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.OpenID] = &u
}

// AddChat makes c known to im/v1/chats, a valid receive_id, and a
// container for messages.
func (s *Server) AddChat(c Chat) {
	s.t.Helper()
	if !strings.HasPrefix(c.ChatID, "oc_") || !idRe.MatchString(c.ChatID) {
		s.t.Fatalf("larkfake: AddChat: %q is not a chat_id (oc_...)", c.ChatID)
	}
	if c.ChatMode == "" {
		c.ChatMode = "group"
	}
	if c.ChatType == "" {
		c.ChatType = "private"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats[c.ChatID] = &c
}

// AddMessage stores m in chatID's history and returns its message_id.
// A reply (ParentID set) takes its root and thread from its parent when
// m leaves them empty.
func (s *Server) AddMessage(chatID string, m Message) string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chats[chatID] == nil {
		s.t.Fatalf("larkfake: AddMessage: unknown chat %q (AddChat first)", chatID)
	}
	m.ChatID = chatID
	if m.MessageID == "" {
		m.MessageID = s.nextID("om_")
	}
	if s.msgs[m.MessageID] != nil {
		s.t.Fatalf("larkfake: AddMessage: message %s already exists", m.MessageID)
	}
	if m.UpperMessageID != "" {
		if up := s.msgs[m.UpperMessageID]; up == nil || up.MsgType != "merge_forward" {
			s.t.Fatalf("larkfake: AddMessage: upper message %q is not a merge_forward message added before", m.UpperMessageID)
		}
	}
	if m.MsgType == "" {
		m.MsgType = "text"
	}
	if m.SenderType == "" {
		m.SenderType = "user"
	}
	if m.CreateTime.IsZero() {
		m.CreateTime = s.opts.Now()
	}
	if p := s.msgs[m.ParentID]; p != nil {
		if m.RootID == "" {
			m.RootID = cmpOr(p.RootID, p.MessageID)
		}
		if m.ThreadID == "" {
			m.ThreadID = p.ThreadID
		}
	}
	s.store(&m)
	return m.MessageID
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// store adds m to the history. Called with s.mu held.
func (s *Server) store(m *Message) {
	s.msgs[m.MessageID] = m
	s.order = append(s.order, m)
}

// AddResource makes content downloadable through
// im/v1/messages/{messageID}/resources/{fileKey}?type=typ ("image" or
// "file"), named name in its Content-Disposition.
func (s *Server) AddResource(messageID, fileKey string, content []byte, typ, name string) {
	s.t.Helper()
	if typ != "image" && typ != "file" {
		s.t.Fatalf("larkfake: AddResource: type %q is not image or file", typ)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.res[messageID] == nil {
		s.res[messageID] = map[string]*resource{}
	}
	s.res[messageID][fileKey] = &resource{typ: typ, name: name, content: bytes.Clone(content)}
}

// Sent returns every message create or reply that made a message, in
// order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Uploads returns every image and file uploaded, in order.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.uploads)
}

// Messages returns chatID's history, oldest first.
func (s *Server) Messages(chatID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.order {
		if m.ChatID == chatID && m.UpperMessageID == "" {
			out = append(out, *m)
		}
	}
	slices.SortStableFunc(out, func(a, b Message) int { return a.CreateTime.Compare(b.CreateTime) })
	return out
}

// messageJSON is a message as im/v1 answers it.
func (s *Server) messageJSON(m *Message) map[string]any {
	sender := map[string]any{"id": m.SenderID, "id_type": "open_id", "sender_type": m.SenderType, "tenant_key": s.opts.TenantKey}
	if m.SenderType == "app" {
		sender["id_type"] = "app_id"
	}
	out := map[string]any{
		"message_id":  m.MessageID,
		"msg_type":    m.MsgType,
		"create_time": strconv.FormatInt(m.CreateTime.UnixMilli(), 10),
		"update_time": strconv.FormatInt(m.CreateTime.UnixMilli(), 10),
		"deleted":     m.Deleted,
		"updated":     false,
		"chat_id":     m.ChatID,
		"sender":      sender,
		"body":        map[string]any{"content": m.Content},
	}
	if m.Deleted {
		// Lark blanks a recalled message's content.
		out["body"] = map[string]any{"content": "This message was recalled"}
	}
	for k, v := range map[string]string{"root_id": m.RootID, "parent_id": m.ParentID, "thread_id": m.ThreadID} {
		if v != "" {
			out[k] = v
		}
	}
	if len(m.Mentions) > 0 {
		out["mentions"] = m.Mentions
	}
	if m.UpperMessageID != "" {
		out["upper_message_id"] = m.UpperMessageID
	}
	return out
}

type sendBody struct {
	ReceiveID     string `json:"receive_id"`
	MsgType       string `json:"msg_type"`
	Content       string `json:"content"`
	UUID          string `json:"uuid"`
	ReplyInThread bool   `json:"reply_in_thread"`
}

// checkSend validates what create and reply share. Called with s.mu held.
func (s *Server) checkSend(b *sendBody) error {
	if !slices.Contains(msgTypes, b.MsgType) {
		return invalidParam("invalid msg_type %q", b.MsgType)
	}
	var content map[string]any
	if b.Content == "" || json.Unmarshal([]byte(b.Content), &content) != nil {
		return invalidParam("content is not a JSON object")
	}
	limit := maxTextContent
	if b.MsgType == "post" || b.MsgType == "interactive" {
		limit = maxRichContent
	}
	if len(b.Content) > limit {
		return larkErr(http.StatusBadRequest, CodeContentTooLong, "message content too long: %d bytes, at most %d for %s", len(b.Content), limit, b.MsgType)
	}
	if len(b.UUID) > maxUUIDLen {
		return fieldValidation("uuid is longer than %d characters", maxUUIDLen)
	}
	for _, k := range []string{"image_key", "file_key"} {
		if key, ok := content[k].(string); ok && (b.MsgType == "image" || b.MsgType == "file" || b.MsgType == "audio" || b.MsgType == "media") {
			if s.keys[key] == nil {
				return invalidParam("invalid %s %q", k, key)
			}
		}
	}
	return nil
}

// deduped returns the message a uuid already made within the hour.
// Called with s.mu held.
func (s *Server) deduped(uuid string) *Message {
	if uuid == "" {
		return nil
	}
	seen, ok := s.uuids[uuid]
	if !ok || s.opts.Now().Sub(seen.at) >= uuidWindow {
		return nil
	}
	return seen.msg
}

// newBotMessage stores a message the app sent. Called with s.mu held.
func (s *Server) newBotMessage(chatID string, b *sendBody) *Message {
	m := &Message{MessageID: s.nextID("om_"), ChatID: chatID, MsgType: b.MsgType, Content: b.Content,
		CreateTime: s.opts.Now(), SenderID: s.opts.AppID, SenderType: "app", UUID: b.UUID}
	s.store(m)
	if b.UUID != "" {
		if len(s.uuids) >= maxUUIDs {
			// Forget the uuids past Lark's hour, so a long run stays bounded.
			for k, v := range s.uuids {
				if m.CreateTime.Sub(v.at) >= uuidWindow {
					delete(s.uuids, k)
				}
			}
		}
		s.uuids[b.UUID] = uuidSeen{at: m.CreateTime, msg: m}
	}
	// The app's own media is downloadable from its message, as Lark's is.
	var content map[string]any
	json.Unmarshal([]byte(b.Content), &content)
	for k, typ := range map[string]string{"image_key": "image", "file_key": "file"} {
		if key, ok := content[k].(string); ok {
			if u := s.keys[key]; u != nil {
				if s.res[m.MessageID] == nil {
					s.res[m.MessageID] = map[string]*resource{}
				}
				s.res[m.MessageID][key] = &resource{typ: typ, name: u.FileName, content: u.Content}
			}
		}
	}
	return m
}

// create is im/v1/messages POST.
func (s *Server) create(_ http.ResponseWriter, r *http.Request, body []byte) (any, error) {
	idType := r.URL.Query().Get("receive_id_type")
	var b sendBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fieldValidation("body is not JSON")
	}
	switch idType {
	case "chat_id", "open_id", "union_id", "user_id", "email":
	case "":
		return nil, fieldValidation("receive_id_type is required")
	default:
		return nil, fieldValidation("receive_id_type %q is not one of open_id, union_id, user_id, email, chat_id", idType)
	}
	if b.ReceiveID == "" {
		return nil, fieldValidation("receive_id is required")
	}
	if err := s.checkSend(&b); err != nil {
		return nil, err
	}
	if m := s.deduped(b.UUID); m != nil {
		return s.messageJSON(m), nil
	}
	var chatID string
	if idType == "chat_id" {
		if s.chats[b.ReceiveID] == nil {
			return nil, invalidParam("invalid receive_id %q", b.ReceiveID)
		}
		chatID = b.ReceiveID
	} else {
		u := s.findUser(idType, b.ReceiveID)
		if u == nil {
			return nil, invalidParam("invalid receive_id %q", b.ReceiveID)
		}
		chatID = s.p2pChat(u)
	}
	m := s.newBotMessage(chatID, &b)
	s.sent = append(s.sent, Sent{Route: RouteCreate, ReceiveIDType: idType, ReceiveID: b.ReceiveID,
		MsgType: b.MsgType, Content: b.Content, UUID: b.UUID, MessageID: m.MessageID, ChatID: chatID})
	return s.messageJSON(m), nil
}

// findUser finds a user by any of its ids. Called with s.mu held.
func (s *Server) findUser(idType, id string) *User {
	for _, u := range s.users {
		var v string
		switch idType {
		case "open_id":
			v = u.OpenID
		case "union_id":
			v = u.UnionID
		case "user_id":
			v = u.UserID
		case "email":
			if strings.EqualFold(u.Email, id) && u.Email != "" {
				return u
			}
			continue
		}
		if v != "" && v == id {
			return u
		}
	}
	return nil
}

// p2pChat is the bot's one-to-one chat with u, made on first use.
// Called with s.mu held.
func (s *Server) p2pChat(u *User) string {
	if id, ok := s.p2p[u.OpenID]; ok {
		return id
	}
	id := s.nextID("oc_")
	s.chats[id] = &Chat{ChatID: id, Name: u.Name, ChatMode: "p2p", ChatType: "private"}
	s.p2p[u.OpenID] = id
	return id
}

// reply is im/v1/messages/{message_id}/reply.
func (s *Server) reply(_ http.ResponseWriter, r *http.Request, body []byte) (any, error) {
	var b sendBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fieldValidation("body is not JSON")
	}
	parent := s.msgs[r.PathValue("message_id")]
	if parent == nil {
		return nil, invalidParam("invalid message_id %q", r.PathValue("message_id"))
	}
	if parent.Deleted {
		return nil, larkErr(http.StatusBadRequest, 230011, "The message was withdrawn.")
	}
	if err := s.checkSend(&b); err != nil {
		return nil, err
	}
	if m := s.deduped(b.UUID); m != nil {
		return s.messageJSON(m), nil
	}
	m := s.newBotMessage(parent.ChatID, &b)
	m.ParentID = parent.MessageID
	m.RootID = cmpOr(parent.RootID, parent.MessageID)
	// A reply in a thread stays in it; reply_in_thread starts one at the
	// parent, which becomes the thread's root.
	switch {
	case parent.ThreadID != "":
		m.ThreadID = parent.ThreadID
	case b.ReplyInThread:
		root := s.msgs[m.RootID]
		if root == nil {
			root = parent
		}
		if root.ThreadID == "" {
			root.ThreadID = s.nextID("omt_")
		}
		m.ThreadID = root.ThreadID
		parent.ThreadID = root.ThreadID
	}
	s.sent = append(s.sent, Sent{Route: RouteReply, ParentID: parent.MessageID, ReplyInThread: b.ReplyInThread,
		MsgType: b.MsgType, Content: b.Content, UUID: b.UUID, MessageID: m.MessageID, ChatID: m.ChatID, ThreadID: m.ThreadID})
	return s.messageJSON(m), nil
}

// get is im/v1/messages/{message_id}: the message in "items", as Lark
// answers; a merge_forward's children (AddMessage with UpperMessageID)
// follow it, each level after its upper message, every level in the one
// answer, in the order they were added.
func (s *Server) get(_ http.ResponseWriter, r *http.Request, _ []byte) (any, error) {
	m := s.msgs[r.PathValue("message_id")]
	if m == nil {
		return nil, invalidParam("invalid message_id %q", r.PathValue("message_id"))
	}
	items := []any{s.messageJSON(m)}
	uppers := map[string]bool{m.MessageID: true}
	// Children are added after their upper message, so one walk in
	// order finds every level.
	for _, c := range s.order {
		if c.UpperMessageID != "" && uppers[c.UpperMessageID] && !uppers[c.MessageID] {
			uppers[c.MessageID] = true
			items = append(items, s.messageJSON(c))
		}
	}
	return map[string]any{"items": items}, nil
}

// pageToken is what a page token carries: the query it continues and
// where. Lark's tokens are opaque; a token used with another query is
// refused.
type pageToken struct {
	Query  string `json:"q"`
	Offset int    `json:"o"`
}

// pageAt reads a paged list's page_size (1 to maxSize, defaultPageSize
// when absent) and page_token, which must continue query: the page's size
// and where it starts.
func pageAt(q url.Values, query string, maxSize int) (size, offset int, err error) {
	size = defaultPageSize
	if v := q.Get("page_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSize {
			return 0, 0, fieldValidation("page_size %q is not 1 to %d", v, maxSize)
		}
		size = n
	}
	if v := q.Get("page_token"); v != "" {
		raw, err := base64.RawURLEncoding.DecodeString(v)
		var pt pageToken
		if err != nil || json.Unmarshal(raw, &pt) != nil || pt.Query != query || pt.Offset < 0 {
			return 0, 0, fieldValidation("page_token is invalid for this query")
		}
		offset = pt.Offset
	}
	return size, offset, nil
}

// page answers one page of all: the items from offset, size at most, as
// item writes each, has_more, and the page_token of the next page.
func page[T any](all []T, offset, size int, query string, item func(T) any) map[string]any {
	items := []any{}
	for i := offset; i < len(all) && i < offset+size; i++ {
		items = append(items, item(all[i]))
	}
	more := offset+size < len(all)
	data := map[string]any{"has_more": more, "items": items}
	if more {
		b, _ := json.Marshal(pageToken{Query: query, Offset: offset + size})
		data["page_token"] = base64.RawURLEncoding.EncodeToString(b)
	}
	return data
}

// list is im/v1/messages GET: a chat's or a thread's history between
// start_time and end_time (seconds, both inclusive), sorted by
// create_time, paged.
func (s *Server) list(_ http.ResponseWriter, r *http.Request, _ []byte) (any, error) {
	q := r.URL.Query()
	h, err := s.historyQuery(q)
	if err != nil {
		return nil, err
	}
	query := strings.Join([]string{h.ctype, h.cid, strconv.FormatInt(h.start, 10), strconv.FormatInt(h.end, 10), h.sortType}, "|")
	size, offset, err := pageAt(q, query, maxPageSize)
	if err != nil {
		return nil, err
	}
	return page(s.history(h), offset, size, query, func(m *Message) any { return s.messageJSON(m) }), nil
}

// historyQuery is the history im/v1/messages GET asks for.
type historyQuery struct {
	ctype, cid string // container_id_type (chat or thread), container_id
	start, end int64  // seconds, both inclusive
	sortType   string
}

// historyQuery reads and checks q's container, times and order.
func (s *Server) historyQuery(q url.Values) (historyQuery, error) {
	h := historyQuery{ctype: q.Get("container_id_type"), cid: q.Get("container_id")}
	if h.ctype != "chat" && h.ctype != "thread" {
		return h, fieldValidation("container_id_type %q is not chat or thread", h.ctype)
	}
	if h.cid == "" {
		return h, fieldValidation("container_id is required")
	}
	if h.ctype == "chat" && s.chats[h.cid] == nil {
		return h, invalidParam("invalid container_id %q", h.cid)
	}
	bound := func(name string, def int64) (int64, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fieldValidation("%s %q is not a time in seconds", name, v)
		}
		return n, nil
	}
	var err error
	if h.start, err = bound("start_time", 0); err != nil {
		return h, err
	}
	if h.end, err = bound("end_time", 1<<62); err != nil {
		return h, err
	}
	h.sortType = cmpOr(q.Get("sort_type"), "ByCreateTimeAsc")
	if h.sortType != "ByCreateTimeAsc" && h.sortType != "ByCreateTimeDesc" {
		return h, fieldValidation("sort_type %q is not ByCreateTimeAsc or ByCreateTimeDesc", h.sortType)
	}
	return h, nil
}

// history is the messages h asks for, in its order.
func (s *Server) history(h historyQuery) []*Message {
	var match []*Message
	for _, m := range s.order {
		if m.UpperMessageID != "" {
			continue // a merge_forward's child is no message of the chat
		}
		if h.ctype == "chat" && m.ThreadID != "" && m.RootID != "" && s.chats[h.cid].ChatMode != "topic" {
			// A reply in a thread: Lark's chat container answers a
			// group's thread roots only (the replies are in the thread
			// container).
			continue
		}
		in := (h.ctype == "chat" && m.ChatID == h.cid) || (h.ctype == "thread" && m.ThreadID == h.cid)
		sec := m.CreateTime.Unix()
		if in && sec >= h.start && sec <= h.end {
			match = append(match, m)
		}
	}
	slices.SortStableFunc(match, func(a, b *Message) int {
		c := a.CreateTime.Compare(b.CreateTime)
		if h.sortType == "ByCreateTimeDesc" {
			c = -c
		}
		return c
	})
	return match
}

// resource is im/v1/messages/{message_id}/resources/{file_key}?type=:
// the bytes, streamed, with the name in Content-Disposition.
func (s *Server) resource(w http.ResponseWriter, r *http.Request, _ []byte) (any, error) {
	typ := r.URL.Query().Get("type")
	if typ != "image" && typ != "file" {
		return nil, fieldValidation("type %q is not image or file", typ)
	}
	msgID, key := r.PathValue("message_id"), r.PathValue("file_key")
	if s.msgs[msgID] == nil && s.res[msgID] == nil {
		return nil, invalidParam("invalid message_id %q", msgID)
	}
	res := s.res[msgID][key]
	// Lark serves a file key with type=image as a mismatch, not the bytes.
	if res == nil || res.typ != typ {
		return nil, larkErr(http.StatusBadRequest, CodeResourceNotInMsg, "File not in msg.")
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if res.name != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": res.name}))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(res.content)))
	w.WriteHeader(http.StatusOK)
	w.Write(res.content)
	return nil, errStreamed
}

// readUpload reads a multipart upload: its fields and its one file part.
func readUpload(r *http.Request, body []byte, filePart string, limit int) (map[string]string, []byte, string, error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, nil, "", fieldValidation("the body is not multipart/form-data")
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	fields := map[string]string{}
	var content []byte
	var filename string
	found := false
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, "", fieldValidation("multipart body: %v", err)
		}
		if p.FormName() == filePart {
			content, err = io.ReadAll(io.LimitReader(p, int64(limit)+1))
			if err != nil {
				return nil, nil, "", fieldValidation("multipart body: %v", err)
			}
			filename, found = p.FileName(), true
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, 4096))
		if err != nil {
			return nil, nil, "", fieldValidation("multipart body: %v", err)
		}
		fields[p.FormName()] = string(v)
	}
	if !found || len(content) == 0 {
		return nil, nil, "", fieldValidation("%s is missing or empty", filePart)
	}
	if len(content) > limit {
		return nil, nil, "", fieldValidation("%s is larger than %d bytes", filePart, limit)
	}
	return fields, content, filename, nil
}

// imageUpload is im/v1/images: image_type message or avatar, an image of
// at most 10 MB.
func (s *Server) imageUpload(_ http.ResponseWriter, r *http.Request, body []byte) (any, error) {
	fields, content, filename, err := readUpload(r, body, "image", maxImage)
	if err != nil {
		return nil, err
	}
	if t := fields["image_type"]; t != "message" && t != "avatar" {
		return nil, fieldValidation("image_type %q is not message or avatar", t)
	}
	u := &Upload{Route: RouteImageUpload, Key: s.nextID("img_v3_"), Type: fields["image_type"],
		FileName: filename, Content: content, Timestamp: s.opts.Now()}
	s.keys[u.Key] = u
	s.uploads = append(s.uploads, *u)
	return map[string]any{"image_key": u.Key}, nil
}

// fileUpload is im/v1/files: file_type one of Lark's, file_name, an
// optional duration, a file of at most 30 MB.
func (s *Server) fileUpload(_ http.ResponseWriter, r *http.Request, body []byte) (any, error) {
	fields, content, _, err := readUpload(r, body, "file", maxFile)
	if err != nil {
		return nil, err
	}
	switch t := fields["file_type"]; t {
	case "opus", "mp4", "pdf", "doc", "xls", "ppt", "stream":
	default:
		return nil, fieldValidation("file_type %q is not opus, mp4, pdf, doc, xls, ppt or stream", t)
	}
	if fields["file_name"] == "" {
		return nil, fieldValidation("file_name is required")
	}
	var dur int
	if v := fields["duration"]; v != "" {
		if dur, err = strconv.Atoi(v); err != nil || dur < 0 {
			return nil, fieldValidation("duration %q is not milliseconds", v)
		}
	}
	u := &Upload{Route: RouteFileUpload, Key: s.nextID("file_v3_"), Type: fields["file_type"],
		FileName: fields["file_name"], Duration: dur, Content: content, Timestamp: s.opts.Now()}
	s.keys[u.Key] = u
	s.uploads = append(s.uploads, *u)
	return map[string]any{"file_key": u.Key}, nil
}

// maxChatPageSize is the largest page_size im/v1/chats takes (Lark's
// documented maximum; its default is 20).
const maxChatPageSize = 100

// chatList is im/v1/chats GET: the group chats the app is in, paged
// (page_size 1 to 100, default 20; opaque page tokens bound to their
// query). A tenant token lists no p2p chats (Lark lists them for a user
// token only, whatever types asks), so neither does the fake. Lark sorts
// by create time (sort_type ByCreateTimeAsc, the default) or activity
// (ByActiveTimeDesc); the fake keeps no such times and lists by chat_id
// for either, a stable order to page through.
func (s *Server) chatList(_ http.ResponseWriter, r *http.Request, _ []byte) (any, error) {
	q := r.URL.Query()
	if t := cmpOr(q.Get("user_id_type"), "open_id"); t != "open_id" && t != "union_id" && t != "user_id" {
		return nil, fieldValidation("user_id_type %q is not open_id, union_id or user_id", t)
	}
	sortType := cmpOr(q.Get("sort_type"), "ByCreateTimeAsc")
	if sortType != "ByCreateTimeAsc" && sortType != "ByActiveTimeDesc" {
		return nil, fieldValidation("sort_type %q is not ByCreateTimeAsc or ByActiveTimeDesc", sortType)
	}
	query := "chats|" + sortType
	size, offset, err := pageAt(q, query, maxChatPageSize)
	if err != nil {
		return nil, err
	}
	var list []*Chat
	for _, c := range s.chats {
		if c.ChatMode != "p2p" {
			list = append(list, c)
		}
	}
	slices.SortFunc(list, func(a, b *Chat) int { return strings.Compare(a.ChatID, b.ChatID) })
	return page(list, offset, size, query, func(c *Chat) any {
		return map[string]any{"chat_id": c.ChatID, "avatar": "", "name": c.Name, "description": c.Description,
			"owner_id": c.OwnerID, "owner_id_type": "open_id", "external": false, "tenant_key": s.opts.TenantKey,
			"chat_status": "normal", "chat_mode": c.ChatMode}
	}), nil
}

// chat is im/v1/chats/{chat_id}.
func (s *Server) chat(_ http.ResponseWriter, r *http.Request, _ []byte) (any, error) {
	c := s.chats[r.PathValue("chat_id")]
	if c == nil {
		return nil, invalidParam("invalid chat_id %q", r.PathValue("chat_id"))
	}
	return map[string]any{"name": c.Name, "description": c.Description, "chat_mode": c.ChatMode,
		"chat_type": c.ChatType, "owner_id": c.OwnerID, "owner_id_type": "open_id",
		"tenant_key": s.opts.TenantKey, "external": false, "chat_status": "normal"}, nil
}

// user is contact/v3/users/{user_id}?user_id_type= (default open_id).
func (s *Server) user(_ http.ResponseWriter, r *http.Request, _ []byte) (any, error) {
	idType := cmpOr(r.URL.Query().Get("user_id_type"), "open_id")
	if idType != "open_id" && idType != "union_id" && idType != "user_id" {
		return nil, fieldValidation("user_id_type %q is not open_id, union_id or user_id", idType)
	}
	id := r.PathValue("user_id")
	if p, ok := idPrefix[idType]; ok && !strings.HasPrefix(id, p) {
		return nil, fieldValidation("user_id %q is not a %s", id, idType)
	}
	u := s.findUser(idType, id)
	if u == nil {
		return nil, larkErr(http.StatusBadRequest, CodeNoUserAuthority, "no user authority error")
	}
	return map[string]any{"user": map[string]any{"open_id": u.OpenID, "union_id": u.UnionID, "user_id": u.UserID,
		"name": u.Name, "en_name": u.EnName, "email": u.Email}}, nil
}
