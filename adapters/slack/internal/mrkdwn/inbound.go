package mrkdwn

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/monoco/courier/internal/mdsafe"
)

// Names resolves ids met in a message to display names; a nil func or ""
// answer leaves the id (or the label Slack sent with it).
type Names struct {
	User    func(id string) string // U.../W... → "Ann Lee"
	Channel func(id string) string // C.../G... → "general"
}

func (n Names) user(id, label string) string {
	if n.User != nil {
		if s := n.User(id); s != "" {
			return s
		}
	}
	if label != "" {
		return label
	}
	return id
}

func (n Names) channel(id, label string) string {
	if n.Channel != nil {
		if s := n.Channel(id); s != "" {
			return s
		}
	}
	if label != "" {
		return label
	}
	return id
}

// maxName bounds one resolved name (Slack's own are at most 80
// characters).
const maxName = 256

// bounded returns Names whose answers are cleaned (one line, valid UTF-8,
// at most maxName bytes) and, together, at most the size of the input plus
// 64 KiB: past that budget ids are left as they are. So the output stays
// within a small multiple of the input whatever the names, and a message of
// ten thousand mentions of a user with a long name cannot grow without
// bound.
func (n Names) bounded(inputLen int) Names {
	budget := inputLen + 64<<10
	used := 0
	wrap := func(f func(string) string) func(string) string {
		if f == nil {
			return nil
		}
		return func(id string) string {
			s := strings.Join(strings.Fields(strings.ToValidUTF8(f(id), "\uFFFD")), " ")
			if len(s) > maxName {
				cut := maxName
				for cut > 0 && !utf8.RuneStart(s[cut]) {
					cut--
				}
				s = s[:cut]
			}
			if used+len(s) > budget {
				return ""
			}
			used += len(s)
			return s
		}
	}
	return Names{User: wrap(n.User), Channel: wrap(n.Channel)}
}

// Slack escapes exactly these three in text (and only these), everywhere,
// code included. One pass, so "&amp;lt;" is the text "&lt;".
var unescaper = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">")

func unescape(s string) string { return unescaper.Replace(s) }

// ToMarkdown converts Slack mrkdwn (a message's "text") to CommonMark.
//
// Slack's line breaks are kept as line breaks of the source (a reader of
// the file sees them; a renderer joins them, as it does any paragraph).
// Lines Slack's clients write for lists ("• ", "◦ ", "1. ", four spaces a
// level) become Markdown lists, "&gt;" lines block quotes ("&gt;&gt;&gt;"
// quotes the rest of the message), ``` spans fenced code blocks.
func ToMarkdown(text string, n Names) string {
	return toMarkdown(text, n.bounded(len(text)))
}

func toMarkdown(text string, n Names) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	var w blockWriter
	w.b.Grow(len(text) + len(text)/8)
	splitUnits(text, func(u unit) {
		if u.pre {
			w.code(u.text, u.quoted)
		} else {
			w.line(u.text, u.quoted, n)
		}
	})
	return w.String()
}

// unit is a line of mrkdwn, or a ``` span, with whether Slack shows it
// quoted.
type unit struct {
	text   string
	pre    bool
	quoted bool
}

