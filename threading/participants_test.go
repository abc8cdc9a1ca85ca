package threading

import (
	"slices"
	"testing"
)

func TestNormalizeAddress(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"brackets, space and case", "  <Bob@Example.COM> ", "bob@example.com"},
		{"bare", "bob@example.com", "bob@example.com"},
		{"uppercase local part", "BOB@example.com", "bob@example.com"},
		{"name and address", "Bob Smith <Bob@Example.com>", "bob@example.com"},
		{"only an opening bracket", "<bob@example.com", "bob@example.com"},
		{"only a closing bracket", "bob@example.com>", "bob@example.com"},
		{"space inside the brackets", "< bob@example.com >", "bob@example.com"},
		{"empty", "", ""},
		{"blank", "  ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeAddress(tt.in); got != tt.want {
				t.Errorf("NormalizeAddress(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func addrs(emails ...string) []Address {
	var out []Address
	for _, e := range emails {
		out = append(out, Address{Email: e})
	}
	return out
}

func TestParticipants(t *testing.T) {
	own := []string{"agent@example.com"}
	tests := []struct {
		name                       string
		from, replyTo, to, cc, bcc []Address
		own                        []string
		want                       []string
		eligible                   bool
	}{
		{
			name: "direct mail: one external participant",
			from: addrs("alice@example.org"), to: addrs("agent@example.com"), own: own,
			want: []string{"alice@example.org"}, eligible: true,
		},
		{
			name: "own address compared case-insensitively",
			from: addrs("Alice@Example.org"), to: addrs("AGENT@Example.COM"), own: own,
			want: []string{"alice@example.org"}, eligible: true,
		},
		{
			name: "own address configured with brackets and case",
			from: addrs("alice@example.org"), to: addrs("agent@example.com"), own: []string{" <Agent@Example.com> "},
			want: []string{"alice@example.org"}, eligible: true,
		},
		{
			name: "several own addresses",
			from: addrs("alice@example.org"), to: addrs("agent@example.com"), cc: addrs("alias@example.com"),
			own:  []string{"agent@example.com", "alias@example.com"},
			want: []string{"alice@example.org"}, eligible: true,
		},
		{
			name: "reply-all: several external participants",
			from: addrs("alice@example.org"), to: addrs("agent@example.com"), cc: addrs("bob@example.org"), own: own,
			want: []string{"alice@example.org", "bob@example.org"},
		},
		{
			name: "Reply-To counts",
			from: addrs("alice@example.org"), replyTo: addrs("list@example.org"), to: addrs("agent@example.com"), own: own,
			want: []string{"alice@example.org", "list@example.org"},
		},
		{
			name: "To counts",
			from: addrs("alice@example.org"), to: addrs("agent@example.com", "carol@example.org"), own: own,
			want: []string{"alice@example.org", "carol@example.org"},
		},
		{
			name: "Bcc counts",
			from: addrs("alice@example.org"), to: addrs("agent@example.com"), bcc: addrs("dave@example.org"), own: own,
			want: []string{"alice@example.org", "dave@example.org"},
		},
		{
			name: "same address in several fields and cases counts once",
			from: addrs("Alice@Example.org"), replyTo: addrs("alice@example.org"), to: addrs("ALICE@EXAMPLE.ORG", "agent@example.com"),
			cc: addrs("<alice@example.org>"), own: own,
			want: []string{"alice@example.org"}, eligible: true,
		},
		{
			name: "order of first appearance: From, Reply-To, To, Cc, Bcc",
			from: addrs("e@x"), replyTo: addrs("d@x"), to: addrs("c@x"), cc: addrs("b@x"), bcc: addrs("a@x", "e@x"), own: own,
			want: []string{"e@x", "d@x", "c@x", "b@x", "a@x"},
		},
		{
			name: "display names do not make different participants",
			from: []Address{{Name: "Alice", Email: "alice@x"}}, cc: []Address{{Name: "A. Smith", Email: "alice@x"}}, own: own,
			want: []string{"alice@x"}, eligible: true,
		},
		{
			name: "empty addresses skipped",
			from: addrs("alice@x"), to: []Address{{Name: "undisclosed-recipients"}, {Email: "  "}}, own: own,
			want: []string{"alice@x"}, eligible: true,
		},
		{
			name: "only own addresses: no external participant",
			from: addrs("agent@example.com"), to: addrs("Agent@example.com"), own: own,
			want: nil,
		},
		{
			name: "no own addresses configured",
			from: addrs("alice@x"), to: addrs("agent@example.com"),
			want: []string{"alice@x", "agent@example.com"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Participants(tt.from, tt.replyTo, tt.to, tt.cc, tt.bcc, tt.own)
			if !slices.Equal(got.External, tt.want) {
				t.Errorf("External = %q, want %q", got.External, tt.want)
			}
			if got.PersonalEligible != tt.eligible {
				t.Errorf("PersonalEligible = %v, want %v", got.PersonalEligible, tt.eligible)
			}
		})
	}
}

func TestReplyTarget(t *testing.T) {
	alice := Address{Name: "Alice", Email: "Alice@Example.org"}
	list := Address{Name: "The List", Email: "list@example.org"}
	bob := Address{Email: "bob@example.org"}
	tests := []struct {
		name          string
		from, replyTo []Address
		want          []Address
	}{
		{"Reply-To wins over From", []Address{alice}, []Address{list}, []Address{list}},
		{"From when there is no Reply-To", []Address{alice}, nil, []Address{alice}},
		{"From when Reply-To has no address", []Address{alice}, []Address{{Name: "nobody"}, {Email: " "}}, []Address{alice}},
		{"Reply-To entries without address dropped", []Address{alice}, []Address{{Name: "nobody"}, list}, []Address{list}},
		{"several Reply-To kept in order", []Address{alice}, []Address{list, bob}, []Address{list, bob}},
		{"addresses returned as given, not normalised", []Address{alice}, nil, []Address{{Name: "Alice", Email: "Alice@Example.org"}}},
		{"duplicates dropped ignoring case", nil, []Address{list, {Email: "LIST@example.org"}}, []Address{list}},
		{"nobody to reply to", nil, nil, nil},
		{"From without address: nobody, nothing made up", []Address{{Name: "Alice"}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReplyTarget(tt.from, tt.replyTo); !slices.Equal(got, tt.want) {
				t.Errorf("ReplyTarget = %+v, want %+v", got, tt.want)
			}
		})
	}
}
