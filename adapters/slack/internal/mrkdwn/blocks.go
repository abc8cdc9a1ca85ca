package mrkdwn

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/monoco/courier/internal/mdsafe"
)

// maxDepth bounds every recursion over what arrives: list nesting and
// blocks within blocks. Slack's clients nest lists at most 8 deep; what is
// deeper is still written, as plain text, never lost.
const maxDepth = 32

// maxBlocks bounds the blocks converted with their structure: each level
// of nesting is decoded on its own (to bound the recursion), so memory is
// depth × size; 1 MiB × maxDepth stays small. Larger blocks are written as
// their words (flattenRaw), in one linear pass.
const maxBlocks = 1 << 20

// block is any Block Kit block or rich text element: the fields of every
// type we read, decoded lazily level by level (json.RawMessage) so that the
// depth we recurse to is ours to bound, not the payload's.
type block struct {
	Type        string              `json:"type"`
	Elements    []json.RawMessage   `json:"elements"`
	Text        json.RawMessage     `json:"text"` // a string in rich text, a text object in section/header
	Fields      []json.RawMessage   `json:"fields"`
	Rows        [][]json.RawMessage `json:"rows"`
	Style       json.RawMessage     `json:"style"` // "ordered"|"bullet" in a list, an object in an element
	Indent      int                 `json:"indent"`
	Offset      int                 `json:"offset"`
	URL         string              `json:"url"`
	UserID      string              `json:"user_id"`
	ChannelID   string              `json:"channel_id"`
	UsergroupID string              `json:"usergroup_id"`
	TeamID      string              `json:"team_id"`
	Range       string              `json:"range"`
	Name        string              `json:"name"`
	Unicode     string              `json:"unicode"`
	Timestamp   json.Number         `json:"timestamp"`
	Fallback    string              `json:"fallback"`
	Value       json.RawMessage     `json:"value"`
	AltText     string              `json:"alt_text"`
	ImageURL    string              `json:"image_url"`
}

type textStyle struct {
	Bold, Italic, Strike, Code bool
}

// str returns a raw JSON value as a string when it is one.
func str(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// BlocksToMarkdown converts a message's blocks: rich_text (sections, lists
// with their indent, style and offset, quotes, preformatted; text with its
// styles, links, mentions, broadcasts, emoji, dates), section, header,
// context, divider, image, markdown and table blocks. ok is false when the
// blocks hold nothing it can convert (then the caller uses the text).
//
// blocks is the message's "blocks" array; a single block object is taken as
// an array of one.
func BlocksToMarkdown(blocks json.RawMessage, n Names) (md string, ok bool) {
	blocks = bytes.TrimSpace(blocks)
	if len(blocks) > maxBlocks {
		// Far past what Slack sends (50 blocks of a few KB): the words,
		// without the structure, for a memory bound that holds.
		md = plainLines(flattenRaw(blocks))
		return md, strings.TrimSpace(md) != ""
	}
	var list []json.RawMessage
	switch {
	case len(blocks) == 0:
		return "", false
	case blocks[0] == '[':
		if err := json.Unmarshal(blocks, &list); err != nil {
			// Deeper than encoding/json goes, or broken: the words
			// that can be read, or nothing.
			md = plainLines(flattenRaw(blocks))
			return md, strings.TrimSpace(md) != ""
		}
	case blocks[0] == '{':
		list = []json.RawMessage{blocks}
	default:
		return "", false
	}
	n = n.bounded(len(blocks))
	var parts []string
	for _, raw := range list {
		if s := renderBlock(raw, n, 0); strings.TrimSpace(s) != "" {
			parts = append(parts, s)
		}
	}
	md = strings.ToValidUTF8(strings.Join(parts, "\n\n"), "\uFFFD")
	return md, md != ""
}

func renderBlock(raw json.RawMessage, n Names, depth int) string {
	if depth > maxDepth {
		return flatten(raw)
	}
	var b block
	if json.Unmarshal(raw, &b) != nil {
		return ""
	}
	switch b.Type {
	case "rich_text":
		return richText(b.Elements, n, depth+1)
	case "section":
		var parts []string
		if s := textObject(b.Text, n); s != "" {
			parts = append(parts, s)
		}
		for _, f := range b.Fields {
			if s := textObject(f, n); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "\n\n")
	case "header":
		s := strings.Join(strings.Fields(plainOf(b.Text)), " ")
		if s == "" {
			return ""
		}
		return "## " + escapeText(s)
	case "context":
		var parts []string
		for _, e := range b.Elements {
			if s := textObject(e, n); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " ")
	case "divider":
		return "---"
	case "image":
		alt := b.AltText
		if t := plainOf(b.Text); t != "" {
			alt = t
		}
		if b.ImageURL == "" {
			return escapeText(alt)
		}
		return link(b.ImageURL, alt)
	case "markdown":
		// Already Markdown (an app's "markdown" block), but an outsider's:
		// read and written again through the same rules as the rest, so
		// its links are as safe and its HTML is text.
		s, _ := str(b.Text)
		return toMarkdown(FromMarkdown(s), n)
	case "table":
		return table(b.Rows, n, depth+1)
	case "rich_text_section", "rich_text_list", "rich_text_quote", "rich_text_preformatted":
		// An element where a block was expected (a fragment): rendered as
		// the rich text it is.
		return richText([]json.RawMessage{raw}, n, depth+1)
	}
	return ""
}

// plainOf returns the text of a text object (or a bare string).
func plainOf(raw json.RawMessage) string {
	if s, ok := str(raw); ok {
		return s
	}
	var t struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &t)
	return t.Text
}

