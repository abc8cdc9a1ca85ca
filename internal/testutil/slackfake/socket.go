package slackfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	// slack-go's own websocket library, on the server side of the
	// connection slack-go dials.
	"github.com/gorilla/websocket"
)

const appID = "A0FAKE"

type socketState struct {
	conns []*wsConn // open, oldest first
	// starting are connections being greeted: not handed to SendEvent
	// until their hello is written, but already Drop's and Disconnect's
	// (a test that saw hello may drop the connection at once).
	starting []*wsConn
	accepted int
	// changed is closed, and replaced, whenever a connection opens or
	// closes: what SendEvent and WaitConnections wait on.
	changed chan struct{}
	envs    map[string]*envelope
	order   []string // envelope ids, as first sent
	pongs   int      // answers to the server's pings, on every connection
}

func (st *socketState) init() {
	st.changed = make(chan struct{})
	st.envs = map[string]*envelope{}
}

// signal wakes the waiters. Called with s.mu held.
func (st *socketState) signal() {
	close(st.changed)
	st.changed = make(chan struct{})
}

type wsConn struct {
	ws   *websocket.Conn
	nc   net.Conn
	done chan struct{} // closed when the connection is gone
	once sync.Once
	wmu  sync.Mutex // gorilla's writers are not safe for concurrent use
	// silent stops the pings (SilencePings); guarded by Server.mu.
	silent bool
}

func (c *wsConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *wsConn) control(typ int, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteControl(typ, data, time.Now().Add(10*time.Second))
}

type envelope struct {
	id, typ string
	payload json.RawMessage
	retry   int
	acked   chan struct{}
	isAcked bool
}

var upgrader = websocket.Upgrader{
	// slack-go sends Origin: https://api.slack.com; Slack takes any.
	CheckOrigin: func(*http.Request) bool { return true },
}

func (s *Server) connectionsOpen(*request) (map[string]any, error) {
	b := make([]byte, 16)
	rand.Read(b)
	ticket := hex.EncodeToString(b)
	s.tickets[ticket] = true
	u := "ws://" + strings.TrimPrefix(s.base, "http://") + "/link/?ticket=" + ticket + "&app_id=" + appID
	return map[string]any{"url": u}, nil
}

// serveLink is the websocket endpoint: a ticket from
// apps.connections.open opens one connection.
func (s *Server) serveLink(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	valid := ticket != "" && s.tickets[ticket] && !s.revoked && !s.closed
	delete(s.tickets, ticket)
	s.mu.Unlock()
	if !valid {
		http.Error(w, "invalid_auth", http.StatusUnauthorized)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade answered the client
	}
	ws.SetReadLimit(maxFrame)
	ws.SetPongHandler(func(string) error {
		s.mu.Lock()
		s.sock.pongs++
		s.mu.Unlock()
		return nil
	})
	c := &wsConn{ws: ws, nc: ws.NetConn(), done: make(chan struct{})}
	// hello comes first on a connection, before any envelope: the
	// connection is not handed to SendEvent until it is written.
	s.mu.Lock()
	n := len(s.sock.conns) + 1
	s.sock.starting = append(s.sock.starting, c)
	s.sock.accepted++ // accepted: the client is told hello next
	s.sock.signal()
	s.mu.Unlock()
	hello := mustJSON(map[string]any{"type": "hello", "num_connections": n,
		"debug_info":      map[string]any{"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": appID}})
	werr := c.write(hello)
	s.mu.Lock()
	if i := slices.Index(s.sock.starting, c); i >= 0 {
		s.sock.starting = slices.Delete(s.sock.starting, i, i+1)
	}
	select {
	case <-c.done:
		werr = net.ErrClosed // dropped while greeted
	default:
	}
	if werr != nil || s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.sock.conns = append(s.sock.conns, c)
	s.sock.signal()
	s.wg.Add(2)
	s.mu.Unlock()
	defer s.wg.Done()
	go s.ping(c)
	s.read(c)
}

// ping pings the connection every PingInterval, unless silenced: slack-go
// takes a connection without pings for dead.
func (s *Server) ping(c *wsConn) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-s.shutdown:
			return
		case <-t.C:
			s.mu.Lock()
			silent := c.silent
			s.mu.Unlock()
			if !silent && c.control(websocket.PingMessage, []byte("ping")) != nil {
				s.gone(c)
				return
			}
		}
	}
}

// read takes the client's acks until the connection ends.
func (s *Server) read(c *wsConn) {
	defer s.gone(c)
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if len(b) >= maxAck {
			continue // Slack drops a response this large without a word
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(b, &ack) != nil || ack.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		if e := s.sock.envs[ack.EnvelopeID]; e != nil && !e.isAcked {
			e.isAcked = true
			close(e.acked)
		}
		s.mu.Unlock()
	}
}

// gone forgets a connection and closes it.
func (s *Server) gone(c *wsConn) {
	c.once.Do(func() {
		close(c.done)
		c.nc.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.sock.conns, c); i >= 0 {
			s.sock.conns = slices.Delete(s.sock.conns, i, i+1)
			s.sock.signal()
		}
	})
}

