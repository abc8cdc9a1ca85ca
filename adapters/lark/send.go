package lark

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/adapters/internal/chatmsg"
	"github.com/monoco/courier/adapters/lark/internal/content"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Lark's bounds on what one message carries (im/v1 message create): 150
// KB of text content, 30 KB of post or card content; an image uploaded
// for a message at most 10 MB, a file at most 30 MB.
const (
	maxTextContent = 150 << 10
	maxRichContent = 30 << 10
	maxImageUpload = 10 << 20
	maxFileUpload  = 30 << 20
)

// codeChatRateLimited is Lark's rate limit of one chat or user (the
// app's is codeRateLimited).
const codeChatRateLimited = 230020

// permanentCodes are Lark's answers that a retry answers again: the
// draft, the app's scopes or the bot's place in the chat must change
// first. Any other code is temporary (Lark's internal errors, and codes
// it adds later): the engine retries within its attempts.
var permanentCodes = map[int]bool{
	230001:   true, // invalid parameter: receive_id, message_id, msg_type, content
	230002:   true, // the bot is not in the chat
	230006:   true, // the app has no bot ability
	230011:   true, // the message answered was recalled
	230013:   true, // the user is outside the bot's availability
	230015:   true, // a p2p chat with the user cannot be made
	230017:   true, // the bot cannot speak in the chat
	230018:   true, // the chat is muted for the bot
	230019:   true, // the topic does not exist
	230022:   true, // the content was refused by review
	230025:   true, // the content is too long
	230027:   true, // the app lacks a permission for this chat or user
	230028:   true, // the message was refused by data-loss prevention
	230035:   true, // sending is forbidden in the chat
	230099:   true, // the card could not be made from the content
	234001:   true, // invalid upload parameter
	234006:   true, // the upload is too large
	234010:   true, // the upload is empty
	234011:   true, // the image could not be read
	99991401: true, // the caller's IP is not allowed
	99991672: true, // the app lacks a scope
	99992402: true, // field validation failed
}

// outbound sets the provider's Sender, which posts with the tenant token.
func (a *Adapter) outbound(p *adapters.Provider) {
	if a.cfg.AppID == "" || a.cfg.AppSecret.Reveal() == "" {
		p.Waiting = "lark: no app_id or app_secret, so drafts wait (courier.adapters.lark.app_id, app_secret)"
		return
	}
	p.Sender = &sender{a: a, api: a.newSDKClient()}
}

// sender is the Lark Sender. A draft is one or more steps, each a message
// in Lark: its words (text, post or card; several parts when Lark would
// refuse them in one), then each attachment as an image, file, audio or
// video message, in the same chat and, for a reply, in reply to the same
// parent, so that they land in the same thread. Every step sends a uuid
// of its own derived from the draft's idempotency key (the key for the
// words, key-t2, key-t3... for their further parts, key-1, key-2... for
// the attachments), the same on every attempt: Lark makes one message of
// the calls that share a uuid within an hour, so a retry after a timeout
// or a crash does not post a step twice. Each step done is also reported
// to the engine as an accepted "recipient" ("oc_… text", "om_… file
// 2/3"), through Attempt.Progress at once and a PartialError when a
// later step fails, so that the next attempt, even past Lark's hour,
// does only the steps left (chatsync.Poster).
type sender struct {
	a   *Adapter
	api *lark.Client
}

var _ adapters.Sender = (*sender)(nil)

// step is one message of a draft.
type step struct {
	label   string // "text", "text 2/3", "file 1/2": unique within the draft
	uuid    string
	art     int // the artifact's index; -1 for the words
	msgType string
	content string
}

// target is where a draft's messages go: a reply to a message, or a new
// message to a chat or person.
type target struct {
	reply    string // the om_ id answered
	inThread bool
	id       string // receive_id
	idType   string // receive_id_type
}

func (t target) String() string {
	if t.reply != "" {
		return t.reply
	}
	return t.id
}

