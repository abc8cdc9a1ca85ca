// Package schema defines the files of the Mailbox protocol (seed 004) as Go
// types, and reads and writes them.
//
// A mailbox file is YAML front matter between two "---" lines followed by a
// Markdown body. Three kinds exist:
//
//   - Message: an inbound message (protocol §3), written by Courier under
//     inbound/<provider>/ and never rewritten; done moves it to archive/ with
//     processed_at set.
//   - Draft: an outbound message (protocol §5.1, plus subject and
//     correlation_id) written by an agent, queued by `courier send` into
//     outbound/<provider>/ and, once delivered, filed in archive/<provider>/
//     with its Delivery record.
//   - Delivery: the record of a draft's delivery attempts.
//
// The contract of this package:
//
//   - Encode is deterministic: Decode(Encode(m)) equals m, and encoding a
//     file Courier wrote after decoding it yields the same bytes.
//   - Decode and DecodeDraft reject what the protocol does not allow, and
//     every error is a *FieldError naming the source line and the field path
//     (for example "draft.md:7: options.schedule_at: not a time").
//   - Every Message that Validate accepts also validates against the
//     protocol's JSON Schema (§7.2), embedded here as InboundJSONSchema.
//
// This package imports nothing of Courier's and only gopkg.in/yaml.v3 beyond
// the standard library.
package schema
