package content_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters/lark/internal/content"
	"github.com/monoco/courier/internal/testutil"
)

// The conformance table: the corpus's normaliser cases from other projects
// (larksuite/node-sdk's channel/normalize tests, openclaw-lark's post
// tests), recorded as each call's inputs and each expect()'s expected
// value. Each project writes its own format (node-sdk: XML-ish tags such
// as <file key="f1" name="doc.pdf"/>); ours is Markdown. So a case is
// checked for the same information, not the same bytes: the expected
// words appear in our output in the same order, its links are our links,
// its resource keys our Resources, its mentions our Mentions.

type refFile struct {
	Source struct{ Repo, Path string }
	Cases  []refCase
}

type refCase struct {
	Test         string
	Calls        []refCall
	Expectations []refExpect
}

type refCall struct {
	CallID   string            `json:"call_id"`
	Function string            `json:"function"`
	Args     []json.RawMessage `json:"args"`
	Sub      json.RawMessage   `json:"fetchSubMessages_returns"`
}

type refExpect struct {
	Actual struct {
		Ref string `json:"$ref"`
	}
	Matcher  string
	Expected []json.RawMessage
}

// converters maps node-sdk's converters to the message_type they convert.
var converters = map[string]string{
	"convertText": "text", "convertImage": "image", "convertFile": "file", "convertAudio": "audio",
	"convertVideo": "media", "convertSticker": "sticker", "convertLocation": "location",
	"convertShareChat": "share_chat", "convertShareUser": "share_user", "convertPost": "post",
	"convertUnknown": "something_new", "convertMergeForward": "merge_forward",
}

// differs lists the expectations where a reference project deliberately
// does what DESIGN and issue 11 say not to, and why; each is checked for
// what we do instead.
var differs = map[string]string{
	// node-sdk drops what it cannot read to a fixed placeholder; we keep
	// the raw content as a code block (issue 11: "unknown types kept with
	// their raw content, never dropped"), with an ErrMalformed for a
	// known type.
	"fallback (unknown) > otherwise returns [unsupported message]": "raw kept",
	"fallback (unknown) > handles bad JSON":                        "raw kept",
	"post converter > malformed post falls back to placeholder":    "raw kept",
	"normalize() end-to-end > unparseable content falls back":      "raw kept",
	// node-sdk's converter leaves a post's @ as the placeholder key for a
	// later pass to resolve (its normalize() then gives "@Bob"); Parse
	// resolves it itself, so the mailbox gets the name.
	"post converter > at element uses placeholder key when reverse lookup hits": "name resolved",
	// The sender of each forwarded message is named by the adapter, which
	// fetches them; Parse sees only their content.
	"convertMergeForward > displays resolved user name when resolver is available": "adapter's",
}

// node-sdk also strips the bot's own @ ("@_bot help me" → "help me");
// Parse keeps it (who was addressed is part of the message, and Parse is
// not told the bot's id). Those cases are checked like the others: their
// words still appear, in order.

// notContent names the fields the reference normalisers set that are the
// adapter's, not content's (ids, thread fields, the bot's own identity,
// which Parse is not told), or a forward's layout, which the adapter
// writes.
var notContent = regexp.MustCompile(`^(messageId|chatId|chatType|senderId|senderName|rootId|replyToMessageId|threadId|raw|rawContentType|mentionedBot|mentionList\.0\.isBot|content\.indexOf.*|content\.match.*)$`)

