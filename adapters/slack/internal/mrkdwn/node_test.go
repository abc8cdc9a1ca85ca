package mrkdwn_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"golang.org/x/net/html"

	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
)

// TestNodeReference checks FromMarkdown against two implementations we did
// not write, from npm (testdata/npm; install with
// `npm ci --prefix adapters/slack/internal/mrkdwn/testdata/npm`):
//
//   - slack-markdown, a parser of Slack's mrkdwn, reads the mrkdwn we write
//     and must find in it the structures goldmark finds in the draft
//     (bold, italics, strike, links and where they go, code, quotes);
//   - slackify-markdown, the most used Markdown → mrkdwn converter, gives
//     mrkdwn that slack-markdown must read as it reads ours, but for the
//     differences we chose (referenceDiffers says which and why).
//
// Skipped without node or the packages.
func TestNodeReference(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, _ := filepath.Abs(filepath.Join("testdata", "npm"))
	for _, p := range []string{"slack-markdown", "slackify-markdown"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			t.Skipf("%s is not installed: npm ci --prefix %s", p, dir)
		}
	}
	type pair struct {
		MD   string `json:"md"`
		Ours string `json:"ours"`
	}
	var in []pair
	for _, md := range referenceInputs {
		in = append(in, pair{md, mrkdwn.FromMarkdown(md)})
	}
	data, _ := json.Marshal(in)
	cmd := exec.Command(node, filepath.Join(dir, "compare.mjs"))
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var res []struct {
		Ref      string `json:"ref"`
		OursHTML string `json:"oursHTML"`
		RefHTML  string `json:"refHTML"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(in) {
		t.Fatalf("node answered %d results for %d inputs: %v", len(res), len(in), err)
	}
	gm := goldmark.New(goldmark.WithExtensions(extension.Strikethrough, extension.Linkify))
	for i, r := range res {
		md := in[i].MD
		var want bytes.Buffer
		if err := gm.Convert([]byte(md), &want); err != nil {
			t.Fatal(err)
		}
		ours := htmlOutline(t, r.OursHTML, true)
		if w := htmlOutline(t, want.String(), false); ours != w && draftDiffers[md] == "" {
			t.Errorf("slack-markdown reads our mrkdwn of %q (%q) as\n %s\nwhere goldmark reads the draft as\n %s", md, in[i].Ours, ours, w)
		}
		ref := htmlOutline(t, r.RefHTML, true)
		if why, ok := referenceDiffers[md]; ok {
			if ours == ref {
				t.Errorf("%q: listed as differing from slackify-markdown (%s), but agrees now", md, why)
			}
			continue
		}
		if ours != ref {
			t.Errorf("%q: ours %q reads as\n %s\nslackify-markdown's %q as\n %s", md, in[i].Ours, ours, r.Ref, ref)
		}
	}
}

var referenceInputs = []string{
	"**bold** and *em* and _em_ and ~~struck~~",
	"***both*** at once",
	"foo**bar**baz",
	"snake_case_names stay",
	"[a link](https://example.com/path?a=1&b=2) and more",
	"<https://example.com/auto>",
	"see https://example.com/bare for it",
	"[**bold label**](https://example.com)",
	"`code with *stars* & <tags>` here",
	"```js\nconst a = b < c && d > e;\n```",
	"> a quote\n> of two lines",
	"# A heading\n\nand a paragraph",
	"- one\n- two\n  - nested",
	"1. first\n2. second",
	"a & b < c > d",
	"line one  \nline two",
	"[click](javascript:alert(1))",
	"![an image](https://example.com/i.png)",
}

// referenceDiffers lists where our mrkdwn means something else than
// slackify-markdown's, on purpose.
var referenceDiffers = map[string]string{
	// slackify-markdown drops a link to a scheme it does not allow and
	// keeps the label alone; we keep the address visible beside it, as
	// text, so the reader sees what the draft pointed to.
	"[click](javascript:alert(1))": "unsafe links keep their address as text",
	// slackify-markdown writes <url|url> for a bare or automatic link,
	// and slack-markdown links the label again inside the link; we write
	// <url>, which Slack shows as the same link.
	"<https://example.com/auto>":          "<url> for <url|url>",
	"see https://example.com/bare for it": "<url> for <url|url>",
	// slackify-markdown leaves the backslash of a hard line break in the
	// text ("line one\\\nline two"); we write the line break alone.
	"line one  \nline two": "hard break without a backslash",
}

// draftDiffers lists where slack-markdown reading our mrkdwn sees another
// structure than goldmark's HTML of the draft, on purpose.
var draftDiffers = map[string]string{
	// goldmark keeps the link and blanks its unsafe href; we write the
	// label and the address as text.
	"[click](javascript:alert(1))": "unsafe links are text",
	// Slack shows no image inline: the image becomes a link to it.
	"![an image](https://example.com/i.png)": "images are links",
}

// A link whose whole label is bold is a bold link: one meaning, whether
// written <a><strong> or <strong><a>.
var styledLink = regexp.MustCompile(`a\[([^\]]*)\]\( (strong|em|del)\( ("(?:[^"\\]|\\.)*") \) \)`)

var listMarkerStart = regexp.MustCompile(`^\s*(?:[•◦▪]|\d{1,9}\.)\s+`)

// htmlOutline reduces HTML to what a reader of a message sees as structure:
// strong (b, and headings, which Slack has not), em, del, links with their
// targets, code spans, code blocks and quotes, around text with its spaces
// collapsed and list bullets or numbers dropped (slack-markdown has no
// lists; both sides write them as lines). slack says the text holds Slack's
// entities still (slack-markdown does not decode them).
func htmlOutline(t *testing.T, h string, slack bool) string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(h))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var text strings.Builder
	flush := func() {
		s := strings.Join(strings.Fields(strings.ReplaceAll(text.String(), "\u200b", "")), " ")
		text.Reset()
		if s != "" {
			b.WriteString(`"` + s + `" `)
		}
	}
	var walk func(n *html.Node, inPre bool)
	walk = func(n *html.Node, inPre bool) {
		switch n.Type {
		case html.TextNode:
			s := n.Data
			if slack {
				s = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
			}
			if !inPre {
				s = listMarkerStart.ReplaceAllString(s, "")
			}
			text.WriteString(s)
			return
		case html.ElementNode:
			name := ""
			switch n.Data {
			case "strong", "b", "h1", "h2", "h3", "h4", "h5", "h6":
				name = "strong"
			case "em", "i":
				name = "em"
			case "del", "s", "strike":
				name = "del"
			case "a":
				for _, a := range n.Attr {
					if a.Key == "href" {
						name = "a[" + a.Val + "]"
					}
				}
			case "code":
				if !inPre {
					name = "cs"
				}
			case "pre":
				name = "pre"
				inPre = true
			case "blockquote":
				name = "quote"
			case "br", "p", "li", "ul", "ol", "div":
				text.WriteByte(' ')
			}
			if name != "" {
				flush()
				b.WriteString(name + "( ")
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					walk(c, inPre)
				}
				flush()
				b.WriteString(") ")
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inPre)
		}
	}
	walk(doc, false)
	flush()
	return styledLink.ReplaceAllString(strings.TrimSpace(b.String()), "$2( a[$1]( $3 ) )")
}
