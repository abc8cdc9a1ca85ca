package email

import (
	"bytes"

	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/monoco/courier/internal/confkit"
)

// smtpFake is a recording SMTP server with error knobs, in the manner of
// maddy's internal/testutils/smtp_server.go.
type smtpFake struct {
	addr string
	srv  *smtp.Server
	ln   net.Listener

	mu       sync.Mutex
	msgs     []fakeMsg
	user     string // required login ("" = no auth)
	pass     string
	authErr  error
	mailErr  error
	rcptErr  map[string]error // by address
	dataErr  error
	sessions int
}

type fakeMsg struct {
	from  string
	rcpts []string
	data  []byte
	utf8  bool // MAIL FROM said SMTPUTF8
}

func startSMTPFake(t testing.TB) *smtpFake { return startSMTPFakeWith(t, false) }

// startSMTPFakeWith starts an smtpFake that offers SMTPUTF8 or not.
func startSMTPFakeWith(t testing.TB, smtputf8 bool) *smtpFake {
	t.Helper()
	f := &smtpFake{rcptErr: map[string]error{}}
	f.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		f.mu.Lock()
		f.sessions++
		f.mu.Unlock()
		return &fakeSession{f: f}, nil
	}))
	f.srv.Domain = "fake.test"
	f.srv.AllowInsecureAuth = true
	f.srv.EnableSMTPUTF8 = smtputf8
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr, f.ln = ln.Addr().String(), ln
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func (f *smtpFake) server() Server {
	host, port, _ := net.SplitHostPort(f.addr)
	p := 0
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	auth := "none"
	if f.user != "" {
		auth = "plain"
	}
	return Server{Host: host, Port: p, TLS: "none", Username: f.user, Password: confkit.Secret(f.pass), Auth: auth}
}

func (f *smtpFake) messages() []fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeMsg(nil), f.msgs...)
}

type fakeSession struct {
	f     *smtpFake
	from  string
	rcpts []string
	utf8  bool
	authd bool
}

func (s *fakeSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *fakeSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		s.f.mu.Lock()
		defer s.f.mu.Unlock()
		if s.f.authErr != nil {
			return s.f.authErr
		}
		if user != s.f.user || pass != s.f.pass {
			return smtp.ErrAuthFailed
		}
		s.authd = true
		return nil
	}), nil
}

func (s *fakeSession) Mail(from string, opts *smtp.MailOptions) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.user != "" && !s.authd {
		return smtp.ErrAuthRequired
	}
	if s.f.mailErr != nil {
		return s.f.mailErr
	}
	s.from, s.utf8 = from, opts != nil && opts.UTF8
	return nil
}

func (s *fakeSession) Rcpt(to string, opts *smtp.RcptOptions) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if err := s.f.rcptErr[to]; err != nil {
		return err
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}

func (s *fakeSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.dataErr != nil {
		return s.f.dataErr
	}
	s.f.msgs = append(s.f.msgs, fakeMsg{from: s.from, rcpts: s.rcpts, data: bytes.Clone(b), utf8: s.utf8})
	return nil
}

func (s *fakeSession) Reset()        { s.from, s.rcpts = "", nil }
func (s *fakeSession) Logout() error { return nil }

var errTemp = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
var errPerm = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
