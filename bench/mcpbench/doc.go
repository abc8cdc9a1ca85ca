// Package mcpbench holds the MCP benchmarks of issue 12, each measured
// beside what an agent would otherwise run, in the same run, on the same
// mailbox (made by bench/genmailbox through the real write path):
//
//   - BenchmarkList: the MCP tool list (all, limit 100,000) over -messages
//     messages, one call on an open `courier mcp` session over stdio (the
//     go-sdk's client), beside `courier list --all --format json`, a
//     process, which is what an agent without MCP runs for the same
//     answer. Medians of -runs.
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
