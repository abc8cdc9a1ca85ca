package email

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/adapters"

	"github.com/emersion/go-smtp"
)

// selfSigned returns a TLS certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "courier-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// The sender speaks implicit TLS and STARTTLS, and authenticates only over
// TLS (the server refuses AUTH in clear).
func TestSendTLSModes(t *testing.T) {
	cert := selfSigned(t)
	for _, mode := range []string{"implicit", "starttls", "none"} {
		t.Run(mode, func(t *testing.T) {
			f := startSMTPFake(t)
			f.user, f.pass = "agent", "s3cret"
			// A second server on TLS in front of the same recording backend.
			srv := smtp.NewServer(f.srv.Backend)
			srv.Domain = "fake.test"
			srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
			srv.AllowInsecureAuth = false
			srv.ErrorLog = log.New(io.Discard, "", 0)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if mode == "implicit" {
				ln = tls.NewListener(ln, srv.TLSConfig)
			}
			go srv.Serve(ln)
			t.Cleanup(func() { srv.Close(); ln.Close() })
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			p := 0
			for _, c := range port {
				p = p*10 + int(c-'0')
			}
			s := NewSender(SenderOptions{Accounts: []Account{{Name: "work", Addresses: []string{"agent@corp.example"},
				SMTP: Server{Host: "127.0.0.1", Port: p, TLS: mode, InsecureSkipVerify: true, Username: "agent", Password: "s3cret", Auth: "plain"}}},
				Timeout: 5 * time.Second})
			_, err = s.Send(context.Background(), &adapters.Attempt{Draft: testDraft()})
			if mode == "none" {
				// The server refuses AUTH in clear: so the other modes
				// really authenticated over TLS.
				if err == nil || !strings.Contains(err.Error(), "authentication failed") {
					t.Errorf("AUTH in clear: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(f.messages()) != 1 {
				t.Fatalf("%d messages", len(f.messages()))
			}
			// Verification on: the self-signed certificate is refused.
			s.opts.Accounts[0].SMTP.InsecureSkipVerify = false
			_, err = s.Send(context.Background(), &adapters.Attempt{Draft: testDraft()})
			if err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("self-signed certificate accepted without InsecureSkipVerify: %v", err)
			}
		})
	}
}
