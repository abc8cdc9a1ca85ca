// Command slowbench drives the attacks of issue 9 (items 2 and 3) against
// a running `courier serve`, for bench/slowloris.sh:
//
//	slowbench slow -addr 127.0.0.1:2525 -n 2000 -ips 200
//	    n slow clients from ips loopback addresses (127.1.x.y): half
//	    trickle a command line one byte every -trickle, half send a NOOP
//	    every -noop; a client refused or closed reconnects after -retry, so
//	    that n are always trying. Prints "ready" once every client has
//	    tried once and -settle has passed; runs until stdin closes, then
//	    prints its counts.
//	slowbench mail -addr 127.0.0.1:2525 -n 50 [-giveup 20s]
//	    n real mails from 127.0.0.1, one session each, one after the other;
//	    the latency of each is from the dial to the 250 that ends DATA (a
//	    4xx is retried after -retry, and counted). A mail not delivered
//	    within -giveup is counted failed. Prints p50, p95, max of those
//	    delivered, and the counts.
//	slowbench longline -addr 127.0.0.1:2525 -n 10 -size 146800640
//	    n clients at once, each sending NOOP and then a command line of
//	    size octets without a newline (issue 9: 140 MB).
//	slowbench rcpts -addr 127.0.0.1:2525 -n 100 -rcpts 1000 -len 4000
//	    n sessions at once, each naming rcpts recipients of len octets,
//	    held open until all have named theirs.
//	slowbench bodies ..., slowbench probe ...
//	    the listener attacks of issue 18 (listener.go).
//	slowbench port
//	    a free TCP port on 127.0.0.1.
//
// The pacing sleeps are the attack being simulated, not synchronisation.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/smtp"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		log.Fatal("slowbench: slow | mail | longline | rcpts | bodies | probe | port")
	}
	switch os.Args[1] {
	case "slow":
		slow(os.Args[2:])
	case "mail":
		mail(os.Args[2:])
	case "longline":
		longline(os.Args[2:])
	case "rcpts":
		rcpts(os.Args[2:])
	case "bodies":
		bodies(os.Args[2:])
	case "probe":
		probe(os.Args[2:])
	case "port":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	default:
		log.Fatalf("slowbench: unknown command %q", os.Args[1])
	}
}

// dialFrom connects to addr from the loopback address ip.
func dialFrom(addr, ip string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if ip != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
	}
	return d.Dial("tcp", addr)
}

func slow(args []string) {
	fs := flag.NewFlagSet("slow", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2525", "the receiver")
	n := fs.Int("n", 2000, "slow clients")
	ips := fs.Int("ips", 200, "loopback addresses they come from")
	trickle := fs.Duration("trickle", 3*time.Second, "a trickler's pause between bytes")
	noop := fs.Duration("noop", time.Minute, "a NOOP client's pause between NOOPs")
	retry := fs.Duration("retry", 5*time.Second, "pause before reconnecting, jittered ±50%")
	settle := fs.Duration("settle", 15*time.Second, "after every client tried once, before saying ready")
	fs.Parse(args)

	var attempts, admitted, refused, closed atomic.Int64
	var tried sync.WaitGroup
	stop := make(chan struct{})
	var wg sync.WaitGroup
	tried.Add(*n)
	for i := range *n {
		ip := fmt.Sprintf("127.1.%d.%d", (i%*ips)/250, (i%*ips)%250+1)
		trickler := i%2 == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			greeted := func() { once.Do(tried.Done) }
			for {
				attempts.Add(1)
				slowSession(*addr, ip, trickler, *trickle, *noop, stop, greeted, &admitted, &refused, &closed)
				pause := time.Duration(float64(*retry) * (0.5 + rand.Float64()))
				select {
				case <-stop:
					return
				case <-time.After(pause):
				}
			}
		}()
	}
	tried.Wait()
	time.Sleep(*settle)
	fmt.Printf("ready attempts=%d admitted=%d refused=%d closed=%d\n", attempts.Load(), admitted.Load(), refused.Load(), closed.Load())
	io.Copy(io.Discard, os.Stdin)
	close(stop)
	wg.Wait()
	fmt.Printf("done attempts=%d admitted=%d refused=%d closed=%d\n", attempts.Load(), admitted.Load(), refused.Load(), closed.Load())
}