func TestConformance(t *testing.T) {
	dir := filepath.Join(testutil.CorpusDir(t), "chat", "lark", "normalizer-reference-cases")
	files, _ := filepath.Glob(filepath.Join(dir, "*.cases.json"))
	if len(files) < 6 {
		t.Fatalf("%d case files in %s", len(files), dir)
	}
	checked, skipped := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf refFile
		if err := json.Unmarshal(data, &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.HasPrefix(filepath.Base(f), "event-normalizers") {
			// Card actions, reactions, bot-added and comment events: no
			// message content, the adapter's events.
			skipped += len(rf.Cases)
			continue
		}
		for _, c := range rf.Cases {
			results := map[string]content.Result{}
			for _, call := range c.Calls {
				r, ok := ours(t, call)
				if ok {
					results[call.CallID] = r
				}
			}
			for _, e := range c.Expectations {
				id, path, _ := strings.Cut(e.Actual.Ref, ".")
				r, ok := results[id]
				switch {
				case !ok:
					t.Errorf("%s: no result for %s", c.Test, id)
					continue
				case notContent.MatchString(path) || e.Matcher == "toMatch":
					skipped++
					continue
				case differs[c.Test] != "":
					checkDiffers(t, c, differs[c.Test], r)
					checked++
					continue
				}
				if msg := check(r, path, e); msg != "" {
					t.Errorf("%s (%s):\n %s %s %s\n %s\n text %q\n markdown %q\n resources %+v mentions %+v",
						c.Test, filepath.Base(f), path, e.Matcher, e.Expected, msg, r.Text, r.Markdown, r.Resources, r.Mentions)
				}
				checked++
			}
		}
	}
	if checked < 60 {
		t.Errorf("only %d expectations checked", checked)
	}
	t.Logf("%d expectations checked, %d not content", checked, skipped)
}

// ours runs the call's input through Parse.
func ours(t *testing.T, call refCall) (content.Result, bool) {
	t.Helper()
	str := func(i int) string {
		var s string
		if i < len(call.Args) {
			json.Unmarshal(call.Args[i], &s)
		}
		return s
	}
	var opts struct {
		Mentions         refMap `json:"mentions"`
		MentionsByOpenID refMap `json:"mentionsByOpenId"`
	}
	if len(call.Args) > 1 {
		json.Unmarshal(call.Args[1], &opts)
	}
	mentions := append(opts.Mentions.list(), opts.MentionsByOpenID.list()...)
	parse := func(typ, c string, m []content.Mention) content.Result {
		r, _ := content.Parse(typ, c, m, content.Names{})
		return r
	}
	switch fn := call.Function; {
	case fn == "convertMergeForward" && len(call.Sub) > 0:
		// The adapter fetches a forward's messages and converts each: here,
		// each is converted and their texts joined.
		var sub map[string][]struct {
			MsgType string `json:"msg_type"`
			Body    struct{ Content string }
		}
		r := content.Result{}
		if json.Unmarshal(call.Sub, &sub) == nil {
			for _, m := range sub["om_root"] {
				if m.MsgType == "merge_forward" {
					continue
				}
				one := parse(m.MsgType, m.Body.Content, nil)
				r.Text += one.Text + "\n"
				r.Markdown += one.Markdown + "\n\n"
			}
		}
		if r.Text == "" {
			r = parse("merge_forward", str(0), nil)
		}
		return r, true
	case converters[fn] != "":
		return parse(converters[fn], str(0), mentions), true
	case fn == "normalize":
		var ev struct {
			Message struct {
				MessageType string `json:"message_type"`
				Content     string `json:"content"`
				Mentions    []struct {
					Key string
					ID  struct {
						OpenID string `json:"open_id"`
					} `json:"id"`
					Name string
				}
			}
		}
		json.Unmarshal(call.Args[0], &ev)
		var m []content.Mention
		for _, x := range ev.Message.Mentions {
			m = append(m, content.Mention{Key: x.Key, ID: x.ID.OpenID, Name: x.Name})
		}
		return parse(ev.Message.MessageType, ev.Message.Content, m), true
	case fn == "resolveMentions":
		c, _ := json.Marshal(map[string]string{"text": str(0)})
		return parse("text", string(c), mentions), true
	case fn == "extractMentions":
		var list []struct {
			Key string
			ID  struct {
				OpenID string `json:"open_id"`
			} `json:"id"`
			Name string
		}
		json.Unmarshal(call.Args[0], &list)
		var m []content.Mention
		for _, x := range list {
			m = append(m, content.Mention{Key: x.Key, ID: x.ID.OpenID, Name: x.Name})
		}
		return parse("text", `{"text":""}`, m), true
	}
	t.Errorf("no mapping for %s", call.Function)
	return content.Result{}, false
}

// refMap is a recorded JS Map: {"$map": [[key, value], ...]}.
type refMap struct {
	Map [][2]json.RawMessage `json:"$map"`
}

