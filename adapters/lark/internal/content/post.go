package content

import (
	"encoding/json"

	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/yuin/goldmark/text"

	"github.com/monoco/courier/internal/mdsafe"
)

func unixMilli(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// locales are tried in this order for a post (and a system message's
// i18n text): Lark's default first, then the other languages it names.
var locales = []string{"zh_cn", "en_us", "ja_jp", "zh_hk", "zh_tw"}

// postBody is one locale of a post. content_v2, when Lark sends it, is
// the richer form of content (openclaw-lark prefers it).
type postBody struct {
	Title     string          `json:"title"`
	Content   json.RawMessage `json:"content"`
	ContentV2 json.RawMessage `json:"content_v2"`
}

// element is one inline element of a post line.
type element struct {
	Tag       string   `json:"tag"`
	Text      string   `json:"text"`
	Href      string   `json:"href"`
	UserID    string   `json:"user_id"`
	UserName  string   `json:"user_name"`
	ImageKey  string   `json:"image_key"`
	FileKey   string   `json:"file_key"`
	EmojiType string   `json:"emoji_type"`
	Language  string   `json:"language"`
	Style     []string `json:"style"`
}

// lines returns the lines of a body: content_v2 when it is a non-empty
// array of lines, else content.
func (b postBody) lines() ([][]element, bool) {
	for _, raw := range []json.RawMessage{b.ContentV2, b.Content} {
		var lines [][]element
		if len(raw) > 0 && json.Unmarshal(raw, &lines) == nil && len(lines) > 0 {
			return lines, true
		}
	}
	var lines [][]element
	if json.Unmarshal(b.Content, &lines) == nil {
		return nil, true // an empty post
	}
	return nil, false
}

// post converts rich text: the flat {"title","content"} the receive event
// sends, or the locale-keyed {"zh_cn": {"title","content"}} the send API
// takes (and older events carry). Each line of the post is a line of the
// Markdown; an empty line ends a paragraph.
func (p *parser) post(content string) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &top); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	var body postBody
	_, hasContent := top["content"]
	_, hasV2 := top["content_v2"]
	switch {
	case hasContent || hasV2:
		if err := json.Unmarshal([]byte(content), &body); err != nil {
			return fmt.Errorf("not a post: %v", err)
		}
	default:
		found := false
		for _, loc := range locales {
			if raw, ok := top[loc]; ok && json.Unmarshal(raw, &body) == nil {
				found = true
				break
			}
		}
		if !found {
			// a locale not in the list: the first that reads as a body
			keys := sortedKeys(top)
			for _, k := range keys {
				var b postBody
				if json.Unmarshal(top[k], &b) == nil && (len(b.Content) > 0 || len(b.ContentV2) > 0) {
					body, found = b, true
					break
				}
			}
		}
		if !found {
			return errors.New("no content in any locale")
		}
	}
	lines, ok := body.lines()
	if !ok {
		return errors.New(`"content" is not a list of lines`)
	}
	if t := strings.TrimSpace(clean(body.Title)); t != "" {
		p.text_.WriteString(t + "\n\n")
		p.md.WriteString(strong(escape(t, false)) + "\n\n")
	}
	p.lines(lines)
	return nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// deterministic, whatever the map's order
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// lines writes a post's lines. A block element (code_block, hr) stands
// alone as a Markdown block; text lines are lines of a paragraph, and an
// empty line starts the next paragraph.
func (p *parser) lines(lines [][]element) {
	inPara := false // the Markdown ends inside a paragraph
	for _, line := range lines {
		if blank(line) {
			inPara = false
			continue
		}
		for _, e := range line {
			switch e.Tag {
			case "code_block":
				p.blockBreak()
				p.text_.WriteString(clean(e.Text))
				p.md.WriteString(fenced(e.Language, clean(e.Text)))
				inPara = false
				continue
			case "md":
				// Markdown Lark writes itself (content_v2) or a sender put in
				// an md tag: read as a draft is, into post elements, so only
				// what a post can say, and safe links, come through.
				p.blockBreak()
				p.lines(markdownLines(e.Text))
				p.blockBreak()
				inPara = false
				continue
			case "hr":
				p.blockBreak()
				p.text_.WriteString("---")
				p.md.WriteString("---")
				inPara = false
				continue
			}
			if !inPara {
				p.blockBreak()
				inPara = true
			}
			p.inline(e)
		}
		if inPara {
			p.md.WriteString("\n")
			p.text_.WriteString("\n")
		}
	}
}

