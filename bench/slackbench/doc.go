// Package slackbench holds the Slack benchmarks of issue 10, each measured
// beside the bare slack-go program a user would otherwise write, in the
// same run, against the same fake Slack (internal/testutil/slackfake):
//
//   - BenchmarkEventToFile: a Socket Mode event → a durable file in
//     inbound/slack/ with `courier serve` (debounce off), p50 and p99 over
//     -events events sent one at a time, timed from the frame written to
//     the ack read (Courier acks only once the file is durable); beside a
//     bare slack-go socketmode handler that writes the event's JSON to a
//     file, fsyncs it and acks.
//   - BenchmarkReplies: -replies drafts answering inbound messages, queued
//     with `courier send` while the service is down, then delivered by
//     `courier serve` (threaded chat.postMessage calls, each recorded and
//     archived); beside slack-go's PostMessage posting the same replies in
//     a loop.
//
// Both sides interleave over -rounds rounds, each against a fresh fake
// into a fresh folder (benchutil.Chat, benchutil.Sample); -before runs
// another courier binary as a third side. They drive the real binary and
// ignore b.N: run them once each,
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 30m ./bench/slackbench
//
// or bench/slack.sh, which prints the table. The package holds only tests.
package slackbench
