package service

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
)

// Issue 18, item 6: 140 loopback clients that each send a webhook's
// headers with Content-Length: 100 and one byte of the body held all 128
// places of the listener for the 30 s read timeout: /health, /mcp and the
// webhooks waited behind them. Under the service's own limits, /health
// and a webhook are answered while the 140 hang on.
func TestHTTPSlowBodiesDoNotStarve(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("POST /webhook/slack", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "got %s", b)
	})
	lim := DefaultHTTPLimits()
	addr, srv := startHTTPServer(t, mux, lim)
	const slow = 140
	for range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /webhook/slack HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	}
	// Every place is taken before the real clients come.
	testutil.WaitFor(t, 20*time.Second, "the slow clients to take every place", func() bool {
		n, _ := srv.Conns()
		return n == lim.MaxConns
	})

	// Well under the 30 s the slow clients held their places before.
	hc := &http.Client{Timeout: 20 * time.Second}
	resp, err := hc.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("/health with %d slow clients: %v", slow, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		t.Errorf("/health: %d %q", resp.StatusCode, b)
	}
	resp, err = hc.Post("http://"+addr+"/webhook/slack", "application/json", strings.NewReader(`{"type":"event_callback"}`))
	if err != nil {
		t.Fatalf("a webhook with %d slow clients: %v", slow, err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `got {"type":"event_callback"}` {
		t.Errorf("webhook: %d %q", resp.StatusCode, b)
	}
	if _, peak := srv.Conns(); peak > lim.MaxConns {
		t.Errorf("%d connections held a place at once, bound %d", peak, lim.MaxConns)
	}
}

// When every place is busy with a request in progress (nothing to take
// from a client that waits), /health is served on a reserve connection
// at once, and a webhook waits for a place and is served when one frees.
func TestHTTPReserveForHealth(t *testing.T) {
	entered, release := make(chan struct{}, 4), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("POST /webhook/slack", func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		entered <- struct{}{}
		<-release
		io.WriteString(w, "done")
	})
	lim := testHTTPLimits()
	lim.ReserveConns, lim.ReserveWait = 2, time.Minute
	addr := startHTTP(t, mux, lim)
	// A connection of its own for each request: one kept alive may give
	// its place to a newcomer as the client sends on it, and that race is
	// not what this test is about.
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	post := func(got chan<- string) {
		resp, err := hc.Post("http://"+addr+"/webhook/slack", "application/json", strings.NewReader(`{}`))
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}
	busy := make(chan string, 3)
	for range lim.MaxConns {
		go post(busy)
		<-entered
	}
	resp, err := hc.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("/health with every place busy: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health with every place busy: %d", resp.StatusCode)
	}
	go post(busy) // waits for a place
	release <- struct{}{}
	release <- struct{}{}
	<-entered
	close(release)
	for range 3 {
		if got := <-busy; got != "200 done" {
			t.Errorf("webhook: %s", got)
		}
	}
}

// An event stream (GET /mcp) lasts past the body and header timeouts, and
// keeps its place when newcomers need one: its handler is at work, not
// waiting for its client.
func TestHTTPEventStreamKeepsItsPlace(t *testing.T) {
	next := make(chan string)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mcp", func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		for {
			select {
			case ev := <-next:
				fmt.Fprintf(w, "data: %s\n\n", ev)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	lim := testHTTPLimits()
	// Room for the connections the clients below have closed and the
	// server has not yet: one after the other, a new one may come first.
	lim.ReserveConns = 8
	addr := startHTTP(t, mux, lim)
	c := dialHTTP(t, addr)
	fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	if _, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	}
	event := func(ev string) {
		t.Helper()
		select {
		case next <- ev:
		case <-time.After(20 * time.Second):
			// A read deadline left on while the handler runs would
			// cancel its request (net/http's background read).
			t.Fatalf("the stream's handler ended before %q", ev)
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended before %q: %v", ev, err)
			}
			if line == "data: "+ev+"\n" {
				return
			}
		}
	}
	event("one")
	// Past every read timeout of the listener, and newcomers enough to
	// take every other place many times over.
	time.Sleep(lim.ReadHeaderTimeout + lim.BodyTimeout + lim.IdleTimeout)
	// A connection of its own for each: a kept-alive one may give its
	// place to a newcomer as the client sends on it again.
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 * lim.MaxConns {
		r, err := hc.Get("http://" + addr + "/health")
		if err != nil {
			t.Fatalf("/health beside a stream, %d: %v", i, err)
		}
		r.Body.Close()
	}
	event("two")
}

// Remote addresses are counted by their address (IPv6: their /64);
// loopback ones by none, for every local client is 127.0.0.1, the reverse
// proxy among them.
func TestHTTPPerIPKey(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1", ""}, {"127.1.2.3", ""}, {"::1", ""},
		{"192.0.2.7", "192.0.2.7"}, {"2001:db8:1:2:3::4", "2001:db8:1:2::/64"},
	} {
		key, _, err := remoteIP(fakeConn{remote: &net.TCPAddr{IP: net.ParseIP(tc.addr), Port: 4242}})
		if err != nil || key != tc.want {
			t.Errorf("%s: key %q %v, want %q", tc.addr, key, err, tc.want)
		}
	}
}

type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (c fakeConn) RemoteAddr() net.Addr { return c.remote }
