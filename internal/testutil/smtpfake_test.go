package testutil

import (
	"fmt"
	"io"
	"net/smtp"
	"strings"
	"testing"
	"time"
)

// fakeTransaction starts a transaction on f over net/smtp and writes its
// data; closing w sends the final "." and reads the reply.
func fakeTransaction(t *testing.T, f *SMTPFake, subject string) (c *smtp.Client, w io.WriteCloser) {
	t.Helper()
	c, err := smtp.Dial(f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Mail("a@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("b@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("c@example.com"); err != nil {
		t.Fatal(err)
	}
	w, err = c.Data()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, "Subject: %s\r\n\r\n.dot-stuffed\r\n", subject) // "..dot-stuffed" on the wire
	return c, w
}

// The fake records whole transactions, and holds the one asked for at its
// final "." until released: the client has sent everything and has no
// reply.
func TestSMTPFakeHold(t *testing.T) {
	f := StartSMTPFake(t)
	h := f.HoldAt(2)
	_, w := fakeTransaction(t, f, "one")
	if err := w.Close(); err != nil {
		t.Fatalf("the first transaction, not held: %v", err)
	}
	select {
	case <-h.Held():
		t.Fatal("held the first transaction; asked for the second")
	default:
	}
	_, w = fakeTransaction(t, f, "two")
	replied := make(chan error, 1)
	go func() { replied <- w.Close() }()
	select {
	case <-h.Held():
	case err := <-replied:
		t.Fatalf("the second transaction was answered (%v), not held", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the second transaction was not held")
	}
	// Held: on the fake's side the message is whole, and the client cannot
	// have its reply.
	select {
	case err := <-replied:
		t.Fatalf("the client got a reply (%v) while its transaction is held", err)
	default:
	}
	msgs := f.Messages()
	if len(msgs) != 2 || string(h.Message().Raw) != string(msgs[1].Raw) {
		t.Fatalf("while held: %d messages, held %q", len(msgs), h.Message().Raw)
	}
	m := msgs[1]
	if m.From != "a@example.com" || strings.Join(m.To, ",") != "b@example.com,c@example.com" ||
		string(m.Raw) != "Subject: two\r\n\r\n.dot-stuffed\r\n" {
		t.Errorf("held message = %+v %q", m, m.Raw)
	}
	h.Release()
	if err := <-replied; err != nil {
		t.Errorf("after Release: %v", err)
	}
}

// A held transaction whose client hangs up (a crash) is still a message:
// the fake had it whole. The next one is received as usual.
func TestSMTPFakeClientGone(t *testing.T) {
	f := StartSMTPFake(t)
	h := f.HoldAt(1)
	c, w := fakeTransaction(t, f, "held")
	go w.Close()
	<-h.Held()
	c.Close()
	h.Release()
	_, w = fakeTransaction(t, f, "next")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, m := range f.Messages() {
		subjects = append(subjects, strings.SplitN(string(m.Raw), "\r\n", 2)[0])
	}
	if strings.Join(subjects, "|") != "Subject: held|Subject: next" {
		t.Errorf("messages %v", subjects)
	}
}
