package mcpserver

import (
	"iter"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionBound is courier.mcp.max_sessions. A session is open once its
// initialize has been handled (the SDK's session then holds its
// InitializeParams). A request without a session id (an initialize, or
// the server/discover a client of the 2026-07-28 protocol sends first)
// may open one, and holds a place from its admission until the first
// byte of its answer is written: by then an initialize's session counts
// as open (the SDK handles the call before it writes the answer), and a
// client that has the answer and asks again finds the place free.
//
// Not counted: a session the SDK holds for a discover, or for an
// initialize that failed, which it closes a moment after answering (the
// client has the answer before that session is gone). Counted, it made
// the bound refuse the initialize a go-sdk client sends right after its
// discover (TestMCPHTTPGuards, now and then under load). Counting and
// taking a place happen under one lock, so requests that arrive together
// cannot all take the last place.
//
// When every place is taken, the idlest session with no request in
// flight (an event stream is a request for as long as it is open) is
// ended to make room, and the log says so: a one-shot client (the MCP
// Inspector's --cli) never sends DELETE, and its sessions held every
// place until three keepalive pings went unanswered, about three minutes
// in which every client was refused. A client that keeps its event
// stream open, or is in a call, is never ended; only when all are does a
// new client get 503.
type sessionBound struct {
	max     int // 0: no bound
	log     *slog.Logger
	mu      sync.Mutex
	pending int                    // requests without a session admitted and not yet answered
	uses    map[string]*sessionUse // the sessions opened here, by id
}

// sessionUse is what /mcp knows of a session's use.
type sessionUse struct {
	open    int       // requests in flight
	last    time.Time // when the last one ended, or the session opened
	evicted bool      // ended to make room, and not gone from the SDK yet
}

// take takes a place for a request without a session id, given the
// server's sessions, ending the idlest unused one if that is what it
// takes; release gives the place back (call it once the answer is
// started, or the request ends) with the id of the session the answer
// opened, if any. When there is no place, ok is false and n says how
// many are taken.
func (b *sessionBound) take(sessions func() iter.Seq[*mcp.ServerSession]) (release func(id string), n int, ok bool) {
	if b.max <= 0 {
		return func(string) {}, 0, true
	}
	b.mu.Lock()
	n, idlest := b.count(sessions)
	if n >= b.max && idlest != nil {
		u := b.uses[idlest.ID()]
		u.evicted = true
		n--
		b.log.Info("mcp: ended the idlest session, which had no stream open, to let a new client in (courier.mcp.max_sessions)",
			"idle", time.Since(u.last).Round(time.Millisecond), "max_sessions", b.max)
		defer idlest.Close()
	}
	if n >= b.max {
		b.mu.Unlock()
		return nil, n, false
	}
	b.pending++
	b.mu.Unlock()
	var once sync.Once
	return func(id string) {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.pending--
			if id != "" && b.uses[id] == nil {
				if b.uses == nil {
					b.uses = map[string]*sessionUse{}
				}
				b.uses[id] = &sessionUse{last: time.Now()}
			}
		})
	}, n, true
}

// count counts the places taken and finds the idlest session opened
// here with no request in flight (nil if none), forgetting the sessions
// that are gone. b.mu is held.
func (b *sessionBound) count(sessions func() iter.Seq[*mcp.ServerSession]) (n int, idlest *mcp.ServerSession) {
	n = b.pending
	live := make(map[string]bool, len(b.uses))
	var idle *sessionUse
	for ss := range sessions() {
		id := ss.ID()
		live[id] = true
		u := b.uses[id]
		if ss.InitializeParams() == nil || (u != nil && u.evicted) {
			continue
		}
		n++
		if u != nil && u.open == 0 && (idle == nil || u.last.Before(idle.last)) {
			idlest, idle = ss, u
		}
	}
	for id := range b.uses {
		if !live[id] {
			delete(b.uses, id)
		}
	}
	return n, idlest
}

// use marks a request of session id in flight until done is called.
func (b *sessionBound) use(id string) (done func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.uses[id]
	if u == nil {
		return func() {}
	}
	u.open++
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		u.open--
		u.last = time.Now()
	}
}
