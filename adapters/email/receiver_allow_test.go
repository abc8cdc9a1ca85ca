package email

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/internal/testutil"
)

// greeting connects to addr and returns the server's first line.
func greeting(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no greeting: %v", err)
	}
	return strings.TrimSpace(line)
}

// A client outside allow_from gets 554 in place of the greeting and can
// deliver nothing; a client inside gets the greeting and delivers.
func TestReceiverAllowFrom(t *testing.T) {
	ws := newWorkspace(t)
	outside := startReceiver(t, ws, nil, ReceiverOptions{Hostname: "mx.courier.test",
		AllowFrom: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}})
	if g := greeting(t, outside.Addr()); !strings.HasPrefix(g, "554 5.7.1 ") {
		t.Errorf("greeting to a client outside allow_from: %q, want 554", g)
	}
	if c, err := smtp.Dial(outside.Addr()); err == nil {
		c.Close()
		t.Error("an SMTP client outside allow_from got a session")
	} else if !strings.Contains(err.Error(), "554") {
		t.Errorf("an SMTP client outside allow_from: %v, want the 554", err)
	}
	if n := len(ws.files(t)); n != 0 {
		t.Errorf("%d files from a refused client", n)
	}

	inside := startReceiver(t, ws, nil, ReceiverOptions{AllowFrom: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if g := greeting(t, inside.Addr()); !strings.HasPrefix(g, "220 ") {
		t.Errorf("greeting to a client inside allow_from: %q, want 220", g)
	}
	if err := sendSMTP(t, inside.Addr(), receiverMail); err != nil {
		t.Fatalf("a client inside allow_from: %v", err)
	}
	if n := len(ws.files(t)); n != 1 {
		t.Errorf("%d files, want 1", n)
	}
}

// A receiver that listens beyond loopback without allow_from warns when it
// starts, and its exposure check (doctor's) fails naming the key to set;
// on loopback, a Unix socket, or with allow_from, neither.
func TestReceiverExposure(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "lmtp.sock")
	for _, c := range []struct {
		addr    string
		lmtp    bool
		allow   []netip.Prefix
		exposed bool
	}{
		{"0.0.0.0:0", false, nil, true},
		{"[::]:0", true, nil, true},
		{"0.0.0.0:0", false, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, false},
		{"127.0.0.1:0", false, nil, false},
		{"[::1]:0", false, nil, false},
		{"localhost:0", false, nil, false},
		{"unix:" + sock, true, nil, false},
	} {
		var log testutil.Buffer
		r := NewReceiver(ReceiverOptions{Addr: c.addr, LMTP: c.lmtp, AllowFrom: c.allow, Dropzone: testutil.NewDropzone(t, nil),
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err := r.Start(context.Background()); err != nil {
			if strings.Contains(err.Error(), "address") && c.addr == "[::1]:0" {
				continue // no IPv6 here
			}
			t.Fatal(err)
		}
		r.Stop(context.Background())
		err := r.Exposure()
		warned := strings.Contains(log.String(), "allow_from")
		if (err != nil) != c.exposed || warned != c.exposed {
			t.Errorf("%s (allow_from %v): exposure %v, warned %v; want exposed %v", c.addr, c.allow, err, warned, c.exposed)
		}
		if c.exposed && !strings.Contains(err.Error(), "courier.adapters.email.receiver.allow_from") {
			t.Errorf("the warning does not say what to set: %v", err)
		}
	}
	os.Remove(sock)
}

// The provider gives doctor the exposure check of each receiver, and
// refuses an allow_from it cannot read, naming the key.
func TestProviderExposureCheck(t *testing.T) {
	cfg := Config{Enabled: true, Receiver: ReceiverConfig{SMTP: "0.0.0.0:2525"}}
	p, err := New(Options{Config: cfg, Dropzone: testutil.NewDropzone(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	var check *adapters.Check
	for i := range p.Checks {
		if strings.HasSuffix(p.Checks[i].Name, "exposure") {
			check = &p.Checks[i]
		}
	}
	if check == nil {
		t.Fatalf("no exposure check among %v", p.Checks)
	}
	if err := check.Run(context.Background()); err == nil {
		t.Error("doctor's exposure check passes a receiver open to anyone")
	}
	cfg.Receiver.AllowFrom = []string{"192.0.2.0/24", "2001:db8::1"}
	if p, err = New(Options{Config: cfg, Dropzone: testutil.NewDropzone(t, nil)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Checks {
		if strings.HasSuffix(c.Name, "exposure") {
			if err := c.Run(context.Background()); err != nil {
				t.Errorf("with allow_from: %v", err)
			}
		}
	}
	cfg.Receiver.AllowFrom = []string{"192.0.2.0/33"}
	if _, err := New(Options{Config: cfg}); err == nil || !strings.Contains(err.Error(), "allow_from[0]") {
		t.Errorf("a bad network: %v", err)
	}
}
