package approval

import (
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/schema"
)

func policy(mode string) *Policy {
	return NewPolicy(&config.Outbound{Approval: mode, Internal: config.Internal{
		Email: []string{"Corp.Example", "*.lab.example."},
		Slack: []string{"C0INTERNAL"},
		Lark:  []string{"oc_team"},
	}})
}

// An address is internal when its domain is listed exactly (case and a
// trailing dot aside), or is a subdomain of one listed as *.<domain>:
// a subdomain of a plain listing is not, nor a domain that only ends
// like one, nor the apex of a *. listing.
func TestInternalAddress(t *testing.T) {
	p := policy(config.ApprovalExternal)
	for addr, want := range map[string]bool{
		"ann@corp.example":             true,
		"Ann <ANN@CORP.EXAMPLE>":       true,
		"ann@corp.example.":            true,
		"ann@mail.corp.example":        false, // subdomains only with *.
		"ann@evilcorp.example":         false,
		"ann@corp.example.evil.test":   false,
		"bob@lab.example":              false, // *.lab.example is not lab.example
		"bob@eu.lab.example":           true,
		"bob@a.b.lab.example":          true,
		"bob@evil-lab.example":         false,
		"not an address":               false,
		"ann@":                         false,
		"\"x@corp.example\"@evil.test": false,
		"x@corp.example <y@evil.test>": false,
	} {
		if got := p.InternalAddress(addr); got != want {
			t.Errorf("%q internal: %v, want %v", addr, got, want)
		}
	}
}

// none holds nothing; all holds everything; external holds a draft with
// any recipient outside (to, cc and bcc alike), or with none known yet.
func TestHold(t *testing.T) {
	mail := func(to, cc, bcc []string) *schema.Draft {
		return &schema.Draft{Provider: schema.Email, To: to, Cc: cc, Bcc: bcc}
	}
	in := mail([]string{"a@corp.example"}, []string{"b@x.lab.example"}, nil)
	cases := []struct {
		mode string
		d    *schema.Draft
		want bool
	}{
		{config.ApprovalNone, mail([]string{"a@outside.test"}, nil, nil), false},
		{"", mail([]string{"a@outside.test"}, nil, nil), false},
		{config.ApprovalAll, in, true},
		{config.ApprovalExternal, in, false},
		{config.ApprovalExternal, mail([]string{"a@corp.example"}, nil, []string{"spy@outside.test"}), true},
		{config.ApprovalExternal, mail([]string{"a@corp.example"}, []string{"c@outside.test"}, nil), true},
		{config.ApprovalExternal, &schema.Draft{Provider: schema.Email, ReplyTo: "email_1"}, true},
		{config.ApprovalExternal, &schema.Draft{Provider: schema.Slack, To: []string{"C0INTERNAL"}}, false},
		{config.ApprovalExternal, &schema.Draft{Provider: schema.Slack, To: []string{"C0OTHER"}}, true},
		{config.ApprovalExternal, &schema.Draft{Provider: schema.Slack, To: []string{"U0PERSON"}}, true},
		{config.ApprovalExternal, &schema.Draft{Provider: schema.Lark, To: []string{"oc_team"}}, false},
		{config.ApprovalExternal, &schema.Draft{Provider: schema.Lark, To: []string{"oc_team", "oc_public"}}, true},
		// A Slack id listed is not an email domain, nor the reverse.
		{config.ApprovalExternal, &schema.Draft{Provider: schema.Lark, To: []string{"C0INTERNAL"}}, false},
		{config.ApprovalExternal, mail([]string{"C0INTERNAL"}, nil, nil), true},
	}
	for i, c := range cases {
		if got := policy(c.mode).Hold(c.d); got != c.want {
			t.Errorf("%d: %s %+v: hold %v, want %v", i, c.mode, c.d, got, c.want)
		}
	}
}

// An approver is a listed user or a member of a listed group, and never
// for a draft its own agents queued.
func TestCheck(t *testing.T) {
	a := &config.Approvers{Users: []string{"alice"}, Groups: []string{"ops"}}
	for _, c := range []struct {
		who   Identity
		agent string
		ok    bool
		why   string
	}{
		{Identity{User: "alice"}, "bot", true, ""},
		{Identity{User: "carol", Groups: []string{"staff", "ops"}}, "bot@dave", true, ""},
		{Identity{User: "bob", Groups: []string{"staff"}}, "bot", false, "not in courier.outbound.approvers"},
		{Identity{User: "mallory", Groups: []string{"opsx"}}, "bot", false, "not in courier.outbound.approvers"},
		{Identity{User: "alice"}, "alice", false, "nobody approves their own draft"},
		{Identity{User: "alice"}, "reviewer@alice", false, "nobody approves their own draft"},
		{Identity{User: "carol", Groups: []string{"ops"}}, "carol", false, "nobody approves their own draft"},
		{Identity{User: "alice"}, "reviewer@malice", true, ""},
	} {
		err := Check(a, c.who, "email_out_1", c.agent)
		if c.ok != (err == nil) {
			t.Errorf("%+v on %s's draft: %v", c.who, c.agent, err)
			continue
		}
		if err != nil && (fault.ExitCode(err) != 77 || !strings.Contains(err.Error(), c.why)) {
			t.Errorf("%+v on %s's draft: %v (exit %d)", c.who, c.agent, err, fault.ExitCode(err))
		}
	}
	if err := Check(&config.Approvers{}, Identity{User: "root"}, "x", "bot"); err == nil {
		t.Errorf("nobody listed, root: %v", err)
	}
}

// The identity of this process (and of a peer with its uid) names its
// user and its primary group, as the databases do.
func TestIdentities(t *testing.T) {
	g, err := user.LookupGroupId(strconv.Itoa(os.Getgid()))
	if err != nil {
		t.Skip("no name for this process's group")
	}
	self := SelfIdentity()
	peer := PeerIdentity(uint32(os.Getuid()), uint32(os.Getgid()), self.User)
	for _, id := range []Identity{self, peer} {
		if !slices.Contains(id.Groups, g.Name) {
			t.Errorf("%+v lacks group %s", id, g.Name)
		}
	}
	if u, err := user.Current(); err == nil && self.User != u.Username {
		t.Errorf("self is %q, want %q", self.User, u.Username)
	}
}
