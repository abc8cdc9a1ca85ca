package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/freelist"
	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/mailbox"
)

// The tools' input, in the words of the CLI's flags.

type listIn struct {
	All         bool     `json:"all,omitempty" jsonschema:"include done and dead messages (by default: the inbox, that is new, claimed and failed)"`
	Outbound    bool     `json:"outbound,omitempty" jsonschema:"list queued, sent and dead drafts instead"`
	Provider    []string `json:"provider,omitempty" jsonschema:"only these providers: email, lark, slack"`
	Status      []string `json:"status,omitempty" jsonschema:"only these statuses: new, claimed, failed, done, dead (inbound); queued, sent (drafts)"`
	Since       string   `json:"since,omitempty" jsonschema:"only messages since a time: a duration back from now (2h, 30m, 7d) or a date (2026-02-06)"`
	Today       bool     `json:"today,omitempty" jsonschema:"only messages since midnight"`
	Correlation string   `json:"correlation,omitempty" jsonschema:"only messages with this correlation id"`
	Limit       int      `json:"limit,omitempty" jsonschema:"at most this many (default 500, at most 10000); a page also ends at 768 KiB as sent (about 950 entries), truncated and next_cursor saying when more matched"`
	Cursor      string   `json:"cursor,omitempty" jsonschema:"the next_cursor of the page before, with the same filters: the entries after it"`
}

type keyIn struct {
	Key string `json:"key" jsonschema:"a thread key (email-thread:..., a Slack thread ts, a Lark thread id) or the id of any message in the thread"`
}

type corrIn struct {
	CorrelationID string `json:"correlation_id" jsonschema:"the correlation id"`
}

type readIn struct {
	ID string `json:"id" jsonschema:"the id of a message or draft, as list gives it (email_..., slack_..., lark_..., <provider>_out_...)"`
}

type verbIn struct {
	ID    string `json:"id" jsonschema:"the id of the message"`
	Agent string `json:"agent,omitempty" jsonschema:"the agent acting (default: over stdio courier --agent, else $COURIER_AGENT, else the user's name; over HTTP mcp). Over HTTP the name is qualified as name@mcp"`
	// claim
	Timeout string `json:"timeout,omitempty" jsonschema:"claim: how long the claim holds, as a Go duration (300s, 10m); default from the config, 300s. Claiming again renews it"`
	// fail
	Reason    string `json:"reason,omitempty" jsonschema:"fail: why (recorded with the message)"`
	Permanent bool   `json:"permanent,omitempty" jsonschema:"fail: do not retry; set the message aside in .deadletter at once (a failure is retried after a backoff by default, dead after max_failures)"`
}

type sendIn struct {
	Draft       string   `json:"draft,omitempty" jsonschema:"a whole draft: Markdown with YAML front matter, as a draft file holds (reply_to, to, subject, correlation_id, artifacts by id...); the fields below win over its own"`
	Text        string   `json:"text,omitempty" jsonschema:"the message text (quick mode, without a draft)"`
	ReplyTo     string   `json:"reply_to,omitempty" jsonschema:"id of the message answered: provider, recipients, subject, thread and correlation come from it"`
	Provider    string   `json:"provider,omitempty" jsonschema:"email, lark or slack (default: from the draft, the message answered, or the recipients)"`
	To          []string `json:"to,omitempty" jsonschema:"recipients (replace the draft's)"`
	Cc          []string `json:"cc,omitempty" jsonschema:"cc recipients (email)"`
	Bcc         []string `json:"bcc,omitempty" jsonschema:"bcc recipients (email)"`
	Subject     string   `json:"subject,omitempty" jsonschema:"subject (email)"`
	Correlation string   `json:"correlation,omitempty" jsonschema:"correlation id"`
	Account     string   `json:"account,omitempty" jsonschema:"email account to send from (default: the one the message answered came to, else the first)"`
	Attach      []string `json:"attach,omitempty" jsonschema:"attachments: dropzone objects by id (sha256:...), as read and attachment give them; over stdio also files by path, under the CLI's attach rules"`
	DryRun      bool     `json:"dry_run,omitempty" jsonschema:"validate and resolve, return the draft as it would be queued, queue nothing"`
	Agent       string   `json:"agent,omitempty" jsonschema:"the agent sending (recorded on the draft)"`
}

type attachmentIn struct {
	ID       string `json:"id" jsonschema:"the dropzone object's id (sha256:<64 hex>), as a message's artifacts give it"`
	As       string `json:"as,omitempty" jsonschema:"text (UTF-8; refused if the bytes are not) or base64 (the default)"`
	MaxBytes int64  `json:"max_bytes,omitempty" jsonschema:"return at most this many bytes (default and most: 8 MiB); truncated says when the object is longer"`
}

// The tools' output.

type entriesOut struct {
	Messages   []json.RawMessage `json:"messages" jsonschema:"the entries, as list --format json prints them"`
	Count      int               `json:"count"`
	Truncated  bool              `json:"truncated,omitempty" jsonschema:"more matched than limit"`
	NextCursor string            `json:"next_cursor,omitempty" jsonschema:"list: the cursor of the next page, when truncated"`
}

