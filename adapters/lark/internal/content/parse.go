package content

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Names resolves the ids a message names when its content carries no name.
// A nil Names, or a nil User, leaves ids as they are.
type Names struct {
	// User returns the display name of an open_id (ou_...), or "".
	User func(openID string) string
}

// Mention is one entry of the event's `mentions`: the placeholder Key the
// text carries ("@_user_1", "@_all"), the user's ID (open_id) and Name.
// @all is the Mention whose ID is AllID.
type Mention struct{ Key, ID, Name string }

// AllID is the ID of the Mention that stands for everyone in the chat
// (@all), as Lark writes it in a post's at tag.
const AllID = "all"

// Resource is a file a message carries, for the caller to fetch with
// im/v1/messages/{message_id}/resources/{Key}?type={Type}.
type Resource struct {
	// Type is the resources API's type: "image" or "file".
	Type string
	// Kind is what the file is: image, file, audio, media (a video) or
	// sticker.
	Kind string
	// Key is the image_key or file_key.
	Key string
	// Name is the file's name when the content gives one.
	Name string
}

// Result is a message's content converted.
type Result struct {
	// Text is plain text: what a reader sees, without markup.
	Text string
	// Markdown is CommonMark (with GFM strikethrough).
	Markdown string
	// Resources are the files the message carries, in order (at most
	// maxResources). Where each stood, Text and Markdown say so in
	// brackets ("[image]", "[file: a.pdf]"); a sender can type the same
	// words, so the caller lists the files it fetched rather than
	// replacing those.
	Resources []Resource
	// Mentions are the users the message names, resolved (a name from
	// the event, else from Names, else the id), in order of the event's
	// mentions then of the content; @all is one with ID AllID.
	Mentions []Mention
	// Raw is the content as received; content that is not JSON is kept
	// as a JSON string.
	Raw json.RawMessage
}

// MentionsAll reports whether the message mentions @all.
func (r Result) MentionsAll() bool {
	for _, m := range r.Mentions {
		if m.ID == AllID {
			return true
		}
	}
	return false
}

// ErrMalformed is wrapped by Parse's error when content is not what its
// message_type says.
var ErrMalformed = errors.New("content: malformed content")

const (
	// maxName bounds one resolved name.
	maxName = 256
	// nameSlack is what names may add to a message beyond its size.
	nameSlack = 64 << 10
	// maxResources bounds the resources listed for one message: more is
	// no message a person sends, and each costs the caller a download.
	maxResources = 100
	// maxMentions bounds the mentions listed (and looked through for
	// each @): Lark's clients stop far below it.
	maxMentions = 200
	// maxDepth bounds the recursion into a card.
	maxDepth = 32
)

// Parse converts the content of a message of messageType. mentions are the
// event's; n resolves ids they and the content leave unnamed.
//
// Content that is not what its type says gives an error wrapping
// ErrMalformed together with a usable Result: the raw content as a code
// block, so that nothing is dropped. An unknown messageType is no error:
// it is kept the same way.
func Parse(messageType, content string, mentions []Mention, n Names) (Result, error) {
	content = strings.ToValidUTF8(content, "\uFFFD")
	p := &parser{names: n, budget: len(content) + nameSlack}
	p.res.Raw = raw(content)
	for _, m := range mentions {
		p.addMention(m)
	}
	var err error
	switch messageType {
	case "text":
		err = p.text(content)
	case "post":
		err = p.post(content)
	case "image", "file", "audio", "media", "sticker":
		err = p.file(messageType, content)
	case "interactive":
		err = p.card(content)
	case "share_chat":
		err = p.shareChat(content)
	case "share_user":
		err = p.shareUser(content)
	case "merge_forward":
		// The event's content is "{}" or a sentence ("Merged and
		// Forwarded Message"); the forwarded messages are fetched by the
		// caller, not carried here.
		p.placeholder("[merged and forwarded messages]")
	case "location":
		err = p.location(content)
	case "system":
		err = p.system(content)
	case "hongbao":
		p.placeholder("[red packet]")
	case "share_calendar_event", "calendar", "general_calendar":
		err = p.calendar(messageType, content)
	case "vote":
		err = p.vote(content)
	case "video_chat":
		err = p.videoChat(content)
	case "todo":
		err = p.todo(content)
	default:
		p.unknown(messageType, content)
	}
	if err != nil {
		p = &parser{names: n, budget: len(content) + nameSlack}
		p.res.Raw = raw(content)
		for _, m := range mentions {
			p.addMention(m)
		}
		p.unknown(messageType, content)
		err = fmt.Errorf("%w: %s: %v", ErrMalformed, typeName(messageType), err)
	}
	p.res.Text = clean(strings.TrimRight(p.text_.String(), "\n "))
	p.res.Markdown = clean(strings.TrimRight(p.md.String(), "\n "))
	return p.res, err
}

