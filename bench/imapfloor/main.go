// Command imapfloor is the floor of bench/email.sh's fetch benchmark: the
// least a go-imap v2 program does to copy a mailbox to disk. It logs in,
// selects the mailbox, fetches every message (UID, internal date, the
// whole body, in one FETCH) and writes each to a file of its own in -dir,
// making the files durable by one syncfs(2) per 250 and one at the end.
// No parsing, no index, no dedupe: what `courier fetch` adds to this is
// what the benchmark's ratio measures.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"golang.org/x/sys/unix"
)

func main() {
	addr := flag.String("addr", "", "IMAP server, host:port (plain text, as the bench's Dovecot)")
	user := flag.String("user", "", "username")
	pass := flag.String("pass", "", "password")
	box := flag.String("mailbox", "INBOX", "mailbox to copy")
	dir := flag.String("dir", "", "directory for the files (created)")
	every := flag.Int("sync", 250, "messages per syncfs")
	flag.Parse()
	if *addr == "" || *dir == "" {
		log.Fatal("imapfloor: -addr and -dir are required")
	}
	n, err := copyBox(*addr, *user, *pass, *box, *dir, *every)
	if err != nil {
		log.Fatalf("imapfloor: %v", err)
	}
	fmt.Printf("fetched %d messages\n", n)
}

// copyBox copies every message of box into dir and returns how many.
func copyBox(addr, user, pass, box, dir string, every int) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	c, err := imapclient.DialInsecure(addr, nil)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := c.Login(user, pass).Wait(); err != nil {
		return 0, fmt.Errorf("login: %w", err)
	}
	if _, err := c.Select(box, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		return 0, fmt.Errorf("select %s: %w", box, err)
	}
	section := &imap.FetchItemBodySection{Peek: true}
	cmd := c.Fetch(imap.UIDSet{imap.UIDRange{Start: 1, Stop: 0}},
		&imap.FetchOptions{UID: true, InternalDate: true, BodySection: []*imap.FetchItemBodySection{section}})
	n := 0
	for {
		msg := cmd.Next()
		if msg == nil {
			break
		}
		buf, err := msg.Collect()
		if err != nil {
			return n, err
		}
		if err := write(filepath.Join(dir, strconv.FormatUint(uint64(buf.UID), 10)), buf.FindBodySection(section)); err != nil {
			return n, err
		}
		if n++; n%every == 0 {
			if err := unix.Syncfs(int(d.Fd())); err != nil {
				return n, err
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return n, err
	}
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return n, err
	}
	return n, c.Logout().Wait()
}

func write(name string, body []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
