package email

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-msgauth/authres"
	"github.com/emersion/go-msgauth/dkim"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/schema"
)

// Bounds on what one message can make the verifier do. A message is bounded
// by courier.limits.max_message_bytes already; these bound the work and
// the file's auth block within it.
const (
	// maxSignatures DKIM signatures are verified (each costs a DNS lookup
	// and a pass over the body); the rest are listed as not checked.
	maxSignatures = 5
	// maxAuthResults Authentication-Results fields are read.
	maxAuthResults = 32
	// maxListed bounds the lists of the auth block (untrusted authserv-ids,
	// Delivered-To).
	maxListed = 8
	// maxRcptListed envelope recipients are listed (go-smtp takes up to
	// the receiver's MaxRecipients, a thousand).
	maxRcptListed = 64
	// maxAuthText bounds each string of the auth block: a domain, an
	// address, a reason (RFC 5321 paths are at most 256 octets).
	maxAuthText = 256
	// DefaultLookupTimeout bounds one DNS lookup of a DKIM key.
	DefaultLookupTimeout = 5 * time.Second
	// txtCacheSize keys are kept, for txtTTL (txtErrTTL for a failed
	// lookup, so that a DNS outage does not cost every message a timeout
	// and its end is noticed soon).
	txtCacheSize = 1024
	txtTTL       = 10 * time.Minute
	txtErrTTL    = time.Minute
)

// VerifierOptions configure a Verifier. The zero value verifies DKIM with
// the system resolver and trusts no Authentication-Results.
type VerifierOptions struct {
	// AuthservIDs are the authserv-ids (RFC 8601 §2.5) of the hosts whose
	// Authentication-Results are trusted: the MTA that receives the mail
	// (courier.adapters.email.authserv_ids). Compared case-insensitively.
	AuthservIDs []string
	// TrustUnverified treats senders that could not be verified as
	// verified for personal_eligible and correlation inheritance. The
	// auth block still says what was found.
	TrustUnverified bool
	// LookupTXT returns the TXT records of a DNS name; nil uses the system
	// resolver. Tests give keys of their own through it. An error that is
	// a *net.DNSError with IsNotFound means there is no key (permerror);
	// any other error is taken as temporary (temperror).
	LookupTXT func(ctx context.Context, name string) ([]string, error)
	// LookupTimeout bounds one lookup (default DefaultLookupTimeout).
	LookupTimeout time.Duration
	// Now is the clock of the key cache; nil is time.Now.
	Now func() time.Time
}

// Verifier establishes who sent an email (metadata.extra.auth, DESIGN §4):
// it verifies DKIM signatures itself, reads the Authentication-Results
// that trusted hosts added, and aligns both with the From domain. One
// Verifier is shared by the provider's sources: it caches DKIM keys. It is
// safe for concurrent use.
type Verifier struct {
	opts    VerifierOptions
	trusted map[string]bool
	cache   txtCache
}

// NewVerifier returns a Verifier; nil options mean the defaults. It does
// no I/O.
func NewVerifier(o *VerifierOptions) *Verifier {
	v := &Verifier{trusted: map[string]bool{}}
	if o != nil {
		v.opts = *o
	}
	if v.opts.LookupTXT == nil {
		v.opts.LookupTXT = net.DefaultResolver.LookupTXT
	}
	if v.opts.LookupTimeout <= 0 {
		v.opts.LookupTimeout = DefaultLookupTimeout
	}
	if v.opts.Now == nil {
		v.opts.Now = time.Now
	}
	for _, id := range v.opts.AuthservIDs {
		v.trusted[strings.ToLower(strings.TrimSpace(id))] = true
	}
	v.cache.entries = map[string]txtEntry{}
	return v
}

// UnverifiedSender reports what adapters.Event.UnverifiedSender should say
// of m: its auth block found no verified sender, and the config does not
// trust unverified senders.
func (v *Verifier) UnverifiedSender(m *schema.Message) bool {
	a := m.Metadata.Extra.Auth
	return a != nil && !a.Verified && (v == nil || !v.opts.TrustUnverified)
}

// trustUnverified reports whether unverified senders count as verified.
func (v *Verifier) trustUnverified() bool { return v != nil && v.opts.TrustUnverified }

