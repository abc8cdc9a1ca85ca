package slack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/adapters/internal/chatmsg"
	"github.com/monoco/courier/adapters/slack/internal/mrkdwn"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// maxPostRunes is the most text one post carries. Slack asks for at most
// 4,000 characters in the text field: past that it may break a message
// into several itself (and answer one ts), and past 40,000 it truncates
// (docs.slack.dev chat.postMessage; api.slack.com changelog
// 2018-04-truncating-really-long-messages). A longer draft is posted as
// several messages, in order, where Courier chose to cut.
const maxPostRunes = 4000

// maxFilesPerShare is the most files one files.completeUploadExternal
// shares: Slack shows at most 10 files in a message.
const maxFilesPerShare = 10

// outbound sets the provider's Sender, which posts with the bot token.
func (a *Adapter) outbound(p *adapters.Provider) {
	if a.cfg.BotToken.Reveal() == "" {
		p.Waiting = "slack: no bot_token, so drafts wait (courier.adapters.slack.bot_token)"
		return
	}
	p.Sender = &sender{a: a}
}

// sender is the Slack Sender. A draft is one or more steps, each shown in
// Slack once done: the posts of its text (one per maxPostRunes) and the
// shares of its files (maxFilesPerShare at a time). Every step done is
// reported to the engine as an accepted "recipient" (a RecipientResult
// whose address names the step: "C024BE91L text 2/3"), through a
// PartialError when a later step fails, so that the next attempt does
// only the steps left and no part is posted twice (chatsync.Poster). A crash while the
// steps run re-posts those of that attempt: the engine's commit gate lets
// one draft at a time past the first post, so a crash duplicates the
// steps of at most one draft.
type sender struct {
	a *Adapter
}

var _ adapters.Sender = (*sender)(nil)

// step is one thing a draft shows in Slack.
type step struct {
	label string // "text 1/2", "files 1-3/3": unique within the draft
	text  string // a post, or
	files []int  // the indexes of the artifacts one share shows
}

// Send implements adapters.Sender: the steps are posted by
// chatsync.Poster, each once across attempts.
func (s *sender) Send(ctx context.Context, at *adapters.Attempt) (adapters.Receipt, error) {
	d := at.Draft
	if err := checkDraft(d); err != nil {
		return adapters.Receipt{}, adapters.Permanent(err)
	}
	text, mrkdwn, err := draftText(d)
	if err != nil {
		return adapters.Receipt{}, adapters.Permanent(err)
	}
	steps := plan(text, mrkdwn, len(d.Artifacts))
	if len(steps) == 0 {
		return adapters.Receipt{}, adapters.Permanent(errors.New("slack: the draft has no text and no attachment, and Slack posts no empty message"))
	}
	channel, err := s.conversation(ctx, d.To)
	if err != nil {
		return adapters.Receipt{}, err
	}
	thread := string(d.ThreadKey)
	todo := make([]chatsync.Step, len(steps))
	for n, st := range steps {
		todo[n] = chatsync.Step{Label: st.label, Post: func(ctx context.Context) (string, error) {
			return s.post(ctx, d, channel, thread, st.text, mrkdwn, n+1, len(steps))
		}}
		if st.files == nil {
			continue
		}
		// Files are uploaded before anything is posted: an upload that
		// is not completed shows nowhere.
		var uploaded []slackapi.FileSummary
		todo[n].Upload = func(ctx context.Context) error {
			for _, i := range st.files {
				f, err := s.upload(ctx, i, d.Artifacts[i])
				if err != nil {
					return err
				}
				uploaded = append(uploaded, f)
			}
			return nil
		}
		todo[n].Post = func(ctx context.Context) (string, error) { return s.share(ctx, channel, thread, uploaded) }
	}
	posted, err := chatsync.Poster{Name: "slack", Log: s.a.log,
		Unrecorded: "slack: could not record a step posted; a crash now would post it again"}.Post(ctx, at, channel, todo)
	if err != nil {
		return adapters.Receipt{}, err
	}
	s.a.health.Event()

	// The message's id is its first post's ts: a reply to it keeps the
	// draft's correlation id, and its echo is known as ours. A draft of
	// files alone has no ts (completeUploadExternal answers file ids).
	first := posted.Replies[0]
	r := adapters.Receipt{ProviderMessageID: first, Channel: channel, Recipients: posted.Results}
	if steps[0].files == nil {
		r.InboundID = threading.SlackID(channel, first)
	} else if i := strings.IndexByte(first, ','); i >= 0 {
		r.ProviderMessageID = first[:i]
	}
	return r, nil
}

