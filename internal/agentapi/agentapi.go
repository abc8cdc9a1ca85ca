// Package agentapi is how agents write while the service runs (DESIGN §7).
// The service is then the only writer of the mailbox and its database:
// agents may read them (they are in the workspace's group) but not change
// them, and their writing verbs (claim, done, fail, send, and those of
// `courier mcp`) reach the service as HTTP requests over a Unix socket. The
// socket tells the service who asks: it reads the peer's credentials
// (SO_PEERCRED) from every connection, and the agent a request acts for
// is tied to that user (see Caller.Agent), whatever the request says.
//
// The service's side is a Backend (package agents implements it): plain
// Go methods taking the Caller, which the socket's Server calls for each
// request and which the MCP server over HTTP calls directly, with its own
// Caller. The command line's side is a Client (agents.Local dials it).
//
// The wire, for `curl --unix-socket .monoco/run/courier.sock`:
//
//	GET  /v1/whoami                  the Caller, and the agent name it defaults to
//	POST /v1/claim  {"id", "agent", "timeout"}         an Outcome
//	POST /v1/done   {"id", "agent"}                    an Outcome
//	POST /v1/fail   {"id", "agent", "reason", "retryable"}   an Outcome
//	POST /v1/send   multipart/form-data: a part "request" (SendRequest, JSON),
//	                then one part "artifact.<i>" per entry of its Files,
//	                in order                            a SendResult
//	POST /v1/outbound {"verb", "id"}                   an OutboundResult
//	                (verb retry, requeue or cancel: `courier outbound`;
//	                served when the Backend is an Operator)
//
// Every answer is JSON; a refusal is an Error: the exit code the command
// line exits with and the message it prints, exactly as it would have
// printed it acting on the mailbox itself.
package agentapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/monoco/courier/schema"
)

// Caller is who sent a request, as the kernel tells the socket
// (SO_PEERCRED), not as the request says.
type Caller struct {
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	PID  int32  `json:"pid"`
	User string `json:"user"` // the user name of UID, or "uid<UID>" when it has none
	// Owner is true for the service's own user and for root: users who
	// may write the mailbox directly anyway, so who gain nothing by
	// impersonation and may act under any agent name.
	Owner bool `json:"owner"`
}

// MaxAgentLen bounds an agent name.
const MaxAgentLen = 128

// Agent returns the agent name a request of c acts under, asked being the
// name the request gives ("" for none: the user's name).
//
// Agents name themselves (upstream's --agent and $COURIER_AGENT), and
// several agents of one user may run side by side under different names.
// What a name must not do is reach across users: a claim made by one user's
// agent must not be renewed, finished or failed by another user's agent
// that took the same name. So a user other than the Owner acts under its
// own user name, or under a name qualified by it: "reviewer" asked by
// user alice becomes "reviewer@alice", while "alice" and "reviewer@alice"
// stay as they are. No name another user can reach ends in "@alice", so
// alice's claims are alice's. The Owner's names are taken as given (it
// could write the database directly), so a single-user workspace names
// agents exactly as the command line does without the service.
func (c Caller) Agent(asked string) (string, error) {
	if asked == "" {
		return c.User, nil
	}
	if err := CheckAgent(asked); err != nil {
		return "", err
	}
	if c.Owner || asked == c.User || strings.HasSuffix(asked, "@"+c.User) {
		return asked, nil
	}
	return asked + "@" + c.User, nil
}

// CheckAgent refuses an agent name that is too long, not UTF-8, or holds
// a space, a control character or a bidirectional mark (U+202E shows
// "evil\u202Eecila" as "evilalice" in `courier list` and logs): the
// service and the command line acting directly check alike.
func CheckAgent(name string) error {
	if len(name) > MaxAgentLen {
		return fmt.Errorf("agentapi: agent name is %d bytes, over the limit of %d", len(name), MaxAgentLen)
	}
	bad := func(r rune) bool {
		return unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Bidi_Control, r) || schema.IsStrippedControl(r)
	}
	if !utf8.ValidString(name) || strings.IndexFunc(name, bad) >= 0 {
		return fmt.Errorf("agentapi: agent name %q has a space, control or bidirectional character", name)
	}
	return nil
}

func (c Caller) String() string {
	return c.User + " (uid " + strconv.FormatUint(uint64(c.UID), 10) + ", pid " + strconv.FormatInt(int64(c.PID), 10) + ")"
}

// Result is the answer of claim, done or fail for one message, shaped like
// upstream's API responses; `courier claim --format json` prints it.
type Result struct {
	Success   bool       `json:"success"`
	MessageID string     `json:"message_id"`
	Status    string     `json:"status,omitempty"`
	ClaimedBy string     `json:"claimed_by,omitempty"`
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RetryAt   *time.Time `json:"retry_at,omitempty"`
	Failures  int        `json:"failures,omitempty"`
	Path      string     `json:"path,omitempty"`
	Error     string     `json:"error,omitempty"`
	Message   string     `json:"message,omitempty"`
}

// Outcome is a Result and the exit code of the command line for it: 0, or
// 1 not found, 2 conflict, 4 database timeout, 64 and up as sysexits(3).
type Outcome struct {
	Result Result `json:"result"`
	Code   int    `json:"code"`
}

// ClaimRequest asks for a claim on a message.
type ClaimRequest struct {
	ID      string        `json:"id"`
	Agent   string        `json:"agent,omitempty"`   // "" is the caller's user name
	Timeout time.Duration `json:"timeout,omitempty"` // 0 is the configured claim_timeout
}

