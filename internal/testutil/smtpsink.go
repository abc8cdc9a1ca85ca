package testutil

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SMTPSink is Postfix's smtp-sink, a real SMTP peer, on a free 127.0.0.1
// port. It accepts every transaction (or fails the commands
// SMTPSinkOptions names) and dumps each one to a file, which Messages
// parses. Start one with StartSMTPSink.
//
// It announces PIPELINING (unless a failure is injected), 8BITMIME,
// ENHANCEDSTATUSCODES and AUTH PLAIN LOGIN, and accepts any credentials.
// No STARTTLS.
type SMTPSink struct {
	// Dir holds the dumps (Dir/dump) and the program's output.
	Dir string

	t      testing.TB
	bin    string
	acct   account
	host   string
	port   int
	marker string // unique greeting host name
	starts int    // the program's starts: a dump's name begins with it

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	output  *Buffer
	partial map[string]bool // dumps cut off by Stop
}

// sinkPIDFile, in the sink's directory, holds smtp-sink's pid.
const sinkPIDFile = "smtp-sink.pid"

// SMTPSinkOptions configures reply injection; a nil *SMTPSinkOptions
// accepts everything. Commands are named as smtp-sink names them: CONNECT,
// HELO, EHLO, MAIL, RCPT, DATA, "." (the end of the message data), RSET,
// NOOP, QUIT. A failure applies to every occurrence of the command, in
// every transaction; to fail first and succeed later, Restart the sink
// with other options.
//
// smtp-sink writes the dump before it answers ".", so a transaction
// rejected at "." still shows in Messages (the client sent it all);
// one rejected earlier does not.
type SMTPSinkOptions struct {
	// TempFail lists the commands answered with TempReply (smtp-sink -r).
	TempFail []string
	// TempReply is the reply for TempFail (-b); it must start with 4.
	// Default "450 4.3.0 Error: command failed".
	TempReply string
	// PermFail lists the commands answered with PermReply (-f).
	PermFail []string
	// PermReply is the reply for PermFail (-B); it must start with 5.
	// Default "500 5.3.0 Error: command failed".
	PermReply string
	// Disconnect lists commands after which the sink hangs up without
	// answering (-q).
	Disconnect []string
	// Shutdown lists commands answered with "421" and a hang-up (-Q).
	Shutdown []string
	// Hostname is the name in the greeting and EHLO reply (-h); default a
	// unique "smtp-sink-<hex>".
	Hostname string
	// LMTP makes it speak LMTP (-L), answering "." once per recipient.
	LMTP bool
	// Args are more smtp-sink options, passed as they are, e.g.
	// []string{"-W", "rcpt:3"} to wait 3 s before answering each RCPT,
	// "-a" not to announce AUTH. See man smtp-sink.
	Args []string
}

// SinkMessage is one dumped mail transaction.
type SinkMessage struct {
	File     string   // the dump file
	From     string   // envelope sender (MAIL FROM), "" for <>
	To       []string // envelope recipients (RCPT TO), in order
	MailArgs string   // MAIL FROM's arguments as sent, e.g. "<a@b.c> BODY=8BITMIME"
	RcptArgs []string // each RCPT TO's arguments as sent
	Helo     string   // the last HELO/EHLO argument
	Proto    string   // SMTP, ESMTP or LMTP
	// Raw is the message as received, dot-unstuffed, with every line
	// ending in "\n": smtp-sink drops each CR.
	Raw []byte
}

// StartSMTPSink starts smtp-sink for t and stops it in t.Cleanup. It skips
// the test when smtp-sink (package postfix) is missing, unless
// COURIER_REQUIRE_SERVERS=1 is set, then it fails. Run as root, smtp-sink
// drops to MailUser.
func StartSMTPSink(t testing.TB, opts *SMTPSinkOptions) *SMTPSink {
	t.Helper()
	s := &SMTPSink{
		t:    t,
		bin:  NeedCommand(t, "smtp-sink", "postfix"),
		acct: mailAccount(t),
		host: "127.0.0.1",
	}
	s.Dir = serverDir(t, "courier-smtp-sink-")
	dump := filepath.Join(s.Dir, "dump")
	if err := os.Mkdir(dump, 0o755); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	if err := s.acct.chown(dump); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("smtp-sink dumps in %s; output:\n%s", dump, tail(s.outputString(), 20))
		}
	})
	onFreePort(t, "smtp-sink", func(port int) error {
		s.port = port
		return s.start(opts)
	})
	return s
}

// Addr returns the sink's "127.0.0.1:PORT".
func (s *SMTPSink) Addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