// typeName quotes a message_type for an error, cut short: it came from
// outside.
func typeName(t string) string {
	if len(t) > 64 {
		t = t[:64] + "…"
	}
	return strconv.Quote(t)
}

func raw(content string) json.RawMessage {
	if json.Valid([]byte(content)) {
		return json.RawMessage(content)
	}
	b, _ := json.Marshal(content)
	return b
}

// parser accumulates one Result.
type parser struct {
	names  Names
	budget int // bytes names may still add
	res    Result
	text_  strings.Builder
	md     strings.Builder
}

// name returns what to call the user id when the content gives name: name
// itself, else Names', else the id; cut to maxName.
func (p *parser) name(id, name string) string {
	if name == "" && id != "" && id != AllID && p.names.User != nil {
		name = p.names.User(id)
	}
	name = strings.TrimSpace(clean(strings.ReplaceAll(name, "\n", " ")))
	if name == "" {
		name = id
	}
	if len(name) > maxName {
		name = strings.ToValidUTF8(name[:maxName], "")
	}
	return name
}

// at returns how a mention is written where the content names it written
// as short: "@" and its name while the budget lasts (every use of a name
// is charged, so a message of 10,000 "@_user_1" cannot write 10,000 long
// names), then what the content had.
func (p *parser) at(m Mention, short string) string {
	if p.budget -= len(m.Name); p.budget < 0 {
		p.budget = 0
		return short
	}
	return "@" + m.Name
}

// addMention records m, resolved, once per id (or key, for a mention
// without id).
func (p *parser) addMention(m Mention) Mention {
	if m.Key == "@_all" || m.ID == AllID || m.ID == "@_all" {
		m.ID = AllID
		if m.Key == "" {
			m.Key = "@_all"
		}
		if m.Name == "" {
			m.Name = "all"
		}
	}
	for i, have := range p.res.Mentions {
		if have.ID != "" && have.ID == m.ID || have.ID == "" && have.Key == m.Key {
			return p.res.Mentions[i]
		}
	}
	if len(m.ID) > maxName {
		m.ID = strings.ToValidUTF8(m.ID[:maxName], "")
	}
	if m.ID != AllID {
		m.Name = p.name(m.ID, m.Name)
	}
	if len(p.res.Mentions) < maxMentions {
		p.res.Mentions = append(p.res.Mentions, m)
	}
	return m
}

// mentionByKey returns the mention a placeholder key or id names.
func (p *parser) mention(keyOrID string) (Mention, bool) {
	for _, m := range p.res.Mentions {
		if m.Key == keyOrID || m.ID != "" && m.ID == keyOrID {
			return m, true
		}
	}
	return Mention{}, false
}

// write adds plain text to both outputs.
func (p *parser) write(text string) {
	p.text_.WriteString(text)
	p.md.WriteString(escape(text, p.atLineStart()))
}

// atLineStart reports whether the Markdown written so far ends a line.
func (p *parser) atLineStart() bool {
	n := p.md.Len()
	return n == 0 || p.md.String()[n-1] == '\n'
}

// placeholder writes a bracketed note such as "[image]".
func (p *parser) placeholder(s string) {
	p.write(s)
}

func (p *parser) resource(r Resource) {
	if len(p.res.Resources) < maxResources && r.Key != "" {
		p.res.Resources = append(p.res.Resources, r)
	}
}

