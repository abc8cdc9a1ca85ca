// Command membench makes and sends the inputs of bench/memory.sh, the
// classes of mail issue 9 measured Courier's memory with:
//
//	membench gen -kind html30 -o mail.eml     30 HTML parts of 4 MB (123 MB)
//	membench gen -kind html4 -o mail.eml      one 4 MB HTML mail
//	membench gen -kind text140 -o mail.eml    one 140 MB text part
//	membench gen -kind attach100 -o mail.eml  a 100 MB attachment (base64)
//	membench gen -kind cc57k -o mail.eml      57,000 Cc addresses, a megabyte of header
//	membench gen -kind ccmax -o mail.eml      the most Cc addresses a megabyte holds (95,000)
//	membench send -addr 127.0.0.1:2525 -n 60 -conc 60 mail.eml
//	membench port                              a free TCP port on 127.0.0.1
//
// send hands the mail over SMTP n times, conc sessions at once, each copy
// with its own Message-ID (so none is a duplicate of another), and retries
// a copy answered 4xx (the receiver's session cap, say) as an MTA would,
// until every copy got its 250: when send returns, every file is durable.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"sync"
	"time"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		log.Fatal("membench: gen | send | port")
	}
	switch os.Args[1] {
	case "gen":
		gen(os.Args[2:])
	case "send":
		send(os.Args[2:])
	case "port":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	default:
		log.Fatalf("membench: unknown command %q", os.Args[1])
	}
}

const header = "From: Ann <ann@example.com>\r\nTo: agent@example.com\r\nSubject: %s\r\nMessage-ID: <membench@example.com>\r\nDate: Fri, 06 Feb 2026 18:31:15 +0100\r\nMIME-Version: 1.0\r\n"

