// Package netgate bounds what clients can hold of a listener served by
// net/http, the way the SMTP receiver's gate does for its sessions
// (adapters/email): places in all and per source, a deadline on each
// request's body, and, when every place is taken, the newcomer takes the
// place of the connection that has waited longest for its client.
//
// A connection is waiting for its client while the server reads its
// request (headers or body) or waits for the next one; it is busy while a
// handler works on it (an event stream that writes now and then is busy,
// however idle it looks). Only waiting connections give their place: a
// client that holds one by sending slowly, or not at all, loses it to the
// next client as soon as the places run out, so it cannot keep the others
// waiting for its timeouts. A connection that finds every place busy gets
// a spare one: there a reserved request (/health) is served at once, and
// another waits for a place to free.
package netgate

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound a Gate. Zero values are taken as none (MaxPerSource,
// Spare, BodyTimeout) or one (MaxConns).
type Limits struct {
	MaxConns     int           // places for requests of any kind
	MaxPerSource int           // of them, held by one source (its key; "" counts against none)
	Spare        int           // connections beyond MaxConns, waiting for a place or served a reserved request
	SpareWait    time.Duration // how long a request on a spare connection waits for a place
	// MinWait is how long a connection must have waited for its client
	// before it gives its place: a connection just accepted, its request
	// on the way, or one between two of its client's writes, keeps it.
	MinWait time.Duration
	// BodyTimeout bounds the reading of a request's body, from the moment
	// its handler starts. A handler that needs longer (an upload) sets its
	// own deadline with http.ResponseController.
	BodyTimeout time.Duration
}

// Source tells who is at the other end of c: key is what MaxPerSource
// counts by ("" for none), info is kept with the connection (Conn.Info).
// An error refuses the connection.
type Source func(c net.Conn) (key string, info any, err error)

// A newcomer's place is bought from a connection waiting for its client,
// and content arriving is credited at this rate: a request whose body
// comes at 1 KiB/s or more never looks long-waiting, one that trickles does.
const creditPerKiB = time.Second

// spareTick is how often a request on a spare connection looks for a place.
const spareTick = 50 * time.Millisecond

// Gate admits and tracks a listener's connections. Serve it with Listen,
// ConnContext and Handler on one http.Server.
type Gate struct {
	lim    Limits
	source Source
	log    *slog.Logger
	name   string

	mu      sync.Mutex
	conns   map[*Conn]struct{}
	placed  int // connections holding a place
	spares  int
	perKey  map[string]int
	peak    int
	evicted int // since the last log line
	refused int
	logged  time.Time
}

// New returns a gate under lim; name starts its log lines.
func New(name string, lim Limits, source Source, log *slog.Logger) *Gate {
	lim.MaxConns = max(lim.MaxConns, 1)
	if lim.MaxPerSource <= 0 {
		lim.MaxPerSource = lim.MaxConns
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Gate{lim: lim, source: source, log: log, name: name, conns: map[*Conn]struct{}{}, perKey: map[string]int{}}
}

// Conns returns the connections holding a place now and the most there
// were at once.
func (g *Gate) Conns() (placed, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.placed, g.peak
}

// Listen returns ln behind the gate: its Accept returns the connections
// admitted, as *Conn; the others are closed there.
func (g *Gate) Listen(ln net.Listener) net.Listener { return &listener{Listener: ln, g: g} }

type listener struct {
	net.Listener
	g *Gate
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := l.g.admit(c); gc != nil {
			return gc, nil
		}
	}
}

type connKey struct{}

// ConnContext is the http.Server's ConnContext: it lets Handler find the
// connection of a request.
func (g *Gate) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if gc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, gc)
	}
	return ctx
}

// ConnOf returns the gate's connection that r came on, nil if none.
func ConnOf(r *http.Request) *Conn {
	c, _ := r.Context().Value(connKey{}).(*Conn)
	return c
}

