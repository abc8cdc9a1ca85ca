package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// imapConn is a bare IMAP conversation over net.Conn: enough to check
// the harness without an IMAP library (no literals are parsed).
type imapConn struct {
	t   testing.TB
	c   net.Conn
	r   *bufio.Reader
	tag int
}

func dialIMAP(t testing.TB, addr string) *imapConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ic := &imapConn{t: t, c: c, r: bufio.NewReader(c)}
	if g := ic.line(); !strings.HasPrefix(g, "* OK") {
		t.Fatalf("greeting %q", g)
	}
	return ic
}

func (ic *imapConn) line() string {
	ic.t.Helper()
	ic.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	l, err := ic.r.ReadString('\n')
	if err != nil {
		ic.t.Fatalf("imap read: %v (after %q)", err, l)
	}
	return strings.TrimRight(l, "\r\n")
}

func (ic *imapConn) send(format string, args ...any) string {
	ic.t.Helper()
	ic.tag++
	tag := fmt.Sprintf("a%d", ic.tag)
	if _, err := fmt.Fprintf(ic.c, tag+" "+format+"\r\n", args...); err != nil {
		ic.t.Fatal(err)
	}
	return tag
}

// cmd runs a command and returns its untagged responses; it fails unless
// the command completes OK.
func (ic *imapConn) cmd(format string, args ...any) []string {
	ic.t.Helper()
	tag := ic.send(format, args...)
	return ic.until(tag)
}

func (ic *imapConn) until(tag string) []string {
	ic.t.Helper()
	var untagged []string
	for {
		l := ic.line()
		if strings.HasPrefix(l, tag+" ") {
			if !strings.HasPrefix(l, tag+" OK") {
				ic.t.Fatalf("imap: %s", l)
			}
			return untagged
		}
		untagged = append(untagged, l)
	}
}

var (
	existsRE      = regexp.MustCompile(`^\* (\d+) EXISTS$`)
	uidValidityRE = regexp.MustCompile(`\[UIDVALIDITY (\d+)\]`)
	fetchUIDRE    = regexp.MustCompile(`^\* (\d+) FETCH \(UID (\d+)\)$`)
)

// selectBox returns EXISTS and UIDVALIDITY from SELECT.
func (ic *imapConn) selectBox(name string) (exists int, uidValidity uint32) {
	ic.t.Helper()
	exists, uidValidity = -1, 0
	for _, l := range ic.cmd("SELECT %q", name) {
		if m := existsRE.FindStringSubmatch(l); m != nil {
			exists, _ = strconv.Atoi(m[1])
		}
		if m := uidValidityRE.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseUint(m[1], 10, 32)
			uidValidity = uint32(v)
		}
	}
	if exists < 0 || uidValidity == 0 {
		ic.t.Fatalf("SELECT %s: no EXISTS or UIDVALIDITY", name)
	}
	return exists, uidValidity
}

func (ic *imapConn) uids() []int {
	ic.t.Helper()
	var uids []int
	for _, l := range ic.cmd("UID FETCH 1:* (UID)") {
		m := fetchUIDRE.FindStringSubmatch(l)
		if m == nil {
			ic.t.Fatalf("unexpected %q", l)
		}
		uid, _ := strconv.Atoi(m[2])
		uids = append(uids, uid)
	}
	return uids
}

func login(t testing.TB, d *Dovecot) *imapConn {
	t.Helper()
	ic := dialIMAP(t, d.Addr)
	ic.cmd("LOGIN %s %s", d.User, d.Password)
	return ic
}

func testMessage(i int) []byte {
	return fmt.Appendf(nil, "From: Ann <ann@example.com>\r\nTo: agent@example.com\r\nSubject: message %d\r\n"+
		"Message-ID: <m%d@example.com>\r\nDate: Mon, 02 Feb 2026 10:00:00 +0000\r\n\r\nHello %d.\r\n", i, i, i)
}