// splitUnits cuts mrkdwn into lines and ``` spans. A span may start or end
// in the middle of a line: what precedes and follows it on that line are
// lines of their own, since a fenced block cannot share a line in Markdown.
//
// Units are handed to emit one at a time, and every search is linear over
// the whole text (a fence found once is remembered, a fence never closed
// is not looked for again), so a 10 MB message of lines costs its size.
func splitUnits(text string, emit func(unit)) {
	fenceAt := -2 // the first ``` at or after the last search; -1: none left
	nextFence := func(from int) int {
		if fenceAt == -1 || fenceAt >= from {
			return fenceAt
		}
		if i := strings.Index(text[from:], "```"); i >= 0 {
			fenceAt = from + i
		} else {
			fenceAt = -1
		}
		return fenceAt
	}
	quoteRest := false
	lineStart := true
	quoted := false
	pos := 0
	for pos <= len(text) {
		if lineStart {
			lineStart = false
			if quoteRest {
				quoted = true
			} else {
				var n int
				n, quoted, quoteRest = quoteMark(text[pos:])
				pos += n
			}
		}
		rest := text[pos:]
		nl := strings.IndexByte(rest, '\n')
		fence := nextFence(pos)
		if fence >= 0 {
			fence -= pos
		}
		if fence >= 0 && (nl < 0 || fence < nl) {
			end := strings.Index(rest[fence+3:], "```")
			if end < 0 {
				fenceAt = -1 // no ``` after this one: none closes
			} else {
				pos += emitSpan(rest, fence, end, quoted, quoted && !quoteRest, emit)
				for pos < len(text) && text[pos] == ' ' {
					pos++
				}
				if strings.HasPrefix(text[pos:], "\n") {
					pos++
					lineStart = true
				} else if pos >= len(text) {
					break
				}
				continue
			}
		}
		if nl < 0 {
			emit(unit{text: rest, quoted: quoted})
			break
		}
		emit(unit{text: rest[:nl], quoted: quoted})
		pos += nl + 1
		lineStart = true
	}
}

// quoteMark reads the quote mark a line starts with, if any: it returns
// how many bytes the mark takes (with one space after it), whether the
// line is quoted and whether the mark quotes the rest of the message
// (">>>").
func quoteMark(line string) (n int, quoted, quoteRest bool) {
	var mark string
	switch {
	case strings.HasPrefix(line, "&gt;&gt;&gt;"):
		mark, quoteRest = "&gt;&gt;&gt;", true
	case strings.HasPrefix(line, ">>>"):
		// A raw ">" is never in text Slack stores (it escapes
		// them), but is what a poster writes: read it the same.
		mark, quoteRest = ">>>", true
	case strings.HasPrefix(line, ">"):
		mark = ">"
	case strings.HasPrefix(line, "&gt;"):
		mark = "&gt;"
	default:
		return 0, false, false
	}
	n = len(mark)
	if strings.HasPrefix(line[n:], " ") {
		n++
	}
	return n, true, quoteRest
}

// emitSpan emits a ``` span that opens fence bytes into rest and closes
// end bytes after its opening ```: first what precedes it on its line, as
// a line of its own, then its body as a code unit (with the quote marks of
// its lines taken off when unquote). It returns the bytes of rest up to the
// end of the closing ```.
func emitSpan(rest string, fence, end int, quoted, unquote bool, emit func(unit)) int {
	if before := strings.TrimRight(rest[:fence], " "); strings.TrimSpace(before) != "" {
		emit(unit{text: before, quoted: quoted})
	}
	body := rest[fence+3 : fence+3+end]
	if unquote {
		body = unquoteBody(body)
	}
	body = strings.TrimPrefix(body, "\n")
	body = strings.TrimSuffix(body, "\n")
	emit(unit{text: unescape(body), pre: true, quoted: quoted})
	return fence + 3 + end + 3
}

