package email

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/emersion/go-message"
	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	gmhtml "github.com/yuin/goldmark/renderer/html"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// Server is a mail server to connect to.
type Server struct {
	Host               string
	Port               int
	TLS                string // implicit | starttls | none
	InsecureSkipVerify bool
	Username           string
	Password           confkit.Secret // revealed only to log in
	Auth               string         // plain | login | none
}

func (s Server) addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

func (s Server) tlsConfig() *tls.Config {
	return &tls.Config{ServerName: s.Host, InsecureSkipVerify: s.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
}

// Account is one email account's outgoing side.
type Account struct {
	Name      string
	Addresses []string // the first is the From address
	// DisplayName is the name shown with the From address.
	DisplayName string
	SMTP        Server
	Hostname    string // EHLO name (default: the From domain)
	// AppendSent copies each sent message to IMAP's SentFolder.
	AppendSent bool
	IMAP       *Server
	SentFolder string
}

// SenderOptions configure a Sender.
type SenderOptions struct {
	Accounts []Account
	Dropzone *dropzone.Store
	Logger   *slog.Logger
	Timeout  time.Duration // per SMTP command (default 60 s)
}

// Sender delivers email drafts over SMTP: the adapters.Sender of the email
// provider. Each draft goes out through the account it names (its
// email.account, set by `courier send`), else the first account.
type Sender struct {
	opts SenderOptions
	log  *slog.Logger
	adapters.HealthTracker
}

var _ adapters.Sender = (*Sender)(nil)

// NewSender returns a Sender. It does no I/O.
func NewSender(opts SenderOptions) *Sender {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	s := &Sender{opts: opts, log: opts.Logger}
	s.Set(adapters.StatusConnected, "smtp")
	return s
}

func (s *Sender) account(name string) (*Account, error) {
	for i := range s.opts.Accounts {
		if a := &s.opts.Accounts[i]; a.Name == name || name == "" {
			return a, nil
		}
	}
	if name != "" {
		return nil, fmt.Errorf("email: no account named %q has smtp configured", name)
	}
	return nil, errors.New("email: no account has smtp configured")
}

// Send implements adapters.Sender. SMTP 4xx replies are temporary, 5xx
// permanent, each recipient on its own: when some recipients accept and
// others are deferred, the error is an adapters.PartialError and the next
// attempt goes to the deferred ones only.
func (s *Sender) Send(ctx context.Context, at *adapters.Attempt) (adapters.Receipt, error) {
	d := at.Draft
	name := ""
	if d.Email != nil {
		name = d.Email.Account
	}
	acct, err := s.account(name)
	if err != nil {
		return adapters.Receipt{}, adapters.Permanent(err)
	}
	if err := checkHeaders(d); err != nil {
		return adapters.Receipt{}, adapters.Permanent(err)
	}
	// The message is written straight into DATA (attachments stream from
	// the dropzone); composing twice gives the same bytes.
	from, err := s.compose(io.Discard, acct, d)
	if err != nil {
		return adapters.Receipt{}, err
	}
	write := func(w io.Writer) error { _, err := s.compose(w, acct, d); return err }
	done := map[string]bool{}
	for _, r := range at.Accepted {
		done[strings.ToLower(r.Address)] = true
	}
	var rcpts []string
	for _, r := range d.Recipients() {
		a, err := mail.ParseAddress(r)
		if err != nil {
			return adapters.Receipt{}, adapters.Permanent(fmt.Errorf("email: recipient %q: %w", r, err))
		}
		if err := envelopeAddress(a.Address); err != nil {
			return adapters.Receipt{}, adapters.Permanent(fmt.Errorf("email: recipient %q: %w", r, err))
		}
		if !done[strings.ToLower(a.Address)] {
			rcpts = append(rcpts, a.Address)
			done[strings.ToLower(a.Address)] = true // once, even if in To and Cc
		}
	}
	results, err := s.transmit(ctx, at, acct, from, rcpts, write)
	if err != nil {
		s.Error(err)
		return adapters.Receipt{}, err
	}
	s.Set(adapters.StatusConnected, "smtp")
	s.Event()
	var accepted []schema.RecipientResult
	var deferred, rejected []string
	for _, r := range results {
		switch r.Status {
		case "sent":
			accepted = append(accepted, r)
		case "deferred":
			deferred = append(deferred, r.Address+": "+string(r.Reply))
		default:
			rejected = append(rejected, r.Address+": "+string(r.Reply))
		}
	}
	mid := d.IdempotencyKey
	switch {
	case len(accepted) == 0 && len(deferred) > 0:
		return adapters.Receipt{}, adapters.Temporary(fmt.Errorf("email: every recipient was deferred: %s", strings.Join(append(deferred, rejected...), "; ")))
	case len(accepted) == 0:
		return adapters.Receipt{}, adapters.Permanent(fmt.Errorf("email: every recipient was rejected: %s", strings.Join(rejected, "; ")))
	case len(deferred) > 0:
		return adapters.Receipt{}, &adapters.PartialError{Accepted: accepted,
			Err: adapters.Temporary(fmt.Errorf("email: deferred: %s", strings.Join(deferred, "; ")))}
	}
	if acct.AppendSent && acct.IMAP != nil {
		if err := appendSent(ctx, *acct.IMAP, acct.SentFolder, write, s.opts.Timeout); err != nil {
			s.log.Warn("email: sent, but the copy to the Sent folder failed", "account", acct.Name, "err", err)
		}
	}
	// The inbound id is the draft's own (fixed at queue time); giving it
	// here also covers drafts queued before drafts carried one.
	return adapters.Receipt{ProviderMessageID: mid, InboundID: threading.EmailID(mid), Recipients: results}, nil
}

// transmit runs one SMTP transaction and returns a result per recipient.
// A recipient refused at RCPT keeps its own status; a DATA refusal applies
// to all.
func (s *Sender) transmit(ctx context.Context, at *adapters.Attempt, acct *Account, from string, rcpts []string, write func(io.Writer) error) ([]schema.RecipientResult, error) {
	c, stop, err := dialSMTP(ctx, acct.SMTP, s.opts.Timeout)
	if err != nil {
		return nil, err
	}
	quit := false
	defer func() {
		if quit {
			// The transaction is done: say QUIT without making the caller
			// wait for the answer, so that the draft is recorded as sent
			// as soon as the server took it (a crash in between resends).
			go func() { c.Quit(); c.Close(); stop() }()
			return
		}
		c.Close()
		stop()
	}()
	if err := greet(c, acct, from); err != nil {
		return nil, err
	}
	wide, err := needsUTF8(c, acct, from, rcpts)
	if err != nil {
		quit = true
		return nil, err
	}
	if err := c.Mail(from, &smtp.MailOptions{UTF8: wide}); err != nil {
		return nil, classify(err, "MAIL FROM")
	}
	results, ok, err := rcptTo(c, rcpts)
	if err != nil {
		return nil, err
	}
	if ok == 0 {
		c.Reset()
		quit = true
		return results, nil
	}
	resp, err := sendData(ctx, c, at, write)
	if err != nil {
		return nil, err
	}
	for i := range results {
		if results[i].Status == "sent" && resp != nil {
			results[i].Reply = schema.Text("250 " + resp.StatusText)
		}
	}
	quit = true
	return results, nil
}

// greet says EHLO, as the account's hostname (else from's domain), and
// authenticates when the account has a user name.
func greet(c *smtp.Client, acct *Account, from string) error {
	hostname := acct.Hostname
	if hostname == "" {
		hostname = domainOf(from)
	}
	if err := c.Hello(hostname); err != nil {
		return classify(err, "EHLO")
	}
	if acct.SMTP.Auth != "none" && acct.SMTP.Username != "" {
		var sc sasl.Client
		if acct.SMTP.Auth == "login" {
			sc = sasl.NewLoginClient(acct.SMTP.Username, acct.SMTP.Password.Reveal())
		} else {
			sc = sasl.NewPlainClient("", acct.SMTP.Username, acct.SMTP.Password.Reveal())
		}
		if err := c.Auth(sc); err != nil {
			// Credentials are fixed by a person; retrying later is right.
			return adapters.Temporary(fmt.Errorf("email: smtp %s: authentication failed as %s: %w", acct.SMTP.addr(), acct.SMTP.Username, err))
		}
	}
	return nil
}

// needsUTF8 reports whether the transaction needs SMTPUTF8 (RFC 6531): an
// address that is not ASCII (a reply to josé@exämple.com) goes only with
// it, in the envelope and in the header fields, which carry it as
// written. A server that does not offer it cannot take the message: that
// is permanent (the account's server will not change its mind on a
// retry), and the error names the address.
func needsUTF8(c *smtp.Client, acct *Account, from string, rcpts []string) (bool, error) {
	var wide []string
	for _, a := range append([]string{from}, rcpts...) {
		if !isASCII(a) {
			wide = append(wide, a)
		}
	}
	if len(wide) == 0 {
		return false, nil
	}
	if ok, _ := c.Extension("SMTPUTF8"); !ok {
		return false, adapters.Permanent(fmt.Errorf("email: smtp %s (account %s) does not offer SMTPUTF8, which %s needs (an address that is not ASCII): send it through a server that does",
			acct.SMTP.addr(), acct.Name, strings.Join(wide, ", ")))
	}
	return true, nil
}

// envelopeAddress refuses an address that SMTP cannot carry as it is
// written into "RCPT TO:<...>": an angle bracket, a quote, white space or
// a control character would end the path or add to the command (a quoted
// local part "a@x>, <b" parses as one address).
func envelopeAddress(a string) error {
	for _, r := range a {
		if r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) || strings.ContainsRune("<>\",\\", r) {
			return fmt.Errorf("%s cannot be written in an SMTP envelope", runeName(r))
		}
	}
	return nil
}

