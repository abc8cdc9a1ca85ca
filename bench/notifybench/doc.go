// Package notifybench holds the wake-up benchmark of issue 12: how soon a
// courier.notify hook starts once a message is durable, measured in one
// run through the real `courier serve`:
//
//   - BenchmarkMessageToHook: -messages mails handed one at a time to the
//     SMTP receiver. For each, from the moment the client starts the
//     transaction: the 250 reply (the file is durable and indexed: the
//     time to the durable file), the POST of a url hook reaching an HTTP
//     server in this process, and an exec hook (a shell script writing the
//     id into a FIFO this process reads) starting. Beside them, in the
//     same run, the tool a user would otherwise use to be woken: an
//     fsnotify (inotify) watcher on inbound/email/ in this process, which
//     sees the file's rename. Reported as p50 and p99, and as ratios to
//     the time to the durable file, each percentile's median (min-max)
//     over -rounds rounds in fresh workspaces (-before: another build's
//     rounds interleaved).
//
// It drives the real binary and ignores b.N: run it once,
//
//	go test -run '^$' -bench . -benchtime 1x ./bench/notifybench
//
// or bench/notify.sh, which prints the table. The package holds only tests.
package notifybench
