package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/mailbox"
)

// Resources: each message as courier://message/<id> (its file, Markdown
// with front matter), and courier://inbox, the inbox as list gives it,
// which a client subscribes to to hear of new mail.

func (s *Server) addResources() {
	s.srv.AddResource(s.inboxResource(), s.readInbox)
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: MessageURI + "{id}", Name: "message", MIMEType: "text/markdown",
		Description: "A message or draft: its file as Courier wrote it, Markdown with YAML front matter"}, s.readMessage)
	// resources/list lists the inbox's messages from the index, paged,
	// rather than from resources registered one by one (which would hold
	// the whole mailbox in memory and go stale).
	s.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			p, _ := req.GetParams().(*mcp.ListResourcesParams)
			cursor := ""
			if p != nil {
				cursor = p.Cursor
			}
			return s.listResources(ctx, cursor)
		}
	})
}

func (s *Server) inboxResource() *mcp.Resource {
	return &mcp.Resource{URI: InboxURI, Name: "inbox", Title: "The inbox", MIMEType: "application/json",
		Description: "The inbox (new, claimed, failed) as `courier list --format json`, the first 1,000; subscribe to it to be notified when mail arrives"}
}

func (s *Server) readInbox(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	release, err := s.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	buf := &capped{max: s.max}
	if err := mailview.WriteJSON(ctx, s.mb, mailbox.Filter{Limit: inboxLimit}, buf); err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: InboxURI, MIMEType: "application/json", Text: buf.String()}}}, nil
}

func (s *Server) readMessage(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, MessageURI)
	if !ok || checkID(id) != nil || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	release, err := s.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := s.readAs(ctx, id, mailview.Form{Raw: true})
	var r *refusal
	switch {
	case errors.As(err, &r) && r.code == fault.NotFound.ExitCode():
		return nil, mcp.ResourceNotFoundError(uri)
	case r != nil:
		return nil, errors.New(r.msg)
	case err != nil:
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: string(out)}}}, nil
}

// listResources answers resources/list: the inbox resource, then the
// inbox's messages, pageSize a page. The cursor is the offset. Answered
// here, the result misses the SDK's step that fills its cacheScope, sent
// even when empty ("cacheScope":"", which the Python SDK 2.x refuses):
// it is the user's mail, so private.
func (s *Server) listResources(ctx context.Context, cursor string) (*mcp.ListResourcesResult, error) {
	off := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("mcp: cursor %q is not one this server gave", cursor)
		}
		off = n
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
	if off == 0 {
		res.Resources = append(res.Resources, s.inboxResource())
	}
	i := 0
	err := s.mb.List(ctx, mailbox.Filter{Limit: off + pageSize + 1}, func(e *mailbox.Entry) error {
		i++
		if i <= off {
			return nil
		}
		if i > off+pageSize {
			res.NextCursor = strconv.Itoa(off + pageSize)
			return nil
		}
		res.Resources = append(res.Resources, messageResource(e))
		return nil
	})
	return res, err
}

// messageResource is a message as resources/list names it.
func messageResource(e *mailbox.Entry) *mcp.Resource {
	title := mailview.SafeText(e.Session.Name)
	if title == "" {
		title = mailview.SafeText(e.Preview)
	}
	return &mcp.Resource{URI: MessageURI + e.ID, Name: e.ID, Title: mailview.OneLine(title), MIMEType: "text/markdown",
		Description: mailview.OneLine(fmt.Sprintf("%s from %s: %s", e.Status, mailview.SafeText(e.From.Name), mailview.SafeText(e.Preview)))}
}