func gen(args []string) {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	kind := fs.String("kind", "html30", "html30 | html4 | text140 | attach100 | cc57k | ccmax")
	out := fs.String("o", "", "the .eml to write")
	fs.Parse(args)
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	switch *kind {
	case "html30":
		fmt.Fprintf(w, header+"Content-Type: multipart/mixed; boundary=part\r\n\r\n", "thirty HTML reports")
		for i := range 30 {
			fmt.Fprintf(w, "--part\r\nContent-Type: text/html; charset=utf-8\r\n\r\n")
			html(w, i, 4_100_000)
		}
		fmt.Fprintf(w, "--part--\r\n")
	case "html4":
		fmt.Fprintf(w, header+"Content-Type: text/html; charset=utf-8\r\n\r\n", "one HTML report")
		html(w, 0, 4_000_000)
	case "text140":
		fmt.Fprintf(w, header+"Content-Type: text/plain; charset=utf-8\r\n\r\n", "a long log")
		for n, i := 0, 0; n < 140_000_000; i++ {
			k, _ := fmt.Fprintf(w, "2026-02-06T18:31:15Z job %08d: ünïcödé line of a long log, with some words in it\r\n", i)
			n += k
		}
	case "attach100":
		fmt.Fprintf(w, header+"Content-Type: multipart/mixed; boundary=part\r\n\r\n--part\r\nContent-Type: text/plain\r\n\r\nThe dump is attached.\r\n"+
			"--part\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=dump.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n", "a 100 MB attachment")
		rng := rand.NewChaCha8([32]byte{9})
		raw := make([]byte, 57*1000)
		line := make([]byte, base64.StdEncoding.EncodedLen(57))
		for n := 0; n < 100_000_000; n += len(raw) {
			rng.Read(raw)
			for j := 0; j < len(raw); j += 57 {
				base64.StdEncoding.Encode(line, raw[j:j+57])
				w.Write(line)
				w.WriteString("\r\n")
			}
		}
		fmt.Fprintf(w, "--part--\r\n")
	case "cc57k":
		// Issue 18, item 5: as TestCcFloodKeepsListBound sends it, less
		// the References.
		fmt.Fprintf(w, header+"Cc: c00000@cc.test", "all hands")
		for i := 1; i < 57000; i++ {
			fold := ""
			if i%10 == 0 {
				fold = "\r\n"
			}
			fmt.Fprintf(w, ",%s c%05d@cc.test", fold, i)
		}
		fmt.Fprintf(w, "\r\nContent-Type: text/plain\r\n\r\nSee you all.\r\n")
	case "ccmax":
		// The shortest addresses, as many as the 1 MiB a header keeps.
		n, _ := fmt.Fprintf(w, header+"Cc: 0@c.t", "all hands")
		for i := 1; n < 1<<20-4096; i++ {
			sep := ", "
			if i%20 == 0 {
				sep = ",\r\n "
			}
			k, _ := fmt.Fprintf(w, "%s%d@c.t", sep, i)
			n += k
		}
		fmt.Fprintf(w, "\r\nContent-Type: text/plain\r\n\r\nSee you all.\r\n")
	default:
		log.Fatalf("membench: unknown kind %q", *kind)
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

// html writes an HTML part of about size bytes: a newsletter's paragraphs,
// links and a table now and then.
func html(w *bufio.Writer, part, size int) {
	n, _ := fmt.Fprintf(w, "<html><head><style>p { margin: 0 }</style></head><body>\r\n<h1>Report %d</h1>\r\n", part)
	for i := 0; n < size; i++ {
		k, _ := fmt.Fprintf(w, "<p>Line %d of report %d: the <b>value</b> was %d, see <a href=\"https://example.com/r/%d/%d\">the details</a>.</p>\r\n", i, part, i*7, part, i)
		n += k
		if i%40 == 0 {
			k, _ = fmt.Fprintf(w, "<table><tr><td>cell %d</td><td>%d</td></tr></table>\r\n", i, i*3)
			n += k
		}
	}
	fmt.Fprintf(w, "</body></html>\r\n")
}

func send(args []string) {
	fs := flag.NewFlagSet("send", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2525", "the receiver")
	n := fs.Int("n", 1, "copies to send")
	conc := fs.Int("conc", 1, "sessions at once")
	deadline := fs.Duration("timeout", 30*time.Minute, "give up after")
	fs.Parse(args)
	if fs.NArg() != 1 {
		log.Fatal("membench send: one .eml")
	}
	file := fs.Arg(0)
	// The receiver may not listen yet: wait for it.
	for start := time.Now(); ; {
		c, err := net.Dial("tcp", *addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Since(start) > time.Minute {
			log.Fatalf("membench send: %s does not answer: %v", *addr, err)
		}
		time.Sleep(50 * time.Millisecond) // a process starting: nothing to wait on but the port
	}
	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	retries := 0
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				for try := 0; ; try++ {
					err := sendOne(*addr, file, i)
					if err == nil {
						break
					}
					var te *textproto.Error
					if !(asTextproto(err, &te) && te.Code/100 == 4) || time.Since(start) > *deadline {
						log.Fatalf("membench send: copy %d: %v", i, err)
					}
					mu.Lock()
					retries++
					mu.Unlock()
					time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond) // an MTA's retry, shortened
				}
			}
		}()
	}
	for i := range *n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("sent %d in %.1f s (%d retried after a 4xx)\n", *n, time.Since(start).Seconds(), retries)
}

func asTextproto(err error, te **textproto.Error) bool {
	e, ok := err.(*textproto.Error)
	if ok {
		*te = e
	}
	return ok
}

// sendOne sends copy i of file, its Message-ID made its own.
func sendOne(addr, file string, i int) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("membench.example"); err != nil {
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
	// net/smtp's dot writer turns LF into CRLF; the file has CRLF already,
	// which it leaves alone.
	head := make([]byte, 4096)
	k, _ := io.ReadFull(f, head)
	head = bytes.Replace(head[:k], []byte("<membench@example.com>"), []byte(fmt.Sprintf("<membench-%d@example.com>", i)), 1)
	if _, err := io.Copy(w, io.MultiReader(bytes.NewReader(head), f)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
