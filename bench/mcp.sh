#!/usr/bin/env bash
# Issue 12 benchmarks: the MCP server beside what an agent would otherwise
# run, on the same mailbox, in one run, reported as ratios:
#   1. the MCP tool list (all) over MESSAGES messages, paged 10,000 at a
#      time on an open `courier mcp` stdio session, against `courier list
#      --all --format json`, a process (medians of RUNS);
#   2. READS MCP read calls over one stdio session, calls per second,
#      against `courier read ID` run as a process a read (an agent without
#      MCP shells out once a read).
# The mailbox is made by bench/genmailbox through the real write path. The
# benchmarks are Go code in bench/mcpbench (the go-sdk's client); this
# script builds the binaries, runs them once each and prints the table.
#
# Usage: bench/mcp.sh            MESSAGES=100000 READS=1000 RUNS=5 (defaults)
set -euo pipefail
MESSAGES=${MESSAGES:-100000}
READS=${READS:-1000}
RUNS=${RUNS:-5}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-mcpbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/genmailbox" ./bench/genmailbox
go test -c -o "$work/mcpbench.test" ./bench/mcpbench
: >"$work/rows.tsv"
cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3)"
echo "== MESSAGES=$MESSAGES READS=$READS RUNS=$RUNS, load average $(cut -d' ' -f1-3 /proc/loadavg)"
(cd bench/mcpbench && TMPDIR="$work" "$work/mcpbench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 60m \
  -courier "$work/courier" -genmailbox "$work/genmailbox" -messages "$MESSAGES" -reads "$READS" -runs "$RUNS" -out "$work/rows.tsv")
echo
awk -F'\t' '
  BEGIN { print "| measure | courier | baseline | ratio |"; print "|---|---|---|---|" }
  { printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }
' "$work/rows.tsv"
