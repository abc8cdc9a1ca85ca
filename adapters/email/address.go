package email

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of an address a reply goes to (RFC 5321 §4.5.3.1, in octets,
// which RFC 6531 keeps for UTF-8 addresses).
const (
	maxLocalPart = 64
	maxAddress   = 254
)

// plainAddress checks that s is one address a reply can go to as it was
// written: local@domain, ASCII or UTF-8 (RFC 6531), the local part a
// dot-atom (no quotes, no comment, no route, no group) and the domain a
// host name. An address in a mail's From or Reply-To is its sender's to
// write: one that carried a second recipient (a comma, a quoted "a@x,
// b"), a line break (a header of its own), an angle bracket (the end of
// the SMTP path) or invisible characters (a bidi override, a zero-width
// space) would be answered as written, so none passes.
func plainAddress(s string) error {
	switch {
	case s == "":
		return errors.New("it is empty")
	case !utf8.ValidString(s):
		return errors.New("it is not valid UTF-8")
	case len(s) > maxAddress:
		return fmt.Errorf("it is %d bytes long, over the %d an address has", len(s), maxAddress)
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return errors.New("it is not one address (local@domain)")
	}
	local, domain := s[:at], s[at+1:]
	if len(local) > maxLocalPart {
		return fmt.Errorf("its local part is %d bytes long, over the %d it may have", len(local), maxLocalPart)
	}
	if strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return errors.New("its local part is not a dot-atom (a dot at an end, or two in a row)")
	}
	for _, r := range local {
		if r != '.' && !atext(r) {
			return fmt.Errorf("its local part holds %s, which is not written in a plain address (one recipient, no quotes, no comment)", runeName(r))
		}
	}
	return hostName(domain)
}

// hostName checks the domain of a plain address: labels of letters, digits
// and hyphens, ASCII or not (an IDN as written), none starting or ending
// with a hyphen; no address literal.
func hostName(domain string) error {
	d := strings.TrimSuffix(domain, ".")
	if d == "" || len(d) > 253 {
		return errors.New("its domain is not a host name")
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("its domain is not a host name (label %q)", label)
		}
		for _, r := range label {
			if !(r == '-' || r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) ||
				r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))) {
				return fmt.Errorf("its domain holds %s, which is not in a host name", runeName(r))
			}
		}
	}
	return nil
}

// atext reports whether r may stand in a dot-atom: RFC 5322's atext, and
// any printable character beyond ASCII (RFC 6532's UTF8-non-ascii), but no
// space, control or format character (those render as nothing, or turn
// the text around).
func atext(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-/=?^_`{|}~", r)
	}
	return r != utf8.RuneError && unicode.IsPrint(r) && !unicode.IsSpace(r)
}

// runeName names r in an error: as itself when it is visible, else by its
// code point (a line break or a bidi override printed as is would hide, or
// break, the message).
func runeName(r rune) string {
	if r > ' ' && r != 0x7f && unicode.IsPrint(r) && r != utf8.RuneError {
		return fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf("U+%04X", r)
}

// rawAddress is the address of a "Name <addr>" string as provider_raw
// writes a mail's From and Reply-To: what stands in the angle brackets
// that end it, else the whole string. The name is the sender's and may
// hold commas; one that holds an angle bracket makes the string
// ambiguous (the address itself may hold one: "a@x>, <b@y"), and the
// whole string is returned, which is no plain address.
func rawAddress(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, ">") {
		if i := strings.LastIndexByte(s, '<'); i >= 0 && !strings.ContainsAny(s[:i], "<>") {
			return s[i+1 : len(s)-1]
		}
	}
	return s
}

// isASCII reports whether s is ASCII throughout: an address that is not
// needs SMTPUTF8 (RFC 6531).
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
