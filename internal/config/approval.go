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
	for _, l := range []struct {
		key  string
		vals []string
		re   *regexp.Regexp
		what string
	}{
		{"internal.email", o.Internal.Email, domainRE, "a domain (example.com; *.example.com for its subdomains)"},
		{"internal.slack", o.Internal.Slack, slackChanRE, "a Slack channel id (C…, G… or D…, upper case)"},
		{"internal.lark", o.Internal.Lark, larkChatRE, "a Lark chat id (oc_…)"},
		{"approvers.users", o.Approvers.Users, unixNameRE, "a Unix user name"},
		{"approvers.groups", o.Approvers.Groups, unixNameRE, "a Unix group name"},
	} {
		for _, v := range l.vals {
			w := v
			if l.key == "internal.email" {
				w = strings.ToLower(strings.TrimSuffix(v, "."))
			}
			if !l.re.MatchString(w) {
				k.Bad(l.key, "%q is not %s", v, l.what)
			}
		}
	}
	if o.ApprovalMode() != ApprovalNone && len(o.Approvers.Users)+len(o.Approvers.Groups) == 0 {
		k.Bad("approvers", "approval is %s, but no user or group may approve: list them in approvers.users or approvers.groups", o.ApprovalMode())
	}
}