func TestDovecot(t *testing.T) {
	d := StartDovecot(t)
	for i := 0; i < 3; i++ {
		d.Deliver(t, "INBOX", testMessage(i))
	}
	ic := login(t, d)
	exists, v1 := ic.selectBox("INBOX")
	if exists != 3 {
		t.Fatalf("EXISTS %d, want 3", exists)
	}
	if got := fmt.Sprint(ic.uids()); got != "[1 2 3]" {
		t.Fatalf("UIDs %s", got)
	}
	// UIDs follow the delivery order.
	out := d.Doveadm(t, "fetch", "-u", d.User, "uid hdr.subject", "mailbox", "INBOX", "all")
	for i := 0; i < 3; i++ {
		want := fmt.Sprintf("uid: %d\nhdr.subject: message %d\n", i+1, i)
		if !strings.Contains(out, want) {
			t.Errorf("doveadm fetch lacks %q:\n%s", want, out)
		}
	}
	if got := d.UIDValidity(t, "INBOX"); got != v1 {
		t.Errorf("UIDValidity %d, SELECT said %d", got, v1)
	}

	t.Run("restart keeps mail", func(t *testing.T) {
		d.Restart()
		ic := login(t, d)
		exists, v := ic.selectBox("INBOX")
		if exists != 3 || v != v1 {
			t.Fatalf("after restart: EXISTS %d UIDVALIDITY %d, want 3 %d", exists, v, v1)
		}
	})

	t.Run("deliver while stopped", func(t *testing.T) {
		d.Stop()
		if c, err := net.Dial("tcp", d.Addr); err == nil {
			c.Close()
			t.Fatal("port still open after Stop")
		}
		d.Deliver(t, "INBOX", testMessage(3))
		d.Start()
		ic := login(t, d)
		if exists, _ := ic.selectBox("INBOX"); exists != 4 {
			t.Fatalf("EXISTS %d, want 4", exists)
		}
		if got := fmt.Sprint(ic.uids()); got != "[1 2 3 4]" {
			t.Fatalf("UIDs %s", got)
		}
	})

	t.Run("reset UIDVALIDITY", func(t *testing.T) {
		before, after := d.ResetUIDValidity(t, "INBOX")
		if before != v1 {
			t.Errorf("before %d, want %d", before, v1)
		}
		ic := login(t, d)
		exists, v := ic.selectBox("INBOX")
		if v == v1 || v != after {
			t.Fatalf("UIDVALIDITY %d after reset (was %d, ResetUIDValidity said %d)", v, v1, after)
		}
		if exists != 4 {
			t.Fatalf("EXISTS %d after reset, want 4", exists)
		}
		t.Logf("UIDVALIDITY %d -> %d", v1, v)
	})

	t.Run("folders", func(t *testing.T) {
		for _, name := range []string{"Archive/2024", "Entwürfe", "Sent"} {
			d.CreateFolder(t, name)
			d.Deliver(t, name, testMessage(10))
		}
		if _, err := os.Stat(filepath.Join(d.Maildir, ".Archive.2024", "new")); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(filepath.Join(d.Maildir, ".Entw&APw-rfe", "new")); err != nil {
			t.Error(err)
		}
		ic := login(t, d)
		list := strings.Join(ic.cmd(`LIST (SUBSCRIBED) "" "*"`), "\n")
		for _, want := range []string{`(\Subscribed) "/" Archive/2024`, `(\Subscribed) "/" Entw&APw-rfe`, `(\Subscribed) "/" Sent`} {
			if !strings.Contains(list, want) {
				t.Errorf("LIST (SUBSCRIBED) lacks %q:\n%s", want, list)
			}
		}
		if list := strings.Join(ic.cmd(`LIST "" "Sent"`), "\n"); !strings.Contains(list, `\Sent`) {
			t.Errorf("Sent is not \\Sent: %s", list)
		}
		if exists, _ := ic.selectBox("Archive/2024"); exists != 1 {
			t.Errorf("Archive/2024 EXISTS %d", exists)
		}
		if exists, _ := ic.selectBox("Entw&APw-rfe"); exists != 1 {
			t.Errorf("Entwürfe EXISTS %d", exists)
		}
	})

	t.Run("internal date", func(t *testing.T) {
		at := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		d.CreateFolder(t, "Old")
		d.DeliverAt(t, "Old", testMessage(20), at)
		out := d.Doveadm(t, "fetch", "-u", d.User, "date.received", "mailbox", "Old", "all")
		if !strings.Contains(out, "2020-01-02 03:04:05") && !strings.Contains(out, at.Local().Format("2006-01-02 15:04:05")) {
			t.Errorf("date.received: %s", out)
		}
	})
}

