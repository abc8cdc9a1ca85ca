package webui

import (
	"errors"
	"net/http"
	"strings"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/mailview"
	"github.com/monoco/courier/mailbox"
)

// outboundData is the outbound page: the queue and the dead letters, each
// with the verbs that apply to it.
type outboundData struct {
	Drafts []outboundRow
}

type outboundRow struct {
	mailbox.OutboundDraft
	Verbs []string
}

// verbsFor are the buttons of a draft in status: what the Operator and
// the Approver the server has can do to it.
func (s *Server) verbsFor(status string) []string {
	var v []string
	if s.opts.Approver != nil && status == StatusAwaitingApproval {
		v = append(v, "approve", "reject")
	}
	if s.opts.Operator == nil {
		return v
	}
	switch status {
	case mailbox.OutWaiting:
		v = append(v, agentapi.OutboundRetry, agentapi.OutboundCancel)
	case mailbox.OutQueued, mailbox.OutScheduled, mailbox.OutCancelling, StatusAwaitingApproval:
		v = append(v, agentapi.OutboundCancel)
	case mailbox.OutDead:
		v = append(v, agentapi.OutboundRequeue)
	}
	return v
}

func (s *Server) outbound(w http.ResponseWriter, r *http.Request, _ *session) {
	s.outboundPage(w, r, http.StatusOK, "", "")
}

func (s *Server) outboundPage(w http.ResponseWriter, r *http.Request, code int, notice, errText string) {
	ds, err := s.opts.Mailbox.OutboundDrafts(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := &outboundData{}
	// Newest first, as the inbox.
	for i := len(ds) - 1; i >= 0; i-- {
		d.Drafts = append(d.Drafts, outboundRow{OutboundDraft: ds[i], Verbs: s.verbsFor(ds[i].Status)})
	}
	s.page(w, r, code, "outbound", pageData{Title: "Outbound", Outbound: d, Notice: notice, Error: errText})
}

// outboundVerb is POST /ui/outbound/{verb}/{id}, run as the Caller who
// logged in: the Operator's and the Approver's own rules apply to it.
func (s *Server) outboundVerb(w http.ResponseWriter, r *http.Request, sess *session) {
	verb, id := r.PathValue("verb"), r.PathValue("id")
	var msg string
	var err error
	switch {
	case (verb == "approve" || verb == "reject") && s.opts.Approver != nil:
		if verb == "approve" {
			_, err = s.opts.Approver.Approve(r.Context(), sess.caller, id)
		} else {
			reason := strings.TrimSpace(r.PostFormValue("reason"))
			if reason == "" {
				reason = "rejected in the web viewer by " + sess.caller.User
			}
			_, err = s.opts.Approver.Reject(r.Context(), sess.caller, id, reason)
		}
		msg = id + ": " + verb + "d"
	case s.opts.Operator != nil && (verb == agentapi.OutboundRetry || verb == agentapi.OutboundRequeue || verb == agentapi.OutboundCancel):
		var res *agentapi.OutboundResult
		res, err = s.opts.Operator.Outbound(r.Context(), sess.caller, agentapi.OutboundRequest{Verb: verb, ID: id})
		if err == nil {
			msg = res.Message
		}
	default:
		http.Error(w, "no such action: "+verb, http.StatusNotFound)
		return
	}
	s.log.Info("web viewer: outbound action", "verb", verb, "id", id, "user", sess.caller.User, "ok", err == nil)
	if err != nil {
		code := http.StatusConflict
		var ae *agentapi.Error
		if errors.As(err, &ae) && ae.Code == 77 {
			code = http.StatusForbidden
		}
		s.outboundPage(w, r, code, "", mailview.SafeText(err.Error()))
		return
	}
	s.outboundPage(w, r, http.StatusOK, mailview.SafeText(msg), "")
}