// Host returns "127.0.0.1".
func (s *SMTPSink) Host() string { return s.host }

// Port returns the sink's port.
func (s *SMTPSink) Port() int { return s.port }

func (s *SMTPSink) args(opts *SMTPSinkOptions) ([]string, error) {
	if opts == nil {
		opts = &SMTPSinkOptions{}
	}
	var args []string
	if s.acct.root {
		args = append(args, "-u", s.acct.name)
	}
	host := opts.Hostname
	if host == "" {
		var id [6]byte
		rand.Read(id[:])
		host = "smtp-sink-" + hex.EncodeToString(id[:])
	}
	s.marker = host
	args = append(args, "-h", host)
	// One file per transaction; smtp-sink appends a random hex number. Its
	// random numbers are seeded with its pid xor the time in seconds, so a
	// restarted sink often draws the same ones (pid+1, time+1): the name
	// begins with the start's number, or a transaction of the new sink
	// could take the name of one the old sink was cut off in (a partial
	// dump, which Messages leaves out).
	s.starts++
	args = append(args, "-d", filepath.Join(s.Dir, "dump", strconv.Itoa(s.starts)+"-%Y%m%d%H%M%S."))
	list := func(flag string, cmds []string) {
		if len(cmds) > 0 {
			args = append(args, flag, strings.Join(cmds, ","))
		}
	}
	list("-r", opts.TempFail)
	list("-f", opts.PermFail)
	list("-q", opts.Disconnect)
	list("-Q", opts.Shutdown)
	if opts.TempReply != "" {
		if !strings.HasPrefix(opts.TempReply, "4") {
			return nil, fmt.Errorf("TempReply %q does not start with 4", opts.TempReply)
		}
		args = append(args, "-b", opts.TempReply)
	}
	if opts.PermReply != "" {
		if !strings.HasPrefix(opts.PermReply, "5") {
			return nil, fmt.Errorf("PermReply %q does not start with 5", opts.PermReply)
		}
		args = append(args, "-B", opts.PermReply)
	}
	if opts.LMTP {
		args = append(args, "-L")
	}
	args = append(args, opts.Args...)
	return append(args, s.Addr(), "64"), nil
}

func (s *SMTPSink) start(opts *SMTPSinkOptions) error {
	args, err := s.args(opts)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, args...)
	out := &Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.output = cmd, exited, out
	s.mu.Unlock()
	// For sweepStale, should this test process die without cleaning up.
	os.WriteFile(filepath.Join(s.Dir, sinkPIDFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	err = waitGreeting(s.Addr(), s.marker, 15*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	})
	if err != nil {
		s.stop()
		if strings.Contains(out.String(), "in use") {
			return errPortInUse
		}
		return fmt.Errorf("%s %s: %v\n%s", s.bin, strings.Join(args, " "), err, out.String())
	}
	return nil
}

// Stop stops the sink. Transactions in progress are cut off and their
// dumps left out of Messages.
func (s *SMTPSink) Stop() { s.stop() }

func (s *SMTPSink) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	for f := range s.openDumps() {
		if s.partial == nil {
			s.partial = map[string]bool{}
		}
		s.partial[f] = true
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart stops the sink and starts it again on the same port, with the
// same dumps, under new options: to fail a first delivery and accept the
// retry, say.
func (s *SMTPSink) Restart(t testing.TB, opts *SMTPSinkOptions) {
	t.Helper()
	s.stop()
	if err := s.start(opts); err != nil {
		t.Fatalf("testutil: smtp-sink restart: %v", err)
	}
}

func (s *SMTPSink) outputString() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.output == nil {
		return ""
	}
	return s.output.String()
}

// openDumps returns the dump files smtp-sink holds open: transactions in
// progress. It opens a dump at MAIL and closes it when the data's final
// "." arrives, before it answers (or unlinks it on RSET or hang-up), so a
// closed dump is complete. Linux only (/proc); elsewhere it finds none.
// s.mu must be held.
func (s *SMTPSink) openDumps() map[string]bool {
	open := map[string]bool{}
	if s.cmd == nil || s.cmd.Process == nil {
		return open
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return open
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil {
			open[target] = true
		}
	}
	return open
}

// Messages returns the transactions dumped so far, complete ones only,
// ordered by the time their dump was finished. File times are coarse
// (milliseconds on ext4), so transactions finished close together may come
// in either order: find messages by recipient or Message-ID rather than
// by position.
func (s *SMTPSink) Messages(t testing.TB) []SinkMessage {
	t.Helper()
	msgs, err := s.messages()
	if err != nil {
		t.Fatalf("testutil: smtp-sink: %v", err)
	}
	return msgs
}