// textObject renders a composition text object: mrkdwn converted, plain
// text escaped. Image elements of a context block have no text and give "".
func textObject(raw json.RawMessage, n Names) string {
	var t struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &t) != nil || t.Text == "" {
		return ""
	}
	if t.Type == "mrkdwn" {
		return toMarkdown(t.Text, n)
	}
	if t.Type != "plain_text" {
		return ""
	}
	return plainLines(t.Text)
}

func plainLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = guardLineStart(escapeText(l))
	}
	return strings.Join(lines, "\n")
}

// richText renders the elements of a rich_text block: consecutive lists
// make one Markdown list (Slack splits a nested list into one
// rich_text_list per run of items at an indent), other elements are blocks
// of their own.
func richText(elements []json.RawMessage, n Names, depth int) string {
	var parts []string
	var lw *listWriter
	for _, raw := range elements {
		var e block
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		if e.Type == "rich_text_list" {
			if lw == nil {
				lw = &listWriter{}
			}
			lw.list(e, n, e.Indent, depth+1)
			continue
		}
		if lw != nil {
			parts = append(parts, lw.String())
			lw = nil
		}
		var s string
		switch e.Type {
		case "rich_text_section":
			s = paragraph(inline(e.Elements, n, depth+1))
		case "rich_text_quote":
			s = Quote(paragraph(inline(e.Elements, n, depth+1)))
		case "rich_text_preformatted":
			s = fenced(preText(e.Elements))
		default:
			s = renderBlock(raw, n, depth+1)
		}
		if strings.TrimSpace(s) != "" {
			parts = append(parts, s)
		}
	}
	if lw != nil {
		parts = append(parts, lw.String())
	}
	return strings.Join(parts, "\n\n")
}

// paragraph guards each line of inline Markdown and drops the trailing
// newlines Slack leaves at the end of a section.
func paragraph(s string) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = guardLineStart(l)
	}
	return strings.Join(lines, "\n")
}

// Quote makes Markdown s a block quote (its trailing line ends dropped).
func Quote(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + l
		}
	}
	return strings.Join(lines, "\n")
}

func fenced(body string) string {
	body = strings.TrimRight(body, "\n")
	fence := mdsafe.Fence(body)
	if body == "" {
		return fence + "\n" + fence
	}
	return fence + "\n" + body + "\n" + fence
}

// listWriter writes consecutive rich_text_list elements as one Markdown
// list, nesting each indent level under the last item of the level above.
type listWriter struct {
	b       strings.Builder
	widths  []int
	pending bool // the line holds an empty item's marker the next item follows
}

func (w *listWriter) String() string { return w.b.String() }

func (w *listWriter) list(e block, n Names, level int, depth int) {
	var style string
	json.Unmarshal(e.Style, &style)
	if depth > maxDepth {
		w.line(level, "-", escapeText(flattenElements(e.Elements)))
		return
	}
	num := max(e.Offset, 0)
	for _, raw := range e.Elements {
		var it block
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		if it.Type == "rich_text_list" {
			// A list as an item: nested under the item before it, or
			// under an empty one when it comes first.
			if level+1 > len(w.widths) {
				w.line(level, w.marker(style, &num), "")
				// "1. - hi": on the item's own line, since goldmark
				// does not nest a list under an empty "1." line.
				w.b.WriteByte(' ')
				w.pending = true
			}
			w.list(it, n, level+1, depth+1)
			continue
		}
		content := inline(it.Elements, n, depth+1)
		if it.Type == "rich_text_preformatted" {
			content = codeSpan(strings.ReplaceAll(preText(it.Elements), "\n", " "))
		}
		w.line(level, w.marker(style, &num), strings.TrimRight(content, "\n"))
	}
}

