// Package agents is what an agent may do to the mailbox: claim a message,
// mark it done, give it back (fail), and send a draft, with the rules of
// DESIGN §6 (the draft resolved from the message it answers:
// ResolveDraft, inheritFromParent) and the attach policy (which local files
// a draft may attach, attach.go).
//
// Who writes (DESIGN §7). While the service runs it is the only writer of
// the mailbox and its database: the writing verbs go to it over its socket
// (package agentapi), and the agents that run them need only read access
// to the mailbox and access to the socket. Without the service, in a
// single-user workspace, they act on the mailbox themselves. Two types
// carry that:
//
//   - Backend is the service's side: agentapi.Backend over the service's
//     mailbox and providers, for the Caller the socket names (or the MCP
//     server over HTTP names). Socket serves it.
//   - Local is the command line's side (the CLI's claim, done, fail and
//     send, and the tools of `courier mcp` over stdio): Dial decides, per
//     call, whether the service's socket answers (then the verb goes
//     there) or the mailbox may be written directly (then it acts here,
//     with the same functions the Backend calls).
//
// Errors carry a fault.Kind; an Outcome carries the exit code of its kind,
// as the socket's wire does.
package agents