// rcptTo gives the server each recipient and returns a result for each
// (sent, or deferred or failed with the server's reply) and how many it
// took.
func rcptTo(c *smtp.Client, rcpts []string) (results []schema.RecipientResult, ok int, err error) {
	results = make([]schema.RecipientResult, 0, len(rcpts))
	for _, r := range rcpts {
		if err := c.Rcpt(r, nil); err != nil {
			var se *smtp.SMTPError
			if !errors.As(err, &se) {
				return nil, 0, classify(err, "RCPT TO")
			}
			st := "failed"
			if se.Temporary() {
				st = "deferred"
			}
			results = append(results, schema.RecipientResult{Address: r, Status: st, Reply: schema.Text(fmt.Sprintf("%d %s", se.Code, se.Message))})
			continue
		}
		ok++
		results = append(results, schema.RecipientResult{Address: r, Status: "sent"})
	}
	return results, ok, nil
}

// sendData writes the message as DATA and, once the attempt holds the
// commit gate, ends it: the server's reply is the one that takes it.
func sendData(ctx context.Context, c *smtp.Client, at *adapters.Attempt, write func(io.Writer) error) (*smtp.DataResponse, error) {
	w, err := c.Data()
	if err != nil {
		return nil, classify(err, "DATA")
	}
	if err := write(w); err != nil {
		w.Close()
		return nil, classify(err, "DATA")
	}
	if err := at.EnterCommit(ctx); err != nil {
		return nil, adapters.Temporary(err)
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return nil, classify(err, "end of DATA")
	}
	return resp, nil
}

