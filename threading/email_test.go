package threading

import (
	"slices"
	"strings"
	"testing"

	"github.com/monoco/courier/schema"
)

func TestEmailThread(t *testing.T) {
	tests := []struct {
		name      string
		h         Headers
		synthetic string
		want      Thread
	}{
		{
			name: "new topic is its own root",
			h:    Headers{MessageID: "<A@example>"},
			want: Thread{Key: "email-thread:a@example", Root: "a@example", IsRoot: true},
		},
		{
			name: "seed 003 first reply",
			h:    Headers{MessageID: "<b@example>", InReplyTo: "<a@example>", References: "<a@example>"},
			want: Thread{Key: "email-thread:a@example", Root: "a@example", Parent: "a@example"},
		},
		{
			name: "seed 003 second reply: root is the first References id, not the last",
			h:    Headers{MessageID: "<c@example>", InReplyTo: "<b@example>", References: "<a@example> <b@example>"},
			want: Thread{Key: "email-thread:a@example", Root: "a@example", Parent: "b@example"},
		},
		{
			name: "References win over In-Reply-To for the root",
			h:    Headers{MessageID: "<d@x>", InReplyTo: "<c@x>", References: "<a@x> <b@x>"},
			want: Thread{Key: "email-thread:a@x", Root: "a@x", Parent: "c@x"},
		},
		{
			name: "parent is the first In-Reply-To id, even when References end elsewhere",
			h:    Headers{MessageID: "<m@x>", InReplyTo: "<baz@four.com> (RFC822 4lyfe)", References: "<baz@four.com> <foo@four.com>"},
			want: Thread{Key: "email-thread:baz@four.com", Root: "baz@four.com", Parent: "baz@four.com"},
		},
		{
			name: "parent is the last References id without In-Reply-To",
			h:    Headers{MessageID: "<m@x>", References: "<a@x> <b@x> <c@x>"},
			want: Thread{Key: "email-thread:a@x", Root: "a@x", Parent: "c@x"},
		},
		{
			name: "In-Reply-To only: root is its first id",
			h:    Headers{MessageID: "<c@x>", InReplyTo: "<b@x>"},
			want: Thread{Key: "email-thread:b@x", Root: "b@x", Parent: "b@x"},
		},
		{
			name: "In-Reply-To with several ids: first is root and parent",
			h:    Headers{MessageID: "<c@x>", InReplyTo: "<b@x> <z@x>"},
			want: Thread{Key: "email-thread:b@x", Root: "b@x", Parent: "b@x"},
		},
		{
			name: "In-Reply-To with text around the id",
			h:    Headers{MessageID: "<c@x>", InReplyTo: `Your message of "Tue, 17 Nov 2009" <B@X>`},
			want: Thread{Key: "email-thread:b@x", Root: "b@x", Parent: "b@x"},
		},
		{
			name: "empty References header falls back to In-Reply-To",
			h:    Headers{MessageID: "<c@x>", InReplyTo: "<b@x>", References: " "},
			want: Thread{Key: "email-thread:b@x", Root: "b@x", Parent: "b@x"},
		},
		{
			name: "References holding only a comment fall back to In-Reply-To",
			h:    Headers{MessageID: "<c@x>", InReplyTo: "<b@x>", References: "(nothing)"},
			want: Thread{Key: "email-thread:b@x", Root: "b@x", Parent: "b@x"},
		},
		{
			name: "ids normalised: case, brackets, folding, commas",
			h:    Headers{MessageID: " <C@X> ", InReplyTo: "<B@X>", References: "<A@X>,\r\n\t<B@X>"},
			want: Thread{Key: "email-thread:a@x", Root: "a@x", Parent: "b@x"},
		},
		{
			name: "Message-ID with a comment",
			h:    Headers{MessageID: "<M@X> (added by relay)"},
			want: Thread{Key: "email-thread:m@x", Root: "m@x", IsRoot: true},
		},
		{
			name:      "synthetic id used when there are no ids",
			h:         Headers{InReplyTo: "Your message of Tuesday", References: "(none)"},
			synthetic: "18E989B5309236DAE2FC",
			want:      Thread{Key: "email-thread:18e989b5309236dae2fc", Root: "18e989b5309236dae2fc", IsRoot: true, Synthetic: true},
		},
		{
			name:      "synthetic id not used when the Message-ID exists",
			h:         Headers{MessageID: "<m@x>"},
			synthetic: "18e989b5309236dae2fc",
			want:      Thread{Key: "email-thread:m@x", Root: "m@x", IsRoot: true},
		},
		{
			name:      "synthetic id not used for a reply without a Message-ID",
			h:         Headers{References: "<a@x>"},
			synthetic: "18e989b5309236dae2fc",
			want:      Thread{Key: "email-thread:a@x", Root: "a@x", Parent: "a@x"},
		},
		{
			name: "nothing at all",
			h:    Headers{},
			want: Thread{Synthetic: true},
		},
		{
			name: "a message whose References name itself has no parent",
			h:    Headers{MessageID: "<a@x>", References: "<a@x>"},
			want: Thread{Key: "email-thread:a@x", Root: "a@x", IsRoot: true},
		},
		{
			name: "parent skips the message's own id at the end of References",
			h:    Headers{MessageID: "<c@x>", References: "<a@x> <b@x> <C@X>"},
			want: Thread{Key: "email-thread:a@x", Root: "a@x", Parent: "b@x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EmailThread(tt.h, tt.synthetic); got != tt.want {
				t.Errorf("EmailThread(%+v, %q)\n got %+v\nwant %+v", tt.h, tt.synthetic, got, tt.want)
			}
		})
	}
}