// Send implements adapters.Sender: the steps are posted by
// chatsync.Poster, each once across attempts.
func (s *sender) Send(ctx context.Context, at *adapters.Attempt) (adapters.Receipt, error) {
	d := at.Draft
	dest, err := checkDraft(d)
	if err != nil {
		return adapters.Receipt{}, adapters.Permanent(err)
	}
	parts, err := draftContent(d)
	if err != nil {
		return adapters.Receipt{}, adapters.Permanent(err)
	}
	steps := plan(idempotencyKey(d), parts, len(d.Artifacts))
	if len(steps) == 0 {
		return adapters.Receipt{}, adapters.Permanent(errors.New("lark: the draft has no text and no attachment, and Lark sends no empty message"))
	}
	thread := ""
	posted, err := chatsync.Poster{Name: "lark", Log: s.a.log,
		Unrecorded: "lark: could not record a step posted; a retry past Lark's hour of uuid dedupe would post it again",
	}.Post(ctx, at, dest.String(), s.todo(dest, d, steps, &thread))
	if err != nil {
		return adapters.Receipt{}, err
	}
	s.a.health.Event()
	// The message's id is its first step's: a reply to it keeps the
	// draft's correlation, and its echo is known as ours.
	first := posted.Replies[0]
	r := adapters.Receipt{ProviderMessageID: first, InboundID: threading.LarkID(first), Recipients: posted.Results}
	if thread != string(d.ThreadKey) {
		// A thread opened at the parent (or the topic a message started
		// in a topic chat): the archived draft names it, as the
		// thread's later messages do.
		r.ThreadKey = thread
	}
	return r, nil
}

// plan cuts a draft into its steps, each with its uuid derived from the
// draft's key: the parts of its words, then its files.
func plan(key string, parts []part, files int) []step {
	var steps []step
	for i, p := range parts {
		st := step{label: "text", uuid: key, art: -1, msgType: p.msgType, content: p.content}
		if len(parts) > 1 {
			st.label = fmt.Sprintf("text %d/%d", i+1, len(parts))
		}
		if i > 0 {
			st.uuid = key + "-t" + strconv.Itoa(i+1)
		}
		steps = append(steps, st)
	}
	for i := range files {
		steps = append(steps, step{label: fmt.Sprintf("file %d/%d", i+1, files), uuid: key + "-" + strconv.Itoa(i+1), art: i})
	}
	return steps
}

// todo is what the steps do: an attachment is uploaded before anything
// is posted (an upload shows nowhere until a message names it, so a
// failed upload posts nothing, and the engine's gate is held only for the
// quick calls that post, never for an upload); each step posts its
// message. thread is set to the first thread_id Lark answers (the steps
// run one after the other).
func (s *sender) todo(dest target, d *schema.Draft, steps []step, thread *string) []chatsync.Step {
	out := make([]chatsync.Step, len(steps))
	for i := range steps {
		st := &steps[i]
		out[i] = chatsync.Step{Label: st.label, Post: func(ctx context.Context) (string, error) {
			id, th, err := s.post(ctx, dest, *st)
			if *thread == "" && threadRE.MatchString(th) {
				*thread = th
			}
			return id, err
		}}
		if st.art < 0 {
			continue
		}
		out[i].Upload = func(ctx context.Context) error {
			var err error
			st.msgType, st.content, err = s.upload(ctx, st.art, d.Artifacts[st.art])
			return err
		}
	}
	return out
}

// checkDraft refuses what a draft may hold that Lark cannot take, and
// returns where it goes. A draft in outbound/ need not come from `courier
// send` (whoever can write the folder can drop one there), so its fields
// are checked again here.
func checkDraft(d *schema.Draft) (target, error) {
	switch {
	case len(d.To) == 0 && d.ReplyTo == "":
		return target{}, errors.New("lark: the draft has no recipient (to) and answers no message (reply_to)")
	case len(d.Cc) > 0 || len(d.Bcc) > 0:
		return target{}, errors.New("lark: the draft has cc or bcc, which Lark has not: a message goes to one chat or person, in to")
	}
	if err := checkTo(d.To); err != nil {
		return target{}, fmt.Errorf("lark: to: %w", err)
	}
	if err := checkThread(d); err != nil {
		return target{}, fmt.Errorf("lark: thread_key: %w", err)
	}
	if d.ReplyTo != "" {
		om, ok := omOf(string(d.ReplyTo))
		if !ok {
			return target{}, fmt.Errorf("lark: reply_to %q is not a Lark message (lark_om_…)", clip(string(d.ReplyTo), 200))
		}
		// A parent in a thread (its thread_id, omt_…) is answered in
		// it; a draft whose thread_key is the parent's own id opens a
		// thread at the parent (seed 004 §5.2); a parent in a quoted
		// reply chain (its root, om_…) or alone is answered with a
		// plain reply, which Lark shows in the chat quoting it, as a
		// person's reply there would be.
		tk := string(d.ThreadKey)
		return target{reply: om, inThread: threadRE.MatchString(tk) || tk == om}, nil
	}
	id, idType, _ := receiveID(d.To[0])
	return target{id: id, idType: idType}, nil
}

