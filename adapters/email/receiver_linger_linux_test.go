package email

import (
	"bufio"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReceiverLastRepliesReachClient: a session that ends with input
// unread still delivers every reply it wrote before. The client pipelines
// 300 NOOPs and then a command line of 1 MiB (over the limit, and more
// than the server reads before it ends the session), with a receive buffer
// too small for the replies, and reads only after the server had time to
// answer everything and close. A plain close would reset the connection
// and drop what of the replies was still queued at the server (the 500
// among them); the receiver shuts its output, waits for the client to take
// it, and only then closes.
func TestReceiverLastRepliesReachClient(t *testing.T) {
	// 13 KB of replies through a 2 KB window take a few delayed ACKs; on
	// a loaded machine that passed the 2 s the receiver waits (the server
	// closed after 176 replies in a .ci/run at load 6). The wait's bound
	// is not what this tests. Restored after the receiver has stopped.
	was := lingerTime
	lingerTime = 10 * time.Second
	t.Cleanup(func() { lingerTime = was })
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{})
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, raw syscall.RawConn) error {
		var err error
		raw.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		return err
	}}
	c, err := d.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	const noops = 300
	go c.Write([]byte(strings.Repeat("NOOP\r\n", noops) + strings.Repeat("A", 1<<20)))
	// The replies (some 13 KB) fill the client's buffer and wait in the
	// server's; the server reads the long line meanwhile and ends the
	// session.
	time.Sleep(500 * time.Millisecond)
	br := bufio.NewReader(c)
	got := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d NOOPs answered: %q, %v; want all %d answered, then 500", got, line, err, noops)
		}
		if strings.HasPrefix(line, "220") {
			continue
		}
		if strings.HasPrefix(line, "500") {
			break
		}
		if !strings.HasPrefix(line, "250") {
			t.Fatalf("reply %q to a NOOP", line)
		}
		got++
	}
	if got != noops {
		t.Errorf("%d NOOPs answered, want %d", got, noops)
	}
	if line, err := br.ReadString('\n'); err == nil {
		t.Errorf("a reply after the 500: %q", line)
	}
}