// checkDraft refuses what a draft may hold that Slack cannot take. A draft
// in outbound/ need not come from `courier send` (whoever can write the
// folder can drop one there), so its fields are checked again here.
func checkDraft(d *schema.Draft) error {
	switch {
	case len(d.To) == 0:
		return errors.New("slack: the draft has no recipient (to)")
	case len(d.Cc) > 0 || len(d.Bcc) > 0:
		return errors.New("slack: the draft has cc or bcc, which Slack has not: put the conversation in to")
	}
	if err := checkTo(d.To); err != nil {
		return fmt.Errorf("slack: to: %w", err)
	}
	if d.ThreadKey != "" && !tsRE.MatchString(string(d.ThreadKey)) {
		return fmt.Errorf("slack: thread_key %q is not a Slack thread_ts (like 1355517523.000005)", d.ThreadKey)
	}
	return nil
}

// draftText returns the text to post and whether it is mrkdwn: Markdown
// is converted to mrkdwn; plain text is escaped and posted with mrkdwn
// off, so that its * and _ stay as typed.
func draftText(d *schema.Draft) (string, bool, error) {
	if d.EffectiveType() == schema.DraftCard {
		return "", false, errors.New("slack: card drafts are not supported: send markdown or text")
	}
	words, plain, err := chatmsg.DraftWords(d)
	switch {
	case err != nil:
		return "", false, fmt.Errorf("slack: %w", err)
	case plain:
		return slackutilsx.EscapeMessage(words), false, nil
	}
	return toMrkdwn(words), true, nil
}

// toMrkdwn converts a draft's Markdown to Slack mrkdwn (escaping what
// Slack reads as markup).
func toMrkdwn(md string) string { return mrkdwn.FromMarkdown(md) }

// plan cuts a draft into its steps: the posts of its text, then the shares
// of its files.
func plan(text string, mrkdwn bool, files int) []step {
	var steps []step
	if strings.TrimSpace(text) != "" {
		parts := split(text, maxPostRunes, mrkdwn)
		for i, p := range parts {
			steps = append(steps, step{label: fmt.Sprintf("text %d/%d", i+1, len(parts)), text: p})
		}
	}
	for i := 0; i < files; i += maxFilesPerShare {
		j := min(i+maxFilesPerShare, files)
		st := step{label: fmt.Sprintf("files %d-%d/%d", i+1, j, files)}
		for k := i; k < j; k++ {
			st.files = append(st.files, k)
		}
		steps = append(steps, st)
	}
	return steps
}

// split cuts s into pieces of at most max runes, at a paragraph break,
// else a line break, else a space, in the second half of a piece; else
// at max. A cut never falls inside a <link|label>, and, in mrkdwn, a
// code block cut in two is closed and opened again, so that each post
// reads right alone.
func split(s string, max int, mrkdwn bool) []string {
	const fence = "```"
	var out []string
	reopen := ""
	for strings.TrimSpace(s) != "" {
		s = reopen + s
		reopen = ""
		if utf8.RuneCountInString(s) <= max {
			out = append(out, strings.TrimRight(s, " \n"))
			break
		}
		cut := runeOffset(s, max-len("\n"+fence))
		head := s[:cut]
		switch {
		case strings.LastIndex(head, "\n\n") > cut/2:
			cut = strings.LastIndex(head, "\n\n") + 2
		case strings.LastIndexByte(head, '\n') > cut/2:
			cut = strings.LastIndexByte(head, '\n') + 1
		case strings.LastIndexByte(head, ' ') > cut/2:
			cut = strings.LastIndexByte(head, ' ') + 1
		}
		if lt := strings.LastIndexByte(s[:cut], '<'); lt > strings.LastIndexByte(s[:cut], '>') && lt > cut/2 {
			cut = lt // not inside <url|label>, <@U…>, <#C…>
		}
		chunk := strings.TrimRight(s[:cut], " \n")
		if mrkdwn && strings.Count(chunk, fence)%2 == 1 {
			chunk += "\n" + fence
			reopen = fence + "\n"
		}
		if strings.TrimSpace(chunk) != "" {
			out = append(out, chunk)
		}
		s = strings.TrimLeft(s[cut:], "\n")
	}
	return out
}

// runeOffset is the byte offset of the n-th rune of s (len(s) if fewer).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// conversation is the channel a draft goes to: its channel, or the DM (a
// group DM for several users) that conversations.open opens, or finds
// open, with its users.
func (s *sender) conversation(ctx context.Context, to schema.Recipients) (string, error) {
	if len(to) == 1 && !isUser(to[0]) {
		return to[0], nil
	}
	ch, _, _, err := s.a.api.OpenConversationContext(ctx, &slackapi.OpenConversationParameters{Users: to})
	if err != nil {
		return "", s.classify("conversations.open", err)
	}
	if ch == nil || !ids.MatchString(ch.ID) {
		return "", adapters.Temporary(fmt.Errorf("slack: conversations.open for %s answered no conversation id", strings.Join(to, ",")))
	}
	return ch.ID, nil
}