func TestDovecotIdleSeesDeliver(t *testing.T) {
	d := StartDovecot(t)
	d.Deliver(t, "INBOX", testMessage(0))
	ic := login(t, d)
	ic.selectBox("INBOX")
	tag := ic.send("IDLE")
	if l := ic.line(); !strings.HasPrefix(l, "+") {
		t.Fatalf("IDLE: %q", l)
	}
	start := time.Now()
	d.Deliver(t, "INBOX", testMessage(1))
	for {
		l := ic.line()
		if l == "* 2 EXISTS" {
			break
		}
	}
	t.Logf("IDLE saw the delivery after %v", time.Since(start))
	fmt.Fprintf(ic.c, "DONE\r\n")
	ic.until(tag)
}

func TestDovecotDeliverMany(t *testing.T) {
	d := StartDovecot(t)
	const n = 5000
	start := time.Now()
	d.DeliverMany(t, "INBOX", testMessage, n)
	elapsed := time.Since(start)
	t.Logf("DeliverMany: %d messages in %v", n, elapsed)
	// About 0.1 s on tmpfs and 0.5 s on an idle ext4 disk, and over 10 s
	// on a loaded machine (file creation is the cost): logged, not
	// asserted, since a time is no test on a shared machine.
	ic := login(t, d)
	start = time.Now()
	exists, _ := ic.selectBox("INBOX")
	t.Logf("first SELECT (Dovecot indexes them) took %v", time.Since(start))
	if exists != n {
		t.Fatalf("EXISTS %d, want %d", exists, n)
	}
	out := d.Doveadm(t, "fetch", "-u", d.User, "uid hdr.subject", "mailbox", "INBOX", "all")
	for _, i := range []int{0, 1, 999, 4998, 4999} {
		want := fmt.Sprintf("uid: %d\nhdr.subject: message %d\n", i+1, i)
		if !strings.Contains(out, want) {
			t.Errorf("UID order: lacks %q", want)
		}
	}
}

func TestDovecotParallel(t *testing.T) {
	ports := make(chan int, 4)
	t.Run("group", func(t *testing.T) {
		for i := 0; i < 4; i++ {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				d := StartDovecot(t)
				ports <- d.Port
				for j := 0; j <= i; j++ {
					d.Deliver(t, "INBOX", testMessage(j))
				}
				ic := login(t, d)
				if exists, _ := ic.selectBox("INBOX"); exists != i+1 {
					t.Errorf("EXISTS %d, want %d", exists, i+1)
				}
			})
		}
	})
	close(ports)
	seen := map[int]bool{}
	for p := range ports {
		if seen[p] {
			t.Errorf("port %d used twice", p)
		}
		seen[p] = true
	}
}

func TestMbsyncConfig(t *testing.T) {
	mbsync := NeedCommand(t, "mbsync", "isync")
	d := StartDovecot(t)
	d.DeliverMany(t, "INBOX", testMessage, 3)
	local := t.TempDir()
	rc := d.WriteMbsyncConfig(t, local)
	if out, err := exec.Command(mbsync, "-q", "-c", rc, "-a").CombinedOutput(); err != nil {
		t.Fatalf("mbsync: %v: %s\n%s", err, out, tail(d.Log(), 10))
	}
	var files []string
	for _, sub := range []string{"new", "cur"} {
		f, _ := filepath.Glob(filepath.Join(local, "INBOX", sub, "*"))
		files = append(files, f...)
	}
	if len(files) != 3 {
		t.Fatalf("mbsync fetched %d messages, want 3", len(files))
	}
}

