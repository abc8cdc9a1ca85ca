// Package emailbench holds the email benchmarks of issue 4, each measured
// beside the tool a user would otherwise pick, in the same run:
//
//   - BenchmarkFetch: `courier fetch` of 5,000 realistic messages from a
//     local Dovecot against mbsync (its default FSync) and the floor (a
//     bare go-imap v2 client, bench/imapfloor) from the same Dovecot,
//     interleaved; wall time (min, median, max of -runs), CPU time, peak
//     RSS and the load average.
//   - BenchmarkFetchLargeAttachment: the peak RSS a 100 MB attachment adds
//     to `courier fetch` (against fetching a small message), beside what it
//     adds to mbsync.
//   - BenchmarkIdlePush: APPEND over IMAP → file in inbound/email/, with
//     `courier serve` in IDLE, beside a bare IDLE client on the same
//     folder (Dovecot's own notification delay, the floor).
//   - BenchmarkSend: 1,000 drafts delivered by `courier serve` to Postfix's
//     smtp-sink (a backlog, then a burst queued while it runs) against
//     msmtp sending the same 1,000 messages, a process each; and the
//     queued → accepted latency of drafts queued by `courier send`.
//
// They drive the real binary and real servers (internal/testutil), ignore
// b.N and do their own repetitions (those after BenchmarkFetch over
// min(-runs, 3) rounds, interleaved by benchutil.Interleave): run them
// once each,
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 60m ./bench/emailbench -args -runs 5
//
// or bench/email.sh, which builds the binary, runs them and prints the
// table of figures, baselines, ratios and targets. The package holds only
// tests: no production code imports it.
package emailbench
