package schema

// Approval statuses (courier.outbound.approval, docs/approval.md).
const (
	ApprovalAwaiting = "awaiting_approval" // held in outbound/ until a person decides
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// Approval is the hold on a draft queued under courier.outbound.approval
// and the decision a person took on it. While the draft waits in
// outbound/, its front matter says `approval: {status: awaiting_approval}`,
// so that the hold outlives the state database. The decision is recorded
// by the service (not the file, which an agent could write) and filed
// with the draft: in archive/ or .deadletter/, as its delivery block's
// approval (who, when, and for a rejection why).
type Approval struct {
	Status string `yaml:"status" json:"status"`
	By     string `yaml:"by,omitempty" json:"by,omitempty"`
	At     *Time  `yaml:"at,omitempty" json:"at,omitempty"`
	Reason Text   `yaml:"reason,omitempty" json:"reason,omitempty"`
}

// Awaiting reports whether the draft's file says it is held for approval.
func (d *Draft) Awaiting() bool {
	return d.Approval != nil && d.Approval.Status == ApprovalAwaiting
}

func (v *validator) approval(path string, a *Approval) {
	if a == nil {
		return
	}
	switch a.Status {
	case ApprovalAwaiting, ApprovalApproved, ApprovalRejected:
	default:
		v.errorf(path+".status", "%s is not one of awaiting_approval, approved, rejected", quote(a.Status))
	}
	if hasControl(a.By) {
		v.errorf(path+".by", "contains a control character")
	}
}
