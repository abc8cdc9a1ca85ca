package threading

import (
	"regexp"
	"slices"
	"testing"

	"github.com/monoco/courier/schema"
)

func TestNormalizeID(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"brackets, space and case", "  <A@B.c> ", "a@b.c"},
		{"no brackets", "A@B.C", "a@b.c"},
		{"only an opening bracket", "<Foo@Bar", "foo@bar"},
		{"only a closing bracket", "foo@bar>", "foo@bar"},
		{"space inside the brackets", "< Foo@Bar >", "foo@bar"},
		{"comment after the id", "<M@X> (added by relay)", "m@x"},
		{"comment with a bracketed address before the id", "(see <x@y>) <m@x>", "m@x"},
		{"text before the id", "id is <M@X>", "m@x"},
		{"first of two ids", "<a@b> <c@d>", "a@b"},
		{"quoted local part", `<"H000007100164304.1583836879.sx.f1-outsourcing.eu*"@MHS>`, `"h000007100164304.1583836879.sx.f1-outsourcing.eu*"@mhs`},
		{"folded inside the id", "<a\r\n\tb@c>", "a b@c"},
		{"unfolded with a single space", "<a b@c>", "a b@c"},
		{"non-ASCII", "<Ünï@Example>", "ünï@example"},
		{"empty", "", ""},
		{"blank", " \t\r\n", ""},
		{"empty brackets", "<>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeID(tt.in); got != tt.want {
				t.Errorf("NormalizeID(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// An id that went through NormalizeID once must not change the second time:
// otherwise EmailID(t.Parent) and EmailID(rawHeader) would hash different
// strings for the same message.
func TestNormalizeIDIdempotent(t *testing.T) {
	for _, in := range []string{
		"  <A@B.c> ", "<M@X> (comment)", `<"q(x)"@MHS>`, "<a(b)c@d>", "<a\r\n b@c>",
		"<Foo@Bar", "foo@bar>", "yes", "<yes>", "(only a comment)", "<<a@b>>", "a,b@c",
	} {
		t.Run(in, func(t *testing.T) {
			once := NormalizeID(in)
			if twice := NormalizeID(once); twice != once {
				t.Errorf("NormalizeID(%q) = %q, but NormalizeID(%q) = %q", in, once, once, twice)
			}
			if EmailUID(in) != EmailUID(once) {
				t.Errorf("EmailUID(%q) != EmailUID(%q)", in, once)
			}
		})
	}
}

func TestParseIDs(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"blank", " \t\r\n ", nil},
		{"one id", "<A@example>", []string{"a@example"}},
		{"spaces", "<a@x> <b@x>  <c@x>", []string{"a@x", "b@x", "c@x"}},
		{"folded lines and tabs", "<a@x>\r\n\t<b@x>\n <c@x>", []string{"a@x", "b@x", "c@x"}},
		{"commas", "<a@x>,<b@x> ,<c@x>, <d@x>", []string{"a@x", "b@x", "c@x", "d@x"}},
		{"no separator", "<a@x><b@x>", []string{"a@x", "b@x"}},
		{"order kept", "<z@x> <a@x> <m@x>", []string{"z@x", "a@x", "m@x"}},
		{"duplicates removed, first kept", "<a@x> <b@x> <a@x>", []string{"a@x", "b@x"}},
		{"duplicates removed ignoring case", "<Ab@X> <aB@x> <c@x>", []string{"ab@x", "c@x"}},
		{"lowercased", "<CAOi1vP_X=Y@Mail.Gmail.COM>", []string{"caoi1vp_x=y@mail.gmail.com"}},
		{"missing brackets", "a@x b@x", []string{"a@x", "b@x"}},
		{"missing brackets, commas", "a@x,b@x", []string{"a@x", "b@x"}},
		{"missing brackets, single token without @", "yes", []string{"yes"}},
		{"bracketed token without @", "<yes> <a@x>", []string{"yes", "a@x"}},
		{"bare text ignored when a bracketed id exists", "a@x <b@x>", []string{"b@x"}},
		{"comment after the id", "<baz@four.com> (RFC822 4lyfe)", []string{"baz@four.com"}},
		{"comment as garbage at the end of References", "<foo@five.com> (garbage)", []string{"foo@five.com"}},
		{"Gnus comment with quotes and apostrophe", `<20091117203301.GV3165@dottiness.seas.harvard.edu> (Lars` + "\r\n\t" + `Kellogg-Stedman's message of "Tue, 17 Nov 2009 15:33:01 -0500")`,
			[]string{"20091117203301.gv3165@dottiness.seas.harvard.edu"}},
		{"comment holding a bracketed address", "<a@x> (message from Foo <foo@example.com> on Tue)", []string{"a@x"}},
		{"nested comment", "(a (b) <x@y>) <a@x>", []string{"a@x"}},
		{"escaped parenthesis in a comment", `(a \) <x@y>) <a@x>`, []string{"a@x"}},
		{"parenthesis inside brackets is not a comment", "<a(b)@x>", []string{"a(b)@x"}},
		{"unclosed comment runs to the end", "<a@x> (trailing <b@x>", []string{"a@x"}},
		{"text before the id", "Your message of December 31 1999 <bar@baz.com>", []string{"bar@baz.com"}},
		{"text only", "Your message of Tue, 17 Nov 2009", nil},
		{"comment only", "(no id here)", nil},
		{"empty brackets", "<> <a@x> < >", []string{"a@x"}},
		{"stray opening bracket starts over", "<junk <a@x>", []string{"a@x"}},
		{"unclosed last id ignored when others are bracketed", "<a@x> <b@x", []string{"a@x"}},
		{"unclosed only id", "<b@x", []string{"b@x"}},
		{"quoted local part", `<"H000007100163fdf.1583792359.sx.f1-outsourcing.eu*"@MHS> <20200310134613.GA74810@suse.com>`,
			[]string{`"h000007100163fdf.1583792359.sx.f1-outsourcing.eu*"@mhs`, "20200310134613.ga74810@suse.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseIDs(tt.in)
			if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("ParseIDs(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

// Every id ParseIDs returns is already normalised, so hashing it gives the
// same uid as hashing the raw Message-ID of that message.
func TestParseIDsAgreeWithNormalizeID(t *testing.T) {
	for _, msgID := range []string{
		"<CAOi1vP_7Oaw8O-p2X1xymzym1Xf_RZeN0u=SeE4Zbc2y+AfgYA@mail.gmail.com>",
		`<"H00000710016454f.1583923016.sx.f1-outsourcing.eu*"@MHS>`,
		"<4b09891e.YhJ/aJZOBwneOaFr%michiel@michielbuddingh.net>",
		"<a b@c>",
	} {
		t.Run(msgID, func(t *testing.T) {
			ids := ParseIDs("<root@x>,\r\n\t" + msgID + " (comment)")
			if len(ids) != 2 || ids[1] != NormalizeID(msgID) {
				t.Fatalf("ParseIDs gave %q, want [root@x %q]", ids, NormalizeID(msgID))
			}
			if EmailUID(ids[1]) != EmailUID(msgID) {
				t.Errorf("EmailUID(%q) != EmailUID(%q)", ids[1], msgID)
			}
		})
	}
}

var hex20 = regexp.MustCompile(`^[0-9a-f]{20}$`)

func TestEmailUID(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// printf 'a@example' | sha256sum | cut -c1-20
		{"known value", "<a@example>", "c7a46d9b72b6ae7a7ad6"},
		{"normalised before hashing: case", "<A@Example>", "c7a46d9b72b6ae7a7ad6"},
		{"normalised before hashing: brackets and space", "  a@example ", "c7a46d9b72b6ae7a7ad6"},
		{"normalised before hashing: comment", "<a@example> (relay)", "c7a46d9b72b6ae7a7ad6"},
		// printf 'b@example' | sha256sum | cut -c1-20
		{"another id", "<b@example>", "117242040f4755997d0a"},
		{"empty", "", ""},
		{"empty brackets", "<>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EmailUID(tt.in)
			if got != tt.want {
				t.Errorf("EmailUID(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got != "" && !hex20.MatchString(got) {
				t.Errorf("EmailUID(%q) = %q, want 20 lowercase hex digits", tt.in, got)
			}
		})
	}
}

func TestEmailID(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"prefixed uid", "<a@example>", "email_c7a46d9b72b6ae7a7ad6"},
		{"empty", "", ""},
		{"odd characters in the id", `<"we ird!#$%&'*+/=?^{|}~"@x>`, "email_" + EmailUID(`<"we ird!#$%&'*+/=?^{|}~"@x>`)},
		{"non-ASCII id", "<日本@例え>", "email_" + EmailUID("<日本@例え>")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EmailID(tt.in)
			if got != tt.want {
				t.Errorf("EmailID(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got != "" && !schema.ValidID(got) {
				t.Errorf("EmailID(%q) = %q is not a valid schema id", tt.in, got)
			}
		})
	}
}

func TestSyntheticUID(t *testing.T) {
	const (
		from = "alice@example.com"
		date = "Tue, 17 Nov 2009 21:28:37 +0600"
		subj = "hello"
	)
	body := []byte("body\n")
	base := SyntheticUID(from, date, subj, body)

	t.Run("known value", func(t *testing.T) {
		// printf 'alice@example.com\0Tue, 17 Nov 2009 21:28:37 +0600\0hello\0body\n' | sha256sum | cut -c1-20
		if want := "18e989b5309236dae2fc"; base != want {
			t.Errorf("SyntheticUID = %q, want %q", base, want)
		}
	})
	t.Run("all empty", func(t *testing.T) {
		// printf '\0\0\0' | sha256sum | cut -c1-20
		if got, want := SyntheticUID("", "", "", nil), "709e80c88487a2411e1e"; got != want {
			t.Errorf("SyntheticUID of nothing = %q, want %q", got, want)
		}
	})
	t.Run("valid as an email id", func(t *testing.T) {
		if !hex20.MatchString(base) || !schema.ValidID("email_"+base) {
			t.Errorf("SyntheticUID = %q, want 20 hex digits", base)
		}
	})

	differ := []struct {
		name                string
		from, date, subject string
		body                string
	}{
		{"from matters", "bob@example.com", date, subj, "body\n"},
		{"date matters", from, "Wed, 18 Nov 2009 21:28:37 +0600", subj, "body\n"},
		{"subject matters", from, date, "hello!", "body\n"},
		{"body matters", from, date, subj, "body!\n"},
		{"from and date cannot run together", from + "T", "ue, 17 Nov 2009 21:28:37 +0600", subj, "body\n"},
		{"date and subject cannot run together", from, date + "h", "ello", "body\n"},
		{"subject and body cannot run together", from, date, "hellob", "ody\n"},
	}
	for _, tt := range differ {
		t.Run(tt.name, func(t *testing.T) {
			if got := SyntheticUID(tt.from, tt.date, tt.subject, []byte(tt.body)); got == base {
				t.Errorf("SyntheticUID(%q, %q, %q, %q) = %q, same as the base message", tt.from, tt.date, tt.subject, tt.body, got)
			}
		})
	}
}
