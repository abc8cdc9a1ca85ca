// Package larkbench holds the Lark benchmarks of issue 11, each measured
// beside the bare oapi-sdk-go program a user would otherwise write, in the
// same run, against the same fake Lark (internal/testutil/larkfake):
//
//   - BenchmarkEventToFile: an im.message.receive_v1 event over the long
//     connection → a durable file in inbound/lark/ with `courier serve`
//     (debounce off), p50 and p99 over -events events sent one at a time,
//     timed from the frame written to the ack read (Courier acks only once
//     the file is durable); beside a bare SDK ws client whose
//     OnP2MessageReceiveV1 handler writes the event's JSON to a file and
//     fsyncs it (the SDK acks when the handler returns).
//   - BenchmarkReplies: -replies drafts answering inbound messages, queued
//     with `courier send` while the service is down, then delivered by
//     `courier serve` (im/v1 replies with a uuid each, recorded and
//     archived); beside the SDK's Im.Message.Reply sending the same
//     replies in a loop.
//
// Both sides interleave over -rounds rounds, each against a fresh fake
// into a fresh folder (benchutil.Chat, benchutil.Sample); -before runs
// another courier binary as a third side. They drive the real binary and
// ignore b.N: run them once each,
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 30m ./bench/larkbench
//
// or bench/lark.sh, which prints the table. The package holds only tests.
package larkbench