// classify marks an SMTP error temporary (4xx, network) or permanent
// (5xx).
func classify(err error, stage string) error {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		e := fmt.Errorf("email: %s: %d %s", stage, se.Code, se.Message)
		if se.Temporary() {
			return adapters.Temporary(e)
		}
		return adapters.Permanent(e)
	}
	return adapters.Temporary(fmt.Errorf("email: %s: %w", stage, err))
}

// dialSMTP connects to an SMTP server with the configured TLS mode. The
// connection is closed if ctx ends first; stop releases that hook.
func dialSMTP(ctx context.Context, srv Server, timeout time.Duration) (c *smtp.Client, stop func() bool, err error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", srv.addr())
	if err != nil {
		return nil, nil, adapters.Temporary(fmt.Errorf("email: smtp %s: %w", srv.addr(), err))
	}
	stop = context.AfterFunc(ctx, func() { conn.Close() })
	switch srv.TLS {
	case "implicit":
		tc := tls.Client(conn, srv.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			stop()
			conn.Close()
			return nil, nil, adapters.Temporary(fmt.Errorf("email: smtp %s: TLS: %w", srv.addr(), err))
		}
		c = smtp.NewClient(tc)
	case "starttls":
		c, err = smtp.NewClientStartTLS(conn, srv.tlsConfig())
		if err != nil {
			stop()
			conn.Close()
			return nil, nil, classify(err, "STARTTLS")
		}
	default:
		c = smtp.NewClient(conn)
	}
	c.CommandTimeout = timeout
	c.SubmissionTimeout = 4 * timeout
	return c, stop, nil
}