func TestThreadIDs(t *testing.T) {
	tests := []struct {
		name        string
		h           Headers
		synthetic   string
		wantReplyTo string
		wantRoot    string
	}{
		{"root has neither", Headers{MessageID: "<A@example>"}, "", "", ""},
		{"first reply", Headers{MessageID: "<b@example>", InReplyTo: "<a@example>", References: "<a@example>"},
			"", "email_c7a46d9b72b6ae7a7ad6", "email_c7a46d9b72b6ae7a7ad6"},
		{"second reply: reply_to is the parent, thread_root the root",
			Headers{MessageID: "<c@example>", InReplyTo: "<b@example>", References: "<a@example> <b@example>"},
			"", "email_117242040f4755997d0a", "email_c7a46d9b72b6ae7a7ad6"},
		{"ids hash the normalised form whatever the case in the reply",
			Headers{MessageID: "<c@x>", InReplyTo: "<B@EXAMPLE>", References: "<A@Example> <B@EXAMPLE>"},
			"", "email_117242040f4755997d0a", "email_c7a46d9b72b6ae7a7ad6"},
		{"synthetic root has no thread_root", Headers{}, "18e989b5309236dae2fc", "", ""},
		{"nothing at all", Headers{}, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := EmailThread(tt.h, tt.synthetic)
			if got := th.ReplyToID(); got != tt.wantReplyTo {
				t.Errorf("ReplyToID() = %q, want %q", got, tt.wantReplyTo)
			}
			if got := th.RootID(); got != tt.wantRoot {
				t.Errorf("RootID() = %q, want %q", got, tt.wantRoot)
			}
			for _, id := range []string{th.ReplyToID(), th.RootID()} {
				if id != "" && !schema.ValidID(id) {
					t.Errorf("%q is not a valid schema id", id)
				}
			}
		})
	}
}

