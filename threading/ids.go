package threading

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// uidLen is the number of hex digits of an email uid (DESIGN §2).
const uidLen = 20

// NormalizeID returns the comparable form of a message id: white space
// trimmed, the surrounding angle brackets stripped, lowercased
// ("  <A@B.c> " -> "a@b.c"). When the value holds a bracketed id next to
// other text (a comment, a second id), the first bracketed id is the one.
// Runs of white space inside an id, left there by header folding, become one
// space, so that an id reads the same whichever way its header was unfolded.
// NormalizeID is idempotent.
func NormalizeID(id string) string {
	return strings.ToLower(rawID(id))
}

// ParseIDs parses a References or In-Reply-To header value into normalised
// ids, in order, duplicates removed; nil when there are none.
//
// It tolerates what real mail holds: ids separated by spaces, tabs, folded
// lines or commas; RFC 5322 comments in parentheses (skipped, even when they
// hold something bracketed); free text around the ids, as in "Your message of
// ... <id>". When any bracketed id exists only bracketed ids count. When none
// does, the value is read as bare ids separated by white space or commas:
// tokens that contain '@' count, or the value's only token, so that free text
// alone never becomes an id.
func ParseIDs(header string) []string {
	ids := dedupe(scanIDs(header))
	for i, id := range ids {
		ids[i] = strings.ToLower(id)
	}
	return ids
}

// EmailUID returns the uid of the email with the given Message-ID: the first
// 20 hex digits of the SHA-256 of NormalizeID(messageID); "" when the id is
// empty (a uid is never made up from nothing: see SyntheticUID).
func EmailUID(messageID string) string {
	n := NormalizeID(messageID)
	if n == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(n))
	return hex.EncodeToString(sum[:])[:uidLen]
}

// EmailID returns the schema id of the email with the given Message-ID:
// "email_" + EmailUID(messageID), or "" when the id is empty.
func EmailID(messageID string) string {
	uid := EmailUID(messageID)
	if uid == "" {
		return ""
	}
	return string(emailPrefix) + uid
}

const emailPrefix = "email_"

// SyntheticUID returns the uid of an email that has no Message-ID: the first
// 20 hex digits of the SHA-256 of from, date, subject and body joined by NUL
// bytes, so that the fields cannot run together ("ab"+"c" differs from
// "a"+"bc"). Headers cannot hold NUL; only the body, which comes last, may.
// The caller passes the raw header values; the id is a last resort and can
// mis-thread (seed 003), which is why EmailThread flags its use.
func SyntheticUID(from, date, subject string, body []byte) string {
	h := sha256.New()
	for _, f := range []string{from, date, subject} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))[:uidLen]
}

// DerivedID returns the id of an email that cannot have the id its headers
// give it, id: another message holds it (a different mail repeating its
// Message-ID, or a copy of a mail without one received outside the dedupe
// window). It is "email_" followed by the first 20 hex digits of the SHA-256
// of id's uid, a NUL byte and salt (what tells the two apart: the later
// mail's digest, or its time received), so that the same later mail gets the
// same id whenever it is seen again.
func DerivedID(id, salt string) string {
	h := sha256.New()
	h.Write([]byte(strings.TrimPrefix(id, emailPrefix)))
	h.Write([]byte{0})
	h.Write([]byte(salt))
	return emailPrefix + hex.EncodeToString(h.Sum(nil))[:uidLen]
}

// rawID is NormalizeID without the lowercasing: the id as written, for
// outgoing headers.
func rawID(s string) string {
	if ids, _ := scan(s); len(ids) > 0 {
		return ids[0]
	}
	s = clean(s)
	s = strings.TrimPrefix(s, "<")
	s = strings.TrimSuffix(s, ">")
	return clean(s)
}

// scanIDs returns the ids of a header value as written (case kept), in order,
// duplicates not removed. See ParseIDs for the rules.
func scanIDs(s string) []string {
	ids, loose := scan(s)
	if len(ids) > 0 {
		return ids
	}
	tokens := strings.FieldsFunc(loose, func(r rune) bool {
		return r == ',' || r == ';' || isSpace(r)
	})
	var out []string
	for _, t := range tokens {
		if strings.Contains(t, "@") {
			out = append(out, t)
		}
	}
	if len(out) == 0 && len(tokens) == 1 {
		out = tokens
	}
	return out
}

// scan splits a header value into its bracketed ids (cleaned, case kept) and
// the loose text outside brackets and comments. A comment runs from '(' to
// its matching ')', nesting and backslash escapes allowed; an unclosed
// comment runs to the end. A '<' inside an open bracket starts over: what
// came before it was not an id. An unclosed bracket is loose text.
func scan(s string) (ids []string, loose string) {
	var id, rest strings.Builder
	depth := 0
	inAngle := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case depth > 0:
			switch c {
			case '\\':
				i++
			case '(':
				depth++
			case ')':
				depth--
			}
		case inAngle:
			switch c {
			case '>':
				if v := clean(id.String()); v != "" {
					ids = append(ids, v)
				}
				id.Reset()
				inAngle = false
			case '<':
				rest.WriteString(id.String())
				rest.WriteByte(' ')
				id.Reset()
			default:
				id.WriteByte(c)
			}
		case c == '<':
			inAngle = true
			rest.WriteByte(' ')
		case c == '(':
			depth = 1
			rest.WriteByte(' ')
		default:
			rest.WriteByte(c)
		}
	}
	if inAngle {
		rest.WriteString(id.String())
	}
	return ids, rest.String()
}

// clean trims white space and turns every inner run of it into one space.
func clean(s string) string {
	if !strings.ContainsFunc(s, isSpace) {
		return s
	}
	return strings.Join(strings.FieldsFunc(s, isSpace), " ")
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\r', '\n', '\v', '\f':
		return true
	}
	return false
}

// dedupe keeps the first of the ids that are equal ignoring case, in order,
// as they are written; nil when there are none.
func dedupe(ids []string) []string {
	var out []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		k := strings.ToLower(id)
		if !seen[k] {
			seen[k] = true
			out = append(out, id)
		}
	}
	return out
}