func (m refMap) list() []content.Mention {
	var out []content.Mention
	for _, kv := range m.Map {
		var v struct{ Key, OpenID, Name string }
		json.Unmarshal(kv[1], &v)
		out = append(out, content.Mention{Key: v.Key, ID: v.OpenID, Name: v.Name})
	}
	return out
}

// people returns the mentions that are not @all.
func people(r content.Result) []content.Mention {
	var out []content.Mention
	for _, m := range r.Mentions {
		if m.ID != content.AllID {
			out = append(out, m)
		}
	}
	return out
}

// check returns what is wrong with r for one expectation, or "".
func check(r content.Result, path string, e refExpect) string {
	var want any
	if len(e.Expected) > 0 {
		json.Unmarshal(e.Expected[0], &want)
	}
	switch path {
	case "content", "":
		s, _ := want.(string)
		if e.Matcher == "not.toContain" {
			if strings.Contains(r.Text, s) || strings.Contains(r.Markdown, s) {
				return "contains it"
			}
			return ""
		}
		return sameInformation(r, s)
	case "resources":
		var list []struct{ Type, FileKey string }
		json.Unmarshal(e.Expected[0], &list)
		if e.Matcher == "toContainEqual" {
			var one struct{ Type, FileKey string }
			json.Unmarshal(e.Expected[0], &one)
			list = []struct{ Type, FileKey string }{one}
			for _, have := range r.Resources {
				if have.Type == one.Type && have.Key == one.FileKey {
					return ""
				}
			}
			return "no such resource"
		}
		if len(list) != len(r.Resources) {
			return fmt.Sprintf("%d resources, want %d", len(r.Resources), len(list))
		}
		for i, w := range list {
			if r.Resources[i].Type != w.Type || r.Resources[i].Key != w.FileKey {
				return fmt.Sprintf("resource %d differs", i)
			}
		}
	case "resources.0.fileName":
		if len(r.Resources) == 0 || r.Resources[0].Name != want {
			return "no such file name"
		}
	case "resources.0.durationMs":
		ms, _ := want.(float64)
		secs := strconv.FormatFloat(ms/1000, 'f', -1, 64) + "s"
		if !strings.Contains(r.Text, secs) {
			return "the text does not give the duration " + secs
		}
	case "mentionAll", `mentions.has("@_all")`:
		if r.MentionsAll() != want {
			return fmt.Sprintf("MentionsAll %v", r.MentionsAll())
		}
	case "mentions", "mentionList":
		n := 0
		if l, ok := want.([]any); ok {
			n = len(l)
		} else if f, ok := want.(float64); ok {
			n = int(f)
		}
		if len(people(r)) != n {
			return fmt.Sprintf("%d mentions of people, want %d", len(people(r)), n)
		}
	case "mentions.0.openId":
		if p := people(r); len(p) == 0 || p[0].ID != want {
			return "first mention differs"
		}
	case "mentionList.0":
		var w struct{ Key, OpenID, Name string }
		json.Unmarshal(e.Expected[0], &w)
		if p := people(r); len(p) == 0 || p[0] != (content.Mention{Key: w.Key, ID: w.OpenID, Name: w.Name}) {
			return "first mention differs"
		}
	default:
		if id, ok := strings.CutPrefix(path, `mentionsByOpenId.get("`); ok {
			id = strings.TrimSuffix(id, `")`)
			if !slices.ContainsFunc(r.Mentions, func(m content.Mention) bool { return m.ID == id }) {
				return "no mention of " + id
			}
			return ""
		}
		return "no check for " + path
	}
	return ""
}

var (
	xmlTag  = regexp.MustCompile(`</?[a-z_]+((?:\s+[a-z]+="[^"]*")*)\s*/?>`)
	xmlAttr = regexp.MustCompile(`([a-z]+)="([^"]*)"`)
)