// DoneRequest marks a claimed message processed.
type DoneRequest struct {
	ID    string `json:"id"`
	Agent string `json:"agent,omitempty"`
}

// FailRequest gives a claimed message back.
type FailRequest struct {
	ID        string `json:"id"`
	Agent     string `json:"agent,omitempty"`
	Reason    string `json:"reason"`
	Retryable bool   `json:"retryable"`
}

// SendRequest is `courier send` as the agent gave it: the draft file, the
// flags, and what the command line learned from files only the agent may
// read. The service parses, resolves, validates and queues it.
type SendRequest struct {
	// Name is what errors call the draft: its file name as given, or
	// "draft" in quick mode.
	Name string `json:"name"`
	// Draft is the draft file; empty in quick mode (Text).
	Draft []byte `json:"draft,omitempty"`

	// The flags, which win over the draft's fields.
	Provider    string   `json:"provider,omitempty"`
	To          []string `json:"to,omitempty"`
	Cc          []string `json:"cc,omitempty"`
	Bcc         []string `json:"bcc,omitempty"`
	Subject     string   `json:"subject,omitempty"`
	Text        string   `json:"text,omitempty"`
	ReplyTo     string   `json:"reply_to,omitempty"`
	Correlation string   `json:"correlation,omitempty"`
	Account     string   `json:"account,omitempty"`
	DryRun      bool     `json:"dry_run,omitempty"`
	// Attach are the --attach flags, after the draft's own artifacts: a
	// dropzone id, or a path the command line checked exists.
	Attach []Attach `json:"attach,omitempty"`

	Agent string `json:"agent,omitempty"` // "" is the caller's user name

	// Files describe the content that follows the request, one part per
	// artifact given by path, in the order of the artifacts. The service
	// never opens such a path itself: it may read files the agent may not
	// (its config, its credentials), so the agent's command line opens
	// them, as the agent, and sends what it read.
	Files []File `json:"files,omitempty"`
	// Refusal is the first error the command line found checking the
	// artifacts on its side (a missing file, a path outside the roots it
	// may attach from). The service answers with it after its own checks
	// of the draft, which come first without the service too.
	Refusal *Error `json:"refusal,omitempty"`
}

// Attach is one --attach: a dropzone id, or a path.
type Attach struct {
	ID   string `json:"id,omitempty"`
	Path string `json:"path,omitempty"`
}

// File is an artifact whose content the command line sends.
type File struct {
	// Index is the artifact's place in the draft's artifacts (--attach
	// ones after the draft's own).
	Index int `json:"index"`
	// Name and MimeType are what the command line made of the file (its
	// base name, its type by extension or content); they fill in what the
	// draft leaves empty.
	Name     string `json:"name,omitempty"`
	MimeType string `json:"mime_type,omitempty"`
}

// SendResult is a queued draft, or the draft a dry run would queue.
type SendResult struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	// Path is the queued file, relative to the workspace; empty for a
	// dry run.
	Path   string `json:"path,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
	// Summary is what `courier send --format json` prints.
	Summary json.RawMessage `json:"summary"`
	// Draft is the draft as queued (or as it would be), as JSON; File is
	// the same as the front matter file written to outbound/.
	Draft json.RawMessage `json:"draft"`
	File  string          `json:"file"`
	// Waiting says why nothing will deliver the draft now (its provider
	// is not enabled, or has no way to send, as for email without SMTP);
	// empty when a Sender will take it.
	Waiting string `json:"waiting,omitempty"`
}

// Error is a refusal: the command line's exit code and message.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"error"`
}

func (e *Error) Error() string { return e.Message }

// OutboundRequest is `courier outbound retry|requeue|cancel ID`.
type OutboundRequest struct {
	Verb string `json:"verb"` // retry, requeue or cancel
	ID   string `json:"id"`
}

// Outbound verbs.
const (
	OutboundRetry   = "retry"
	OutboundRequeue = "requeue"
	OutboundCancel  = "cancel"
)

// OutboundResult is what an outbound verb did to a draft.
type OutboundResult struct {
	ID   string `json:"id"`
	Verb string `json:"verb"`
	// Status is the draft's status after the verb: queued, or dead for a
	// cancelled one (see mailbox.OutboundDraft).
	Status string `json:"status"`
	// Path is the draft's file after the verb, relative to the workspace.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// Operator is what the service does for the operator's verbs on the
// outbound queue. A Backend that is an Operator serves /v1/outbound; a
// refusal is an *Error (77 for a Caller that may not act on the draft).
type Operator interface {
	Outbound(ctx context.Context, c Caller, req OutboundRequest) (*OutboundResult, error)
}

// Files gives a send the content of its artifacts given by path.
type Files interface {
	// Open returns the content of the artifact at index i of the draft's
	// artifacts. It is called once for each entry of the request's Files,
	// in their order, and the reader is consumed before the next call.
	Open(i int) (io.Reader, error)
}

// Backend is what the service does for agents. Its methods act for the
// Caller, under the agent name Caller.Agent gives.
type Backend interface {
	Claim(ctx context.Context, c Caller, req ClaimRequest) Outcome
	Done(ctx context.Context, c Caller, req DoneRequest) Outcome
	Fail(ctx context.Context, c Caller, req FailRequest) Outcome
	// Send resolves, validates and queues a draft. A refusal is an *Error.
	Send(ctx context.Context, c Caller, req *SendRequest, files Files) (*SendResult, error)
}