func TestEncodeMUTF7(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"INBOX", "INBOX"},
		{"Entwürfe", "Entw&APw-rfe"},
		{"A&B", "A&-B"},
		{"日本語", "&ZeVnLIqe-"},
		{"Archive/2024", "Archive/2024"},
		{"😀", "&2D3eAA-"},
	} {
		if got := encodeMUTF7(tc.in); got != tc.want {
			t.Errorf("encodeMUTF7(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSMTPSinkMsmtp(t *testing.T) {
	msmtp := NeedCommand(t, "msmtp", "msmtp")
	s := StartSMTPSink(t, nil)
	msg := "From: a@b.c\r\nTo: rcpt@x.y\r\nSubject: via msmtp\r\n\r\nline one\r\n.leading dot\r\n"
	cmd := exec.Command(msmtp, "--host=127.0.0.1", "--port="+strconv.Itoa(s.Port()), "--from=a@b.c",
		"--auth=off", "--tls=off", "rcpt@x.y", "other@x.y")
	cmd.Stdin = strings.NewReader(msg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("msmtp: %v: %s", err, out)
	}
	msgs := s.WaitMessages(t, 1, 5*time.Second)
	m := msgs[0]
	if m.From != "a@b.c" || strings.Join(m.To, " ") != "rcpt@x.y other@x.y" || m.Proto != "ESMTP" {
		t.Errorf("envelope %q %q %q", m.From, m.To, m.Proto)
	}
	raw := string(m.Raw)
	// msmtp adds Date and Message-ID; the rest arrives as sent, minus CRs.
	for _, want := range []string{"Subject: via msmtp\n", "\n\nline one\n.leading dot\n"} {
		if !strings.Contains(raw, want) {
			t.Errorf("message lacks %q:\n%s", want, raw)
		}
	}
	if !strings.HasSuffix(raw, "\n.leading dot\n") {
		t.Errorf("message ends %q", raw[max(0, len(raw)-30):])
	}
}

func TestSMTPSinkNetSMTP(t *testing.T) {
	s := StartSMTPSink(t, nil)
	body := "From: Ann <ann@example.com>\r\nSubject: raw\r\n\r\n.starts with a dot\r\n..two dots\r\nlast\r\n"
	if err := smtp.SendMail(s.Addr(), nil, "ann@example.com", []string{"b@example.com", "c@example.com"}, []byte(body)); err != nil {
		t.Fatal(err)
	}
	// A second transaction with the null sender.
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Mail(""); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("d@example.com"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "Subject: bounce\r\n\r\nno\r\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c.Quit()

	msgs := s.WaitMessages(t, 2, 5*time.Second)
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	if msgs[0].From == "" { // finished in the same millisecond
		msgs[0], msgs[1] = msgs[1], msgs[0]
	}
	m := msgs[0]
	if m.From != "ann@example.com" || strings.Join(m.To, ",") != "b@example.com,c@example.com" {
		t.Errorf("envelope %q %q", m.From, m.To)
	}
	if m.Helo != "localhost" {
		t.Errorf("helo %q", m.Helo)
	}
	if want := strings.ReplaceAll(body, "\r\n", "\n"); string(m.Raw) != want {
		t.Errorf("raw\n%q\nwant\n%q", m.Raw, want)
	}
	if m2 := msgs[1]; m2.From != "" || m2.MailArgs == "" || strings.Join(m2.To, ",") != "d@example.com" || string(m2.Raw) != "Subject: bounce\n\nno\n" {
		t.Errorf("second: %+v", m2)
	}
}

func TestSMTPSinkFailures(t *testing.T) {
	send := func(addr string) (stage string, err error) {
		c, err := smtp.Dial(addr)
		if err != nil {
			return "dial", err
		}
		defer c.Close()
		if err := c.Mail("a@example.com"); err != nil {
			return "MAIL", err
		}
		if err := c.Rcpt("b@example.com"); err != nil {
			return "RCPT", err
		}
		w, err := c.Data()
		if err != nil {
			return "DATA", err
		}
		fmt.Fprint(w, "Subject: x\r\n\r\nx\r\n")
		if err := w.Close(); err != nil {
			return ".", err
		}
		return "", c.Quit()
	}
	for _, tc := range []struct {
		name  string
		opts  SMTPSinkOptions
		stage string
		code  int
		msg   string
		dumps int
	}{
		{"temporary at RCPT", SMTPSinkOptions{TempFail: []string{"RCPT"}}, "RCPT", 450, "4.3.0 Error: command failed", 0},
		{"permanent at RCPT", SMTPSinkOptions{PermFail: []string{"rcpt"}, PermReply: "550 5.1.1 No such user"}, "RCPT", 550, "5.1.1 No such user", 0},
		{"temporary at DATA", SMTPSinkOptions{TempFail: []string{"DATA"}, TempReply: "451 4.3.0 Try later"}, "DATA", 451, "4.3.0 Try later", 0},
		{"permanent at DATA", SMTPSinkOptions{PermFail: []string{"DATA"}}, "DATA", 500, "5.3.0 Error: command failed", 0},
		{"temporary after the data", SMTPSinkOptions{TempFail: []string{"."}, TempReply: "452 4.3.1 Insufficient system storage"}, ".", 452, "4.3.1 Insufficient system storage", 1},
		{"permanent after the data", SMTPSinkOptions{PermFail: []string{"."}, PermReply: "554 5.7.1 Rejected"}, ".", 554, "5.7.1 Rejected", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StartSMTPSink(t, &tc.opts)
			stage, err := send(s.Addr())
			var te *textproto.Error
			if !errors.As(err, &te) {
				t.Fatalf("%s: %v, want an SMTP error", stage, err)
			}
			if stage != tc.stage || te.Code != tc.code || te.Msg != tc.msg {
				t.Errorf("%s: %d %q, want %s: %d %q", stage, te.Code, te.Msg, tc.stage, tc.code, tc.msg)
			}
			if got := len(s.Messages(t)); got != tc.dumps {
				t.Errorf("%d dumps, want %d", got, tc.dumps)
			}
		})
	}

	t.Run("fail then accept", func(t *testing.T) {
		s := StartSMTPSink(t, &SMTPSinkOptions{TempFail: []string{"RCPT"}})
		addr := s.Addr()
		if _, err := send(addr); err == nil {
			t.Fatal("first send succeeded")
		}
		s.Restart(t, nil)
		if s.Addr() != addr {
			t.Fatalf("address changed: %s -> %s", addr, s.Addr())
		}
		if stage, err := send(addr); err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if got := len(s.WaitMessages(t, 1, 5*time.Second)); got != 1 {
			t.Fatalf("%d messages", got)
		}
	})

	t.Run("bad reply", func(t *testing.T) {
		s := &SMTPSink{acct: account{}}
		if _, err := s.args(&SMTPSinkOptions{TempReply: "550 no"}); err == nil {
			t.Error("TempReply 550 accepted")
		}
	})
}

func TestSMTPSinkInProgress(t *testing.T) {
	s := StartSMTPSink(t, nil)
	c, err := smtp.Dial(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("a@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("b@example.com"); err != nil {
		t.Fatal(err)
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(w, "Subject: half\r\n\r\n"+strings.Repeat("x", 100000)+"\r\n")
	// The dump exists but is open: not a message yet.
	WaitFor(t, 5*time.Second, "smtp-sink's dump file of the open transaction", func() bool {
		files, _ := filepath.Glob(filepath.Join(s.Dir, "dump", "*"))
		return len(files) == 1
	})
	if n := len(s.Messages(t)); n != 0 {
		t.Fatalf("%d messages while the transaction is open", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	msgs := s.Messages(t) // complete once "." is answered
	if len(msgs) != 1 || len(msgs[0].Raw) != len("Subject: half\n\n")+100001 {
		t.Fatalf("%d messages", len(msgs))
	}
}

func TestParseSinkDump(t *testing.T) {
	for _, tc := range []struct {
		name, dump string
		want       SinkMessage
		err        bool
	}{
		{name: "helo", dump: "X-Client-Addr: 127.0.0.1\nX-Client-Proto: ESMTP\nX-Helo-Args: h.example\nX-Mail-Args: <a@b.c> SIZE=12 BODY=8BITMIME\n" +
			"X-Rcpt-Args: <r@x.y> NOTIFY=NEVER\nX-Rcpt-Args: <s@x.y>\nReceived: from h.example ([127.0.0.1])\n\tby smtp-sink (smtp-sink) with ESMTP id 1;\n" +
			"\tSun, 22 Nov 2026 23:10:26 +0000 (UTC)\nSubject: s\n\nbody\n\n",
			want: SinkMessage{From: "a@b.c", To: []string{"r@x.y", "s@x.y"}, MailArgs: "<a@b.c> SIZE=12 BODY=8BITMIME",
				RcptArgs: []string{"<r@x.y> NOTIFY=NEVER", "<s@x.y>"}, Helo: "h.example", Proto: "ESMTP", Raw: []byte("Subject: s\n\nbody\n")}},
		{name: "no helo, null sender", dump: "X-Client-Addr: 127.0.0.1\nX-Client-Proto: SMTP\nX-Mail-Args: <>\nX-Rcpt-Args: <r@x.y>\n" +
			"Received: from [127.0.0.1] ([127.0.0.1])\n\tby smtp-sink (smtp-sink) with SMTP id 2;\n\tSun, 22 Nov 2026 23:10:26 +0000 (UTC)\nx\n\n",
			want: SinkMessage{From: "", To: []string{"r@x.y"}, MailArgs: "<>", RcptArgs: []string{"<r@x.y>"}, Proto: "SMTP", Raw: []byte("x\n")}},
		{name: "cut in the header", dump: "X-Client-Addr: 127.0.0.1\nX-Client-Proto: SMTP\nX-Mail-Args: <>\n", err: true},
		{name: "stranger", dump: "Hello\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSinkDump([]byte(tc.dump))
			if tc.err {
				if err == nil {
					t.Fatalf("no error: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