// sameInformation reports what of the reference's output s is missing
// from r: its words in order, its links, its resource keys.
func sameInformation(r content.Result, s string) string {
	var wantWords, wantKeys []string
	// node-sdk's tags: key= is a resource, coords= two numbers, the
	// other attributes' values are words.
	for _, m := range xmlTag.FindAllStringSubmatch(s, -1) {
		for _, a := range xmlAttr.FindAllStringSubmatch(m[1], -1) {
			switch a[1] {
			case "key":
				wantKeys = append(wantKeys, a[2])
			case "coords":
				v := strings.NewReplacer("lat:", " ", "lng:", " ", ",", " ").Replace(a[2])
				wantWords = append(wantWords, words(v)...)
			default:
				wantWords = append(wantWords, words(a[2])...)
			}
		}
	}
	s = xmlTag.ReplaceAllString(s, " ")
	// Markdown: images are resources, links links, the rest words.
	for _, l := range links(s) {
		if key, ok := strings.CutPrefix(l, "image:"); ok {
			wantKeys = append(wantKeys, key)
		} else if !slices.Contains(links(r.Markdown), l) {
			return "no link to " + l
		}
	}
	wantWords = append(wantWords, words(plain(s))...)
	for _, k := range wantKeys {
		if !slices.ContainsFunc(r.Resources, func(x content.Resource) bool { return x.Key == k }) {
			return "no resource " + k
		}
	}
	got := words(plain(r.Markdown))
	if !subsequence(wantWords, got) {
		return fmt.Sprintf("words %q are not in order in %q", wantWords, got)
	}
	// the plain text says the same
	if !subsequence(wantWords, words(r.Text)) {
		return fmt.Sprintf("words %q are not in order in the text %q", wantWords, r.Text)
	}
	return ""
}

// subsequence reports whether want appears in got in order.
func subsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// checkDiffers checks what we do where a reference project differs.
func checkDiffers(t *testing.T, c refCase, why string, r content.Result) {
	t.Helper()
	switch why {
	case "raw kept":
		var in string
		for _, call := range c.Calls {
			if len(call.Args) > 0 {
				if json.Unmarshal(call.Args[0], &in) != nil {
					var ev struct{ Message struct{ Content string } }
					json.Unmarshal(call.Args[0], &ev)
					in = ev.Message.Content
				}
			}
		}
		blocks := 0
		find(r.Markdown, kindFenced, func(n astNode, src []byte) {
			if lines(n, src) == in+"\n" {
				blocks++
			}
		})
		if blocks != 1 {
			t.Errorf("%s: %q does not keep %q as a code block", c.Test, r.Markdown, in)
		}
	case "name resolved":
		if !strings.Contains(r.Text, "@Alice") || strings.Contains(r.Text, "@_user_1") {
			t.Errorf("%s: %q, want @Alice", c.Test, r.Text)
		}
	case "adapter's":
		if !strings.Contains(r.Text, "hi") {
			t.Errorf("%s: %q lost the forwarded text", c.Test, r.Text)
		}
	default:
		t.Fatalf("%s: no check for %q", c.Test, why)
	}
}

// TestCorpusEvents converts the message of every receive event in the
// corpus: no error, and every placeholder its mentions name resolved.
func TestCorpusEvents(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testutil.CorpusDir(t), "chat", "lark", "events", "im.message.receive_v1.*.json"))
	if len(files) == 0 {
		t.Fatal("no receive events in the corpus")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Event *struct {
				Message json.RawMessage
			}
			Message json.RawMessage // go-lark's body-only sample
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		raw := ev.Message
		if ev.Event != nil {
			raw = ev.Event.Message
		}
		var m struct {
			MessageType string `json:"message_type"`
			Content     string
			Mentions    []struct {
				Key string
				ID  struct {
					OpenID string `json:"open_id"`
				} `json:"id"`
				Name string
			}
		}
		json.Unmarshal(raw, &m)
		var mentions []content.Mention
		for _, x := range m.Mentions {
			mentions = append(mentions, content.Mention{Key: x.Key, ID: x.ID.OpenID, Name: x.Name})
		}
		r, err := content.Parse(m.MessageType, m.Content, mentions, content.Names{})
		if err != nil || r.Text == "" || strings.Contains(r.Text, "@_user_") {
			t.Errorf("%s: %q, %v", filepath.Base(f), r.Text, err)
		}
		for _, x := range mentions {
			// (Lark's own sample lists a mention its text does not carry.)
			if strings.Contains(m.Content, x.Key) && !strings.Contains(r.Text, "@"+x.Name) {
				t.Errorf("%s: %q does not name %s", filepath.Base(f), r.Text, x.Name)
			}
		}
		t.Logf("%s: %q", filepath.Base(f), r.Text)
	}
}