// part is one message of a draft's words.
type part struct{ msgType, content string }

// maxParts bounds the messages one draft's words make.
const maxParts = 30

// minSplit is the shortest text cut in two: no shorter one makes content
// over Lark's bounds.
const minSplit = 2 << 10

// draftContent returns the messages of the draft's words, none when it
// has none (attachments alone). Words Lark would refuse in one message
// (a post over 30 KB, a text over 150 KB) go in several, cut between
// paragraphs where it can, so that a long report is delivered whole, in
// order, rather than refused.
func draftContent(d *schema.Draft) ([]part, error) {
	if d.EffectiveType() == schema.DraftCard {
		b, err := json.Marshal(d.Content.Card)
		if err != nil {
			return nil, fmt.Errorf("lark: content.card is not a JSON object: %v", err)
		}
		if len(b) > maxRichContent {
			return nil, fmt.Errorf("lark: content.card is %d bytes of JSON, over the %d Lark takes in a card", len(b), maxRichContent)
		}
		return []part{{"interactive", string(b)}}, nil
	}
	words, plain, err := chatmsg.DraftWords(d)
	switch {
	case err != nil:
		return nil, fmt.Errorf("lark: %v", err)
	case plain:
		return fit(words, false, textContent)
	}
	return fit(words, true, func(s string) (part, error) {
		t, c, err := content.FromMarkdown(s)
		if err != nil && !errors.Is(err, content.ErrTooLarge) {
			return part{}, fmt.Errorf("lark: the draft's Markdown: %v", err)
		}
		return part{t, string(c)}, err
	})
}

// fit converts s into one message, or, when convert says it is too large
// (content.ErrTooLarge), into the messages of its halves, recursively.
func fit(s string, md bool, convert func(string) (part, error)) ([]part, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > maxParts*maxTextContent {
		// More than the parts could hold even as plain text.
		return nil, fmt.Errorf("lark: the draft's words are %d bytes, more than %d Lark messages hold: shorten it, or send the rest as an attachment", len(s), maxParts)
	}
	var out []part
	tooMany := fmt.Errorf("lark: the draft's words make more than %d Lark messages: shorten it, or send the rest as an attachment", maxParts)
	calls := 0
	var walk func(s string) error
	walk = func(s string) error {
		if strings.TrimSpace(s) == "" {
			return nil
		}
		// Each call converts what it is given: bounded, so that a huge
		// draft costs a few passes over it, not one per part.
		if calls++; calls > 4*maxParts {
			return tooMany
		}
		p, err := convert(s)
		switch {
		case err == nil:
			if len(out) >= maxParts {
				return tooMany
			}
			out = append(out, p)
			return nil
		case !errors.Is(err, content.ErrTooLarge):
			return err
		case len(s) < minSplit:
			return fmt.Errorf("lark: %d bytes of the draft make a message Lark refuses for its size (150 KB of text, 30 KB of rich text), and cannot be cut", len(s))
		}
		a, b := halve(s, md)
		if err := walk(a); err != nil {
			return err
		}
		return walk(b)
	}
	if err := walk(s); err != nil {
		return nil, err
	}
	return out, nil
}