// slowSession is one slow client's session, until the server refuses or
// closes it, or stop.
func slowSession(addr, ip string, trickler bool, trickle, noop time.Duration, stop chan struct{}, greeted func(),
	admitted, refused, closed *atomic.Int64) {
	defer greeted()
	c, err := dialFrom(addr, ip)
	if err != nil {
		refused.Add(1)
		return
	}
	defer c.Close()
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	greet, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(greet, "220") {
		refused.Add(1)
		return
	}
	c.SetReadDeadline(time.Time{})
	admitted.Add(1)
	greeted()
	gone := make(chan struct{})
	go func() { io.Copy(io.Discard, br); close(gone) }()
	go func() {
		select {
		case <-stop:
			c.Close()
		case <-gone:
		}
	}()
	send := func(s string) bool {
		if _, err := io.WriteString(c, s); err != nil {
			return false
		}
		return true
	}
	wait := func(d time.Duration) bool {
		select {
		case <-gone:
			closed.Add(1)
			return false
		case <-stop:
			return false
		case <-time.After(d):
			return true
		}
	}
	if !send("EHLO slow.example\r\n") {
		return
	}
	for {
		if trickler {
			for _, b := range []byte("MAIL FROM:<slow@example.com>\r\n") {
				if !wait(trickle) || !send(string(b)) {
					return
				}
			}
			if !send("RSET\r\n") {
				return
			}
		} else {
			if !wait(noop) || !send("NOOP\r\n") {
				return
			}
		}
	}
}

func mail(args []string) {
	fs := flag.NewFlagSet("mail", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2525", "the receiver")
	n := fs.Int("n", 50, "mails")
	from := fs.String("from", "127.0.0.1", "the client's address")
	retry := fs.Duration("retry", time.Second, "pause after a 4xx before trying again")
	tag := fs.String("tag", "m", "in the Message-IDs, so that runs do not collide")
	giveup := fs.Duration("giveup", 0, "count a mail failed when not delivered within this (0: never give up)")
	fs.Parse(args)
	var lat []time.Duration
	refusals, failed := 0, 0
	for i := range *n {
		start := time.Now()
		deadline := start.Add(2 * time.Minute)
		if *giveup > 0 {
			deadline = start.Add(*giveup)
		}
		for {
			err := sendOne(*addr, *from, fmt.Sprintf("<%s-%d-%d@slowbench.example>", *tag, i, start.UnixNano()), deadline)
			if err == nil {
				lat = append(lat, time.Since(start))
				break
			}
			if *giveup > 0 && !time.Now().Before(deadline) {
				failed++
				break
			}
			if !strings.Contains(err.Error(), "421") && !strings.Contains(err.Error(), "45") {
				log.Fatalf("slowbench: mail %d: %v", i, err)
			}
			refusals++
			time.Sleep(*retry)
		}
	}
	q := func(p float64) float64 { return -1 }
	if len(lat) > 0 {
		slices.Sort(lat)
		q = func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	}
	fmt.Printf("p50_ms=%.2f p95_ms=%.2f max_ms=%.2f refusals=%d delivered=%d failed=%d\n", q(0.5), q(0.95), q(1), refusals, len(lat), failed)
}

func sendOne(addr, from, msgid string, deadline time.Time) error {
	conn, err := dialFrom(addr, from)
	if err != nil {
		return err
	}
	conn.SetDeadline(deadline)
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		conn.Close()
		return err
	}
	defer c.Close()
	if err := c.Hello("mta.example"); err != nil {
		return err
	}
	if err := c.Mail("ann@example.com"); err != nil {
		return err
	}
	if err := c.Rcpt("agent@example.com"); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "From: Ann <ann@example.com>\r\nTo: agent@example.com\r\nSubject: real mail\r\nMessage-ID: %s\r\n"+
		"Date: Fri, 06 Feb 2026 18:31:15 +0100\r\n\r\nThe build is red again.\r\n", msgid)
	if err := w.Close(); err != nil {
		return err
	}
	c.Quit()
	return nil
}