// compose writes the message of a draft and returns the envelope sender.
// Date, Message-ID and threading headers come from the draft (fixed when it
// was queued), so every attempt sends the same message.
func (s *Sender) compose(w io.Writer, acct *Account, d *schema.Draft) (string, error) {
	from, err := fromAddress(acct, d)
	if err != nil {
		return "", err
	}
	var h gomail.Header
	h.SetAddressList("From", []*gomail.Address{{Name: acct.DisplayName, Address: from}})
	to, err := addressList(d.To)
	if err != nil {
		return "", err
	}
	h.SetAddressList("To", to)
	if len(d.Cc) > 0 {
		cc, err := addressList(d.Cc)
		if err != nil {
			return "", err
		}
		h.SetAddressList("Cc", cc)
	}
	h.Set("Subject", encodeText(d.Subject))
	date := time.Now()
	if d.CreatedAt != nil {
		date = d.CreatedAt.Time
	}
	h.SetDate(date)
	if d.IdempotencyKey != "" {
		h.SetMessageID(strings.Trim(d.IdempotencyKey, "<> "))
	}
	if d.Email != nil {
		if d.Email.InReplyTo != "" {
			h.SetMsgIDList("In-Reply-To", []string{strings.Trim(d.Email.InReplyTo, "<> ")})
		}
		if len(d.Email.References) > 0 {
			refs := make([]string, len(d.Email.References))
			for i, r := range d.Email.References {
				refs[i] = strings.Trim(r, "<> ")
			}
			h.SetMsgIDList("References", refs)
		}
	}
	if d.Options.Urgent {
		h.Set("Importance", "high")
		h.Set("X-Priority", "1 (Highest)")
	}
	h.Set("MIME-Version", "1.0")
	h.Set("X-Courier-Draft", d.ID)
	if err := s.writeBody(w, h.Header, d); err != nil {
		return "", err
	}
	return from, nil
}

// noAddress says that account has no address to send from: its
// addresses, or its login when that is an address, give them.
func noAddress(account string) string {
	return fmt.Sprintf("account %q has no address to send from: list it in courier.adapters.email.accounts[].addresses (its login is no address to take it from)", account)
}

// fromAddress is the address a draft goes out from: its email.from when
// that is one of its account's own addresses (spelt as the config spells
// it), else the account's first. A draft in outbound/ need not come from
// `courier send`, which sets From from the account: whoever can write the
// folder can drop one there, and mail "from ceo@corp.test" would leave
// under the account's login. So From is never taken on the draft's word.
func fromAddress(acct *Account, d *schema.Draft) (string, error) {
	if d.Email == nil || d.Email.From == "" {
		if len(acct.Addresses) == 0 {
			return "", adapters.Permanent(errors.New("email: " + noAddress(acct.Name)))
		}
		return acct.Addresses[0], nil
	}
	want := d.Email.From
	if a, err := mail.ParseAddress(want); err == nil {
		want = a.Address // "Name <addr>" names addr
	}
	for _, own := range acct.Addresses {
		if strings.EqualFold(own, want) {
			return own, nil
		}
	}
	return "", adapters.Permanent(fmt.Errorf("email: email.from %q is not an address of account %q (%s): a draft is sent only from its account's own addresses (courier.adapters.email.accounts[].addresses)",
		d.Email.From, acct.Name, strings.Join(acct.Addresses, ", ")))
}