// The worked example of seed 003, end to end: replies built with
// ReplyHeaders keep the thread rooted at <a@example>.
func TestSeed003Example(t *testing.T) {
	const root = "email-thread:a@example"

	a := Headers{MessageID: "<a@example>"}
	if got := EmailThread(a, "").Key; got != root {
		t.Fatalf("original: key %q, want %q", got, root)
	}

	irt, refs := ReplyHeaders(a.MessageID, a.References, a.InReplyTo)
	if irt != "<a@example>" || !slices.Equal(refs, []string{"<a@example>"}) {
		t.Fatalf("first reply: In-Reply-To %q, References %q; want <a@example>, [<a@example>]", irt, refs)
	}
	b := Headers{MessageID: "<b@example>", InReplyTo: irt, References: strings.Join(refs, " ")}
	if got := EmailThread(b, ""); got.Key != root || got.Parent != "a@example" || got.IsRoot {
		t.Fatalf("first reply: %+v, want key %q, parent a@example", got, root)
	}

	irt, refs = ReplyHeaders(b.MessageID, b.References, b.InReplyTo)
	if irt != "<b@example>" || !slices.Equal(refs, []string{"<a@example>", "<b@example>"}) {
		t.Fatalf("second reply: In-Reply-To %q, References %q; want <b@example>, [<a@example> <b@example>]", irt, refs)
	}
	c := Headers{MessageID: "<c@example>", InReplyTo: irt, References: strings.Join(refs, " ")}
	if got := EmailThread(c, ""); got.Key != root || got.Parent != "b@example" {
		t.Fatalf("second reply: %+v, want key %q, parent b@example", got, root)
	}
}

func TestReplyHeaders(t *testing.T) {
	tests := []struct {
		name             string
		msgID, refs, irt string
		wantIRT          string
		wantRefs         []string
	}{
		{"reply to a new topic", "<a@example>", "", "", "<a@example>", []string{"<a@example>"}},
		{"seed 003 second reply", "<b@example>", "<a@example>", "<a@example>", "<b@example>", []string{"<a@example>", "<b@example>"}},
		{"case of ids kept", "<CAOi1vP_X@Mail.Gmail.com>", "<Root@X>", "<Root@X>",
			"<CAOi1vP_X@Mail.Gmail.com>", []string{"<Root@X>", "<CAOi1vP_X@Mail.Gmail.com>"}},
		{"References deduplicated", "<c@x>", "<a@x> <b@x> <a@x>", "", "<c@x>", []string{"<a@x>", "<b@x>", "<c@x>"}},
		{"duplicates found ignoring case, first spelling kept", "<c@x>", "<A@x> <a@X>", "", "<c@x>", []string{"<A@x>", "<c@x>"}},
		{"parent id already in References not repeated", "<b@x>", "<a@x> <b@x>", "", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"References win over In-Reply-To", "<b@x>", "<a@x>", "<q@x>", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"no References: In-Reply-To with one id", "<b@x>", "", "<a@x>", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"no References: In-Reply-To with one id written twice", "<b@x>", "", "<a@x> <A@x>", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"no References: In-Reply-To with text around one id", "<b@x>", "", "Your message of Tue <a@x>", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"no References: In-Reply-To with two ids is not used", "<b@x>", "", "<a@x> <z@x>", "<b@x>", []string{"<b@x>"}},
		{"empty References header counts as none", "<b@x>", "  ", "<a@x>", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"separators and folding normalised", "<c@x>", "<a@x>,\r\n <b@x>", "", "<c@x>", []string{"<a@x>", "<b@x>", "<c@x>"}},
		{"comments dropped", "<b@x> (relay)", "<a@x> (garbage)", "", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"brackets added to bare ids", "b@x", "a@x", "", "<b@x>", []string{"<a@x>", "<b@x>"}},
		{"quoted local part kept", `<"H0.sx*"@MHS>`, "", "", `<"H0.sx*"@MHS>`, []string{`<"H0.sx*"@MHS>`}},
		{"parent without Message-ID", "", "<a@x>", "", "", []string{"<a@x>"}},
		{"nothing", "", "", "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			irt, refs := ReplyHeaders(tt.msgID, tt.refs, tt.irt)
			if irt != tt.wantIRT {
				t.Errorf("In-Reply-To = %q, want %q", irt, tt.wantIRT)
			}
			if !slices.Equal(refs, tt.wantRefs) {
				t.Errorf("References = %q, want %q", refs, tt.wantRefs)
			}
		})
	}
}