// authenticate sets metadata.extra.auth and makes personal_eligible
// require a verified sender. open reopens the raw message (nil when the
// caller did not store it: its signatures are then listed as not checked).
// Only an I/O error reading the raw message is returned.
func (b *builder) authenticate(v *Verifier, open func() (io.ReadCloser, error), env *schema.Envelope) error {
	if v == nil {
		v = NewVerifier(nil)
	}
	a := &schema.Auth{}
	b.m.Metadata.Extra.Auth = a
	a.FromDomain = b.fromDomain()
	if err := b.verifyDKIM(v, a, open); err != nil {
		return err
	}
	b.trustedResults(v, a)
	a.Verified, a.VerifiedBy = verdict(a)
	b.envelope(a, env)
	if x := &b.m.Metadata.Extra; x.PersonalEligible != nil && *x.PersonalEligible && !a.Verified && !v.trustUnverified() {
		// Seed 003's rule says who the thread is with; that is only worth
		// something when the one external participant is who the From says.
		no := false
		x.PersonalEligible = &no
	}
	return nil
}

// fromDomain is the domain of the From field's one address, lowercase
// ASCII; "" when From has no address or several (DMARC refuses those too:
// a second author could be the one a signature vouches for).
func (b *builder) fromDomain() string {
	var addr string
	for _, f := range b.from {
		n := strings.ToLower(strings.TrimSpace(f.Addr))
		switch {
		case n == "" || n == addr:
		case addr != "":
			return ""
		default:
			addr = n
		}
	}
	i := strings.LastIndexByte(addr, '@')
	if i < 0 {
		return ""
	}
	return authText(asciiDomain(addr[i+1:]))
}

// verifyDKIM verifies the message's DKIM signatures (RFC 6376) with
// go-msgauth, reading the raw message again: its header held in memory
// (at most mime.MaxHeaderBytes), its body streamed through the hashes.
func (b *builder) verifyDKIM(v *Verifier, a *schema.Auth, open func() (io.ReadCloser, error)) error {
	fields := b.h.All("Dkim-Signature")
	a.DKIM = "none"
	if len(fields) == 0 {
		return nil
	}
	if open == nil {
		for _, f := range fields[:min(len(fields), maxSignatures)] {
			a.DKIMSignatures = append(a.DKIMSignatures, schema.DKIMSignature{Domain: authText(tagValue(f, "d")), Result: "temperror",
				Reason: "not checked: the raw message was not stored"})
		}
		a.DKIM = "temperror"
		return nil
	}
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	hl := &headerLimit{r: r, max: mime.MaxHeaderBytes}
	verifs, err := dkim.VerifyWithOptions(hl, &dkim.VerifyOptions{
		LookupTXT:        v.lookupTXT,
		MaxVerifications: maxSignatures,
	})
	switch {
	case hl.err != nil:
		// Our own copy could not be read: the caller tries again later.
		return hl.err
	case err != nil && !errors.Is(err, dkim.ErrTooManySignatures):
		// The message, not the disk: a header go-msgauth cannot read (no
		// end, over the limit). Its signatures cannot be checked.
		reason := "the header cannot be read for DKIM"
		if hl.over {
			reason = "header over 1 MiB: not checked"
		}
		for _, f := range fields[:min(len(fields), maxSignatures)] {
			a.DKIMSignatures = append(a.DKIMSignatures, schema.DKIMSignature{Domain: authText(tagValue(f, "d")), Result: "permerror", Reason: reason})
		}
		verifs = nil
	}
	for _, vr := range verifs {
		s := schema.DKIMSignature{Domain: authText(asciiDomain(vr.Domain)), Result: "pass"}
		if vr.Err != nil {
			s.Result = dkimResult(vr.Err)
			s.Reason = authText(strings.TrimPrefix(vr.Err.Error(), "dkim: "))
		}
		a.DKIMSignatures = append(a.DKIMSignatures, s)
	}
	if len(fields) > maxSignatures {
		b.n.Addf("%d DKIM signatures: the first %d were checked", len(fields), maxSignatures)
	}
	a.DKIM = bestResult(a.DKIMSignatures)
	return nil
}

// bodyNotFetched corrects the DKIM results of a message of which only the
// header was fetched (over max_message_bytes): its signatures did not fail,
// they could not be checked. (A pass stays: the body was empty. A failed
// signature verified nothing, so the verdict does not change.)
func bodyNotFetched(a *schema.Auth) {
	if a == nil {
		return
	}
	for i := range a.DKIMSignatures {
		if s := &a.DKIMSignatures[i]; s.Result == "fail" {
			s.Result, s.Reason = "temperror", "not checked: only the header was fetched (over courier.limits.max_message_bytes)"
		}
	}
	a.DKIM = bestResult(a.DKIMSignatures)
}