// maxMsgID bounds one message id, so that its header line stays under
// RFC 5322's 998 characters (an id cannot be folded).
const maxMsgID = 900

// checkHeaders refuses what a draft would put into header fields that
// `courier send` fixes but a draft dropped into outbound/ may forge: a
// Message-ID (the idempotency key) that is not <id@domain>, and message
// ids (In-Reply-To, References, an inline part's Content-ID) or a media
// type that would break their field or add another: a line break in one
// is a Bcc: header, a space or a ">" a second id.
func checkHeaders(d *schema.Draft) error {
	switch {
	case d.IdempotencyKey == "":
		return errors.New("email: the draft has no Message-ID (idempotency_key); queue drafts with `courier send`, which fixes one")
	case !validMsgID(d.IdempotencyKey, true):
		return fmt.Errorf("email: idempotency_key %q is not a Message-ID (<id@domain>)", d.IdempotencyKey)
	}
	if d.Email != nil {
		if irt := d.Email.InReplyTo; irt != "" && !validMsgID(irt, false) {
			return fmt.Errorf("email: email.in_reply_to %q is not a message id (<id@domain>)", irt)
		}
		for i, r := range d.Email.References {
			if !validMsgID(r, false) {
				return fmt.Errorf("email: email.references[%d] %q is not a message id (<id@domain>)", i, r)
			}
		}
	}
	for i, a := range d.Artifacts {
		if a.ContentID != "" && !validMsgID("<"+strings.Trim(a.ContentID, "<>")+">", false) {
			return fmt.Errorf("email: artifacts[%d].content_id %q is not a content id (id@domain)", i, a.ContentID)
		}
		if a.MimeType != "" {
			if _, _, err := mime.ParseMediaType(a.MimeType); err != nil || strings.ContainsAny(a.MimeType, "\r\n") {
				return fmt.Errorf("email: artifacts[%d].mime_type %q is not a media type", i, a.MimeType)
			}
		}
	}
	return nil
}

// validMsgID reports whether s is "<...>" holding no space, control
// character or angle bracket, and not too long. Strict also wants the
// id@domain form Courier makes; ids from the mail answered are taken as
// their senders wrote them (some have no "@").
func validMsgID(s string, strict bool) bool {
	if len(s) < 3 || len(s) > maxMsgID || s[0] != '<' || s[len(s)-1] != '>' {
		return false
	}
	in := s[1 : len(s)-1]
	for _, r := range in {
		if r <= ' ' || r == 0x7f || r == '<' || r == '>' || (r >= 0x80 && r <= 0x9f) || r == utf8.RuneError {
			return false
		}
	}
	if !strict {
		return true
	}
	local, domain, ok := strings.Cut(in, "@")
	return ok && local != "" && domain != "" && !strings.Contains(domain, "@")
}

func addressList(rs schema.Recipients) ([]*gomail.Address, error) {
	out := make([]*gomail.Address, 0, len(rs))
	for _, r := range rs {
		a, err := mail.ParseAddress(r)
		if err != nil {
			return nil, adapters.Permanent(fmt.Errorf("email: recipient %q: %w", r, err))
		}
		out = append(out, &gomail.Address{Name: a.Name, Address: a.Address})
	}
	return out, nil
}

var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithRendererOptions(gmhtml.WithHardWraps()))