// admit places c, or gives it a spare place, or closes it.
func (g *Gate) admit(c net.Conn) *Conn {
	key, info, err := g.source(c)
	if err != nil {
		g.log.Warn(g.name+": connection refused", "err", err)
		c.Close()
		return nil
	}
	now := time.Now()
	gc := &Conn{Conn: c, g: g, key: key, Info: info, since: now}
	g.mu.Lock()
	victim, why := g.place(gc, now)
	if why != "" {
		gc.spare = true
		if g.spares >= g.lim.Spare {
			// The spare connection that has waited longest for its
			// client gives way (one with its request read waits for a
			// place, and is busy); failing that, the newcomer is closed.
			if victim = g.idlest(now, func(v *Conn) bool { return v.spare }); victim != nil {
				g.forget(victim)
				victim.evicted = true
				g.evicted++
			}
		}
		if g.spares >= g.lim.Spare {
			gc = nil
			g.refused++
		} else {
			g.spares++
		}
	}
	if gc != nil {
		g.conns[gc] = struct{}{}
	}
	logArgs := g.pressure(now, victim != nil || why != "")
	g.mu.Unlock()
	g.logPressure(logArgs)
	if victim != nil {
		victim.Conn.Close()
	}
	if gc == nil {
		c.Close()
		return nil
	}
	return gc
}

// place gives c a place if there is one, or one a waiting connection
// gives up (victim, already forgotten, for the caller to close); else why
// there is none. Called with g.mu held.
func (g *Gate) place(c *Conn, now time.Time) (victim *Conn, why string) {
	if c.key != "" && g.perKey[c.key] >= g.lim.MaxPerSource {
		victim = g.idlest(now, func(v *Conn) bool { return !v.spare && v.key == c.key })
		if victim == nil {
			return nil, "too many connections from " + c.key
		}
	} else if g.placed >= g.lim.MaxConns {
		victim = g.idlest(now, func(v *Conn) bool { return !v.spare })
		if victim == nil {
			return nil, "every connection is busy"
		}
	}
	if victim != nil {
		g.forget(victim)
		victim.evicted = true
		g.evicted++
	}
	c.spare = false
	g.placed++
	g.peak = max(g.peak, g.placed)
	if c.key != "" {
		g.perKey[c.key]++
	}
	return victim, ""
}

// idlest returns the connection, of those ok says, that has waited longest
// for its client, at least MinWait; nil if none has. Called with g.mu held.
func (g *Gate) idlest(now time.Time, ok func(*Conn) bool) *Conn {
	var best *Conn
	var waited time.Duration
	for c := range g.conns {
		if c.evicted || !c.waiting() || now.Sub(c.since) < g.lim.MinWait || !ok(c) {
			continue
		}
		if d := now.Sub(c.since); best == nil || d > waited {
			best, waited = c, d
		}
	}
	return best
}

// forget frees c's place. Called with g.mu held.
func (g *Gate) forget(c *Conn) {
	if _, ok := g.conns[c]; !ok {
		return
	}
	delete(g.conns, c)
	if c.spare {
		g.spares--
		return
	}
	g.placed--
	if c.key != "" {
		if g.perKey[c.key]--; g.perKey[c.key] <= 0 {
			delete(g.perKey, c.key)
		}
	}
}

// promote waits, up to SpareWait, for a place for c (on a spare one); it
// returns why there is none when the wait ends without one.
func (g *Gate) promote(ctx context.Context, c *Conn) string {
	deadline := time.Now().Add(g.lim.SpareWait)
	t := time.NewTicker(spareTick)
	defer t.Stop()
	for {
		now := time.Now()
		g.mu.Lock()
		if c.evicted {
			g.mu.Unlock()
			return "closing a waiting connection for a new one"
		}
		g.spares--
		victim, why := g.place(c, now)
		if why != "" {
			c.spare = true
			g.spares++
		}
		logArgs := g.pressure(now, victim != nil)
		g.mu.Unlock()
		g.logPressure(logArgs)
		if victim != nil {
			victim.Conn.Close()
		}
		if why == "" || !now.Before(deadline) {
			return why
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return why
		}
	}
}

// pressure returns the arguments of the log line that says, once a minute
// at most, how many connections gave their place or were refused one.
// Called with g.mu held.
func (g *Gate) pressure(now time.Time, happened bool) []any {
	if !happened || now.Sub(g.logged) < time.Minute || g.evicted+g.refused == 0 {
		return nil
	}
	args := []any{"placed", g.placed, "spare", g.spares, "closed_for_newcomers", g.evicted, "refused", g.refused,
		"max_conns", g.lim.MaxConns, "max_per_source", g.lim.MaxPerSource}
	g.evicted, g.refused, g.logged = 0, 0, now
	return args
}

func (g *Gate) logPressure(args []any) {
	if args != nil {
		g.log.Warn(g.name+": every place taken: connections waiting for their clients closed for new ones, or new ones refused (counts since the last such line)", args...)
	}
}

func (g *Gate) release(c *Conn) {
	g.mu.Lock()
	g.forget(c)
	g.mu.Unlock()
}
