// Package approval holds the rules of the approval gate
// (courier.outbound.approval, docs/approval.md): which drafts wait for a
// person when they are queued, and who may approve or reject them.
package approval

import (
	"net/mail"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/schema"
)

// Policy decides, when a draft is queued, whether it waits for approval.
type Policy struct {
	mode    string
	domains []string // exact domains, lower case
	subs    []string // ".example.com" of "*.example.com"
	chats   map[string]bool
}

// NewPolicy is the policy of courier.outbound (checked already).
func NewPolicy(o *config.Outbound) *Policy {
	p := &Policy{mode: o.ApprovalMode(), chats: map[string]bool{}}
	for _, d := range o.Internal.Email {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if rest, ok := strings.CutPrefix(d, "*."); ok {
			p.subs = append(p.subs, "."+rest)
		} else {
			p.domains = append(p.domains, d)
		}
	}
	for _, c := range slices.Concat(o.Internal.Slack, o.Internal.Lark) {
		p.chats[c] = true
	}
	return p
}

// Hold says whether d waits for a person's approval: always under all;
// under external, unless every recipient is internal.
func (p *Policy) Hold(d *schema.Draft) bool {
	switch p.mode {
	case config.ApprovalAll:
		return true
	case config.ApprovalExternal:
		return !p.Internal(d)
	}
	return false
}

// Internal says whether every recipient of d is internal: for email,
// every address of to, cc and bcc is in an internal domain; for Slack and
// Lark, every conversation of to is listed. A draft with no recipient
// known yet (a reply_to the service resolves later) is not internal.
func (p *Policy) Internal(d *schema.Draft) bool {
	rcpts := d.Recipients()
	if len(rcpts) == 0 {
		return false
	}
	for _, r := range rcpts {
		if d.Provider == schema.Email {
			if !p.InternalAddress(r) {
				return false
			}
		} else if !p.chats[r] {
			return false
		}
	}
	return true
}

// InternalAddress says whether an email address is in an internal domain:
// one listed exactly, or a subdomain of one listed as "*.<domain>". The
// comparison ignores case and a trailing dot.
func (p *Policy) InternalAddress(addr string) bool {
	if a, err := mail.ParseAddress(addr); err == nil {
		addr = a.Address
	}
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return false
	}
	dom := strings.ToLower(strings.TrimSuffix(addr[at+1:], "."))
	if dom == "" {
		return false
	}
	if slices.Contains(p.domains, dom) {
		return true
	}
	for _, s := range p.subs {
		if strings.HasSuffix(dom, s) {
			return true
		}
	}
	return false
}

// Identity is who asks for a decision: a Unix user and the names of the
// groups it is in (its primary group among them).
type Identity struct {
	User   string
	Groups []string
}

// PeerIdentity is the identity of a socket's peer: the user the kernel
// named and its groups, as the user and group databases list them.
func PeerIdentity(uid, gid uint32, name string) Identity {
	id := Identity{User: name}
	gids := []string{strconv.FormatUint(uint64(gid), 10)}
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		if more, err := u.GroupIds(); err == nil {
			gids = append(gids, more...)
		}
	}
	id.Groups = groupNames(gids)
	return id
}

// SelfIdentity is the identity of this process.
func SelfIdentity() Identity {
	id := Identity{User: "uid" + strconv.Itoa(os.Getuid())}
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil && u.Username != "" {
		id.User = u.Username
	}
	gids := []string{strconv.Itoa(os.Getgid())}
	if more, err := os.Getgroups(); err == nil {
		for _, g := range more {
			gids = append(gids, strconv.Itoa(g))
		}
	}
	id.Groups = groupNames(gids)
	return id
}

func groupNames(gids []string) []string {
	var out []string
	for _, g := range gids {
		if gr, err := user.LookupGroupId(g); err == nil && !slices.Contains(out, gr.Name) {
			out = append(out, gr.Name)
		}
	}
	return out
}

// Listed says whether approvers names who, as a user or through a group.
func Listed(a *config.Approvers, who Identity) bool {
	listed := slices.Contains(a.Users, who.User)
	for _, g := range who.Groups {
		listed = listed || slices.Contains(a.Groups, g)
	}
	return listed
}

// Check says whether who may approve or reject a draft its agent queued:
// who must be listed in approvers (as a user, or through a group), and
// the draft must not be one of its own agents' (agent is who's user name
// or "<name>@<user>", as the outbound verbs' rule names them). A refusal
// is a fault.NoPermission error (exit 77).
func Check(a *config.Approvers, who Identity, id, agent string) error {
	if !Listed(a, who) {
		return fault.Errorf(fault.NoPermission, "approval: user %s may not approve or reject drafts: it is not in courier.outbound.approvers (users %v, groups %v)", who.User, a.Users, a.Groups)
	}
	if agent == who.User || strings.HasSuffix(agent, "@"+who.User) {
		return fault.Errorf(fault.NoPermission, "approval: %s was queued by agent %q, one of user %s's: nobody approves their own draft", id, agent, who.User)
	}
	return nil
}
