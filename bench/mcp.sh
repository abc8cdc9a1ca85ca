#!/usr/bin/env bash
# The MCP server beside what an agent would otherwise run, on the same
# mailbox, in one run, reported as ratios:
#   1. the MCP tool list (all) over each of MESSAGES messages, paged at
#      each of LIMITS (0: the tool's default) on an open `courier mcp`
#      stdio session of the official TypeScript SDK's client, against
#      `courier list --all --format json`, a process, run before each
#      paging: the two sides interleaved, RUNS times, min/median/max, and
#      the ratio of CPU times (client and server against the process),
#      which the machine's load moves less than wall times; and a fifth
#      column, the process and then node's JSON.parse of what it printed
#      (in the client's process), what a consumer of the CLI's JSON spends;
#   2. READS MCP read calls over one stdio session (the go-sdk's client),
#      calls per second, against `courier read ID` run as a process a read
#      (an agent without MCP shells out once a read), on the first mailbox.
# Each mailbox is made by bench/genmailbox through the real write path
# before anything is timed, and nothing is deleted until the end. The
# TypeScript SDK is the one cmd/courier/testdata/mcpconformance pins
# (npm ci there, which this script runs when it is missing). The
# benchmarks are Go code in bench/mcpbench; this script builds the
# binaries, runs them and prints the table, with the load average before
# and after each mailbox.
#
# Usage: bench/mcp.sh   MESSAGES="30000 100000" LIMITS=0,1000,5000,10000 READS=1000 RUNS=5 (defaults)
#        COURIER=path   measure that courier binary (another build) instead of this tree's
set -euo pipefail
MESSAGES=${MESSAGES:-30000 100000}
LIMITS=${LIMITS:-0,1000,5000,10000}
READS=${READS:-1000}
RUNS=${RUNS:-5}
cd "$(dirname "$0")/.."
tsdir=cmd/courier/testdata/mcpconformance
if [ ! -x "$tsdir/node_modules/.bin/node" ]; then
  npm ci --prefix "$tsdir" --no-audit --no-fund --loglevel=error >/dev/null
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-mcpbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -n "${COURIER:-}" ]; then
  cp "$COURIER" "$work/courier"
else
  go build -o "$work/courier" ./cmd/courier
fi
go build -o "$work/genmailbox" ./bench/genmailbox
go test -c -o "$work/mcpbench.test" ./bench/mcpbench
: >"$work/rows.tsv"
cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3), node $("$tsdir/node_modules/.bin/node" --version)"
echo "== MESSAGES=\"$MESSAGES\" LIMITS=$LIMITS READS=$READS RUNS=$RUNS"
bench='List|Read'
for n in $MESSAGES; do
  mkdir -p "$work/$n"
  echo "== $n messages: load average before $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd bench/mcpbench && TMPDIR="$work/$n" "$work/mcpbench.test" -test.run '^$' -test.bench "$bench" -test.benchtime 1x -test.timeout 120m \
    -courier "$work/courier" -genmailbox "$work/genmailbox" \
    -messages "$n" -limits "$LIMITS" -reads "$READS" -runs "$RUNS" -out "$work/rows.tsv" >"$work/$n.log") ||
    { cat "$work/$n.log"; exit 1; }
  echo "== $n messages: load average after $(cut -d' ' -f1-3 /proc/loadavg)"
  bench='List'
done
echo
awk -F'\t' '
  BEGIN { print "| measure | Courier over MCP | baseline | ratio | the baseline and node'"'"'s JSON.parse of its output; ratio |"; print "|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }
' "$work/rows.tsv"
