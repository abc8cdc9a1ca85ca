package config_test

import (
	"testing"

	"github.com/monoco/courier/internal/config"
)

// courier.outbound.approval: none by default; a bad value of approval,
// internal or approvers is an error naming its key.
func TestApprovalConfig(t *testing.T) {
	cfg, err := config.Parse([]byte("courier: {}\n"), t.TempDir(), nil)
	if err != nil || cfg.Courier.Outbound.ApprovalMode() != config.ApprovalNone {
		t.Fatalf("default: %q %v", cfg.Courier.Outbound.ApprovalMode(), err)
	}
	good := `courier:
  outbound:
    approval: external
    internal: {email: [corp.example, "*.lab.example"], slack: [C0123ABC, G0XYZ], lark: [oc_abc123]}
    approvers: {users: [alice, bob.smith], groups: [ops]}
`
	cfg, err = config.Parse([]byte(good), t.TempDir(), nil)
	if err != nil || cfg.Courier.Outbound.ApprovalMode() != config.ApprovalExternal || cfg.Courier.Outbound.Approvers.Groups[0] != "ops" {
		t.Fatalf("good: %+v %v", cfg.Courier.Outbound, err)
	}
	for y, want := range map[string]string{
		"courier:\n  outbound: {approval: some}\n":                                               `courier.outbound.approval: "some" is not one of none, external, all`,
		"courier:\n  outbound: {approval: all}\n":                                                "courier.outbound.approvers: approval is all, but no user or group may approve",
		"courier:\n  outbound: {internal: {email: [ann@corp.example]}}\n":                        `courier.outbound.internal.email: "ann@corp.example" is not a domain`,
		"courier:\n  outbound: {internal: {email: [\"*corp.example\"]}}\n":                       `courier.outbound.internal.email: "*corp.example" is not a domain`,
		"courier:\n  outbound: {internal: {slack: [\"#general\"]}}\n":                            `courier.outbound.internal.slack: "#general" is not a Slack channel id`,
		"courier:\n  outbound: {internal: {lark: [ou_person]}}\n":                                `courier.outbound.internal.lark: "ou_person" is not a Lark chat id`,
		"courier:\n  outbound: {approval: all, approvers: {users: [\"bad user\"]}}\n":            `courier.outbound.approvers.users: "bad user" is not a Unix user name`,
		"courier:\n  outbound: {approval: all, approvers: {users: [a], groups: [\"%wheel\"]}}\n": `courier.outbound.approvers.groups: "%wheel" is not a Unix group name`,
		"courier:\n  outbound: {approval: all, approvers: [alice]}\n":                            "courier.outbound.approvers",
	} {
		parseErr(t, y, want)
	}
}
