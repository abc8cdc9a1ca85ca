// Package mcpbench holds the MCP benchmarks of issue 12, each measured
// beside what an agent would otherwise run, in the same run, on the same
// mailbox (made by bench/genmailbox through the real write path):
//
//   - BenchmarkList: the MCP tool list (all) over -messages messages,
//     paged at each of -limits on an open `courier mcp` session over
//     stdio of the official TypeScript SDK's client
//     (cmd/courier/testdata/mcpconformance/tslist.cjs), beside `courier
//     list --all --format json`, a process, which is what an agent
//     without MCP runs for the same answer: the two interleaved, -runs
//     times, in a mailbox made before timing; min, median and max, and
//     the median of the runs' ratios of wall time and of CPU time (the
//     client's and the server's against the process's).
//   - BenchmarkRead: -reads calls of the MCP tool read over one stdio
//     session, calls per second, beside as many `courier read ID`
//     processes run one after another: an agent without MCP shells out
//     once a read, so a process a read is the fair baseline (the CLI in
//     one process would be `courier read ID...`, which no agent reading
//     one message at a time, as it decides, can use).
//
// They drive the real binary and ignore b.N: run them once each,
//
//	go test -run '^$' -bench . -benchtime 1x -timeout 30m ./bench/mcpbench
//
// or bench/mcp.sh, which prints the table. The package holds only tests.
package mcpbench