// textContent is a message of s, sent as typed: a text message, or, when
// s holds a "<", a post of its lines as plain text elements, since a
// text message reads <at user_id="all"> as a mention of everyone (words
// an agent quotes from anyone must not ping a chat).
func textContent(s string) (part, error) {
	if strings.Contains(s, "<") {
		lines := [][]map[string]string{}
		for _, l := range strings.Split(s, "\n") {
			if l = strings.TrimRight(l, "\r"); l == "" {
				lines = append(lines, []map[string]string{})
				continue
			}
			lines = append(lines, []map[string]string{{"tag": "text", "text": l}})
		}
		b, err := json.Marshal(map[string]any{"zh_cn": map[string]any{"content": lines}})
		if err != nil {
			return part{}, fmt.Errorf("lark: content.text: %v", err)
		}
		if len(b) > maxRichContent {
			return part{}, fmt.Errorf("%w: %d bytes of post content", content.ErrTooLarge, len(b))
		}
		return part{"post", string(b)}, nil
	}
	b, err := json.Marshal(map[string]string{"text": s})
	if err != nil {
		return part{}, fmt.Errorf("lark: content.text: %v", err)
	}
	if len(b) > maxTextContent {
		return part{}, fmt.Errorf("%w: %d bytes of text content", content.ErrTooLarge, len(b))
	}
	return part{"text", string(b)}, nil
}

// halve cuts s in two near its middle: at a paragraph break (a blank line
// outside a code block), else at a line break, else inside a line. In
// Markdown, a code block cut in two is closed and opened again, so that
// each half reads right alone. Both halves are shorter than s.
func halve(s string, md bool) (string, string) {
	lo, hi, mid := len(s)/4, len(s)*3/4, len(s)/2
	bestPara, bestLine := -1, -1
	var lineFence string // the fence open at bestLine
	fence := ""          // the opening line of the code block we are in
	closeOf := func(open string) string {
		t := strings.TrimLeft(open, " ")
		n := len(t) - len(strings.TrimLeft(t, t[:1]))
		return strings.Repeat(t[:1], n)
	}
	nearer := func(cand, best int) bool { return best < 0 || abs(cand-mid) < abs(best-mid) }
	for off := 0; off < len(s); {
		end := strings.IndexByte(s[off:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += off + 1
		}
		line := strings.TrimRight(s[off:end], "\r\n")
		if off >= lo && off <= hi {
			if fence == "" && strings.TrimSpace(line) == "" && nearer(off, bestPara) {
				bestPara = off
			}
			if off > 0 && nearer(off, bestLine) {
				bestLine, lineFence = off, fence
			}
		}
		if md {
			t := strings.TrimLeft(line, " ")
			switch {
			case fence == "" && len(line)-len(t) <= 3 && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
				fence = line
			case fence != "" && strings.HasPrefix(t, closeOf(fence)) && strings.TrimSpace(strings.TrimLeft(t, closeOf(fence)[:1])) == "":
				fence = ""
			}
		}
		off = end
	}
	switch {
	case bestPara > 0:
		return strings.TrimRight(s[:bestPara], "\r\n"), strings.TrimLeft(s[bestPara:], "\r\n")
	case bestLine > 0 && lineFence != "" && len(lineFence) < len(s)/8:
		return s[:bestLine] + closeOf(lineFence), lineFence + "\n" + s[bestLine:]
	case bestLine > 0 && lineFence == "":
		return s[:bestLine], s[bestLine:]
	}
	cut := mid
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], s[cut:]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// idempotencyKey is the draft's key, or, for a draft queued without a
// usable one, a uuid derived from its id: the same on every attempt
// either way.
func idempotencyKey(d *schema.Draft) string {
	if validKey(d.IdempotencyKey) {
		return d.IdempotencyKey
	}
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("courier:lark:"+d.ID)).String()
}

