package larkfake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	// The SDK's own pbbp2 codec: the frames are Lark's protobuf, and
	// this is the generated code for it.
	larkws "github.com/larksuite/oapi-sdk-go/v3/ws"
)

// serviceID is the service the fake's frames name, as Lark's
// msg-frontier puts one in the ws URL and every frame.
const serviceID = 33554678

type socketState struct {
	conns    []*wsConn // open, oldest first
	accepted int
	// opening counts the handshakes past the limit check and not yet in
	// conns: they hold their place, so two at once cannot both pass a
	// limit that has room for one.
	opening int
	tickets map[string]bool
	// changed is closed, and replaced, whenever a connection opens or
	// closes: what SendEvent and WaitConnections wait on.
	changed chan struct{}
	events  map[string]*event // by message_id
	pings   int
	seqID   uint64
	// drops counts Drop calls: a connection whose handshake began before
	// a Drop is dropped too, since its client may already count itself
	// connected (the SDK does once the 101 is read).
	drops int
}

func (st *socketState) init() {
	st.changed = make(chan struct{})
	st.events = map[string]*event{}
	st.tickets = map[string]bool{}
}

// signal wakes the waiters. Called with s.mu held.
func (st *socketState) signal() {
	close(st.changed)
	st.changed = make(chan struct{})
}

type wsConn struct {
	ws   *websocket.Conn
	nc   net.Conn
	once sync.Once
	wmu  sync.Mutex // gorilla's writers are not safe for concurrent use
}

func (c *wsConn) write(f *larkws.Frame) error {
	b, err := f.Marshal()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.BinaryMessage, b)
}

// Ack is the client's response frame to an event.
type Ack struct {
	// Code is the payload's code: 200 handled, 500 the handler failed.
	Code int
	// BizRT is the biz_rt header: the handling time the client reports, ms.
	BizRT string
	// Data is the payload's data (a callback's answer), nil for an event.
	Data []byte
}