// unquoteBody takes the quote marks off the lines of a ``` span that
// started on a quoted line and goes on over lines each quoted again (a
// quoted code block), when every line after the first has one.
func unquoteBody(body string) string {
	lines := strings.Split(body, "\n")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "&gt;") && !strings.HasPrefix(l, ">") {
			return body
		}
	}
	for i, l := range lines[1:] {
		for _, p := range []string{"&gt; ", "&gt;", "> ", ">"} {
			if strings.HasPrefix(l, p) {
				lines[i+1] = l[len(p):]
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}

// blockWriter writes Markdown a block-level line at a time, adding the blank
// lines CommonMark needs so that structures end where Slack's end (a line
// after a list or a quote is not lazily swallowed by it) and the indentation
// that nests list items.
type blockWriter struct {
	b        strings.Builder
	lines    int
	prevKind int // kindNone, kindPara, kindList, kindCode, kindBlank
	prevQ    bool
	widths   []int // content indentation of the open list items, by level
}

const (
	kindNone = iota
	kindPara
	kindList
	kindCode
	kindBlank
)

func (w *blockWriter) String() string { return strings.TrimRight(w.b.String(), "\n") }

// emit writes one output line, quoted or not.
func (w *blockWriter) emit(s string, quoted bool) {
	if w.lines > 0 {
		w.b.WriteByte('\n')
	}
	w.lines++
	if quoted {
		if s == "" {
			w.b.WriteString(">")
			return
		}
		w.b.WriteString("> ")
	}
	w.b.WriteString(s)
}

// begin separates the next block from the previous one when CommonMark
// would otherwise join them.
func (w *blockWriter) begin(kind int, quoted bool) {
	if w.prevKind == kindNone {
		w.prevKind, w.prevQ = kind, quoted
		return
	}
	if w.prevQ && !quoted && w.prevKind != kindBlank {
		w.emit("", false)
	} else if w.prevQ == quoted && w.prevKind != kindBlank && kind != kindBlank && w.prevKind != kind && kind != kindCode && w.prevKind != kindCode {
		// a paragraph after a list, or a list after a paragraph
		w.emit("", quoted)
	}
	if kind != kindList {
		w.widths = w.widths[:0]
	}
	w.prevKind, w.prevQ = kind, quoted
}

func (w *blockWriter) line(s string, quoted bool, n Names) {
	if strings.TrimSpace(s) == "" {
		w.begin(kindBlank, quoted)
		w.widths = w.widths[:0]
		w.emit("", quoted)
		return
	}
	if level, marker, content, ok := listItem(s); ok {
		w.begin(kindList, quoted)
		w.item(level, marker, inlineText(content, n), quoted)
		return
	}
	if w.prevKind == kindList && w.prevQ == quoted && len(w.widths) > 0 && (s[0] == ' ' || s[0] == '\t') {
		// An indented line under a list item that is not an item ("    a.
		// nested", Slack's lettered sub-item): a line of that item, as
		// its indentation says, not the end of the list.
		indent := 0
		for _, x := range w.widths {
			indent += x
		}
		w.emit(strings.Repeat(" ", indent)+guardLineStart(inlineText(strings.TrimLeft(s, " \t"), n)), quoted)
		return
	}
	w.begin(kindPara, quoted)
	w.emit(guardLineStart(inlineText(s, n)), quoted)
}

// item writes a list item at a nesting level, indented under the open item
// of the level above (by that item's content width, which is what nests it
// in CommonMark). A level deeper than the open items is clamped, not
// invented.
func (w *blockWriter) item(level int, marker, content string, quoted bool) {
	if level > len(w.widths) {
		level = len(w.widths)
	}
	if level > maxDepth {
		level = maxDepth
	}
	indent := 0
	for _, x := range w.widths[:level] {
		indent += x
	}
	w.widths = append(w.widths[:level], len(marker)+1)
	pad := strings.Repeat(" ", indent)
	lines := strings.Split(guardLineStart(content), "\n")
	w.emit(pad+marker+" "+lines[0], quoted)
	for _, l := range lines[1:] {
		w.emit(pad+strings.Repeat(" ", len(marker)+1)+l, quoted)
	}
}

// code writes a fenced code block whose fence is longer than any run of
// backticks in the body, so no body closes it.
func (w *blockWriter) code(body string, quoted bool) {
	w.begin(kindCode, quoted)
	fence := mdsafe.Fence(body)
	w.emit(fence, quoted)
	if body != "" {
		for _, l := range strings.Split(body, "\n") {
			w.emit(l, quoted)
		}
	}
	w.emit(fence, quoted)
}

// listItem recognises the list lines Slack's clients write into a message's
// text: "• ", "◦ ", "▪ " (and "- ") bullets, "1. " numbers, nested by four
// spaces a level.
func listItem(s string) (level int, marker, content string, ok bool) {
	spaces := len(s) - len(strings.TrimLeft(s, " "))
	rest := s[spaces:]
	level = (spaces + 2) / 4
	for _, b := range []string{"• ", "◦ ", "▪ ", "▫ ", "‣ ", "- "} {
		if strings.HasPrefix(rest, b) {
			return level, "-", rest[len(b):], true
		}
	}
	digits := 0
	for digits < len(rest) && digits < 9 && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits > 0 && strings.HasPrefix(rest[digits:], ". ") {
		return level, rest[:digits+1], rest[digits+2:], true
	}
	return 0, "", "", false
}

// guardLineStart escapes what would make a paragraph line something else in
// CommonMark that it is not in Slack: a ">" (Slack's quotes were taken as
// "&gt;" already) and an indentation of four spaces (a code block).
func guardLineStart(s string) string {
	if strings.HasPrefix(s, ">") {
		return `\` + s
	}
	if strings.HasPrefix(s, "    ") || strings.HasPrefix(s, "\t") {
		// Indentation is the sender's; a non-breaking space keeps it
		// without making the line code.
		t := strings.TrimLeft(s, " \t")
		return strings.Repeat("\u00a0", min(len(s)-len(t), 16)) + t
	}
	return s
}

// item kinds of an inline line
const (
	itText = iota
	itMarker
	itAtom
)

type item struct {
	kind int
	s    string // raw text (itText), the marker (itMarker), Markdown (itAtom)
}

// maxFormatLine is the longest line whose *bold*, _italic_ and ~strike~
// are resolved (Slack's whole message is at most 40,000 characters).
// Resolving needs a few words of memory per marker; past this bound a line
// is written as it comes, its markers as text, so memory stays a small
// multiple of the line whatever it holds.
const maxFormatLine = 64 << 10

// inlineText converts one line of mrkdwn (no newline, no ```) to inline
// Markdown.
func inlineText(s string, n Names) string {
	if !strings.ContainsAny(s, "<`*_~") {
		// Nothing but text (most lines): no tokens to resolve.
		return escapeText(unescape(s))
	}
	var b strings.Builder
	if len(s) > maxFormatLine {
		b.Grow(len(s))
		tokenize(s, n, func(it item, at int) {
			switch it.kind {
			case itAtom:
				b.WriteString(it.s)
			case itText:
				b.WriteString(escapeText(unescape(it.s)))
			case itMarker:
				before, _ := utf8.DecodeLastRuneInString(s[:at])
				after, _ := utf8.DecodeRuneInString(s[at+1:])
				if it.s != "_" || !wordRune(before) || !wordRune(after) {
					b.WriteByte('\\')
				}
				b.WriteString(it.s)
			}
		})
		return b.String()
	}
	var items []item
	tokenize(s, n, func(it item, _ int) { items = append(items, it) })
	newEmphasis(items).render(&b, 0, len(items), 0)
	return b.String()
}

// tokenize cuts a line into text, markers and atoms (<...> sequences and
// code spans, converted), handing each to emit with its offset.
func tokenize(s string, n Names, emit func(it item, at int)) {
	start := 0
	flush := func(i int) {
		if i > start {
			emit(item{itText, s[start:i]}, start)
		}
	}
	// No ">" (or backtick) after here: a "<" (or "`") is text, without
	// another search to the end of the line.
	noClose, noTick := false, false
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '<':
			end := -1
			if !noClose {
				end = strings.IndexByte(s[i+1:], '>')
			}
			if end < 0 {
				noClose = true
				i++
				continue
			}
			flush(i)
			emit(item{itAtom, angle(s[i+1:i+1+end], n)}, i)
			i += end + 2
			start = i
		case '`':
			end := -1
			if !noTick {
				end = strings.IndexByte(s[i+1:], '`')
			}
			if end <= 0 {
				noTick = end < 0
				i++
				continue
			}
			flush(i)
			emit(item{itAtom, codeSpan(unescape(s[i+1 : i+1+end]))}, i)
			i += end + 2
			start = i
		case '*', '_', '~':
			flush(i)
			emit(item{itMarker, s[i : i+1]}, i)
			i++
			start = i
		default:
			i++
		}
	}
	flush(len(s))
}

// codeSpan writes s as a CommonMark code span: delimited by a backtick run
// that does not occur in s, padded when s starts or ends with a backtick or
// a space (CommonMark strips one space each side).
func codeSpan(s string) string {
	longest, run := 0, 0
	counts := map[int]bool{}
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] == '`' {
			run++
			continue
		}
		if run > 0 {
			counts[run] = true
			longest = max(longest, run)
		}
		run = 0
	}
	n := 1
	for counts[n] {
		n++
	}
	fence := strings.Repeat("`", n)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") ||
		(strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ") && strings.Trim(s, " ") != "") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// emphasis resolves Slack's *bold*, _italic_ and ~strike~ over a line's
// items. Slack formats only at word boundaries: an opening marker follows
// the line start, a space or punctuation and precedes a non-space; a closing
// one follows a non-space and precedes the line end, a space or
// punctuation. So snake_case_names and 2*3*4 stay text.
type emphasis struct {
	items []item
	// next[m][i] is the first valid closer of marker m at or after i, or -1:
	// precomputed so a line of a million openers without closers is linear.
	next [3][]int
}

func markerIndex(s string) int {
	switch s {
	case "*":
		return 0
	case "_":
		return 1
	}
	return 2
}

func newEmphasis(items []item) *emphasis {
	e := &emphasis{items: items}
	for m := range e.next {
		e.next[m] = make([]int, len(items)+1)
		e.next[m][len(items)] = -1
	}
	for i := len(items) - 1; i >= 0; i-- {
		for m := range e.next {
			e.next[m][i] = e.next[m][i+1]
		}
		if items[i].kind == itMarker && e.canClose(i) {
			e.next[markerIndex(items[i].s)][i] = i
		}
	}
	return e
}

// before and after give the rune next to item i on each side: utf8.RuneError
// at the line's ends, and '.' (punctuation) for an atom.
func (e *emphasis) before(i int) rune {
	if i == 0 {
		return utf8.RuneError
	}
	p := e.items[i-1]
	if p.kind == itAtom {
		return '.'
	}
	r, _ := utf8.DecodeLastRuneInString(p.s)
	return r
}

func (e *emphasis) after(i int) rune {
	if i+1 >= len(e.items) {
		return utf8.RuneError
	}
	p := e.items[i+1]
	if p.kind == itAtom {
		return '.'
	}
	r, _ := utf8.DecodeRuneInString(p.s)
	return r
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func (e *emphasis) canOpen(i int) bool {
	b, a := e.before(i), e.after(i)
	if i+1 >= len(e.items) || unicode.IsSpace(a) || string(a) == e.items[i].s {
		return false
	}
	return i == 0 || !wordRune(b)
}

func (e *emphasis) canClose(i int) bool {
	if i == 0 {
		return false
	}
	b, a := e.before(i), e.after(i)
	if unicode.IsSpace(b) || string(b) == e.items[i].s {
		return false
	}
	return i+1 >= len(e.items) || !wordRune(a)
}

var mdOpen = [3]string{"**", "*", "~~"}

const hexDigits = "0123456789ABCDEF"

// render writes items [lo, hi); mask holds the markers already open, so a
// span never nests in itself and the recursion is at most three deep.
func (e *emphasis) render(b *strings.Builder, lo, hi int, mask int) {
	for i := lo; i < hi; i++ {
		it := e.items[i]
		switch it.kind {
		case itAtom:
			b.WriteString(it.s)
		case itText:
			b.WriteString(escapeText(unescape(it.s)))
		case itMarker:
			m := markerIndex(it.s)
			if mask&(1<<m) == 0 && i+2 < hi && e.canOpen(i) {
				if j := e.next[m][i+2]; j >= 0 && j < hi {
					b.WriteString(mdOpen[m])
					e.render(b, i+1, j, mask|1<<m)
					b.WriteString(mdOpen[m])
					i = j
					continue
				}
			}
			if it.s == "_" && wordRune(e.before(i)) && wordRune(e.after(i)) {
				// snake_case: CommonMark does not read "_" inside a word
				// either, so it needs no escape.
				b.WriteString("_")
				continue
			}
			b.WriteString(`\` + it.s)
		}
	}
}

// escapeText escapes what CommonMark would read as markup in text a sender
// typed, so it renders as typed.
func escapeText(s string) string {
	if !strings.ContainsAny(s, "\\*_~`[]<&") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	mdsafe.EscapeText(&b, s, "")
	return b.String()
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// angle converts the inside of a <...> control sequence: a mention, a
// channel, a special command or a link.
func angle(content string, n Names) string {
	target, label, hasLabel := strings.Cut(content, "|")
	target, label = unescape(target), unescape(label)
	switch {
	case strings.HasPrefix(target, "@"):
		return "@" + escapeText(n.user(target[1:], label))
	case strings.HasPrefix(target, "#"):
		return "#" + escapeText(n.channel(target[1:], label))
	case strings.HasPrefix(target, "!"):
		cmd := target[1:]
		switch {
		case cmd == "here" || cmd == "channel" || cmd == "everyone":
			return "@" + cmd
		case strings.HasPrefix(cmd, "subteam^"):
			if label != "" {
				return escapeText(label)
			}
			return "@" + escapeText(strings.TrimPrefix(cmd, "subteam^"))
		case strings.HasPrefix(cmd, "date^"):
			if label != "" {
				return escapeText(label)
			}
			return escapeText(dateFallback(cmd))
		}
		if label != "" {
			return escapeText(label)
		}
		return escapeText(cmd)
	}
	if !hasLabel {
		label = ""
	}
	return link(target, label)
}

// dateFallback renders <!date^1392734382^...> without a fallback as the
// instant in UTC.
func dateFallback(cmd string) string {
	parts := strings.Split(cmd, "^")
	if len(parts) > 1 {
		if sec, err := strconv.ParseInt(parts[1], 10, 64); err == nil && sec > -1e11 && sec < 1e11 {
			return time.Unix(sec, 0).UTC().Format("2006-01-02 15:04 UTC")
		}
	}
	return cmd
}

// scheme returns the lower-cased scheme of a URL, "" without one.
func scheme(u string) string {
	i := strings.IndexByte(u, ':')
	if i <= 0 {
		return ""
	}
	for j := 0; j < i; j++ {
		c := u[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return ""
		}
	}
	return strings.ToLower(u[:i])
}

// link writes a link whose address arrived from outside. Only http, https
// and mailto become links; anything else (javascript:, data:, file:,
// slack://) stays visible text. A label is kept beside its address, never
// instead of it.
func link(url, label string) string {
	switch scheme(url) {
	case "http", "https":
		if label == "" || label == url {
			if autolinkable(url) {
				return "<" + url + ">"
			}
			return "[" + escapeText(url) + "](" + mdsafe.Destination(url) + ")"
		}
		return "[" + escapeText(label) + "](" + mdsafe.Destination(url) + ")"
	case "mailto":
		addr := url[len("mailto:"):]
		if label == "" || label == addr || label == url {
			return escapeText(addr)
		}
		return "[" + escapeText(label) + "](" + mdsafe.Destination(url) + ")"
	}
	if label == "" || label == url {
		return escapeText(url)
	}
	return escapeText(label + " (" + url + ")")
}

// autolinkable reports whether CommonMark reads <url> as an autolink of
// exactly url: no spaces, controls, "<" or ">".
func autolinkable(url string) bool {
	for _, r := range url {
		if r <= ' ' || r == '<' || r == '>' || r == 0x7f || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
