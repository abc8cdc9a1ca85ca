package main

// The listener attacks of issue 18, item 6, for bench/slowloris.sh:
//
//	slowbench bodies -net tcp -addr 127.0.0.1:8080 -path /webhook/slack -n 140
//	slowbench bodies -net unix -addr .monoco/run/courier.sock -path /v1/claim -n 64
//	    n clients that each send a POST's headers with Content-Length: 100
//	    and one byte of the body, and hold; a client closed reconnects
//	    after -retry, so that n are always holding. Prints "ready" once
//	    every client has sent its byte and -settle has passed; runs until
//	    stdin closes, then prints its counts.
//	slowbench probe -net tcp -addr 127.0.0.1:8080 -get /health -post /webhook/slack -n 20 -giveup 20s -every 3s
//	    n rounds, -every apart, each a GET of -get and a POST of
//	    -post (a small JSON body) on fresh connections: the latency of
//	    the GET (p50, p95, max of those answered), and how many of each
//	    were answered, with any status, within -giveup.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func bodies(args []string) {
	fs := flag.NewFlagSet("bodies", flag.ExitOnError)
	network := fs.String("net", "tcp", "tcp or unix")
	addr := fs.String("addr", "127.0.0.1:8080", "the listener")
	path := fs.String("path", "/webhook/slack", "what the POSTs ask for")
	n := fs.Int("n", 140, "slow clients")
	retry := fs.Duration("retry", time.Second, "pause before reconnecting")
	settle := fs.Duration("settle", 3*time.Second, "after every client sent its byte, before saying ready")
	fs.Parse(args)

	var attempts, closed atomic.Int64
	var sent sync.WaitGroup
	sent.Add(*n)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			for {
				attempts.Add(1)
				if c, err := net.DialTimeout(*network, *addr, 10*time.Second); err == nil {
					fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", *path)
					once.Do(sent.Done)
					done := make(chan struct{})
					go func() { io.Copy(io.Discard, c); close(done) }()
					select {
					case <-done:
						closed.Add(1)
					case <-stop:
					}
					c.Close()
				}
				select {
				case <-stop:
					return
				case <-time.After(*retry):
				}
			}
		}()
	}
	sent.Wait()
	time.Sleep(*settle)
	fmt.Printf("ready attempts=%d closed=%d\n", attempts.Load(), closed.Load())
	io.Copy(io.Discard, os.Stdin)
	close(stop)
	wg.Wait()
	fmt.Printf("done attempts=%d closed=%d\n", attempts.Load(), closed.Load())
}

func probe(args []string) {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	network := fs.String("net", "tcp", "tcp or unix")
	addr := fs.String("addr", "127.0.0.1:8080", "the listener")
	get := fs.String("get", "/health", "the GET, timed")
	post := fs.String("post", "/webhook/slack", "the POST")
	n := fs.Int("n", 20, "rounds")
	giveup := fs.Duration("giveup", 20*time.Second, "a request not answered within this fails")
	every := fs.Duration("every", 0, "pause between rounds, so that they span the attack")
	fs.Parse(args)
	hc := &http.Client{Timeout: *giveup, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, *network, *addr)
		},
	}}
	var lat []time.Duration
	getFailed, posted, postFailed := 0, 0, 0
	for i := range *n {
		if i > 0 {
			time.Sleep(*every)
		}
		start := time.Now()
		if answered(hc.Get("http://courier" + *get)) {
			lat = append(lat, time.Since(start))
		} else {
			getFailed++
		}
		if *post == "" {
			continue
		}
		if answered(hc.Post("http://courier"+*post, "application/json", strings.NewReader(`{"id":"slowbench-none"}`))) {
			posted++
		} else {
			postFailed++
		}
	}
	q := func(p float64) float64 { return -1 }
	if len(lat) > 0 {
		slices.Sort(lat)
		q = func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	}
	fmt.Printf("get_p50_ms=%.2f get_p95_ms=%.2f get_max_ms=%.2f get_answered=%d get_failed=%d post_answered=%d post_failed=%d\n",
		q(0.5), q(0.95), q(1), len(lat), getFailed, posted, postFailed)
}

// answered says whether a request got an answer, whatever its status
// (a 503 for want of a place counts as none).
func answered(resp *http.Response, err error) bool {
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode != http.StatusServiceUnavailable
}