func (w *listWriter) marker(style string, num *int) string {
	if style == "ordered" {
		*num++
		return strconv.Itoa(*num) + "."
	}
	return "-"
}

func (w *listWriter) line(level int, marker, content string) {
	level = min(max(level, 0), len(w.widths), maxDepth)
	indent := 0
	for _, x := range w.widths[:level] {
		indent += x
	}
	w.widths = append(w.widths[:level], len(marker)+1)
	pad := strings.Repeat(" ", indent)
	if w.pending {
		w.pending = false
	} else {
		if w.b.Len() > 0 {
			w.b.WriteByte('\n')
		}
		w.b.WriteString(pad)
	}
	lines := strings.Split(content, "\n")
	w.b.WriteString(marker)
	if lines[0] != "" {
		w.b.WriteString(" " + guardLineStart(lines[0]))
	}
	for _, l := range lines[1:] {
		w.b.WriteString("\n")
		if l != "" {
			w.b.WriteString(pad + strings.Repeat(" ", len(marker)+1) + guardLineStart(l))
		}
	}
}

// inline renders rich text elements (text, link, user, channel, usergroup,
// broadcast, emoji, date, color, team) as inline Markdown. Runs of elements
// with the same style share one pair of delimiters: "**a****b**" is not
// what CommonMark reads as two bold words.
func inline(elements []json.RawMessage, n Names, depth int) string {
	var b strings.Builder
	var run strings.Builder
	var runStyle textStyle
	flush := func() {
		b.WriteString(styled(run.String(), runStyle))
		run.Reset()
	}
	for _, raw := range elements {
		var e block
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		var st textStyle
		if len(e.Style) > 0 && e.Style[0] == '{' {
			json.Unmarshal(e.Style, &st)
		}
		s := element(e, st, n, depth)
		st.Code = false
		if st != runStyle {
			flush()
			runStyle = st
		}
		run.WriteString(s)
	}
	flush()
	return b.String()
}

func element(e block, st textStyle, n Names, depth int) string {
	text, _ := str(e.Text)
	switch e.Type {
	case "text":
		if st.Code {
			return codeLines(text)
		}
		return escapeText(text)
	case "link":
		return link(e.URL, text)
	case "user":
		return "@" + escapeText(n.user(e.UserID, ""))
	case "channel":
		return "#" + escapeText(n.channel(e.ChannelID, ""))
	case "usergroup":
		return "@" + escapeText(e.UsergroupID)
	case "broadcast":
		return "@" + escapeText(e.Range)
	case "emoji":
		return emoji(e.Name, e.Unicode)
	case "date":
		if e.Fallback != "" {
			return escapeText(e.Fallback)
		}
		if sec, err := e.Timestamp.Int64(); err == nil && sec > -1e11 && sec < 1e11 {
			return time.Unix(sec, 0).UTC().Format("2006-01-02 15:04 UTC")
		}
		return escapeText(e.Timestamp.String())
	case "color":
		s, _ := str(e.Value)
		return escapeText(s)
	case "team":
		return escapeText(e.TeamID)
	case "rich_text_section", "rich_text_quote", "rich_text_preformatted", "rich_text_list":
		// Nested where Slack puts none: kept as text rather than lost.
		if depth > maxDepth {
			return escapeText(flattenElements(e.Elements))
		}
		return inline(e.Elements, n, depth+1)
	}
	return escapeText(text)
}

// codeLines writes text styled as code a line at a time: a code span
// cannot hold a line break.
func codeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = codeSpan(l)
		}
	}
	return strings.Join(lines, "\n")
}

// styled wraps inline Markdown in the delimiters of a style, a line at a
// time (emphasis cannot span a blank line) and inside the line's outer
// spaces (CommonMark does not open "** x" nor close "x **").
func styled(s string, st textStyle) string {
	if !st.Bold && !st.Italic && !st.Strike {
		return s
	}
	var open, close string
	if st.Strike {
		open, close = open+"~~", "~~"+close
	}
	if st.Bold {
		open, close = open+"**", "**"+close
	}
	if st.Italic {
		open, close = open+"*", "*"+close
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		lead := l[:strings.Index(l, t)]
		trail := l[len(lead)+len(t):]
		lines[i] = lead + open + t + close + trail
	}
	return strings.Join(lines, "\n")
}