// VerbOut is the structured result of claim, done and fail.
type VerbOut struct {
	agentapi.Result
	ExitCode int `json:"exit_code" jsonschema:"the exit code of the command line for this: 0 ok, 1 not found, 2 conflict, 4 database timeout, 64 and up usage and input errors"`
}

// AttachmentOut is the structured result of attachment.
type AttachmentOut struct {
	ID        string `json:"id"`
	Size      int64  `json:"size" jsonschema:"the object's whole size in bytes"`
	Encoding  string `json:"encoding" jsonschema:"text or base64"`
	Data      string `json:"data"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"data holds only the first max_bytes"`
}

func (s *Server) addTools() {
	s.srv.AddReceivingMiddleware(rawListings)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(bool)}
	addListing(s, &mcp.Tool{Name: "list", Annotations: ro,
		Description: "List messages: by default the inbox (new, claimed, failed), oldest first, as `courier list --format json` prints them (structured content); " +
			"a page of limit entries, next_cursor giving the next page. The text gives the count and the next cursor, then one tab-separated line an entry: " +
			"id, provider, direction, from, status, claimed_by, timestamp, correlation_id, reply_to, preview."}, s.list)
	addListing(s, &mcp.Tool{Name: "thread", Annotations: ro,
		Description: "Every message and draft of a thread, in time order, as `courier thread KEY --format json` (structured content; the text is one line an entry, as list gives it). Nothing found is an error (exit 1)."},
		func(ctx context.Context, in keyIn) (*mcp.CallToolResult, error) {
			return s.entriesOf(ctx, in.Key, mailview.Thread)
		})
	addListing(s, &mcp.Tool{Name: "context", Annotations: ro,
		Description: "Everything that carries a correlation id, inbound, archived and sent, in time order, as `courier context ID --format json` (structured content; the text is one line an entry, as list gives it). Nothing found is an error (exit 1)."},
		func(ctx context.Context, in corrIn) (*mcp.CallToolResult, error) {
			return s.entriesOf(ctx, in.CorrelationID, mailview.Context)
		})
	mcp.AddTool(s.srv, &mcp.Tool{Name: "read", Annotations: ro, OutputSchema: readSchema(),
		Description: "Read a message or draft: its text as `courier read ID` shows it (header and body), and as structured content the entry and the whole message as `courier read ID --format json`."},
		s.read)
	s.addVerbs()
	mcp.AddTool(s.srv, &mcp.Tool{Name: "send", OutputSchema: sendSchema(),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(bool), OpenWorldHint: ptr(true)},
		Description: "Validate a draft and queue it for delivery, as `courier send`: a draft (Markdown with front matter) or the fields " +
			"(reply_to and text answer a message: recipients, subject, thread and correlation come from it). Errors name the field and line (exit 65)."},
		s.send)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "attachment", Annotations: ro, OutputSchema: schemaOf[AttachmentOut](),
		Description: "The bytes of a dropzone object (a message's attachment, by its sha256: id), as text or base64, at most 8 MiB."},
		s.attachment)
}

func ptr[T any](v T) *T { return &v }

// checkID refuses what is not a message id: an id never starts with "-".
func checkID(s string) error {
	if s == "" || strings.HasPrefix(s, "-") {
		return fault.Errorf(fault.Usage, "%q is not a message id", s)
	}
	return nil
}

// list is the list tool: a page of what the filters select.
func (s *Server) list(ctx context.Context, in listIn) (*mcp.CallToolResult, error) {
	limit := in.Limit
	switch {
	case limit < 0 || limit > MaxLimit:
		return nil, refuse(fault.Errorf(fault.Usage, "limit %d is not between 1 and %d", limit, MaxLimit))
	case limit == 0:
		limit = DefaultLimit
	}
	cur, err := mailview.ParseCursor(in.Cursor)
	if err != nil {
		return nil, refuse(err)
	}
	q := mailview.Query{All: in.All, Outbound: in.Outbound, Providers: in.Provider, Statuses: in.Status,
		Correlation: in.Correlation, Today: in.Today}
	if !in.Today {
		q.Since = in.Since
	}
	now := time.Now()
	if _, err := cur.Query(q, limit).Filter(now); err != nil {
		return nil, refuse(err)
	}
	release, err := s.slot(ctx)
	if err != nil {
		return nil, refuse(err)
	}
	defer release()
	b := newPage(MaxPage)
	defer b.free()
	next, err := s.fill(ctx, b, q, cur, limit, now)
	if err != nil {
		return nil, err
	}
	if b.count > 0 {
		s.entryBytes.Store(int64((b.size - pageOverhead) / b.count))
	}
	return b.listing(next), nil
}