func longline(args []string) {
	fs := flag.NewFlagSet("longline", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2525", "the receiver")
	n := fs.Int("n", 10, "clients at once")
	size := fs.Int64("size", 140<<20, "octets of the line")
	hold := fs.Duration("hold", 10*time.Second, "how long to wait for the server once the line is sent")
	fs.Parse(args)
	chunk := []byte(strings.Repeat("A", 1<<20))
	var wg sync.WaitGroup
	var sent atomic.Int64
	var closedEarly atomic.Int64
	start := time.Now()
	for i := range *n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialFrom(*addr, fmt.Sprintf("127.2.0.%d", i+1))
			if err != nil {
				log.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "NOOP\r\n")
			for left := *size; left > 0; {
				m, err := c.Write(chunk[:min(int64(len(chunk)), left)])
				sent.Add(int64(m))
				left -= int64(m)
				if err != nil {
					closedEarly.Add(1)
					return
				}
			}
			c.SetReadDeadline(time.Now().Add(*hold))
			io.Copy(io.Discard, c)
		}()
	}
	wg.Wait()
	fmt.Printf("sent_mb=%.1f refused_before_the_end=%d of %d seconds=%.1f\n", float64(sent.Load())/(1<<20), closedEarly.Load(), *n, time.Since(start).Seconds())
}

func rcpts(args []string) {
	fs := flag.NewFlagSet("rcpts", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2525", "the receiver")
	n := fs.Int("n", 100, "sessions at once")
	count := fs.Int("rcpts", 1000, "recipients a session")
	length := fs.Int("len", 4000, "octets of a recipient's local part")
	fs.Parse(args)
	var taken, refused atomic.Int64
	var all, done sync.WaitGroup
	all.Add(*n)
	release := make(chan struct{})
	for i := range *n {
		done.Add(1)
		go func() {
			defer done.Done()
			var once sync.Once
			named := func() { once.Do(all.Done) }
			defer named()
			c, err := dialFrom(*addr, fmt.Sprintf("127.3.%d.%d", i/250, i%250+1))
			if err != nil {
				return
			}
			// Every session holds its recipients until all have named
			// theirs: the peak is all of them at once.
			defer func() { named(); <-release; c.Close() }()
			c.SetDeadline(time.Now().Add(5 * time.Minute))
			br := bufio.NewReader(c)
			reply := func() string {
				for {
					l, err := br.ReadString('\n')
					if err != nil || len(l) < 4 || l[3] != '-' {
						return l
					}
				}
			}
			if !strings.HasPrefix(reply(), "220") {
				refused.Add(1)
				return
			}
			fmt.Fprintf(c, "EHLO r.example\r\n")
			reply()
			fmt.Fprintf(c, "MAIL FROM:<ann@example.com>\r\n")
			reply()
			local := strings.Repeat("r", *length)
			w := bufio.NewWriter(c)
			for j := range *count {
				fmt.Fprintf(w, "RCPT TO:<%s%d@example.com>\r\n", local, j)
			}
			w.Flush()
			for range *count {
				if strings.HasPrefix(reply(), "250") {
					taken.Add(1)
				}
			}
		}()
	}
	go func() { all.Wait(); close(release) }()
	done.Wait()
	fmt.Printf("recipients_taken=%d sessions_refused=%d\n", taken.Load(), refused.Load())
}