func (s *SMTPSink) messages() ([]SinkMessage, error) {
	dump := filepath.Join(s.Dir, "dump")
	// The folder first, then what is open: a dump created in between is
	// not listed, where the other way round it would be listed and not
	// known to be open.
	entries, err := os.ReadDir(dump)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	open := s.openDumps()
	for f := range s.partial {
		open[f] = true
	}
	s.mu.Unlock()
	type file struct {
		path  string
		mtime time.Time
	}
	var files []file
	for _, e := range entries {
		p := filepath.Join(dump, e.Name())
		if open[p] || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // unlinked meanwhile: an aborted transaction
		}
		files = append(files, file{p, fi.ModTime()})
	}
	sort.Slice(files, func(i, j int) bool {
		if !files[i].mtime.Equal(files[j].mtime) {
			return files[i].mtime.Before(files[j].mtime)
		}
		return files[i].path < files[j].path
	})
	var msgs []SinkMessage
	for _, f := range files {
		data, err := os.ReadFile(f.path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		m, err := ParseSinkDump(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f.path, err)
		}
		m.File = f.path
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// WaitMessages polls until at least n transactions are dumped and returns
// them, or fails the test after timeout.
func (s *SMTPSink) WaitMessages(t testing.TB, n int, timeout time.Duration) []SinkMessage {
	t.Helper()
	var msgs []SinkMessage
	var err error
	if !Poll(timeout, func() bool {
		msgs, err = s.messages()
		return err != nil || len(msgs) >= n
	}) {
		t.Fatalf("testutil: smtp-sink got %d messages in %v, want %d", len(msgs), timeout, n)
	}
	if err != nil {
		t.Fatalf("testutil: smtp-sink: %v", err)
	}
	return msgs
}

// ParseSinkDump parses one smtp-sink -d dump file:
//
//	X-Client-Addr: 127.0.0.1
//	X-Client-Proto: ESMTP
//	X-Helo-Args: client.example          (when the client said HELO/EHLO)
//	X-Mail-Args: <a@b.c> BODY=8BITMIME   (MAIL FROM's arguments)
//	X-Rcpt-Args: <r1@x.y>                (one per RCPT TO, in order)
//	Received: from client.example ([127.0.0.1])
//		by smtp-sink (smtp-sink) with ESMTP id 61798128;
//		Sun, 22 Nov 2026 23:10:26 +0000 (UTC)
//	<the message, dot-unstuffed, CRs dropped>
//	<an empty line: the LF of the final ".\r\n">
func ParseSinkDump(data []byte) (SinkMessage, error) {
	var m SinkMessage
	r := bufio.NewReader(bytes.NewReader(data))
	off := 0
	readLine := func() (string, error) {
		line, err := r.ReadString('\n')
		off += len(line)
		if err != nil {
			return line, fmt.Errorf("dump ends inside smtp-sink's header")
		}
		return strings.TrimSuffix(line, "\n"), nil
	}
	for {
		line, err := readLine()
		if err != nil {
			return m, err
		}
		name, value, _ := strings.Cut(line, ": ")
		switch name {
		case "X-Client-Addr":
		case "X-Client-Proto":
			m.Proto = value
		case "X-Helo-Args":
			m.Helo = value
		case "X-Mail-Args":
			m.MailArgs = value
			m.From = pathAddress(value)
		case "X-Rcpt-Args":
			m.RcptArgs = append(m.RcptArgs, value)
			m.To = append(m.To, pathAddress(value))
		case "Received":
			// Two continuation lines end smtp-sink's header.
			for i := 0; i < 2; i++ {
				line, err := readLine()
				if err != nil {
					return m, err
				}
				if !strings.HasPrefix(line, "\t") {
					return m, fmt.Errorf("smtp-sink's Received header has %q", line)
				}
			}
			body := data[off:]
			if !bytes.HasSuffix(body, []byte("\n")) {
				return m, fmt.Errorf("dump does not end in the final newline: incomplete")
			}
			m.Raw = body[:len(body)-1]
			return m, nil
		default:
			return m, fmt.Errorf("unexpected line %q in smtp-sink's header", line)
		}
	}
}

// pathAddress returns the address of an SMTP path argument: "a@b.c" from
// "<a@b.c> SIZE=10", "" from "<>".
func pathAddress(args string) string {
	s := strings.TrimSpace(args)
	if strings.HasPrefix(s, "<") {
		if i := strings.IndexByte(s, '>'); i > 0 {
			return s[1:i]
		}
	}
	addr, _, _ := strings.Cut(s, " ")
	return addr
}
