package netgate

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Conn is a connection the gate admitted.
type Conn struct {
	net.Conn
	g    *Gate
	key  string
	Info any // what the Source said of the client
	once sync.Once

	// Under g.mu.
	spare    bool // it holds no place (yet)
	handling bool // a handler works on its request
	reading  bool // the handler waits for the request's body
	// answering: the handler has returned and the server is still
	// sending its answer; the connection waits for its client again
	// from the server's next read.
	answering bool
	evicted   bool
	// since is when the connection began waiting for its client: its
	// accept, or the end of its last request; advanced by creditPerKiB
	// for each KiB read, up to now.
	since time.Time
}

// Key is what the per-source cap counts the connection by.
func (c *Conn) Key() string { return c.key }

// waiting says whether c waits for its client. Called with g.mu held.
func (c *Conn) waiting() bool { return !c.handling && !c.answering || c.reading }

func (c *Conn) Read(p []byte) (int, error) {
	c.g.mu.Lock()
	if c.answering {
		c.answering = false
		c.since = time.Now()
	}
	c.g.mu.Unlock()
	n, err := c.Conn.Read(p)
	if n > 0 {
		now := time.Now()
		c.g.mu.Lock()
		if s := c.since.Add(time.Duration(n) * creditPerKiB / 1024); s.Before(now) {
			c.since = s
		} else {
			c.since = now
		}
		c.g.mu.Unlock()
	}
	return n, err
}

func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.g.release(c) })
	return err
}

func (c *Conn) set(handling, reading bool) {
	c.g.mu.Lock()
	if c.handling && !handling {
		c.answering = true
	}
	c.handling, c.reading = handling, reading
	c.g.mu.Unlock()
}

// Handler serves h on the gate's connections: it bounds each request's
// body by BodyTimeout and follows when the connection waits for its
// client. On a spare connection a request reserved says is served at
// once; another waits up to SpareWait for a place, and is answered by
// refuse (with the reason) if none frees; the connection is then closed.
func (g *Gate) Handler(h http.Handler, reserved func(*http.Request) bool, refuse func(w http.ResponseWriter, r *http.Request, why string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := ConnOf(r)
		if c == nil {
			h.ServeHTTP(w, r)
			return
		}
		c.set(true, false)
		defer c.set(false, false)
		if c.isSpare() && (reserved == nil || !reserved(r)) {
			if why := g.promote(r.Context(), c); why != "" {
				w.Header().Set("Connection", "close")
				w.Header().Set("Retry-After", "1")
				refuse(w, r, why)
				return
			}
		}
		// Without a body, net/http is already reading in the background
		// (for the client's hang-up) with no deadline, as long as the
		// handler runs: an event stream's, say. A deadline now would end
		// that read and cancel the request.
		if r.Body != nil && r.Body != http.NoBody && g.lim.BodyTimeout > 0 {
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.lim.BodyTimeout))
			r.Body = &body{ReadCloser: r.Body, c: c}
		}
		h.ServeHTTP(w, r)
	})
}

func (c *Conn) isSpare() bool {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.spare
}

// body is a request's body: reading it, the connection waits for its
// client. (At its end net/http lifts the read deadline for its background
// read, which lasts as long as the handler.)
type body struct {
	io.ReadCloser
	c *Conn
}

func (b *body) Read(p []byte) (int, error) {
	b.c.set(true, true)
	n, err := b.ReadCloser.Read(p)
	b.c.set(true, false)
	return n, err
}