// post sends one step and returns the om_ id Lark gave the message and
// the thread Lark put it in ("" for none).
func (s *sender) post(ctx context.Context, dest target, st step) (id, thread string, err error) {
	var idp, threadp *string
	what := "send message to " + dest.String()
	if dest.reply != "" {
		what = "reply to " + dest.reply
	}
	err = s.call(ctx, what, callTimeout, func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.CodeError, error) {
		if dest.reply != "" {
			req := larkim.NewReplyMessageReqBuilder().MessageId(dest.reply).Body(larkim.NewReplyMessageReqBodyBuilder().
				MsgType(st.msgType).Content(st.content).ReplyInThread(dest.inThread).Uuid(st.uuid).Build()).Build()
			resp, err := s.api.Im.V1.Message.Reply(ctx, req, tok)
			if err != nil {
				return nil, err
			}
			if resp.Data != nil {
				idp, threadp = resp.Data.MessageId, resp.Data.ThreadId
			}
			return &resp.CodeError, nil
		}
		req := larkim.NewCreateMessageReqBuilder().ReceiveIdType(dest.idType).Body(larkim.NewCreateMessageReqBodyBuilder().
			ReceiveId(dest.id).MsgType(st.msgType).Content(st.content).Uuid(st.uuid).Build()).Build()
		resp, err := s.api.Im.V1.Message.Create(ctx, req, tok)
		if err != nil {
			return nil, err
		}
		if resp.Data != nil {
			idp, threadp = resp.Data.MessageId, resp.Data.ThreadId
		}
		return &resp.CodeError, nil
	})
	if err != nil {
		return "", "", err
	}
	if idp == nil || !omRE.MatchString(*idp) {
		// Posted, with no id to record; trying again is safe: the
		// uuid makes Lark answer the same message.
		got := ""
		if idp != nil {
			got = clip(*idp, 100)
		}
		return "", "", adapters.Temporary(fmt.Errorf("lark: %s: answered success with message_id %q, which is not a Lark message id", what, got))
	}
	if threadp != nil {
		thread = *threadp
	}
	return *idp, thread, nil
}

// upload sends one artifact to Lark and returns the msg_type and content
// of the message that shows it: an image as an image, else a file (a
// voice message, a video or a document, as its type says).
func (s *sender) upload(ctx context.Context, i int, art schema.DraftArtifact) (msgType, body string, err error) {
	name, data, err := s.readArtifact(i, art)
	if err != nil {
		return "", "", err
	}
	what := fmt.Sprintf("upload artifacts[%d] (%s)", i, name)
	if isImage(data) && int64(len(data)) <= maxImageUpload {
		key, err := s.uploadImage(ctx, what, name, data)
		if err != nil {
			return "", "", err
		}
		b, _ := json.Marshal(map[string]string{"image_key": key})
		return "image", string(b), nil
	}
	ft := fileType(name, art.MimeType)
	key, err := s.uploadFile(ctx, what, name, ft, data)
	if err != nil {
		return "", "", err
	}
	b, _ := json.Marshal(map[string]string{"file_key": key})
	switch ft {
	case "opus":
		return "audio", string(b), nil // a voice message
	case "mp4":
		return "media", string(b), nil // a video, played in the chat
	}
	return "file", string(b), nil
}

