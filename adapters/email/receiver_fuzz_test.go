package email

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"
)

// countingSink counts the events its Sink took.
type countingSink struct {
	adapters.Sink
	n atomic.Int64
}

func (s *countingSink) Deliver(ctx context.Context, events ...adapters.Event) error {
	err := s.Sink.Deliver(ctx, events...)
	if err == nil {
		s.n.Add(int64(len(events)))
	}
	return err
}

// sessionSeeds are real client transcripts: what MTAs and scripts send,
// pipelined or not, and the attacks of issue 9.
func sessionSeeds() []string {
	mail := stuffed(receiverMail)
	raw := string(crlf(receiverMail))
	half := len(raw) / 2
	return []string{
		"EHLO mta.example\r\nMAIL FROM:<ann@example.com>\r\nRCPT TO:<agent@example.com>\r\nDATA\r\n" + mail + ".\r\nQUIT\r\n",
		"HELO mta.example\r\nMAIL FROM:<ann@example.com> SIZE=600\r\nRCPT TO:<agent@example.com>\r\nRCPT TO:<bob@example.com>\r\nDATA\r\n" + mail + ".\r\n" +
			"MAIL FROM:<>\r\nRCPT TO:<agent@example.com>\r\nDATA\r\n" + strings.Replace(mail, "receiver-1@", "receiver-2@", 1) + ".\r\nQUIT\r\n",
		"EHLO mta.example\r\nMAIL FROM:<ann@example.com> BODY=8BITMIME\r\nRCPT TO:<agent@example.com>\r\n" +
			"BDAT " + strconv.Itoa(half) + "\r\n" + raw[:half] + "BDAT " + strconv.Itoa(len(raw)-half) + " LAST\r\n" + raw[half:] + "QUIT\r\n",
		"EHLO mta.example\r\nMAIL FROM:<ann@example.com>\r\nRCPT TO:<agent@example.com>\r\nRSET\r\nDATA\r\nMAIL FROM:<a@b>\r\nRCPT TO:<c@d>\r\nBDAT 0 LAST\r\nQUIT\r\n",
		"EHLO mta.example\r\nMAIL FROM:<ann@example.com>\r\nRCPT TO:<agent@example.com>\r\nBDAT 10\r\n0123456789RSET\r\nNOOP\r\nQUIT\r\n",
		"EHLO mta.example\r\nBDAT 5 FIRST\r\nBDAT -1\r\nBDAT 99999999999\r\nBDAT 3\r\nabcNOOP\r\n",
		"LHLO mta.example\r\nHELO\r\nEHLO\r\nXYZ\r\nDATA x\r\nSTARTTLS\r\nAUTH PLAIN AGFubgBwdw==\r\nVRFY ann\r\nNOOP\r\n",
		"EHLO mta.example\r\nMAIL FROM:<" + strings.Repeat("a", 600) + "@example.com>\r\nNOOP\r\n",
		"EHLO mta.example\r\nMAIL FROM:<ann@example.com>\r\nRCPT TO:<agent@example.com>\r\nDATA\r\nSubject: bare LF\n\nline\n.\nmore\r\n..\r\n.\r\n",
		"EHLO mta.example\r\nMAIL FROM:<ann@example.com>\r\nRCPT TO:<agent@example.com>\r\nDATA\r\nSubject: cut short\r\n\r\nno end",
		"NOOP\r\nNOO",
		"",
	}
}

// FuzzReceiverSession feeds arbitrary client bytes to a receiver session
// over loopback, then half-closes: the server must not panic (go-smtp
// would answer 421 "Internal server error"), must answer and close within
// bounds (no hang, a bounded number of reply lines for the lines sent),
// and must hand the sink a message exactly when it answers "250 ... OK:
// queued" to a complete transaction: nothing for a transfer cut short,
// refused, or reset.
func FuzzReceiverSession(f *testing.F) {
	for _, s := range sessionSeeds() {
		f.Add([]byte(s))
	}
	ws := newWorkspace(f)
	sink := &countingSink{Sink: ws.pipe}
	r := NewReceiver(ReceiverOptions{Addr: "127.0.0.1:0", Dropzone: ws.dz, Own: []string{"agent@example.com"},
		MaxMessage: 64 << 10, MaxCommandLine: 512, MaxSessions: 64, MaxSessionsPerIP: 64,
		ReadTimeout: 5 * time.Second, MaxSessionTime: 10 * time.Second})
	if err := r.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	runSource(f, r, sink)

	f.Fuzz(func(t *testing.T, in []byte) {
		conn, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		before := sink.n.Load()
		go func() {
			conn.Write(in) // fails when the server closes first
			conn.(*net.TCPConn).CloseWrite()
		}()
		out, err := io.ReadAll(conn)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("the server neither answered nor closed: %v (replies %q)", err, out)
		}
		delivered := sink.n.Load() - before
		if bytes.Contains(out, []byte("Internal server error")) {
			t.Fatalf("the session panicked:\n%s", out)
		}
		replies := bytes.Count(out, []byte("\n"))
		if limit := 16*(bytes.Count(in, []byte("\n"))+1) + 4; replies > limit {
			t.Errorf("%d reply lines to %d input lines", replies, bytes.Count(in, []byte("\n")))
		}
		if queued := int64(bytes.Count(out, []byte(" OK: queued"))); delivered != queued {
			t.Errorf("%d messages handed to the sink, %d acknowledged:\n%s", delivered, queued, out)
		}
		if !bytes.HasPrefix(out, []byte("220 ")) && !bytes.HasPrefix(out, []byte("421 ")) {
			t.Errorf("no greeting: %q", out)
		}
	})
}
