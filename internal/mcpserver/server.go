// Package mcpserver is Courier's MCP server (issue 12): the command line's
// verbs as MCP tools, and the inbox as resources, for agents that speak the
// Model Context Protocol. `courier mcp` serves it over stdio to the agent
// that spawns it; the service serves it over HTTP at /mcp.
//
// Tools (tools.go): list, read, thread, context and attachment read the
// mailbox through package mailview, the same functions the command line
// prints from, so the filters, ids, errors and forms are the CLI's; claim,
// done, fail and send write as the command line writes (write.go): over
// stdio through agents.Local, which goes through the service's socket
// when it answers and acts on the mailbox itself when not (decided per
// call); in the service, over HTTP, through the agents' Backend with the
// HTTP caller, the layer the socket's requests go through. Resources
// (resources.go): each message as courier://message/<id>, and
// courier://inbox, whose subscribers are told when mail arrives. The HTTP
// endpoint and its guards are http.go.
//
// A refusal carries the command line's exit code for it, by fault's one
// table: "... (exit 2)" in its text and exit_code in the verbs' structured
// result, so that an agent can tell "not found" (1) from "held by another
// agent" (2).
//
// Who the caller is. Over stdio the process runs as the agent's user, so
// the CLI's rules apply unchanged (the socket tells the service who asks).
// Over HTTP there is no peer credential: whoever holds the bearer token
// (anyone who reaches the loopback listener when mcp.token_file is unset)
// is one caller, the user "mcp" of agentapi.Caller, not the service's
// owner. So an agent named "reviewer" over HTTP acts as "reviewer@mcp":
// HTTP agents cannot renew, finish or fail the claims of the socket's
// users, nor they theirs.
package mcpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/mailbox"
)

const (
	// MaxResult bounds what one tool call or resource read returns: the
	// result is held in memory, and copied by the SDK as it is encoded,
	// before it is sent; and a frame over 16 MiB (read's result is sent
	// twice in one, as structured content and as text) is more than the
	// go-sdk's clients read by default.
	MaxResult = 6 << 20
	// concurrent bounds the calls that read the mailbox, or write it as
	// the command line does, at once: each holds its result, up to the
	// bound above.
	concurrent = 4
	// DefaultLimit is list's default page when the agent gives none: an
	// agent's context is small, a mailbox is not; and a client reads a
	// page in time that grows faster than its size (the TypeScript SDK's
	// copies what it has of a frame at each 64 KiB read), so pages of
	// 500 (about 0.4 MB as sent) list a mailbox at least as fast as pages
	// of 1,000 (bench/mcp.sh), and pages of 250 cost the server more
	// (each page is a query).
	DefaultLimit = 500
	// MaxLimit is the most entries one list call returns. Pages go on
	// with next_cursor, and a page also ends at MaxPage bytes.
	MaxLimit = 10_000
	// MaxPage bounds a page of list as it is sent (the entries as
	// structured content, and their lines in its text): a page ends
	// before it, with a cursor, when its entries are large (about 960
	// entries of bench/genmailbox). A page of 10,000 was 12.7 MB, which
	// the official TypeScript SDK's stdio client refuses (over 10 MiB:
	// "Connection closed"); that client copies what it has of a frame at
	// each 64 KiB read, so it took half as long again per entry at 4 MiB
	// as at 1 MiB, and paging 100,000 entries at 1 MiB pages cost a fifth
	// more CPU than at pages of 0.8 MB (bench/mcp.sh).
	MaxPage = 768 << 10
	// maxFrame bounds the result of thread and context as it is sent:
	// under the 10 MiB of the TypeScript SDK's stdio client.
	maxFrame = 8 << 20
	// maxAttachment is what attachment returns of an object at most,
	// unless max_bytes asks for less.
	maxAttachment = 8 << 20
	// inboxLimit is how many entries courier://inbox reads: its first
	// 1,000, once, as text.
	inboxLimit = 1000
	// pageSize is resources/list's page.
	pageSize = 500
	// InboxURI is the resource that stands for the inbox: subscribe to it
	// to be told when mail arrives.
	InboxURI = "courier://inbox"
	// MessageURI, followed by an id, is a message's resource.
	MessageURI = "courier://message/"
	// MaxSubscriptions bounds a session's subscriptions: the SDK keeps
	// each URI a client names.
	MaxSubscriptions = 256
	// subscribedPoll is how often the journal is read, at the least,
	// while a session subscribes to the inbox.
	subscribedPoll = 100 * time.Millisecond
)

