package webui

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monoco/courier/mailbox"
)

// The live feed. One goroutine (the hub) follows the mailbox's event
// journal, as the notify runner and `courier watch` do: it wakes on the
// mailbox's Subscribe signal (a commit that journals an event in this
// process) and reads the rows after its position. Claims are not
// journaled, so it also looks at the claims and deliveries tables every
// Poll for a change. What changed goes to every open /ui/events stream
// (Server-Sent Events), and each page's script reloads its content.
//
// The hub also fills the search index, a batch at each wake-up, so that
// new mail is searchable as soon as it is shown.

// change is one Server-Sent Event.
type change struct {
	Kind string // inbound, delivered, dead (journal kinds), or state
	ID   string
}

type hub struct {
	mb   *mailbox.Mailbox
	poll time.Duration
	log  *slog.Logger

	mu     sync.Mutex
	subs   map[chan change]bool
	cancel context.CancelFunc
	done   chan struct{}
	// index wakes the search indexer (one pending signal) for the
	// inbound ids in fresh, or a whole scan when too many came at once.
	index  chan struct{}
	fresh  []string
	rescan bool
	// caughtUp is set once the indexer's scan at start is done: until
	// then a search finds only part of the mailbox.
	caughtUp atomic.Bool
}

func newHub(mb *mailbox.Mailbox, poll time.Duration, log *slog.Logger) *hub {
	return &hub{mb: mb, poll: poll, log: log, subs: map[chan change]bool{}, index: make(chan struct{}, 1)}
}

func (h *hub) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	// The position is taken now, so that an event committed once Start
	// returns is streamed.
	pos, _, err := h.mb.LastEvent(ctx)
	if err != nil {
		h.log.Warn("web viewer: cannot read the event journal", "err", err)
	}
	wake, unsubscribe := h.mb.Subscribe()
	indexed := make(chan struct{})
	go func() { defer close(indexed); h.indexer(ctx) }()
	go func() { h.run(ctx, pos, wake); unsubscribe(); <-indexed; close(h.done) }()
}

func (h *hub) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	<-h.done
	h.mu.Lock()
	for ch := range h.subs {
		close(ch)
		delete(h.subs, ch)
	}
	h.mu.Unlock()
}

// maxStreams bounds the live streams at once (each holds a connection).
const maxStreams = 32

func (h *hub) subscribe() (chan change, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= maxStreams {
		return nil, false
	}
	ch := make(chan change, 64)
	h.subs[ch] = true
	return ch, true
}

func (h *hub) unsubscribe(ch chan change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[ch] {
		delete(h.subs, ch)
		close(ch)
	}
}

func (h *hub) broadcast(c change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- c:
		default: // a stream that does not keep up reloads once anyway
		}
	}
}

func (h *hub) run(ctx context.Context, pos int64, wake <-chan struct{}) {
	state := h.stateMark(ctx)
	tick := time.NewTicker(h.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		}
		pos = h.journal(ctx, pos)
		// Nobody watching, nothing to poll: the claims table is read
		// only for open streams.
		if h.watched() {
			if m := h.stateMark(ctx); m != state {
				state = m
				h.broadcast(change{Kind: "state"})
			}
		}
	}
}

func (h *hub) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

// maxFresh bounds the ids waiting for the indexer; beyond, it scans.
const maxFresh = 10000

// toIndex hands the indexer the id of a new inbound message.
func (h *hub) toIndex(id string) {
	h.mu.Lock()
	if len(h.fresh) < maxFresh {
		h.fresh = append(h.fresh, id)
	} else {
		h.rescan = true
	}
	h.mu.Unlock()
	select {
	case h.index <- struct{}{}:
	default:
	}
}

// journal broadcasts the events after pos and returns the new position.
func (h *hub) journal(ctx context.Context, pos int64) int64 {
	for {
		evs, err := h.mb.Events(ctx, pos, 256)
		if err != nil || len(evs) == 0 {
			return pos
		}
		for _, e := range evs {
			h.broadcast(change{Kind: string(e.Kind), ID: e.ID})
			if e.Kind == mailbox.EventInbound {
				h.toIndex(e.ID)
			}
			pos = e.Seq
		}
	}
}

// stateMark changes when a claim or a delivery does.
func (h *hub) stateMark(ctx context.Context) string {
	var c, d, n int64
	h.mb.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(updated_at), 0), COUNT(*) FROM claims`).Scan(&c, &n)
	h.mb.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(updated_at), 0) FROM deliveries`).Scan(&d)
	return fmt.Sprint(c, n, d)
}

// searchBatch is how many messages the indexer adds a transaction.
const searchBatch = 500

// indexer fills the search index: the whole backlog at start (after a
// reindex, or on first use), then each new message as the journal names
// it.
func (h *hub) indexer(ctx context.Context) {
	scan := true
	for {
		if scan {
			var at *mailbox.Key
			h.caughtUp.Store(false)
			for first := true; (first || at != nil) && ctx.Err() == nil; first = false {
				_, at = h.indexSearch(ctx, nil, at)
			}
			h.caughtUp.Store(ctx.Err() == nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-h.index:
		}
		h.mu.Lock()
		ids, all := h.fresh, h.rescan
		h.fresh, h.rescan = nil, false
		h.mu.Unlock()
		scan = all
		for len(ids) > 0 && ctx.Err() == nil {
			n := min(len(ids), searchBatch)
			h.indexSearch(ctx, ids[:n], nil)
			ids = ids[n:]
		}
	}
}

// indexSearch adds a batch to the search index, of ids or (nil) the
// newest messages it lacks before at; it returns how many, and where a
// scan goes on.
func (h *hub) indexSearch(ctx context.Context, ids []string, at *mailbox.Key) (int, *mailbox.Key) {
	n, next, err := h.mb.IndexSearch(ctx, ids, at, searchBatch, h.searchText(ctx))
	if err != nil && ctx.Err() == nil {
		h.log.Warn("web viewer: search index", "err", err)
	}
	return n, next
}

// maxIndexed bounds what is read of a file for its text.
const maxIndexed = 256 << 10

// searchText is a message's subject (from its entry) and text (its file's
// body, after the front matter): no YAML is decoded, which is most of the
// cost of indexing 100,000 messages.
func (h *hub) searchText(ctx context.Context) func(e *mailbox.Entry) (mailbox.SearchText, error) {
	return func(e *mailbox.Entry) (mailbox.SearchText, error) {
		f, err := h.mb.OpenPath(e.Path)
		if err != nil {
			return mailbox.SearchText{}, err
		}
		defer f.Close()
		raw, err := io.ReadAll(io.LimitReader(f, maxIndexed))
		if err != nil {
			return mailbox.SearchText{}, err
		}
		body := string(raw)
		if rest, ok := strings.CutPrefix(body, "---\n"); ok {
			if i := strings.Index(rest, "\n---\n"); i >= 0 {
				body = rest[i+5:]
			}
		}
		return mailbox.SearchText{Subject: e.Session.Name, Body: body}, nil
	}
}

// events is GET /ui/events: the live feed as Server-Sent Events.
func (s *Server) events(w http.ResponseWriter, r *http.Request, _ *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, ok := s.hub.subscribe()
	if !ok {
		http.Error(w, "too many live streams", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.unsubscribe(ch)
	// The server's timeouts would cut the stream (its ReadTimeout would
	// cancel the request): it lives until the browser leaves or the
	// service stops.
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, "retry: 2000\n: live\n\n")
	fl.Flush()
	keep := time.NewTicker(25 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case c, ok := <-ch:
			if !ok {
				return
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", c.Kind, c.ID)
		}
		fl.Flush()
	}
}
