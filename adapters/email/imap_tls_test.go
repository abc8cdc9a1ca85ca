package email

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
)

// The IMAP source speaks implicit TLS and STARTTLS, and logs in with
// AUTHENTICATE PLAIN or the LOGIN command; the test server refuses any
// login in clear, so the TLS modes really ran over TLS.
func TestIMAPTLSModes(t *testing.T) {
	cert := selfSigned(t)
	for _, tc := range []struct{ mode, auth string }{
		{"implicit", "plain"}, {"starttls", "plain"}, {"implicit", "login"}, {"starttls", "login"}, {"none", "plain"},
	} {
		t.Run(tc.mode+"/"+tc.auth, func(t *testing.T) {
			mem := imapmemserver.New()
			user := imapmemserver.NewUser("test", "test")
			user.Create("INBOX", nil)
			mem.AddUser(user)
			tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}}
			srv := imapserver.New(&imapserver.Options{
				NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
					return mem.NewSession(), nil, nil
				},
				TLSConfig:    tlsConf,
				InsecureAuth: false,
				Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}},
				Logger:       log.New(io.Discard, "", 0),
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			if tc.mode == "implicit" {
				ln = tls.NewListener(ln, tlsConf)
			}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close() })
			raw := []byte("From: a@example.com\r\nTo: agent@example.com\r\nSubject: over tls\r\nMessage-ID: <tls-1@example.com>\r\n\r\nhello\r\n")
			if _, err := user.Append("INBOX", literal(raw), &imap.AppendOptions{Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
			ws := newWorkspace(t)
			srvConf := serverAt(t, addr)
			srvConf.TLS, srvConf.Auth, srvConf.InsecureSkipVerify = tc.mode, tc.auth, true
			src := newTestSource(ws, IMAPOptions{Server: srvConf})
			err = src.SyncOnce(context.Background(), ws.pipe)
			if tc.mode == "none" {
				if err == nil || !strings.Contains(err.Error(), "login") && !strings.Contains(err.Error(), "authentication") {
					t.Errorf("login in clear: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if files := ws.files(t); len(files) != 1 {
				t.Errorf("files = %v", files)
			}
		})
	}
}

// literal makes an imap.LiteralReader of bytes.
func literal(b []byte) imap.LiteralReader {
	return &byteLiteral{Reader: strings.NewReader(string(b)), n: int64(len(b))}
}

type byteLiteral struct {
	*strings.Reader
	n int64
}

func (l *byteLiteral) Size() int64 { return l.n }