// SendEvent sends an Events API callback ({"type":"event_callback",
// "event_id":...,"event":{...}}) in an events_api envelope to the newest
// connection, waiting for one while ctx lets it; it returns the
// envelope's id.
func (s *Server) SendEvent(ctx context.Context, payload json.RawMessage) (string, error) {
	return s.SendEnvelope(ctx, "events_api", payload)
}

// SendEnvelope sends payload in an envelope of type typ (events_api,
// slash_commands, interactive, ...), as SendEvent does.
func (s *Server) SendEnvelope(ctx context.Context, typ string, payload json.RawMessage) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return "", fmt.Errorf("slackfake: %s payload is not a JSON object: %v", typ, err)
	}
	e := &envelope{id: uuid.NewString(), typ: typ, payload: payload, acked: make(chan struct{})}
	s.mu.Lock()
	s.sock.envs[e.id] = e
	s.sock.order = append(s.sock.order, e.id)
	s.mu.Unlock()
	if err := s.deliver(ctx, e, 0, ""); err != nil {
		// Never sent: not an envelope the client owes an ack.
		s.mu.Lock()
		delete(s.sock.envs, e.id)
		s.sock.order = slices.DeleteFunc(s.sock.order, func(id string) bool { return id == e.id })
		s.mu.Unlock()
		return "", err
	}
	return e.id, nil
}

// Redeliver sends an envelope again with retry_attempt one more and
// retry_reason "timeout", as Slack does when no ack came in time.
func (s *Server) Redeliver(ctx context.Context, envelopeID string) error {
	s.mu.Lock()
	e := s.sock.envs[envelopeID]
	if e == nil {
		s.mu.Unlock()
		return fmt.Errorf("slackfake: no envelope %q", envelopeID)
	}
	e.retry++
	retry := e.retry
	s.mu.Unlock()
	return s.deliver(ctx, e, retry, "timeout")
}

func (s *Server) deliver(ctx context.Context, e *envelope, retry int, reason string) error {
	frame := map[string]any{"envelope_id": e.id, "payload": e.payload, "type": e.typ,
		"accepts_response_payload": e.typ != "events_api"}
	if e.typ == "events_api" {
		frame["retry_attempt"], frame["retry_reason"] = retry, reason
	}
	b := mustJSON(frame)
	for {
		c, err := s.current(ctx)
		if err != nil {
			return err
		}
		if c.write(b) == nil {
			return nil
		}
		// The connection died under us: Slack sends on another one.
		s.gone(c)
	}
}

// current waits for an open connection and returns the newest.
func (s *Server) current(ctx context.Context) (*wsConn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("slackfake: server closed")
		}
		if n := len(s.sock.conns); n > 0 {
			c := s.sock.conns[n-1]
			s.mu.Unlock()
			return c, nil
		}
		changed := s.sock.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("slackfake: no Socket Mode connection: %w", ctx.Err())
		}
	}
}

// Acked returns a channel closed when the client acked the envelope.
func (s *Server) Acked(envelopeID string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.sock.envs[envelopeID]
	if e == nil {
		s.t.Errorf("slackfake: Acked: no envelope %q", envelopeID)
		return make(chan struct{})
	}
	return e.acked
}

// Unacked returns the envelopes sent and not acked, in the order sent.
func (s *Server) Unacked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, id := range s.sock.order {
		if !s.sock.envs[id].isAcked {
			ids = append(ids, id)
		}
	}
	return ids
}

// Disconnect sends {"type":"disconnect","reason":reason} on every open
// connection, then closes it, as Slack does before it moves a client
// (refresh_requested, warning) or when the app's Socket Mode is turned
// off (link_disabled).
func (s *Server) Disconnect(reason string) {
	b := mustJSON(map[string]any{"type": "disconnect", "reason": reason,
		"debug_info": map[string]any{"host": "applink-fake"}})
	for _, c := range s.open() {
		c.write(b)
		c.control(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		s.gone(c)
	}
}

// Drop closes every open connection's TCP connection, with no frame.
func (s *Server) Drop() {
	for _, c := range s.open() {
		s.gone(c)
	}
}

func (s *Server) open() []*wsConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(slices.Clone(s.sock.conns), s.sock.starting...)
}

// SilencePings stops (true) or resumes (false) the server's pings on the
// connections open now: each is left open and says nothing, a half-dead
// connection, which slack-go drops after its ping interval. Connections
// opened afterwards are pinged as usual.
func (s *Server) SilencePings(silent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.sock.conns {
		c.silent = silent
	}
}

// Connections is how many websocket connections were accepted so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.accepted
}

// OpenConnections is how many websocket connections are open now.
func (s *Server) OpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sock.conns)
}

// Pongs is how many of the server's pings the clients answered.
func (s *Server) Pongs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.pongs
}

// WaitConnections waits until n connections were accepted in all.
func (s *Server) WaitConnections(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, changed := s.sock.accepted, s.sock.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("slackfake: %d of %d connections: %w", got, n, ctx.Err())
		}
	}
}
