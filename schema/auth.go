package schema

// Auth is metadata.extra.auth: what Courier established about who sent an
// email (DESIGN §4). Every field says where its value comes from, because
// they are not equally trustworthy: DKIM is checked by Courier itself, SPF
// and DMARC are taken from Authentication-Results header fields only when a
// trusted host (a configured authserv-id) added them, and the envelope is
// what the SMTP client said, which nobody checked.
type Auth struct {
	// Verified is set when the From domain is aligned (same organisational
	// domain) with a DKIM signature Courier verified, or with a pass that
	// a trusted host recorded: SPF (smtp.mailfrom), DKIM (header.d) or
	// DMARC (header.from). A message with no From address, or several, is
	// never verified.
	Verified bool `yaml:"verified" json:"verified"`
	// VerifiedBy says which check verified the sender: "dkim" (Courier's
	// own), "dmarc", "spf" or "trusted dkim" (a trusted host's results).
	VerifiedBy string `yaml:"verified_by,omitempty" json:"verified_by,omitempty"`
	// FromDomain is the domain of the From address, lowercase ASCII, as it
	// was aligned.
	FromDomain string `yaml:"from_domain,omitempty" json:"from_domain,omitempty"`

	// DKIM is the outcome of Courier's own verification of the message's
	// DKIM signatures, the best over them (pass, temperror, fail,
	// permerror); none when it has no signature.
	DKIM string `yaml:"dkim" json:"dkim"`
	// DKIMSignatures is the outcome per signature, top down.
	DKIMSignatures []DKIMSignature `yaml:"dkim_signatures,omitempty" json:"dkim_signatures,omitempty"`

	// AuthservID names the trusted host whose Authentication-Results give
	// SPF, DMARC and TrustedDKIM; empty when no trusted results were found.
	AuthservID  string `yaml:"authserv_id,omitempty" json:"authserv_id,omitempty"`
	SPF         string `yaml:"spf,omitempty" json:"spf,omitempty"`
	SPFDomain   string `yaml:"spf_domain,omitempty" json:"spf_domain,omitempty"` // of smtp.mailfrom
	DMARC       string `yaml:"dmarc,omitempty" json:"dmarc,omitempty"`
	DMARCDomain string `yaml:"dmarc_domain,omitempty" json:"dmarc_domain,omitempty"` // header.from
	// TrustedDKIM is the DKIM result the trusted host recorded (it checked
	// when the message arrived, with the keys of that day).
	TrustedDKIM       string `yaml:"trusted_dkim,omitempty" json:"trusted_dkim,omitempty"`
	TrustedDKIMDomain string `yaml:"trusted_dkim_domain,omitempty" json:"trusted_dkim_domain,omitempty"` // header.d
	// UntrustedAuthservIDs are the authserv-ids of the Authentication-Results
	// that were ignored (not configured, or below the trusted ones), so that
	// a missing authserv_ids entry can be found. Their results are not
	// recorded: they may be forged.
	UntrustedAuthservIDs []string `yaml:"untrusted_authserv_ids,omitempty" json:"untrusted_authserv_ids,omitempty"`

	// Envelope is what the SMTP client said (the embedded receiver only).
	Envelope *Envelope `yaml:"envelope,omitempty" json:"envelope,omitempty"`
	// ReturnPath and DeliveredTo are the Return-Path and Delivered-To
	// header fields as the delivering MTA wrote them: mail fetched over
	// IMAP has no envelope of ours. They are header fields, not checked.
	ReturnPath  string   `yaml:"return_path,omitempty" json:"return_path,omitempty"`
	DeliveredTo []string `yaml:"delivered_to,omitempty" json:"delivered_to,omitempty"`

	// Correlation says why the message did not inherit the correlation id
	// of the message it answers, when the reason is its sender: it is not
	// verified and its envelope sender (MAIL FROM at the receiver, the
	// Return-Path over IMAP) is not aligned with the From domain, or is
	// unknown or null, so the From may name someone who did not send it.
	// Such a sender inherits nothing, even from a message the From's
	// address took part in. Empty when no correlation id was refused so.
	Correlation string `yaml:"correlation,omitempty" json:"correlation,omitempty"`
}

// DKIMSignature is Courier's verification of one DKIM-Signature.
type DKIMSignature struct {
	// Domain is the signing domain (d=).
	Domain string `yaml:"domain" json:"domain"`
	// Result is pass, fail, temperror or permerror (RFC 8601 §2.7.1).
	Result string `yaml:"result" json:"result"`
	// Reason says why it did not pass.
	Reason string `yaml:"reason,omitempty" json:"reason,omitempty"`
}

// Envelope is the SMTP envelope of a message the receiver took, as the
// client gave it.
type Envelope struct {
	// MailFrom is the reverse path of MAIL FROM; empty for the null sender
	// (<>, a bounce).
	MailFrom string   `yaml:"mail_from,omitempty" json:"mail_from,omitempty"`
	RcptTo   []string `yaml:"rcpt_to,omitempty" json:"rcpt_to,omitempty"`
	// ClientIP is the address the connection came from (empty over a Unix
	// socket).
	ClientIP string `yaml:"client_ip,omitempty" json:"client_ip,omitempty"`
	// Helo is the name the client gave in HELO, EHLO or LHLO.
	Helo string `yaml:"helo,omitempty" json:"helo,omitempty"`
}