// text converts {"text": "..."}: the @_user_N placeholders become @name,
// @_all becomes @all.
func (p *parser) text(content string) error {
	var c struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if c.Text == nil {
		return errors.New(`no "text"`)
	}
	p.mentionText(*c.Text)
	return nil
}

// mentionText writes s with its @_xxx placeholders resolved.
func (p *parser) mentionText(s string) { p.write(p.resolve(s)) }

// resolve returns s with its placeholders (@_user_1, @_all) replaced by
// @ and the name of the mention they stand for; a placeholder no mention
// names stays as it is.
func (p *parser) resolve(s string) string {
	if !strings.Contains(s, "@_") {
		return s
	}
	var b strings.Builder
	for s != "" {
		i := strings.Index(s, "@_")
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := i + 2
		for j < len(s) && (wordByte(s[j]) || s[j] == '_') {
			j++
		}
		key := s[i:j]
		b.WriteString(s[:i])
		if key == "@_all" {
			b.WriteString(p.at(p.addMention(Mention{Key: key, ID: AllID}), key))
		} else if m, ok := p.mention(key); ok {
			b.WriteString(p.at(m, key))
		} else {
			b.WriteString(key)
		}
		s = s[j:]
	}
	return b.String()
}

// file converts the content of an image, file, audio, media (video) or
// sticker message, and lists its file.
func (p *parser) file(kind, content string) error {
	var c struct {
		ImageKey string          `json:"image_key"`
		FileKey  string          `json:"file_key"`
		FileName string          `json:"file_name"`
		Duration json.RawMessage `json:"duration"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	name := clean(c.FileName)
	label := kind
	if kind == "media" {
		label = "video"
	}
	var parts []string
	if name != "" {
		parts = append(parts, name)
	}
	if d := duration(c.Duration); d != "" {
		parts = append(parts, d)
	}
	if kind == "image" {
		if c.ImageKey == "" {
			return errors.New(`no "image_key"`)
		}
		p.resource(Resource{Type: "image", Kind: kind, Key: c.ImageKey})
	} else {
		if c.FileKey == "" {
			return errors.New(`no "file_key"`)
		}
		p.resource(Resource{Type: "file", Kind: kind, Key: c.FileKey, Name: name})
	}
	if len(parts) > 0 {
		label += ": " + strings.Join(parts, ", ")
	}
	p.placeholder("[" + label + "]")
	return nil
}

// duration formats milliseconds as seconds ("1.5s", "30s").
func duration(raw json.RawMessage) string {
	s := strings.Trim(string(raw), `"`)
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return ""
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + "s"
}

func (p *parser) shareChat(content string) error {
	var c struct {
		ChatID string `json:"chat_id"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if c.ChatID == "" {
		return errors.New(`no "chat_id"`)
	}
	p.placeholder("[shared chat: " + clean(c.ChatID) + "]")
	return nil
}

func (p *parser) shareUser(content string) error {
	var c struct {
		UserID string `json:"user_id"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if c.UserID == "" {
		return errors.New(`no "user_id"`)
	}
	id := clean(c.UserID)
	label := "[shared contact: " + id + "]"
	if name := p.name(id, ""); name != id && len(name) <= p.budget {
		label = "[shared contact: " + name + " (" + id + ")]"
	}
	p.placeholder(label)
	return nil
}

func (p *parser) location(content string) error {
	var c struct {
		Name      string          `json:"name"`
		Latitude  json.RawMessage `json:"latitude"`
		Longitude json.RawMessage `json:"longitude"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	label := "[location"
	if c.Name != "" {
		label += ": " + clean(c.Name)
	}
	lat, lng := coordinate(c.Latitude), coordinate(c.Longitude)
	if lat != "" && lng != "" {
		label += " (" + lat + ", " + lng + ")"
	}
	p.placeholder(label + "]")
	return nil
}

// coordinate reads a latitude or longitude, a string or a number.
func coordinate(raw json.RawMessage) string {
	s := strings.Trim(string(raw), `"`)
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return ""
	}
	return s
}

// system fills a system message's template ("{from_user} invited
// {to_chatters} to the group") with its variables, lists joined by ", ".
func (p *parser) system(content string) error {
	var c map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	var tmpl string
	if err := json.Unmarshal(c["template"], &tmpl); err != nil || tmpl == "" {
		return errors.New(`no "template"`)
	}
	var b strings.Builder
	for tmpl != "" {
		i := strings.IndexByte(tmpl, '{')
		j := strings.IndexByte(tmpl[max(i, 0):], '}')
		if i < 0 || j < 0 {
			b.WriteString(tmpl)
			break
		}
		j += i
		b.WriteString(tmpl[:i])
		b.WriteString(variable(c[tmpl[i+1:j]]))
		tmpl = tmpl[j+1:]
	}
	p.write(strings.TrimSpace(b.String()))
	return nil
}

// variable is a system message's variable as text: a string, a list of
// strings, or (a divider's) {"i18n_text": {...}} / {"text": ...}.
func variable(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ", ")
	}
	var o struct {
		Text     string            `json:"text"`
		I18nText map[string]string `json:"i18n_text"`
	}
	if json.Unmarshal(raw, &o) == nil {
		if o.Text != "" {
			return o.Text
		}
		for _, loc := range locales {
			if t := o.I18nText[loc]; t != "" {
				return t
			}
		}
	}
	return ""
}