// dkimResult names a failed signature's result as RFC 8601 does.
func dkimResult(err error) string {
	switch {
	case dkim.IsTempFail(err):
		return "temperror"
	case dkim.IsPermFail(err):
		return "permerror"
	}
	return "fail"
}

// bestResult is the result of the best signature: one that passes makes
// the message pass; then temperror (a later check may pass), fail,
// permerror.
func bestResult(sigs []schema.DKIMSignature) string {
	best := "none"
	rank := map[string]int{"none": 0, "permerror": 1, "fail": 2, "temperror": 3, "pass": 4}
	for _, s := range sigs {
		if rank[s.Result] > rank[best] {
			best = s.Result
		}
	}
	return best
}

// trustedResults records the Authentication-Results (RFC 8601) that a
// trusted host added, and the authserv-ids of the others.
//
// The rule: a field is trusted when its authserv-id is configured and it
// stands between the topmost such field and the next Received field below
// it. Each MTA prepends its Received field (RFC 5321 §4.4) and its results
// go on top of what it received, so our MTA's results are the first with
// its authserv-id, and everything past the Received field below them came
// with the message from outside, where anyone can write an
// Authentication-Results naming our host. RFC 8601 §5 has the receiving
// MTA delete such fields; the rule holds when it does not. It assumes the
// configured host adds its results to every message: one that does not
// lets the topmost forged field stand in for its own.
func (b *builder) trustedResults(v *Verifier, a *schema.Auth) {
	const (
		before = iota
		in
		after
	)
	state, seen := before, 0
	for key, value := range b.h.Fields() {
		switch key {
		case "Received":
			if state == in {
				state = after
			}
			continue
		case "Authentication-Results":
		default:
			continue
		}
		if seen++; seen > maxAuthResults {
			break
		}
		id, results := parseAuthResults(string(value))
		if id == "" {
			continue
		}
		if !v.trusted[strings.ToLower(id)] || state == after {
			a.UntrustedAuthservIDs = appendUnique(a.UntrustedAuthservIDs, authText(id))
			continue
		}
		state = in
		if a.AuthservID == "" {
			a.AuthservID = authText(id)
		}
		record(a, results)
	}
}

// record takes the first SPF and DMARC results of a trusted field, and
// its DKIM result (a pass over any other).
func record(a *schema.Auth, results []authres.Result) {
	for _, r := range results {
		switch r := r.(type) {
		case *authres.SPFResult:
			if a.SPF == "" {
				a.SPF, a.SPFDomain = authText(string(r.Value)), authText(asciiDomain(addrDomain(r.From)))
			}
		case *authres.DMARCResult:
			if a.DMARC == "" {
				a.DMARC, a.DMARCDomain = authText(string(r.Value)), authText(asciiDomain(addrDomain(r.From)))
			}
		case *authres.DKIMResult:
			if a.TrustedDKIM == "" || (a.TrustedDKIM != "pass" && r.Value == authres.ResultPass) {
				d := r.Domain
				if d == "" {
					d = addrDomain(r.Identifier)
				}
				a.TrustedDKIM, a.TrustedDKIMDomain = authText(string(r.Value)), authText(asciiDomain(d))
			}
		}
	}
}

// verdict decides whether the From domain is verified, and by what: a
// passing signature Courier checked, else a trusted DMARC, SPF or DKIM
// pass, each aligned with the From domain (relaxed alignment, RFC 7489
// §3.1: the same organisational domain).
func verdict(a *schema.Auth) (bool, string) {
	if a.FromDomain == "" {
		return false, ""
	}
	for _, s := range a.DKIMSignatures {
		if s.Result == "pass" && aligned(s.Domain, a.FromDomain) {
			return true, "dkim"
		}
	}
	switch {
	case a.DMARC == "pass" && aligned(a.DMARCDomain, a.FromDomain):
		return true, "dmarc"
	case a.SPF == "pass" && aligned(a.SPFDomain, a.FromDomain):
		return true, "spf"
	case a.TrustedDKIM == "pass" && aligned(a.TrustedDKIMDomain, a.FromDomain):
		return true, "trusted dkim"
	}
	return false, ""
}

