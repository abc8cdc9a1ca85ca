package config

import (
	"regexp"
	"strings"

	"github.com/monoco/courier/internal/confkit"
)

// The approval gate's settings, under courier.outbound (docs/approval.md).

// Approval modes of courier.outbound.approval.
const (
	ApprovalNone     = "none"     // nothing is held (the default)
	ApprovalExternal = "external" // drafts to anyone outside Internal are held
	ApprovalAll      = "all"      // every draft is held
)

// Internal lists the recipients a draft may go to without approval under
// approval: external.
type Internal struct {
	// Email holds domains: "example.com" is that domain only; a
	// subdomain counts only when written as "*.example.com" (which does
	// not cover example.com itself).
	Email []string `yaml:"email"`
	Slack []string `yaml:"slack"` // channel ids (C…, G…, D…)
	Lark  []string `yaml:"lark"`  // chat ids (oc_…)
}

// Approvers are who may approve or reject a held draft: Unix users, and
// the members of Unix groups.
type Approvers struct {
	Users  []string `yaml:"users"`
	Groups []string `yaml:"groups"`
}

// ApprovalMode is courier.outbound.approval, none when left out.
func (o *Outbound) ApprovalMode() string {
	if o.Approval == "" {
		return ApprovalNone
	}
	return o.Approval
}

var (
	domainRE    = regexp.MustCompile(`^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)
	slackChanRE = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	larkChatRE  = regexp.MustCompile(`^oc_[A-Za-z0-9]+$`)
	unixNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)
)

// checkApproval checks approval, internal and approvers of courier.outbound.
func checkApproval(k *confkit.Checker, o *Outbound) {
	k = k.At("courier.outbound")
	switch o.ApprovalMode() {
	case ApprovalNone, ApprovalExternal, ApprovalAll:
	default:
		k.Bad("approval", "%q is not one of none, external, all", o.Approval)
	}
	for _, d := range o.Internal.Email {
		if !domainRE.MatchString(strings.ToLower(strings.TrimSuffix(d, "."))) {
			k.Bad("internal.email", "%q is not a domain (example.com; *.example.com for its subdomains)", d)
		}
	}
	for _, c := range o.Internal.Slack {
		if !slackChanRE.MatchString(c) {
			k.Bad("internal.slack", "%q is not a Slack channel id (C…, G… or D…, upper case)", c)
		}
	}
	for _, c := range o.Internal.Lark {
		if !larkChatRE.MatchString(c) {
			k.Bad("internal.lark", "%q is not a Lark chat id (oc_…)", c)
		}
	}
	for _, u := range o.Approvers.Users {
		if !unixNameRE.MatchString(u) {
			k.Bad("approvers.users", "%q is not a Unix user name", u)
		}
	}
	for _, g := range o.Approvers.Groups {
		if !unixNameRE.MatchString(g) {
			k.Bad("approvers.groups", "%q is not a Unix group name", g)
		}
	}
	if o.ApprovalMode() != ApprovalNone && len(o.Approvers.Users)+len(o.Approvers.Groups) == 0 {
		k.Bad("approvers", "approval is %s, but no user or group may approve: list them in approvers.users or approvers.groups", o.ApprovalMode())
	}
}