func (p *parser) calendar(kind, content string) error {
	var c struct {
		Summary   string `json:"summary"`
		StartTime string `json:"start_time"`
		EndTime   string `json:"end_time"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	label := "[calendar event"
	if c.Summary != "" {
		label += ": " + clean(c.Summary)
	}
	if s, e := millis(c.StartTime), millis(c.EndTime); s != "" {
		label += ", " + s
		if e != "" {
			label += " – " + e
		}
	}
	p.placeholder(label + "]")
	return nil
}

// millis reads Unix milliseconds as an RFC 3339 time in UTC.
func millis(s string) string {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 || ms > 1<<50 {
		return ""
	}
	return unixMilli(ms)
}

func (p *parser) vote(content string) error {
	var c struct {
		Topic   string   `json:"topic"`
		Options []string `json:"options"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	p.placeholder("[vote: " + clean(c.Topic) + "]")
	for _, o := range c.Options {
		p.text_.WriteString("\n- " + clean(o))
		p.md.WriteString("\n- " + escape(clean(o), false))
	}
	return nil
}

// todo converts a task: its summary is a post.
func (p *parser) todo(content string) error {
	var c struct {
		TaskID  string          `json:"task_id"`
		Summary json.RawMessage `json:"summary"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	p.placeholder("[task]")
	p.text_.WriteString("\n\n")
	p.md.WriteString("\n\n")
	if len(c.Summary) > 0 && !bytes.Equal(c.Summary, []byte("null")) {
		return p.post(string(c.Summary))
	}
	return nil
}

// unknown keeps content it cannot read: a note naming the type, and the
// content as a code block.
func (p *parser) unknown(messageType, content string) {
	p.text_.Reset()
	p.md.Reset()
	p.res.Resources = nil
	// the type came from outside: its word characters only, cut short
	name := strings.Map(func(r rune) rune {
		if r < 128 && (wordByte(byte(r)) || r == '_' || r == '-') {
			return r
		}
		return -1
	}, messageType)
	if len(name) > 64 {
		name = name[:64]
	}
	note := "[message of type " + name + "]"
	if name == "" {
		note = "[message of an unnamed type]"
	}
	p.write(note)
	p.text_.WriteString("\n" + clean(content))
	p.md.WriteString("\n\n" + fenced("json", clean(content)))
}

func (p *parser) videoChat(content string) error {
	var c struct {
		Topic     string `json:"topic"`
		StartTime string `json:"start_time"`
	}
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	label := "[video call"
	if c.Topic != "" {
		label += ": " + clean(c.Topic)
	}
	if s := millis(c.StartTime); s != "" {
		label += ", " + s
	}
	p.placeholder(label + "]")
	return nil
}