// senderNotAligned says why an unverified sender must not inherit a
// correlation id (adapters.Event.SenderNotAligned), "" when its envelope
// sender backs the From: the envelope sender's domain is aligned with the
// From domain (the same organisational domain). The envelope sender is
// MAIL FROM at the receiver and the Return-Path over IMAP (the delivering
// MTA wrote it from its MAIL FROM). Neither is checked here, but a forger
// who writes a participant's From must then also give that domain as the
// reverse path, where bounces and SPF checks go.
//
// An unknown or null envelope sender is not aligned: a mail fetched over
// IMAP with no Return-Path, or sent with MAIL FROM:<> (as bounces and
// auto-replies are), backs no From. Anyone can send with <>, so taking it
// as aligned would open the attack again to whoever writes it; a genuine
// bounce still reaches the agent, only without the thread's correlation.
func senderNotAligned(a *schema.Auth) string {
	const prefix = "the sender is not verified and "
	if a == nil {
		return ""
	}
	if a.FromDomain == "" {
		return prefix + "the From field has no single address for the envelope sender to align with"
	}
	what, sender := "Return-Path", a.ReturnPath
	if a.Envelope != nil {
		what, sender = "MAIL FROM", a.Envelope.MailFrom
	}
	if sender == "" {
		if a.Envelope != nil {
			return prefix + "the envelope sender is null (MAIL FROM:<>): it aligns with no From domain (" + a.FromDomain + ")"
		}
		return prefix + "it has no Return-Path, or a null one (<>): with no envelope sender, nothing aligns with the From domain " + a.FromDomain
	}
	d := asciiDomain(addrDomain(sender))
	if aligned(d, a.FromDomain) {
		return ""
	}
	return prefix + "the envelope sender's domain " + authText(d) + " (" + what + ") is not aligned with the From domain " + a.FromDomain
}

// envelope records the receiver's envelope and the Return-Path and
// Delivered-To header fields.
func (b *builder) envelope(a *schema.Auth, env *schema.Envelope) {
	if env != nil {
		e := &schema.Envelope{MailFrom: authText(env.MailFrom), ClientIP: authText(env.ClientIP), Helo: authText(env.Helo)}
		for i, r := range env.RcptTo {
			if i == maxRcptListed {
				b.n.Addf("%d envelope recipients: the first %d are listed", len(env.RcptTo), i)
				break
			}
			e.RcptTo = append(e.RcptTo, authText(r))
		}
		a.Envelope = e
	}
	if rp := b.h.Get("Return-Path"); rp != nil {
		a.ReturnPath = authText(strings.Trim(strings.TrimSpace(string(rp)), "<>"))
	}
	for _, d := range b.h.All("Delivered-To") {
		a.DeliveredTo = appendUnique(a.DeliveredTo, authText(strings.TrimSpace(string(d))))
	}
}

// parseAuthResults parses an Authentication-Results value, comments
// removed first (go-msgauth does not skip them, and every real host writes
// some); "" when it has no authserv-id that can be read.
func parseAuthResults(v string) (string, []authres.Result) {
	id, results, _ := authres.Parse(stripComments(v))
	// A partial parse keeps what came before the error.
	if strings.ContainsAny(id, " \t\"()") {
		return "", nil
	}
	return id, results
}

// stripComments removes RFC 5322 comments (nested, with quoted pairs),
// leaving quoted strings as they are.
func stripComments(s string) string {
	if !strings.Contains(s, "(") {
		return s
	}
	var out strings.Builder
	depth, quoted := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && (depth > 0 || quoted) && i+1 < len(s):
			if depth == 0 {
				out.WriteByte(c)
				out.WriteByte(s[i+1])
			}
			i++
		case depth == 0 && c == '"':
			quoted = !quoted
			out.WriteByte(c)
		case !quoted && c == '(':
			depth++
		case !quoted && c == ')' && depth > 0:
			depth--
			if depth == 0 {
				out.WriteByte(' ')
			}
		case depth == 0:
			out.WriteByte(c)
		}
	}
	return out.String()
}

// tagValue returns the value of tag in a DKIM-Signature (for listing a
// signature that was not checked).
func tagValue(field []byte, tag string) string {
	for t := range strings.SplitSeq(string(field), ";") {
		k, v, ok := strings.Cut(t, "=")
		if ok && strings.TrimSpace(k) == tag {
			return strings.ToLower(strings.Join(strings.Fields(v), ""))
		}
	}
	return ""
}