// readArtifact reads artifacts[i] from the dropzone, whole (the SDK builds
// its multipart body in memory; Lark takes at most 30 MB), and checks it
// against the artifact's id: a damaged object is never sent. name is the
// file's name as sent.
func (s *sender) readArtifact(i int, art schema.DraftArtifact) (name string, data []byte, err error) {
	name = dropzone.SanitizeName(art.Name)
	if strings.TrimSpace(art.Name) == "" {
		name = "attachment"
	}
	if s.a.dz == nil {
		return "", nil, adapters.Permanent(errors.New("lark: no dropzone to read attachments from"))
	}
	want, err := dropzone.ParseID(art.ID)
	if err != nil {
		return "", nil, adapters.Permanent(fmt.Errorf("lark: artifacts[%d] (%s): %w", i, name, err))
	}
	f, err := s.a.dz.Open(art.ID)
	if err != nil {
		return "", nil, adapters.Permanent(fmt.Errorf("lark: artifacts[%d] (%s, %s): %w", i, name, art.ID, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, adapters.Temporary(fmt.Errorf("lark: artifacts[%d] (%s): %w", i, name, err))
	}
	size := fi.Size()
	switch max := s.a.limits.MaxArtifactBytes; {
	case size == 0:
		return "", nil, adapters.Permanent(fmt.Errorf("lark: artifacts[%d] (%s) is empty, and Lark takes no empty file", i, name))
	case max > 0 && size > max:
		return "", nil, adapters.Permanent(fmt.Errorf("lark: artifacts[%d] (%s) is %d bytes, over the limit of %d (courier.limits.max_artifact_bytes)", i, name, size, max))
	case size > maxFileUpload:
		return "", nil, adapters.Permanent(fmt.Errorf("lark: artifacts[%d] (%s) is %d bytes, over the %d Lark takes in a file", i, name, size, maxFileUpload))
	}
	data, err = io.ReadAll(io.LimitReader(f, size+1))
	if err != nil || int64(len(data)) != size {
		return "", nil, adapters.Temporary(fmt.Errorf("lark: artifacts[%d] (%s): read %d of its %d bytes: %v", i, name, len(data), size, err))
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want {
		return "", nil, adapters.Permanent(fmt.Errorf("lark: artifacts[%d] (%s): the dropzone's copy is damaged (its content is not %s); not sent", i, name, art.ID))
	}
	return name, data, nil
}

// uploadImage uploads data as a message's image and returns its
// image_key.
func (s *sender) uploadImage(ctx context.Context, what, name string, data []byte) (string, error) {
	var key *string
	err := s.call(ctx, what, uploadTimeout(int64(len(data))), func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.CodeError, error) {
		req := larkim.NewCreateImageReqBuilder().Body(larkim.NewCreateImageReqBodyBuilder().
			ImageType(larkim.CreateImageImageTypeMessage).Image(&namedReader{Reader: bytes.NewReader(data), name: name}).Build()).Build()
		resp, err := s.api.Im.V1.Image.Create(ctx, req, tok)
		if err != nil {
			return nil, err
		}
		if resp.Data != nil {
			key = resp.Data.ImageKey
		}
		return &resp.CodeError, nil
	})
	if err != nil {
		return "", err
	}
	if key == nil || *key == "" {
		return "", adapters.Temporary(fmt.Errorf("lark: %s: answered success without an image_key", what))
	}
	return *key, nil
}

// uploadFile uploads data as a file of Lark's file_type ft and returns
// its file_key.
func (s *sender) uploadFile(ctx context.Context, what, name, ft string, data []byte) (string, error) {
	var key *string
	err := s.call(ctx, what, uploadTimeout(int64(len(data))), func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.CodeError, error) {
		req := larkim.NewCreateFileReqBuilder().Body(larkim.NewCreateFileReqBodyBuilder().
			FileType(ft).FileName(name).File(&namedReader{Reader: bytes.NewReader(data), name: name}).Build()).Build()
		resp, err := s.api.Im.V1.File.Create(ctx, req, tok)
		if err != nil {
			return nil, err
		}
		if resp.Data != nil {
			key = resp.Data.FileKey
		}
		return &resp.CodeError, nil
	})
	if err != nil {
		return "", err
	}
	if key == nil || *key == "" {
		return "", adapters.Temporary(fmt.Errorf("lark: %s: answered success without a file_key", what))
	}
	return *key, nil
}

// namedReader gives the SDK's multipart body the file's name.
type namedReader struct {
	io.Reader
	name string
}

func (n *namedReader) Name() string { return n.name }

// isImage reports whether data is an image Lark shows as one, by its
// bytes rather than what the draft says it is.
func isImage(data []byte) bool {
	switch http.DetectContentType(data) {
	case "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/x-icon":
		return true
	}
	return false
}

// fileType is Lark's file_type for a file upload: its kinds (opus, mp4,
// pdf, doc, xls, ppt), else stream.
func fileType(name, mimeType string) string {
	ext := strings.ToLower(extOf(name))
	switch ext {
	case ".opus":
		return "opus"
	case ".mp4":
		return "mp4"
	case ".pdf":
		return "pdf"
	case ".doc", ".docx":
		return "doc"
	case ".xls", ".xlsx":
		return "xls"
	case ".ppt", ".pptx":
		return "ppt"
	}
	mt, _, _ := mime.ParseMediaType(mimeType)
	switch mt {
	case "audio/opus":
		return "opus"
	case "video/mp4":
		return "mp4"
	case "application/pdf":
		return "pdf"
	}
	return "stream"
}

// callTimeout bounds a call that sends no file; an upload gets a second
// more for every 64 KiB (uploadTimeout).
const callTimeout = time.Minute

func uploadTimeout(size int64) time.Duration {
	return callTimeout + time.Duration(size>>16)*time.Second
}

// call makes one API call with the tenant token, fetching the token again
// once if Lark refuses it, and classifies what failed. Each try is
// bounded by timeout.
func (s *sender) call(ctx context.Context, what string, timeout time.Duration, do func(ctx context.Context, tok larkcore.RequestOptionFunc) (*larkcore.CodeError, error)) error {
	for attempt := 0; ; attempt++ {
		tok, err := s.a.tenantToken(ctx, attempt > 0)
		if err != nil {
			// A refused app secret waits for the operator (unmarked:
			// temporary), as a network error does.
			return fmt.Errorf("lark: %s: %w", what, err)
		}
		cctx, info := withCallInfo(ctx)
		cctx, cancel := context.WithTimeout(cctx, timeout)
		// The SDK has read the whole answer when do returns.
		ce, err := do(cctx, larkcore.WithTenantAccessToken(tok))
		cancel()
		if err != nil {
			return s.transportError(what, info, err)
		}
		if ce == nil || ce.Code == 0 {
			return nil
		}
		if (ce.Code == codeMissingToken || ce.Code == codeInvalidToken) && attempt == 0 {
			continue
		}
		return s.codeError(what, info, ce)
	}
}

// transportError classifies a call that got no answer of Lark's JSON: by
// the status when there was one (a gateway's 5xx), else a network error.
// Both are temporary, but for a status Lark never answers a call it took.
func (s *sender) transportError(what string, info *callInfo, err error) error {
	switch st := info.status; {
	case st == http.StatusTooManyRequests:
		return s.rateLimited(what, info, fmt.Sprintf("HTTP %d", st))
	case st >= 500 || st == 0 || st == http.StatusRequestTimeout:
		if st == 0 {
			return adapters.Temporary(s.errorf("lark: %s: %s", what, clip(err.Error(), 300)))
		}
		return adapters.Temporary(s.errorf("lark: %s: HTTP %d", what, st))
	}
	return adapters.Temporary(s.errorf("lark: %s: HTTP %d, an answer that is not Lark's (check courier.adapters.lark.domain and any proxy): %s", what, info.status, clip(err.Error(), 300)))
}

// codeError classifies an error Lark answered with its code and msg.
func (s *sender) codeError(what string, info *callInfo, ce *larkcore.CodeError) error {
	desc := fmt.Sprintf("code %d: %s", ce.Code, clip(ce.Msg, 300))
	if ce.Code == codeNoScope && ce.Err != nil {
		var scopes []string
		for _, v := range ce.Err.PermissionViolations {
			if v != nil && v.Subject != "" && len(scopes) < 5 {
				scopes = append(scopes, clip(v.Subject, 100))
			}
		}
		if len(scopes) > 0 {
			desc += " (the app needs the scope " + strings.Join(scopes, " or ") + ": add it in the developer console and publish a new version)"
		}
	}
	switch {
	case ce.Code == codeRateLimited || ce.Code == codeChatRateLimited || info.status == http.StatusTooManyRequests:
		return s.rateLimited(what, info, desc)
	case ce.Code == codeMissingToken || ce.Code == codeInvalidToken:
		return adapters.Temporary(s.errorf("lark: %s: the tenant token was refused again after a new one was fetched (%s)", what, desc))
	case permanentCodes[ce.Code]:
		return adapters.Permanent(s.errorf("lark: %s: %s", what, desc))
	case info.status >= 500:
		return adapters.Temporary(s.errorf("lark: %s: HTTP %d, %s", what, info.status, desc))
	}
	return adapters.Temporary(s.errorf("lark: %s: %s", what, desc))
}

// maxRetryAfter bounds the wait a rate limit asks for: a header from
// outside must not park a draft for days.
const maxRetryAfter = time.Hour

// rateLimited is a temporary error after the wait Lark named
// (x-ogw-ratelimit-reset, in seconds), if it named one.
func (s *sender) rateLimited(what string, info *callInfo, desc string) error {
	if n, err := strconv.Atoi(strings.TrimSpace(info.reset)); err == nil && n > 0 {
		d := min(time.Duration(n)*time.Second, maxRetryAfter)
		return adapters.TemporaryAfter(s.errorf("lark: %s: rate limited (%s), retry after %s", what, desc, d), d)
	}
	return adapters.Temporary(s.errorf("lark: %s: rate limited (%s)", what, desc))
}

// errorf is fmt.Errorf with the tenant token and the app secret cut out,
// whatever Lark's msg or an error from below quotes.
func (s *sender) errorf(format string, args ...any) error {
	return errors.New(s.a.redact(fmt.Sprintf(format, args...)))
}