// blockBreak ends what was written with one empty line, so that what
// follows is a new block.
func (p *parser) blockBreak() {
	for _, b := range []*strings.Builder{&p.md, &p.text_} {
		if b.Len() == 0 {
			continue
		}
		s := b.String()
		switch {
		case strings.HasSuffix(s, "\n\n"):
		case strings.HasSuffix(s, "\n"):
			b.WriteString("\n")
		default:
			b.WriteString("\n\n")
		}
	}
}

// blank reports whether a line shows nothing.
func blank(line []element) bool {
	for _, e := range line {
		if e.Tag != "text" || strings.TrimSpace(e.Text) != "" {
			return false
		}
	}
	return true
}

// inline writes one inline element of a post line.
func (p *parser) inline(e element) {
	start := p.atLineStart()
	text := clean(strings.ReplaceAll(e.Text, "\n", " "))
	var plain, md string
	switch e.Tag {
	case "text":
		if e.Tag == "text" {
			// a text element may carry placeholders too (a post's @all)
			text = p.resolve(text)
		}
		plain, md = text, escape(text, start)
	case "a":
		href := clean(strings.TrimSpace(e.Href))
		plain = text
		if text == "" {
			plain = href
		} else if text != href && href != "" {
			plain = text + " (" + href + ")"
		}
		md = link(href, text, start)
	case "at":
		var m Mention
		if known, ok := p.mention(e.UserID); ok {
			m = known
		} else {
			m = p.addMention(Mention{ID: clean(e.UserID), Name: clean(e.UserName)})
		}
		id := m.ID
		if len(id) > maxName {
			id = id[:maxName]
		}
		plain = p.at(m, "@"+id)
		md = escape(plain, start)
	case "img":
		p.resource(Resource{Type: "image", Kind: "image", Key: e.ImageKey})
		plain = "[image]"
		md = escape(plain, start)
	case "media":
		p.resource(Resource{Type: "file", Kind: "media", Key: e.FileKey})
		plain = "[video]"
		md = escape(plain, start)
	case "emotion":
		plain = ":" + clean(e.EmojiType) + ":"
		md = escape(plain, start)
	default:
		// a tag Lark adds later: its text, if it has any
		plain, md = text, escape(text, start)
	}
	if md == "" {
		return
	}
	p.text_.WriteString(plain)
	p.md.WriteString(styled(md, e.Style))
}

// styled wraps md in the Markdown of a post's styles. Underline has none in
// CommonMark: it is written as <u>, which renderers that allow HTML show
// and others print as it is.
func styled(md string, style []string) string {
	if len(style) == 0 || strings.TrimSpace(md) == "" {
		return md
	}
	// Emphasis cannot open after or close before a space: the spaces go
	// outside the markers.
	core := strings.TrimSpace(md)
	i := strings.Index(md, core)
	lead, trail := md[:i], md[i+len(core):]
	for _, s := range style {
		switch s {
		case "bold":
			core = strong(core)
		case "italic":
			core = "*" + core + "*"
		case "lineThrough":
			core = "~~" + core + "~~"
		case "underline":
			core = "<u>" + core + "</u>"
		}
	}
	return lead + core + trail
}

func strong(md string) string { return "**" + md + "**" }

// markdownLines converts the Markdown of an md tag to post lines.
func markdownLines(md string) [][]element {
	md = strings.ToValidUTF8(md, "\uFFFD")
	if len(md) > maxDraft {
		md = md[:maxDraft]
	}
	w := &postWriter{src: []byte(mdsafe.Guard(md))}
	w.blocks(mdParser.Parse(text.NewReader(w.src)), "", 0)
	w.flush()
	out := make([][]element, len(w.lines))
	for i, l := range w.lines {
		for _, e := range l {
			out[i] = append(out[i], element{Tag: e.Tag, Text: e.Text, Href: e.Href, UserID: e.UserID, Language: e.Language, Style: e.Style})
		}
	}
	return out
}