// A reply built with ReplyHeaders lands in the parent's thread, whatever
// headers the parent had, as long as the parent's root is in those headers.
// (A parent with two In-Reply-To ids and no References is the exception RFC
// 5322 makes: its reply starts the chain at the parent.)
func TestReplyHeadersKeepThread(t *testing.T) {
	parents := []struct {
		name string
		h    Headers
	}{
		{"root", Headers{MessageID: "<Root@X>"}},
		{"reply with References", Headers{MessageID: "<b@x>", InReplyTo: "<Root@X>", References: "<Root@X>"}},
		{"deep reply", Headers{MessageID: "<d@x>", InReplyTo: "<c@x>", References: "<root@x> <b@x> <c@x>"}},
		{"reply with In-Reply-To only", Headers{MessageID: "<b@x>", InReplyTo: "<root@x>"}},
		{"reply with comma-separated References", Headers{MessageID: "<d@x>", InReplyTo: "<c@x>", References: "<root@x>,<b@x> ,<c@x>"}},
	}
	for _, p := range parents {
		t.Run(p.name, func(t *testing.T) {
			want := EmailThread(p.h, "")
			irt, refs := ReplyHeaders(p.h.MessageID, p.h.References, p.h.InReplyTo)
			reply := EmailThread(Headers{MessageID: "<reply@x>", InReplyTo: irt, References: strings.Join(refs, " ")}, "")
			if reply.Key != want.Key {
				t.Errorf("reply key %q, parent key %q", reply.Key, want.Key)
			}
			if reply.Parent != NormalizeID(p.h.MessageID) {
				t.Errorf("reply parent %q, want %q", reply.Parent, NormalizeID(p.h.MessageID))
			}
		})
	}
}

func TestReplySubject(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "Hello", "Re: Hello"},
		{"empty", "", "Re:"},
		{"blank", "  \t", "Re:"},
		{"trimmed", "  Hello  ", "Re: Hello"},
		{"Re: kept", "Re: Hello", "Re: Hello"},
		{"RE: kept", "RE: Hello", "RE: Hello"},
		{"re: kept", "re: hello", "re: hello"},
		{"Re: without a space kept", "Re:Hello", "Re:Hello"},
		{"Re: alone kept", "Re:", "Re:"},
		{"Re[2]: kept", "Re[2]: Hello", "Re[2]: Hello"},
		{"Re(2): kept", "Re(2): Hello", "Re(2): Hello"},
		{"Re : kept", "Re : Hello", "Re : Hello"},
		{"Re: Re: kept as it is", "Re: Re: Hello", "Re: Re: Hello"},
		{"Aw: kept", "Aw: Hallo", "Aw: Hallo"},
		{"AW: kept", "AW: Hallo", "AW: Hallo"},
		{"Sv: kept", "Sv: Hej", "Sv: Hej"},
		{"Antw: kept", "Antw: Hoi", "Antw: Hoi"},
		{"回复: kept", "回复: 你好", "回复: 你好"},
		{"答复: kept", "答复: 你好", "答复: 你好"},
		{"回复 with a full-width colon kept", "回复：你好", "回复：你好"},
		{"Fwd: is not a reply", "Fwd: Hello", "Re: Fwd: Hello"},
		{"a word starting with Re is not a prefix", "Regarding: Hello", "Re: Regarding: Hello"},
		{"a word starting with Aw is not a prefix", "Awesome: news", "Re: Awesome: news"},
		{"Re without a colon is not a prefix", "Re Hello", "Re: Re Hello"},
		{"typo RRe: is not a prefix", "RRe: Possible memory leak", "Re: RRe: Possible memory leak"},
		{"list tag first", "[ceph] Re: Hello", "Re: [ceph] Re: Hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReplySubject(tt.in)
			if got != tt.want {
				t.Errorf("ReplySubject(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := ReplySubject(got); again != got {
				t.Errorf("ReplySubject(%q) = %q: replying again changes it", got, again)
			}
		})
	}
}
