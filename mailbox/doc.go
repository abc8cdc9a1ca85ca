// Package mailbox is the mailbox on disk: its layout, the atomic and durable
// writing of message files, and the state database beside them.
//
// Layout (DESIGN §1), under a workspace root:
//
//	.monoco/mailbox/inbound/<provider>/      messages, written by Courier, read-only to agents
//	.monoco/mailbox/outbound/<provider>/     drafts queued by `courier send`
//	.monoco/mailbox/archive/<provider>/      inbound marked done, outbound delivered
//	.monoco/mailbox/.deadletter/<provider>/  what failed for good, with the reason in the file; and
//	                                         inbound payloads that could not become messages (deadletter.go)
//	.monoco/mailbox/.tmp/                    staging for atomic writes and debounce groups
//	.monoco/mailbox/.state/courier.db        SQLite (WAL): index, dedupe keys, claims, checkpoints
//	.monoco/dropzone/                        attachments, see package dropzone
//
// The contract:
//
//   - Files are the truth. A file is named {YYYYMMDDTHHMMSS}_{id}.md after
//     its own timestamp in UTC, written into .tmp/, fsynced, renamed into
//     place (never over an existing file), and its directory fsynced: a
//     reader never sees a partial file and a crash never leaves one. Files
//     are 0440 and folders 0750 whatever the umask (agents read through
//     the group; others nothing). An inbound file is never rewritten; done
//     writes a new file in archive/ (with processed_at) and only then
//     removes the inbound one.
//   - Nothing below .monoco/mailbox is reached through a symbolic link
//     (confine.go): a link where a folder or a file should be is refused,
//     never followed, and a name already taken is compared with what was
//     to be written instead of being taken for a duplicate.
//   - The database holds what the files cannot: claims, failure counts and
//     adapter checkpoints; and what can be derived from them: the index
//     (id → file, thread, correlation) and dedupe keys. Reindex rebuilds the
//     derivable part from the files; Reconcile repairs what a crash between
//     a rename and its database commit left behind.
//   - WriteInbound makes a batch of messages durable before it commits their
//     index rows and the checkpoints that go with them, in one transaction:
//     a checkpoint never runs ahead of the files it covers.
//   - Claims are decided inside one SQLite write transaction, so among any
//     number of processes claiming a message at once exactly one wins.
//   - Everything works without the service: the CLI opens the same database.
package mailbox
