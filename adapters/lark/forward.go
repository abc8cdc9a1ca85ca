package lark

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/lark/internal/content"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/mdsafe"
	"github.com/monoco/courier/schema"
)

// merge_forward: the event says only that messages were forwarded; the
// messages themselves are read from im/v1/messages/{id}, which answers
// the merge_forward and its children (upper_message_id = their upper
// message, every level), and shown as an email forward is: a title, then
// each message's sender and time, then its content.

const (
	// maxForwarded bounds the forwarded messages shown, every level
	// together: Lark lets a forward hold hundreds.
	maxForwarded = 50
	// maxForwardDepth bounds the forwards within forwards shown.
	maxForwardDepth = 4
	// maxForwardResources bounds the files fetched for the forwarded
	// messages of one message.
	maxForwardResources = 20
)

// forwardTitle opens the forwarded messages, as a mail reader opens a
// forward.
const forwardTitle = "---------- Forwarded messages ----------"

// mergeForward fetches the forwarded messages of merge_forward message id
// and puts them into r (Text and Markdown) and msg (their files, stored
// in batch). A failure Lark will answer the same way again leaves the
// placeholder and a note in extra["merge_forward"]; the error it returns is
// one worth retrying (Lark redelivers the event), except on the
// catch-up's last try at the message (lastTry), which notes what still
// fails.
func (a *Adapter) mergeForward(ctx context.Context, id string, msg *schema.Message, r *content.Result, extra map[string]any, batch *dropzone.Batch, lastTry bool) error {
	var data struct {
		Items []histItem `json:"items"`
	}
	err := a.apiGet(ctx, "/open-apis/im/v1/messages/"+url.PathEscape(id)+"?user_id_type=open_id", &data)
	var ae *apiError
	switch {
	case err == nil:
	case errors.As(err, &ae) && !retryable(ae):
		extra["merge_forward"] = clip(fmt.Sprintf("the forwarded messages could not be read (code %d: %s)", ae.Code, schema.CleanText(ae.Msg)), 500)
		a.log.Warn("lark: forwarded messages not read; the message is written without them", "message_id", id, "code", ae.Code)
		return nil
	case strings.Contains(err.Error(), "data not as documented"):
		extra["merge_forward"] = "the forwarded messages could not be read: Lark's answer is not as documented"
		return nil
	case givesUp(ctx, lastTry):
		extra["merge_forward"] = "the forwarded messages could not be read after the catch-up's tries: " + clip(schema.CleanText(a.redact(err.Error())), 300)
		a.log.Warn("lark: forwarded messages not read after the catch-up's tries; the message is written without them", "message_id", id, "error", err)
		return nil
	default:
		return adapters.Temporary(fmt.Errorf("lark: the forwarded messages of %s: %w", id, err))
	}
	kids := map[string][]*histItem{}
	for i := range data.Items {
		it := &data.Items[i]
		if it.UpperMessageID != "" && it.MessageID != id {
			kids[it.UpperMessageID] = append(kids[it.UpperMessageID], it)
		}
	}
	f := &forwardRender{a: a, ctx: ctx, top: id, kids: kids, batch: batch, lastTry: lastTry}
	if err := f.level(id, 0); err != nil {
		return err
	}
	if f.shown == 0 {
		extra["merge_forward"] = "Lark answered no forwarded message"
		return nil
	}
	if f.left > 0 {
		extra["merge_forward"] = fmt.Sprintf("%d forwarded messages not shown: at most %d are", f.left, maxForwarded)
	}
	r.Text = strings.TrimRight(f.text.String(), "\n")
	r.Markdown = strings.TrimRight(f.md.String(), "\n")
	msg.Artifacts = append(msg.Artifacts, f.arts...)
	noteResources(extra, f.notes)
	return nil
}

// forwardRender writes the forwarded messages, depth first.
type forwardRender struct {
	a        *Adapter
	ctx      context.Context
	top      string // the merge_forward's message_id
	kids     map[string][]*histItem
	batch    *dropzone.Batch
	lastTry  bool // the catch-up's last try: a file that still fails is noted
	text, md strings.Builder
	arts     []schema.Artifact
	notes    []resourceNote
	shown    int // messages shown
	left     int // messages not shown past maxForwarded
	files    int // resources fetched or tried
	lookups  int // names looked up
}

// put writes s to b, each line quoted.
func put(b *strings.Builder, quote, s string) {
	for _, l := range strings.Split(s, "\n") {
		b.WriteString(strings.TrimRight(quote+l, " ") + "\n")
	}
}