// Options configure a Server. Writes go one of two ways: Local (stdio:
// as the command line) or Backend (in the service, for Caller).
type Options struct {
	Mailbox  *mailbox.Mailbox
	Dropzone *dropzone.Store

	// Local writes as the command line does; Agent is the name the
	// command was given (--agent, $COURIER_AGENT), for calls that give
	// none.
	Local *agents.Local
	Agent string

	// Backend writes in the service, as Caller.
	Backend agentapi.Backend
	Caller  agentapi.Caller

	Version string
	Logger  *slog.Logger
	// MaxResult bounds a result (default MaxResult; tests lower it).
	MaxResult int
}

// Server is one MCP server over a workspace.
type Server struct {
	mb  *mailbox.Mailbox
	dz  *dropzone.Store
	w   writer
	srv *mcp.Server
	log *slog.Logger
	// max bounds a result; slots bounds the calls run at once.
	max   int
	slots chan struct{}
	// entryBytes is what an entry of the last page of list took as sent,
	// on average: list reads about as many entries as fit (fill).
	entryBytes atomic.Int64

	mu   sync.Mutex
	subs map[*mcp.ServerSession]map[string]bool
}

// New makes the server; it does no I/O.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxResult <= 0 {
		opts.MaxResult = MaxResult
	}
	s := &Server{mb: opts.Mailbox, dz: opts.Dropzone, log: opts.Logger, max: opts.MaxResult, slots: make(chan struct{}, concurrent)}
	if opts.Local != nil {
		s.w = &localWriter{s: s, l: opts.Local, agent: opts.Agent}
	} else {
		s.w = &remoteWriter{s: s, b: opts.Backend, caller: opts.Caller}
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "courier", Title: "Courier mailbox", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: "Courier is a mailbox of email, Slack and Lark messages. `list` the inbox, `read` a message, `claim` it " +
			"(so that no other agent works on it), answer with `send` (reply_to the message), then `done` (or `fail`). " +
			"Subscribe to " + InboxURI + " to be told when mail arrives; each message is also the resource courier://message/<id>.",
		Logger:             slog.New(sdkLog{opts.Logger.Handler()}),
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
		Capabilities:       &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}},
		KeepAlive:          time.Minute,
		// Pings go unanswered while a client waits on a long call of
		// its own; three in a row is a client gone.
		KeepAliveFailureThreshold: 3,
	})
	s.addTools()
	s.addResources()
	return s
}

// MCP is the SDK's server, to connect a transport to.
func (s *Server) MCP() *mcp.Server { return s.srv }

// ServeStdio serves one session on r and w (standard input and output)
// until the client closes it or ctx ends, telling it of new mail.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.Watch(wctx)
	f := newFrames()
	err := s.srv.Run(context.WithValue(ctx, framesKey{}, f), &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{framesWriter{w, f}}})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// slot waits for one of the calls that may run at once; release gives it
// back.
func (s *Server) slot(ctx context.Context) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	case <-ctx.Done():
		return nil, unavailable(ctx.Err())
	}
}

// capped is a buffer that refuses to grow past max, and, when soft is
// set, takes nothing more once it holds soft bytes (errFull).
type capped struct {
	bytes.Buffer
	max  int
	soft int
}

// errFull is a capped buffer that holds enough.
var errFull = errors.New("mcpserver: the page is full")