// fill adds to b the entries after cur that q selects, up to limit and
// MaxPage bytes as sent, and returns the cursor after them ("" at the
// end). It reads about as many entries as fit, by the size of the last
// page's entries (entryBytes), and reads on from where it stopped while
// more fit: what is read and not sent costs as much as what is sent,
// and at list's largest limits the listing read a third more than it
// sent. The listing is read into a buffer that takes MaxPage bytes, and
// up to a piece more (256 KiB): entries that alone pass MaxPage cannot
// all fit.
func (s *Server) fill(ctx context.Context, b *pageBuilder, q mailview.Query, cur mailview.Cursor, limit int, now time.Time) (string, error) {
	buf := pageBufs.Get(func() *capped { return new(capped) })
	defer pageBufs.Put(buf)
	for {
		want := limit - b.count
		if per := int(s.entryBytes.Load()); per > 0 {
			fit := (MaxPage - b.size) / per
			want = max(1, min(want, fit+fit/16+1))
		}
		f, err := cur.Query(q, want).Filter(now)
		if err != nil {
			return "", refuse(err)
		}
		buf.Reset()
		buf.max, buf.soft = s.max, MaxPage
		err = mailview.WriteJSON(ctx, s.mb, f, buf)
		full := errors.Is(err, errFull)
		if err != nil && !full {
			return "", refuse(err)
		}
		rows := buf.Bytes()
		if full {
			rows = mailview.Whole(rows)
		}
		page, err := mailview.ParsePage(rows, want, cur)
		if err != nil {
			return "", err
		}
		if len(page.Entries) == 0 && full {
			if b.count > 0 {
				return cur.String(), nil // the page ends where this read started
			}
			return "", refuse(tooLarge(MaxPage)) // a cursor passing over more than MaxPage bytes at one time
		}
		n := b.addAll(page.Entries)
		if n < len(page.Entries) || (full && page.Next == "") {
			if n == 0 {
				return cur.String(), nil
			}
			if err := page.Cut(n, cur); err != nil {
				return "", err
			}
			return page.Next, nil
		}
		if page.Next == "" || b.count == limit {
			return page.Next, nil
		}
		if cur, err = mailview.ParseCursor(page.Next); err != nil {
			return page.Next, nil // refused when the client gives it, as before
		}
	}
}

// pageBufs are the buffers list reads a page into, kept from one call to
// the next: grown from nothing at each call, a page's buffer and the
// garbage it left took a tenth of the server's time for a listing.
var pageBufs = make(freelist.List[*capped], concurrent)

// entriesOf is the thread and context tools: every entry that list
// gives for arg.
func (s *Server) entriesOf(ctx context.Context, arg string, list func(context.Context, *mailbox.Mailbox, string, func(*mailbox.Entry) error) error) (*mcp.CallToolResult, error) {
	if err := checkID(arg); err != nil {
		return nil, refuse(err)
	}
	release, err := s.slot(ctx)
	if err != nil {
		return nil, refuse(err)
	}
	defer release()
	b := newPage(math.MaxInt)
	defer b.free()
	var enc mailview.EntryEncoder
	err = list(ctx, s.mb, arg, func(e *mailbox.Entry) error {
		entry, err := enc.Encode(e)
		if err != nil {
			return err
		}
		if b.add(entry); b.size-pageOverhead > min(s.max, maxFrame-pageOverhead) {
			return tooLarge(min(s.max, maxFrame))
		}
		return nil
	})
	if err != nil {
		return nil, refuse(err)
	}
	return b.listing(""), nil
}

// read is the read tool: the message as read shows it, and as JSON.
func (s *Server) read(ctx context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, json.RawMessage, error) {
	if err := checkID(in.ID); err != nil {
		return nil, nil, refuse(err)
	}
	release, err := s.slot(ctx)
	if err != nil {
		return nil, nil, refuse(err)
	}
	defer release()
	out, err := s.readAs(ctx, in.ID, mailview.Form{JSON: true})
	if err != nil {
		return nil, nil, err
	}
	text, err := s.readAs(ctx, in.ID, mailview.Form{})
	if err != nil {
		return nil, nil, err
	}
	return textResult(string(text)), json.RawMessage(bytes.TrimSpace(out)), nil
}

// readAs reads a message in form, bounded, refusing as the command line
// does: a message that cannot be opened is reported as read reports each
// id it cannot open, prefixed.
func (s *Server) readAs(ctx context.Context, id string, form mailview.Form) ([]byte, error) {
	f, e, err := s.mb.OpenFile(ctx, id)
	if err != nil {
		return nil, &refusal{msg: "courier: " + err.Error(), code: fault.ExitCode(err)}
	}
	defer f.Close()
	buf := &capped{max: s.max}
	if err := mailview.Write(buf, f, e, form); err != nil {
		return nil, refuse(err)
	}
	return buf.Bytes(), nil
}

// attachment is the attachment tool: a dropzone object's bytes, bounded.
func (s *Server) attachment(ctx context.Context, _ *mcp.CallToolRequest, in attachmentIn) (*mcp.CallToolResult, *AttachmentOut, error) {
	max := in.MaxBytes
	if max <= 0 || max > maxAttachment {
		max = maxAttachment
	}
	a, err := mailview.ReadAttachment(s.dz, in.ID, in.As, max)
	if err != nil {
		return nil, nil, refuse(err)
	}
	return nil, &AttachmentOut{ID: a.ID, Size: a.Size, Encoding: a.Encoding, Data: a.Data, Truncated: a.Truncated}, nil
}