// level writes the title and the children of upper, quoted once per
// level below the first.
func (f *forwardRender) level(upper string, depth int) error {
	quote := strings.Repeat("> ", depth)
	put(&f.text, quote, forwardTitle)
	// As it is in Markdown too: dashes then words are no thematic break,
	// no list item and (after a blank line) no heading underline.
	put(&f.md, quote, forwardTitle)
	for _, it := range f.kids[upper] {
		if f.shown >= maxForwarded {
			f.left++
			continue
		}
		f.shown++
		name := f.sender(it)
		ht, hm := []string{"From: " + name}, []string{"From: " + mdsafe.EscapeLine(name)}
		if at, ok := millis(it.CreateTime); ok {
			when := "Date: " + at.Format("2006-01-02 15:04:05 UTC")
			ht, hm = append(ht, when), append(hm, when)
		}
		// A blank line, the header (hard breaks in Markdown), a blank
		// line, the content.
		put(&f.text, quote, "\n"+strings.Join(ht, "\n")+"\n")
		put(&f.md, quote, "\n"+strings.Join(hm, "\\\n")+"\n")
		switch {
		case it.Deleted:
			put(&f.text, quote, "[recalled]")
			put(&f.md, quote, "\\[recalled\\]")
		case it.MsgType == "merge_forward" && depth+1 < maxForwardDepth && len(f.kids[it.MessageID]) > 0:
			if err := f.level(it.MessageID, depth+1); err != nil {
				return err
			}
		default:
			if err := f.content(it, quote); err != nil {
				return err
			}
		}
	}
	return nil
}

// content writes one forwarded message's content and fetches its files.
func (f *forwardRender) content(it *histItem, quote string) error {
	var ms []content.Mention
	for _, x := range it.Mentions {
		ms = append(ms, content.Mention{Key: x.Key, ID: x.ID, Name: x.Name})
	}
	raw := it.Body.Content
	if len(raw) > maxContent {
		raw = ""
	}
	// A content that is not what its type says comes back as a code
	// block of the raw content: shown, not dropped.
	res, _ := content.Parse(it.MsgType, raw, ms, content.Names{User: f.name})
	put(&f.text, quote, strings.TrimRight(schema.CleanText(res.Text), "\n"))
	put(&f.md, quote, strings.TrimRight(schema.CleanText(res.Markdown), "\n"))
	rs := res.Resources
	if n := maxForwardResources - f.files; len(rs) > max(n, 0) {
		for _, x := range rs[max(n, 0):] {
			f.notes = append(f.notes, resourceNote{Key: clip(x.Key, 200), Kind: x.Kind,
				Reason: fmt.Sprintf("at most %d files of forwarded messages are fetched", maxForwardResources)})
		}
		rs = rs[:max(n, 0)]
	}
	if len(rs) == 0 {
		return nil
	}
	f.files += len(rs)
	for _, x := range rs {
		// Lark serves a forwarded message's file under the merge_forward's
		// message_id (under the child's own it answers 234003, File not in
		// msg, as reported from live use); the child's is tried second.
		art, err := f.a.fetchResource(f.ctx, f.top, x, f.batch)
		var s *errSkip
		if errors.As(err, &s) && it.MessageID != "" && it.MessageID != f.top {
			art, err = f.a.fetchResource(f.ctx, it.MessageID, x, f.batch)
		}
		if err != nil && !errors.As(err, &s) && givesUp(f.ctx, f.lastTry) {
			s = &errSkip{reason: "still failing after the catch-up's tries: " + clip(f.a.redact(err.Error()), 300)}
			err = s
		}
		switch {
		case errors.As(err, &s):
			f.notes = append(f.notes, resourceNote{Key: clip(x.Key, 200), Kind: x.Kind, Reason: s.reason})
			f.a.log.Warn("lark: resource of a forwarded message not stored; the message is written without it", "message_id", f.top, "key", clip(x.Key, 200), "reason", s.reason)
		case err != nil:
			return adapters.Temporary(err)
		default:
			f.arts = append(f.arts, art)
		}
	}
	return nil
}

// sender names a forwarded message's sender: the user's name when Lark
// gives it, else the id.
func (f *forwardRender) sender(it *histItem) string {
	id := schema.CleanText(clip(strings.TrimSpace(it.Sender.ID), 128))
	if id == "" {
		return "(unknown sender)"
	}
	if idKey(it.Sender.IDType, id) == "open_id" {
		if n := strings.TrimSpace(schema.CleanText(f.name(id))); n != "" {
			return strings.ReplaceAll(n, "\n", " ")
		}
	}
	return id
}

// name looks a user's name up, maxLookups times at most for one message
// (the names are cached across messages).
func (f *forwardRender) name(id string) string {
	if f.lookups >= maxLookups {
		return ""
	}
	f.lookups++
	return f.a.userName(f.ctx, id)
}