// bodies returns the text and HTML of a draft: Markdown is sent as text
// (the Markdown itself, readable as is) and HTML rendered with goldmark.
func bodies(d *schema.Draft) (text, html string, err error) {
	switch d.EffectiveType() {
	case schema.DraftText:
		return d.Text(), "", nil
	case schema.DraftHTML:
		html = string(d.Content.HTML)
		text = string(d.Content.Text)
		if text == "" {
			if text, err = htmltomarkdown.ConvertString(html); err != nil {
				text = ""
			}
		}
		return text, html, nil
	}
	md := d.Markdown()
	var buf bytes.Buffer
	if err := markdown.Convert([]byte(md), &buf); err != nil {
		return "", "", adapters.Permanent(fmt.Errorf("email: render Markdown: %w", err))
	}
	html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body>\n" + buf.String() + "</body></html>\n"
	if d.Content.Text != "" {
		md = string(d.Content.Text)
	}
	return md, html, nil
}

// outPart is a node of the MIME tree: a leaf with content, or a
// multipart with children.
type outPart struct {
	h    message.Header
	leaf func(w io.Writer) error
	kids []outPart
}

// emit writes a part's body into w (which encodes it per its header).
func emit(w *message.Writer, p outPart) error {
	if p.leaf != nil {
		return p.leaf(w)
	}
	for _, k := range p.kids {
		cw, err := w.CreatePart(k.h)
		if err != nil {
			return err
		}
		if err := emit(cw, k); err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
	}
	return nil
}

// writeBody writes the MIME body: multipart/mixed for attachments around
// multipart/related for inline images around multipart/alternative (text
// and HTML); each level only when needed.
func (s *Sender) writeBody(w io.Writer, top message.Header, d *schema.Draft) error {
	text, html, err := bodies(d)
	if err != nil {
		return err
	}
	var inline, attached []schema.DraftArtifact
	for _, a := range d.Artifacts {
		if a.Inline && html != "" {
			inline = append(inline, a)
		} else {
			attached = append(attached, a)
		}
	}
	seed := d.ID
	if d.IdempotencyKey != "" {
		seed = d.IdempotencyKey
	}
	b := &bodyWriter{dz: s.opts.Dropzone, seed: seed}
	root := textPart("text/plain", text)
	if html != "" {
		root = b.multipart("alternative", nil, textPart("text/plain", text), textPart("text/html", html))
	}
	if len(inline) > 0 {
		kids := []outPart{root}
		for _, a := range inline {
			kids = append(kids, b.attachment(a, true))
		}
		root = b.multipart("related", map[string]string{"type": "multipart/alternative"}, kids...)
	}
	if len(attached) > 0 {
		kids := []outPart{root}
		for _, a := range attached {
			kids = append(kids, b.attachment(a, false))
		}
		root = b.multipart("mixed", nil, kids...)
	}
	for f := root.h.Fields(); f.Next(); {
		top.Set(f.Key(), f.Value())
	}
	mw, err := message.CreateWriter(w, top)
	if err != nil {
		return err
	}
	if err := emit(mw, root); err != nil {
		return err
	}
	return mw.Close()
}

// bodyWriter makes parts; boundaries derive from the draft's key, so a
// resend of the same draft is the same bytes.
type bodyWriter struct {
	dz   *dropzone.Store
	seed string
}

func (b *bodyWriter) multipart(kind string, params map[string]string, kids ...outPart) outPart {
	sum := sha256.Sum256([]byte(b.seed + "/" + kind))
	p := map[string]string{"boundary": "courier-" + kind + "-" + hex.EncodeToString(sum[:12])}
	for k, v := range params {
		p[k] = v
	}
	var h message.Header
	h.SetContentType("multipart/"+kind, p)
	return outPart{h: h, kids: kids}
}

func textPart(ctype, body string) outPart {
	var h message.Header
	h.SetContentType(ctype, map[string]string{"charset": "utf-8"})
	h.Set("Content-Transfer-Encoding", "quoted-printable")
	return outPart{h: h, leaf: func(w io.Writer) error { _, err := io.WriteString(w, body); return err }}
}