// emoji writes an emoji as its characters when Slack gave their code points
// ("1f44d-1f3fb"), else as :name:.
func emoji(name, code string) string {
	if code != "" {
		var b strings.Builder
		ok := true
		for _, h := range strings.Split(code, "-") {
			r, err := strconv.ParseUint(h, 16, 32)
			if err != nil || !utf8.ValidRune(rune(r)) || r < 0x20 {
				ok = false
				break
			}
			b.WriteRune(rune(r))
		}
		if ok && b.Len() > 0 {
			return b.String()
		}
	}
	return escapeText(":" + name + ":")
}

// preText is the text of a rich_text_preformatted element as Slack shows
// it: raw, no Markdown.
func preText(elements []json.RawMessage) string {
	var b strings.Builder
	for _, raw := range elements {
		var e block
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		text, _ := str(e.Text)
		switch e.Type {
		case "link":
			if text != "" && text != e.URL {
				b.WriteString(text + " (" + e.URL + ")")
			} else {
				b.WriteString(e.URL)
			}
		case "user":
			b.WriteString("@" + e.UserID)
		case "channel":
			b.WriteString("#" + e.ChannelID)
		case "broadcast":
			b.WriteString("@" + e.Range)
		case "emoji":
			b.WriteString(emojiRaw(e.Name, e.Unicode))
		default:
			b.WriteString(text)
		}
	}
	return b.String()
}

func emojiRaw(name, code string) string {
	s := emoji(name, code)
	if strings.HasPrefix(s, ":") {
		return ":" + name + ":"
	}
	return s
}

// table renders a table block as a GFM table: the first row is the header,
// a missing or null cell is empty, "|" in a cell is escaped.
func table(rows [][]json.RawMessage, n Names, depth int) string {
	if len(rows) == 0 {
		return ""
	}
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	if cols == 0 {
		return ""
	}
	var b strings.Builder
	for i, r := range rows {
		b.WriteString("|")
		// Only the header is padded to the widest row (GFM takes the
		// columns from it); a short row is left short, so a million empty
		// rows under a wide one stay small.
		width := len(r)
		if i == 0 {
			width = cols
		}
		for c := 0; c < width; c++ {
			cell := ""
			if c < len(r) {
				cell = tableCell(r[c], n, depth)
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat(" --- |", cols) + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func tableCell(raw json.RawMessage, n Names, depth int) string {
	if string(raw) == "null" {
		return ""
	}
	var c block
	if json.Unmarshal(raw, &c) != nil {
		return ""
	}
	var s string
	switch c.Type {
	case "raw_text":
		t, _ := str(c.Text)
		s = escapeText(t)
	case "raw_number":
		s = escapeText(string(bytes.TrimSpace(c.Value)))
	case "rich_text":
		var parts []string
		for _, raw := range c.Elements {
			var e block
			if json.Unmarshal(raw, &e) != nil {
				continue
			}
			if depth > maxDepth {
				parts = append(parts, escapeText(flattenElements(e.Elements)))
				continue
			}
			parts = append(parts, inline(e.Elements, n, depth+1))
		}
		s = strings.Join(parts, " ")
	default:
		s = textObject(raw, n)
	}
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// flatten returns every "text" string in a JSON value, in order, joined by
// spaces: what is written of blocks nested deeper than maxDepth. It reads
// tokens, so the depth it handles is encoding/json's, without recursion.
func flatten(raw json.RawMessage) string {
	return escapeText(flattenRaw(raw))
}

func flattenElements(elements []json.RawMessage) string {
	var parts []string
	for _, e := range elements {
		if s := flattenRaw(e); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

func flattenRaw(raw json.RawMessage) string {
	// A lexer of strings and colons, not a parser: it needs no stack, so
	// no depth (not even past encoding/json's 10,000) stops it, and it
	// reads broken JSON as far as it goes.
	var parts []string
	var key string
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		end := i + 1
		for end < len(raw) && raw[end] != '"' {
			if raw[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(raw) {
			break
		}
		tok := raw[i : end+1]
		j := end + 1
		for j < len(raw) && (raw[j] == ' ' || raw[j] == '\n' || raw[j] == '\r' || raw[j] == '\t') {
			j++
		}
		if j < len(raw) && raw[j] == ':' {
			json.Unmarshal(tok, &key)
		} else if key == "text" || key == "url" {
			var v string
			if json.Unmarshal(tok, &v) == nil && strings.TrimSpace(v) != "" {
				parts = append(parts, strings.TrimSpace(v))
			}
			key = ""
		} else {
			key = ""
		}
		i = end
	}
	return strings.Join(parts, " ")
}