func (b *capped) Write(p []byte) (int, error) {
	if b.soft > 0 && b.Len() >= b.soft {
		return 0, errFull
	}
	if b.Len()+len(p) > b.max {
		return 0, tooLarge(b.max)
	}
	return b.Buffer.Write(p)
}

// tooLarge is the refusal of a result over max bytes.
func tooLarge(max int) error {
	return fmt.Errorf("the result is over %d bytes, the most one MCP call returns here; narrow it (a limit, a filter) or use the command line", max)
}

// subscribe takes a subscription, up to MaxSubscriptions a session. Any
// URI may be subscribed to; only courier://inbox is ever updated.
func (s *Server) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[*mcp.ServerSession]map[string]bool{}
	}
	m := s.subs[req.Session]
	if m == nil {
		// A new session's first: forget those of sessions gone.
		live := map[*mcp.ServerSession]bool{}
		for ss := range s.srv.Sessions() {
			live[ss] = true
		}
		for ss := range s.subs {
			if !live[ss] {
				delete(s.subs, ss)
			}
		}
		m = map[string]bool{}
		s.subs[req.Session] = m
	}
	if !m[req.Params.URI] && len(m) >= MaxSubscriptions {
		return fmt.Errorf("mcp: this session holds %d subscriptions, the most it may", len(m))
	}
	m[req.Params.URI] = true
	return nil
}

func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs[req.Session], req.Params.URI)
	return nil
}

// Watch tells subscribers when mail arrives until ctx ends: an inbound
// event in the mailbox's journal (written with the message's index row),
// whoever wrote it (this service, or the service the stdio server sits
// beside), read as `courier watch` reads it. A burst is one notification.
// A journal that cannot be read is logged: new mail is then not notified.
func (s *Server) Watch(ctx context.Context) {
	wake, stop := s.mb.WakerEvery(ctx, s.pollEvery)
	cursor, _, err := s.mb.LastEvent(ctx)
	if err != nil {
		stop()
		s.log.Warn("mcp: new mail will not be notified", "err", err)
		return
	}
	go func() {
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			var arrived bool
			cursor, arrived = s.arrivals(ctx, cursor)
			if arrived {
				s.notify(ctx)
			}
		}
	}()
}

// pollEvery is how often Watch reads the journal when nothing woke it:
// every subscribedPoll while a session subscribes to the inbox (someone
// waits to hear of new mail the moment it lands, and a wake-up can be
// missed), else every mailbox.WakerPoll.
func (s *Server) pollEvery() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.subs {
		if m[InboxURI] {
			return subscribedPoll
		}
	}
	return mailbox.WakerPoll
}

// arrivals reads the journal after cursor: whether an inbound message
// arrived, and the new position.
func (s *Server) arrivals(ctx context.Context, cursor int64) (int64, bool) {
	arrived := false
	for {
		evs, err := s.mb.Events(ctx, cursor, 256)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("mcp: reading the journal for new mail", "err", err)
			}
			return cursor, arrived
		}
		for _, ev := range evs {
			cursor = ev.Seq
			arrived = arrived || ev.Kind == mailbox.EventInbound
		}
		if len(evs) < 256 {
			return cursor, arrived
		}
	}
}

// notify tells every session that the list of messages changed, and the
// subscribers of the inbox that it was updated.
func (s *Server) notify(ctx context.Context) {
	s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: InboxURI})
	s.srv.AddResource(s.inboxResource(), s.readInbox) // the same again: the SDK sends list_changed
}

// sdkLog is the go-sdk's log: its info lines (one for every notification
// sent, whether or not anyone subscribed) show only when the service logs
// at debug; its warnings and errors always do.
type sdkLog struct{ slog.Handler }

func (h sdkLog) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l) && (l >= slog.LevelWarn || h.Handler.Enabled(ctx, slog.LevelDebug))
}

func (h sdkLog) WithAttrs(as []slog.Attr) slog.Handler { return sdkLog{h.Handler.WithAttrs(as)} }

func (h sdkLog) WithGroup(name string) slog.Handler { return sdkLog{h.Handler.WithGroup(name)} }