// post posts one piece of text and returns its ts. The metadata tags it
// as the part of a draft, so that a post seen again (history, an echo)
// can be told for ours.
func (s *sender) post(ctx context.Context, d *schema.Draft, channel, thread, text string, mrkdwn bool, part, parts int) (string, error) {
	opts := []slackapi.MsgOption{
		slackapi.MsgOptionText(text, false), // escaped already
		slackapi.MsgOptionMetadata(slackapi.SlackMetadata{EventType: "courier_draft", EventPayload: map[string]any{
			"draft_id": d.ID, "idempotency_key": d.IdempotencyKey, "part": part, "parts": parts}}),
	}
	if !mrkdwn {
		opts = append(opts, slackapi.MsgOptionDisableMarkdown())
	}
	if thread != "" {
		opts = append(opts, slackapi.MsgOptionTS(thread))
	}
	ch, ts, msg, err := s.a.api.PostMessageWithResponseContext(ctx, channel, opts...)
	if err != nil {
		return "", s.classify("chat.postMessage", err)
	}
	if !tsRE.MatchString(ts) {
		// Posted, but with no ts to record: retrying would post it again.
		return "", adapters.Permanent(fmt.Errorf("slack: chat.postMessage to %s answered ok with ts %q, which is not a Slack ts", channel, ts))
	}
	if ch != "" && ch != channel {
		s.a.log.Warn("slack: posted in another channel than asked", "asked", channel, "posted", ch, "ts", ts)
	}
	if thread != "" && msg.ThreadTimestamp == "" && msg.Timestamp != "" {
		// Slack posts a reply whose parent is gone as a new message.
		s.a.log.Warn("slack: the reply was posted outside its thread (its parent was deleted?)", "channel", channel, "thread_ts", thread, "ts", ts, "draft", d.ID)
	}
	return ts, nil
}

