package netgate_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/monoco/courier/internal/netgate"
)

// With the one place busy and the one spare taken by a client that sends
// nothing, a newcomer closes that client and is served a reserved request
// on the spare; another request waits for the place and is served once
// the busy one ends.
func TestSpareGivesWay(t *testing.T) {
	g := netgate.New("test", netgate.Limits{MaxConns: 1, Spare: 1, SpareWait: time.Minute},
		func(net.Conn) (string, any, error) { return "", nil, nil }, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "busy done")
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	refuse := func(w http.ResponseWriter, r *http.Request, why string) {
		http.Error(w, why, http.StatusServiceUnavailable)
	}
	reserved := func(r *http.Request) bool { return r.URL.Path == "/health" }
	srv := &http.Server{Handler: g.Handler(mux, reserved, refuse), ConnContext: g.ConnContext}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(g.Listen(ln)) }()
	t.Cleanup(func() { srv.Close(); <-done })
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + ln.Addr().String()
	get := func(path string, got chan<- string) {
		resp, err := hc.Get(url + path)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}

	busy := make(chan string, 1)
	go get("/busy", busy)
	<-entered
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetDeadline(time.Now().Add(20 * time.Second))
	// The listener accepts in the order the clients connected: the silent
	// one has the spare before the next client comes.
	health := make(chan string, 1)
	get("/health", health)
	if got := <-health; got != "ok" {
		t.Errorf("/health on the spare: %q", got)
	}
	_, err = io.ReadAll(silent)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Error("the silent client kept the spare")
	}
	waiting := make(chan string, 1)
	go get("/busy", waiting)
	close(release)
	if got := <-busy; got != "busy done" {
		t.Errorf("busy: %q", got)
	}
	<-entered
	if got := <-waiting; got != "busy done" {
		t.Errorf("the request that waited for the place: %q", got)
	}
	if _, peak := g.Conns(); peak != 1 {
		t.Errorf("peak of %d places, bound 1", peak)
	}
}
