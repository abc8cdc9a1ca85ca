package threading

import "strings"

// Address is a mailbox address.
type Address struct {
	Name, Email string
}

// NormalizeAddress returns the comparable form of an address: white space
// trimmed, angle brackets stripped, lowercased. Given "Name <addr>" it keeps
// the part in brackets.
func NormalizeAddress(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '<'); i >= 0 {
		s = s[i+1:]
		if j := strings.IndexByte(s, '>'); j >= 0 {
			s = s[:j]
		}
	}
	s = strings.TrimSuffix(s, ">")
	return strings.ToLower(strings.TrimSpace(s))
}

// ParticipantSet is the external participants of one thread event (seed 003).
type ParticipantSet struct {
	// External holds the normalised addresses of From, Reply-To, To, Cc and
	// Bcc, in that order of first appearance, without the account's own
	// addresses, deduplicated case-insensitively; nil when there are none.
	External []string
	// PersonalEligible is set when there is exactly one external participant.
	PersonalEligible bool
}

// Participants computes the external participants of one thread event: the
// addresses of from, replyTo, to, cc and bcc, less own (the account's own
// addresses, compared normalised), each once. The decision is per event:
// nothing here links an address to a user.
func Participants(from, replyTo, to, cc, bcc []Address, own []string) ParticipantSet {
	skip := make(map[string]bool, len(own))
	for _, a := range own {
		skip[NormalizeAddress(a)] = true
	}
	var ext []string
	for _, list := range [][]Address{from, replyTo, to, cc, bcc} {
		for _, a := range list {
			n := NormalizeAddress(a.Email)
			if n == "" || skip[n] {
				continue
			}
			skip[n] = true
			ext = append(ext, n)
		}
	}
	return ParticipantSet{External: ext, PersonalEligible: len(ext) == 1}
}

// ReplyTarget returns the recipients of a reply: the Reply-To addresses when
// any has an address, else the From addresses; each address once (compared
// normalised), as given, in order. It never adds a recipient that is not in
// the message: nil means there is no one to reply to.
func ReplyTarget(from, replyTo []Address) []Address {
	if r := usable(replyTo); len(r) > 0 {
		return r
	}
	return usable(from)
}

// usable returns the addresses of list that have a non-empty address, the
// first of each.
func usable(list []Address) []Address {
	var out []Address
	seen := make(map[string]bool, len(list))
	for _, a := range list {
		n := NormalizeAddress(a.Email)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, a)
	}
	return out
}