// upload sends one artifact to Slack, streamed from the dropzone, without
// sharing it anywhere yet: files.getUploadURLExternal, then the bytes to
// the URL it gave. The bytes are checked against the artifact's id on the
// way: a damaged object is never shared.
func (s *sender) upload(ctx context.Context, i int, art schema.DraftArtifact) (slackapi.FileSummary, error) {
	name := dropzone.SanitizeName(art.Name)
	if s.a.dz == nil {
		return slackapi.FileSummary{}, adapters.Permanent(errors.New("slack: no dropzone to read attachments from"))
	}
	want, err := dropzone.ParseID(art.ID)
	if err != nil {
		return slackapi.FileSummary{}, adapters.Permanent(fmt.Errorf("slack: artifacts[%d] (%s): %w", i, name, err))
	}
	f, err := s.a.dz.Open(art.ID)
	if err != nil {
		return slackapi.FileSummary{}, adapters.Permanent(fmt.Errorf("slack: artifacts[%d] (%s, %s): %w", i, name, art.ID, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return slackapi.FileSummary{}, adapters.Temporary(fmt.Errorf("slack: artifacts[%d] (%s): %w", i, name, err))
	}
	size := fi.Size()
	switch max := s.a.limits.MaxArtifactBytes; {
	case size == 0:
		return slackapi.FileSummary{}, adapters.Permanent(fmt.Errorf("slack: artifacts[%d] (%s) is empty, and Slack takes no empty file", i, name))
	case max > 0 && size > max:
		return slackapi.FileSummary{}, adapters.Permanent(fmt.Errorf("slack: artifacts[%d] (%s) is %d bytes, over the limit of %d (courier.limits.max_artifact_bytes)", i, name, size, max))
	}
	u, err := s.a.api.GetUploadURLExternalContext(ctx, slackapi.GetUploadURLExternalParameters{FileName: name, FileSize: int(size)})
	if err != nil {
		return slackapi.FileSummary{}, s.classify("files.getUploadURLExternal", err)
	}
	h := sha256.New()
	cr := &countReader{r: io.TeeReader(io.LimitReader(f, size), h)}
	if err := s.a.api.UploadToURL(ctx, slackapi.UploadToURLParameters{UploadURL: u.UploadURL, Reader: cr, Filename: name}); err != nil {
		return slackapi.FileSummary{}, s.classify("file upload", err)
	}
	if cr.n != size {
		return slackapi.FileSummary{}, adapters.Temporary(fmt.Errorf("slack: artifacts[%d] (%s): read %d of its %d bytes", i, name, cr.n, size))
	}
	if hex.EncodeToString(h.Sum(nil)) != want {
		return slackapi.FileSummary{}, adapters.Permanent(fmt.Errorf("slack: artifacts[%d] (%s): the dropzone's copy is damaged (its content is not %s); not shared", i, name, art.ID))
	}
	return slackapi.FileSummary{ID: u.FileID, Title: name}, nil
}

// share shows uploaded files in the channel and thread
// (files.completeUploadExternal) and returns their ids, comma-separated.
func (s *sender) share(ctx context.Context, channel, thread string, files []slackapi.FileSummary) (string, error) {
	r, err := s.a.api.CompleteUploadExternalContext(ctx, slackapi.CompleteUploadExternalParameters{Files: files, Channel: channel, ThreadTimestamp: thread})
	if err != nil {
		return "", s.classify("files.completeUploadExternal", err)
	}
	ids := make([]string, 0, len(files))
	for _, f := range files {
		ids = append(ids, f.ID)
	}
	if len(r.Files) != len(files) {
		s.a.log.Warn("slack: files.completeUploadExternal answered another number of files", "sent", len(files), "answered", len(r.Files), "channel", channel)
	}
	return strings.Join(ids, ","), nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// permanentCodes are the errors Slack answers that a retry answers again:
// the draft, the token or the app must change first. Any other code is
// temporary (internal_error, fatal_error, service_unavailable,
// request_timeout, ratelimited, and codes Slack adds later): the engine
// retries, and gives up after its attempts.
var permanentCodes = map[string]bool{
	"channel_not_found": true, "not_in_channel": true, "is_archived": true, "invalid_auth": true,
	"not_authed": true, "token_revoked": true, "token_expired": true, "account_inactive": true,
	"msg_too_long": true, "no_text": true, "restricted_action": true, "restricted_action_read_only_channel": true,
	"restricted_action_thread_only_channel": true, "restricted_action_non_threadable_channel": true,
	"missing_scope": true, "not_allowed_token_type": true, "no_permission": true, "ekm_access_denied": true,
	"team_access_not_granted": true, "invalid_blocks": true, "too_many_attachments": true,
	"invalid_metadata_format": true, "invalid_metadata_schema": true, "metadata_too_large": true,
	"invalid_arguments": true, "invalid_arg_name": true, "invalid_charset": true, "invalid_form_data": true,
	"user_not_found": true, "user_not_visible": true, "user_disabled": true, "cannot_dm_bot": true,
	"too_many_users": true, "not_enough_users": true, "thread_not_found": true, "invalid_thread_ts": true,
	"file_not_found": true, "file_uploads_disabled": true, "file_uploads_except_images_disabled": true,
	"invalid_channel": true, "channel_is_archived": true, "duplicate_channel_not_found": true,
}

// classify marks an error of a Web API call: 429 and ratelimited wait for
// Retry-After, 5xx and network errors are temporary, Slack's final codes
// permanent. The message names the method and Slack's code, never the
// token.
func (s *sender) classify(method string, err error) error {
	var (
		rl *slackapi.RateLimitedError
		sc slackapi.StatusCodeError
		se slackapi.SlackErrorResponse
	)
	switch {
	case errors.As(err, &rl):
		return adapters.TemporaryAfter(s.errorf("slack: %s: rate limited, retry after %s", method, rl.RetryAfter), rl.RetryAfter)
	case errors.As(err, &sc):
		e := s.errorf("slack: %s: HTTP %d", method, sc.Code)
		switch {
		case sc.Code == 408 || sc.Code == 429 || sc.Code >= 500:
			return adapters.Temporary(e)
		case sc.Code == 401 || sc.Code == 403 || sc.Code == 404 || sc.Code == 407:
			// Slack answers its own errors with 200: these come from a
			// wrong api_url or a proxy in the way, which the operator
			// fixes; the draft waits for it (within the attempts).
			return adapters.Temporary(s.errorf("slack: %s: HTTP %d (not Slack's answer: check courier.adapters.slack.api_url and any proxy)", method, sc.Code))
		}
		return adapters.Permanent(e)
	case errors.As(err, &se):
		code := se.Err
		msg := code
		if code == "missing_scope" {
			msg = fmt.Sprintf("missing_scope: the bot token needs the scope %s (it has %s); add it to the app and reinstall it", orNone(se.Needed), orNone(se.Provided))
		}
		e := s.errorf("slack: %s: %s", method, msg)
		if permanentCodes[code] {
			return adapters.Permanent(e)
		}
		return adapters.Temporary(e)
	}
	return adapters.Temporary(s.errorf("slack: %s: %w", method, err))
}

func orNone(s string) string {
	if s == "" {
		return "none named"
	}
	return s
}

// errorf is fmt.Errorf with the tokens cut out of the message, whatever
// an error from below quotes.
func (s *sender) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	msg := err.Error()
	clean := confkit.Redact(msg, s.a.cfg.BotToken.Reveal(), s.a.cfg.AppToken.Reveal(), s.a.cfg.SigningSecret.Reveal())
	if clean != msg {
		return errors.New(clean)
	}
	return err
}