type event struct {
	acked chan struct{}
	ack   *Ack
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// clientConfig is the ClientConfig the endpoint and every pong carry.
func (s *Server) clientConfig() map[string]int {
	return map[string]int{
		"PingInterval":      int(s.opts.PingInterval / time.Second),
		"ReconnectCount":    s.opts.ReconnectCount,
		"ReconnectInterval": int(s.opts.ReconnectInterval / time.Second),
		"ReconnectNonce":    int(s.opts.ReconnectNonce / time.Second),
	}
}

// wsEndpoint is /callback/ws/endpoint: the app's credentials in, a
// one-use ws URL and the ClientConfig out. Called with s.mu held.
func (s *Server) wsEndpoint(_ http.ResponseWriter, _ *http.Request, body []byte) (any, error) {
	var req struct {
		AppID     string `json:"AppID"`
		AppSecret string `json:"AppSecret"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, larkErr(http.StatusOK, CodeInvalidAppID, "invalid param: body is not JSON")
	}
	// HTTP 200 with a code, which the SDK takes as a ClientError: it
	// does not retry bad credentials.
	if req.AppID != s.opts.AppID || req.AppSecret != s.opts.AppSecret {
		return nil, larkErr(http.StatusOK, CodeInvalidAppSecret, "app_id or app_secret invalid")
	}
	if len(s.sock.tickets) >= maxTickets {
		// A client that asks and never connects cannot grow the map: the
		// old tickets go, and one used late is refused with a 514, on
		// which the SDK asks again.
		clear(s.sock.tickets)
	}
	ticket := randHex(16)
	s.sock.tickets[ticket] = true
	s.seq++
	u := fmt.Sprintf("ws://%s/ws/v2?device_id=%d&service_id=%d&ticket=%s",
		strings.TrimPrefix(s.base, "http://"), s.seq, serviceID, ticket)
	return map[string]any{"URL": u, "ClientConfig": s.clientConfig()}, nil
}

// handshakeError refuses a ws handshake as msg-frontier does: the status
// in Handshake-Status, which the SDK reads before the HTTP status.
func handshakeError(w http.ResponseWriter, status int, msg string, authCode int) {
	w.Header().Set(larkws.HeaderHandshakeStatus, strconv.Itoa(status))
	w.Header().Set(larkws.HeaderHandshakeMsg, msg)
	if authCode != 0 {
		w.Header().Set(larkws.HeaderHandshakeAuthErrCode, strconv.Itoa(authCode))
	}
	w.WriteHeader(http.StatusForbidden)
}

// serveWS is the ws endpoint: a ticket from /callback/ws/endpoint opens
// one connection.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	s.calls[RouteWSConnection]++
	valid := ticket != "" && s.sock.tickets[ticket] && !s.closed
	delete(s.sock.tickets, ticket)
	full := len(s.sock.conns)+s.sock.opening >= s.opts.MaxConnections
	if valid && !full {
		s.sock.opening++
	}
	drops := s.sock.drops
	s.mu.Unlock()
	switch {
	case !valid:
		// A retryable refusal: the SDK asks the endpoint for a new ticket.
		handshakeError(w, codeHandshakeAuthFail, "ticket invalid", 0)
		return
	case full:
		handshakeError(w, codeHandshakeAuthFail, "exceed connection limit", CodeWSExceedConnLimit)
		return
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.mu.Lock()
		s.sock.opening--
		s.mu.Unlock()
		return // Upgrade answered the client
	}
	ws.SetReadLimit(maxFrame)
	c := &wsConn{ws: ws, nc: ws.NetConn()}
	s.mu.Lock()
	s.sock.opening-- // in conns below, or gone
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.sock.accepted++
	if s.sock.drops != drops {
		s.sock.signal()
		s.mu.Unlock()
		c.nc.Close()
		return
	}
	s.sock.conns = append(s.sock.conns, c)
	s.sock.signal()
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	s.read(c)
}

// read answers the client's pings and records its responses until the
// connection ends.
func (s *Server) read(c *wsConn) {
	defer s.gone(c)
	for {
		typ, b, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if typ != websocket.BinaryMessage {
			continue
		}
		var f larkws.Frame
		if f.Unmarshal(b) != nil {
			continue // msg-frontier drops what it cannot decode
		}
		hs := larkws.Headers(f.Headers)
		switch {
		case larkws.FrameType(f.Method) == larkws.FrameTypeControl && hs.GetString(larkws.HeaderType) == string(larkws.MessageTypePing):
			s.mu.Lock()
			s.sock.pings++
			s.sock.signal()
			cfg, _ := json.Marshal(s.clientConfig())
			s.mu.Unlock()
			pong := &larkws.Frame{SeqID: 0, LogID: 0, Service: f.Service, Method: int32(larkws.FrameTypeControl),
				Headers: []larkws.Header{{Key: larkws.HeaderType, Value: string(larkws.MessageTypePong)}}, Payload: cfg}
			if c.write(pong) != nil {
				return
			}
		case larkws.FrameType(f.Method) == larkws.FrameTypeData:
			var resp struct {
				Code int    `json:"code"`
				Data []byte `json:"data"`
			}
			if json.Unmarshal(f.Payload, &resp) != nil {
				continue
			}
			id := hs.GetString(larkws.HeaderMessageID)
			s.mu.Lock()
			if e := s.sock.events[id]; e != nil && e.ack == nil {
				e.ack = &Ack{Code: resp.Code, BizRT: hs.GetString(larkws.HeaderBizRt), Data: resp.Data}
				close(e.acked)
			}
			s.mu.Unlock()
		}
	}
}

// gone forgets a connection and closes it.
func (s *Server) gone(c *wsConn) {
	c.once.Do(func() {
		c.nc.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.sock.conns {
			if x == c {
				s.sock.conns = append(s.sock.conns[:i], s.sock.conns[i+1:]...)
				break
			}
		}
		s.sock.signal()
	})
}

// SendEvent sends body, an event envelope (schema 2.0), as one data frame
// to the newest connection, waiting for one until ctx ends. It returns
// the frame's message_id, which Acked takes.
func (s *Server) SendEvent(ctx context.Context, body json.RawMessage) (string, error) {
	return s.SendEventSplit(ctx, body, 1)
}

// SendEventSplit is SendEvent with the payload cut into parts frames
// (sum=parts, seq=0..parts-1), as Lark fragments a large event.
//
// The SDK (v3.11.0) handles each frame in a goroutine of its own and
// joins the parts through a cache with no lock around its read and
// write: two parts handled at the same instant can each start a buffer,
// and the event is then never handed to the handler (nor acked). Lark
// redelivers an unacked event; the fake does not by itself.
func (s *Server) SendEventSplit(ctx context.Context, body json.RawMessage, parts int) (string, error) {
	if !json.Valid(body) {
		return "", errors.New("larkfake: SendEvent: body is not JSON")
	}
	if parts < 1 || parts > len(body) {
		return "", fmt.Errorf("larkfake: SendEvent: cannot cut %d bytes into %d parts", len(body), parts)
	}
	c, err := s.newestConn(ctx)
	if err != nil {
		return "", err
	}
	id := randHex(16)
	trace := randHex(8)
	s.mu.Lock()
	s.sock.events[id] = &event{acked: make(chan struct{})}
	s.mu.Unlock()
	size := (len(body) + parts - 1) / parts
	for i := 0; i < parts; i++ {
		chunk := body[i*size : min((i+1)*size, len(body))]
		s.mu.Lock()
		s.sock.seqID++
		seq := s.sock.seqID
		s.mu.Unlock()
		f := &larkws.Frame{SeqID: seq, LogID: seq, Service: serviceID, Method: int32(larkws.FrameTypeData),
			Headers: []larkws.Header{
				{Key: larkws.HeaderType, Value: string(larkws.MessageTypeEvent)},
				{Key: larkws.HeaderMessageID, Value: id},
				{Key: larkws.HeaderSum, Value: strconv.Itoa(parts)},
				{Key: larkws.HeaderSeq, Value: strconv.Itoa(i)},
				{Key: larkws.HeaderTraceID, Value: trace},
				{Key: larkws.HeaderTimestamp, Value: strconv.FormatInt(s.opts.Now().UnixMilli(), 10)},
			},
			Payload: chunk,
		}
		if err := c.write(f); err != nil {
			s.gone(c)
			return "", fmt.Errorf("larkfake: SendEvent: %w", err)
		}
	}
	return id, nil
}

// newestConn waits for an open connection and returns the newest.
func (s *Server) newestConn(ctx context.Context) (*wsConn, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errors.New("larkfake: server closed")
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
			return nil, fmt.Errorf("larkfake: waiting for a ws connection: %w", ctx.Err())
		}
	}
}

// Acked returns a channel closed when the client's response to the event
// SendEvent returned messageID came back; nil for an id never sent.
func (s *Server) Acked(messageID string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.sock.events[messageID]; e != nil {
		return e.acked
	}
	return nil
}

// Ack returns the client's response to an event, false before it came.
func (s *Server) Ack(messageID string) (Ack, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.sock.events[messageID]; e != nil && e.ack != nil {
		return *e.ack, true
	}
	return Ack{}, false
}

// Drop closes every open connection at the TCP level, with no close
// frame, as a network failure does; a connection still in its handshake
// is closed as soon as it completes.
func (s *Server) Drop() {
	s.mu.Lock()
	s.sock.drops++
	conns := append([]*wsConn(nil), s.sock.conns...)
	s.mu.Unlock()
	for _, c := range conns {
		s.gone(c)
	}
}

// Connections is how many ws connections were accepted, ever.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.accepted
}

// OpenConnections is how many ws connections are open now.
func (s *Server) OpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sock.conns)
}

// Pings is how many pings the clients sent (each answered with a pong).
func (s *Server) Pings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sock.pings
}

// WaitPings waits until the clients sent n pings, ever.
func (s *Server) WaitPings(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		ok := s.sock.pings >= n
		changed := s.sock.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("larkfake: waiting for %d pings (%d so far): %w", n, s.Pings(), ctx.Err())
		}
	}
}

// WaitConnections waits until n connections were accepted, ever, and one
// is open.
func (s *Server) WaitConnections(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		ok := s.sock.accepted >= n && len(s.sock.conns) > 0
		changed := s.sock.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("larkfake: waiting for %d ws connections (%d so far): %w", n, s.Connections(), ctx.Err())
		}
	}
}