// attachment streams an artifact from the dropzone as a base64 part.
func (b *bodyWriter) attachment(a schema.DraftArtifact, inline bool) outPart {
	ctype := a.MimeType
	if ctype == "" {
		ctype = mime.TypeByExtension(extOf(a.Name))
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	var h message.Header
	h.SetContentType(ctype, map[string]string{"name": a.Name})
	disp := "attachment"
	if inline {
		disp = "inline"
		cid := a.ContentID
		if cid == "" {
			cid = strings.TrimPrefix(a.ID, "sha256:")[:16] + "@courier"
		}
		h.Set("Content-ID", "<"+strings.Trim(cid, "<>")+">")
	}
	// The file name as RFC 2231 (filename*=utf-8''...), which MIME
	// parsers read, rather than go-message's RFC 2047 encoded word inside
	// the quotes, which RFC 2047 §5 forbids there and the standard
	// library, among others, leaves undecoded. The Content-Type name
	// above keeps the encoded word for the old clients that read only
	// that.
	if cd := mime.FormatMediaType(disp, map[string]string{"filename": a.Name}); cd != "" {
		h.Set("Content-Disposition", cd)
	} else {
		h.SetContentDisposition(disp, map[string]string{"filename": a.Name})
	}
	h.Set("Content-Transfer-Encoding", "base64")
	return outPart{h: h, leaf: func(w io.Writer) error {
		if b.dz == nil {
			return adapters.Permanent(errors.New("email: no dropzone to read attachments from"))
		}
		f, err := b.dz.Open(a.ID)
		if err != nil {
			return adapters.Permanent(fmt.Errorf("email: attachment %s (%s): %w", a.Name, a.ID, err))
		}
		defer f.Close()
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("email: attachment %s: %w", a.Name, err)
		}
		return nil
	}}
}

func extOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}

func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 && i < len(addr)-1 {
		return addr[i+1:]
	}
	return "localhost"
}

// Check connects, says EHLO and authenticates, for `courier doctor`.
func (a Account) Check(ctx context.Context) error {
	c, stop, err := dialSMTP(ctx, a.SMTP, 20*time.Second)
	if err != nil {
		return fmt.Errorf("%w (check the smtp host, port and tls of account %s)", err, a.Name)
	}
	defer stop()
	defer c.Close()
	from := ""
	if len(a.Addresses) > 0 {
		from = a.Addresses[0]
	}
	if err := c.Hello(domainOf(from)); err != nil {
		return err
	}
	if a.SMTP.Auth != "none" && a.SMTP.Username != "" {
		var sc sasl.Client = sasl.NewPlainClient("", a.SMTP.Username, a.SMTP.Password.Reveal())
		if a.SMTP.Auth == "login" {
			sc = sasl.NewLoginClient(a.SMTP.Username, a.SMTP.Password.Reveal())
		}
		if err := c.Auth(sc); err != nil {
			return fmt.Errorf("smtp %s: authentication as %s failed: %v (check the account's smtp username and password)", a.SMTP.addr(), a.SMTP.Username, err)
		}
	}
	c.Quit()
	return nil
}

// encodeText encodes an unstructured header value (a Subject) as RFC 2047
// encoded words short enough that the field folds into lines of at most
// 76 characters (mime.QEncoding makes words of up to 75, so a long
// non-ASCII subject became one line of hundreds). Text that needs no
// encoding is left to the header writer, which folds it at spaces.
func encodeText(s string) string {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			plain = false
			break
		}
	}
	if plain && !strings.Contains(s, "=?") {
		return s
	}
	const prefix, suffix, maxWord = "=?utf-8?q?", "?=", 60
	var out, word strings.Builder
	flush := func() {
		if word.Len() == 0 {
			return
		}
		if out.Len() > 0 {
			out.WriteByte(' ') // folding white space: dropped between encoded words
		}
		out.WriteString(prefix + word.String() + suffix)
		word.Reset()
	}
	var enc []byte
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		enc = enc[:0]
		for _, c := range []byte(string(r)) {
			switch {
			case c == ' ':
				enc = append(enc, '_')
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("!*+-/", c) >= 0:
				enc = append(enc, c)
			default:
				enc = fmt.Appendf(enc, "=%02X", c)
			}
		}
		if len(prefix)+word.Len()+len(enc)+len(suffix) > maxWord {
			flush()
		}
		word.Write(enc)
	}
	flush()
	return out.String()
}