// aligned reports whether two domains have the same organisational domain
// (RFC 7489 §3.2): the public suffix plus one label, from the Public
// Suffix List (golang.org/x/net/publicsuffix, private domains included,
// so that two users of one hosting suffix are not aligned).
func aligned(a, b string) bool {
	return a != "" && b != "" && orgDomain(a) == orgDomain(b)
}

func orgDomain(d string) string {
	if o, err := publicsuffix.EffectiveTLDPlusOne(d); err == nil {
		return o
	}
	// A public suffix itself, or a name the list cannot place: only the
	// same name aligns.
	return d
}

// asciiDomain is d lowercased, without a final dot, in its ASCII (A-label)
// form when it is an internationalised name, so that "bücher.example" and
// "xn--bcher-kva.example" align.
func asciiDomain(d string) string {
	d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
	if a, err := idna.Lookup.ToASCII(d); err == nil {
		return a
	}
	return d
}

// addrDomain is the domain of an address, or s itself when it has no @
// (smtp.mailfrom may be a bare domain).
func addrDomain(s string) string {
	s = strings.Trim(strings.TrimSpace(s), "<>")
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// authText makes a value from the message or the client fit the file: one
// line of valid UTF-8, at most maxAuthText bytes.
func authText(s string) string {
	s = mime.OneLine(strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD"))
	if len(s) > maxAuthText {
		i := maxAuthText
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}

func appendUnique(list []string, s string) []string {
	if s == "" || len(list) >= maxListed {
		return list
	}
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// errHeaderTooLarge stops go-msgauth from reading a header it would hold
// whole in memory.
var errHeaderTooLarge = errors.New("email: header over the limit")

// headerLimit passes a message through, failing once more than max bytes
// go by before the empty line that ends the header (over is then set), and
// keeps the first error of r other than io.EOF (err): go-msgauth reports
// both as it reports a malformed message, without wrapping them.
type headerLimit struct {
	r           io.Reader
	max, n      int
	prev, prev2 byte
	done, over  bool
	err         error
}

func (h *headerLimit) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if err != nil && err != io.EOF && h.err == nil {
		h.err = err
	}
	if h.done {
		return n, err
	}
	if h.n == 0 && h.prev == 0 {
		h.prev = '\n' // the message starts at the start of a line
	}
	for i := range n {
		c := p[i]
		if c == '\n' && (h.prev == '\n' || (h.prev == '\r' && h.prev2 == '\n')) {
			h.done = true
			return n, err
		}
		h.prev2, h.prev = h.prev, c
		if h.n++; h.n > h.max {
			h.over = true
			return i, errHeaderTooLarge
		}
	}
	return n, err
}

// lookupTXT is go-msgauth's key lookup: cached, bounded in time, and with
// errors it classifies as RFC 6376 §6.1.2 says (no key: permerror; no
// answer: temperror). The error text never names the resolver.
func (v *Verifier) lookupTXT(name string) ([]string, error) {
	name = strings.ToLower(name)
	now := v.opts.Now()
	if txts, err, ok := v.cache.get(name, now); ok {
		return txts, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), v.opts.LookupTimeout)
	txts, err := v.opts.LookupTXT(ctx, name)
	cancel()
	ttl := txtTTL
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			err = &net.DNSError{Err: "no such key", Name: name, IsNotFound: true}
		} else {
			err = &net.DNSError{Err: "no answer", Name: name, IsTemporary: true, IsTimeout: errors.Is(err, context.DeadlineExceeded)}
			ttl = txtErrTTL
		}
		txts = nil
	}
	v.cache.put(name, txtEntry{txts: txts, err: err, expires: now.Add(ttl)}, now)
	return txts, err
}

// txtCache holds DKIM key lookups, at most txtCacheSize of them.
type txtCache struct {
	mu      sync.Mutex
	entries map[string]txtEntry
}

type txtEntry struct {
	txts    []string
	err     error
	expires time.Time
}

func (c *txtCache) get(name string, now time.Time) ([]string, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[name]
	if !ok || !now.Before(e.expires) {
		return nil, nil, false
	}
	return e.txts, e.err, true
}

func (c *txtCache) put(name string, e txtEntry, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= txtCacheSize {
		// Full: drop what expired, and if nothing did, any entry (a map
		// iterates from a random place), which costs one more lookup.
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < txtCacheSize {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[name] = e
}
