#!/usr/bin/env bash
# Issue 11 benchmarks: Courier's Lark paths, each beside the bare oapi-sdk-go
# program a user would otherwise write, against the same fake Lark, in
# one run, reported as ratios:
#   1. a long-connection event -> a durable file (courier serve, debounce off),
#      p50 and p99 over EVENTS events, against an oapi-sdk-go ws handler
#      that writes the JSON, fsyncs and acks;
#   2. REPLIES drafts queued -> sent as replies by courier serve,
#      against the SDK's Im.Message.Reply in a loop.
# The benchmarks are Go code in bench/larkbench; this script builds the
# binary, runs them once each and prints the table.
#
# Usage: bench/lark.sh            EVENTS=5000 REPLIES=1000 (defaults)
set -euo pipefail
EVENTS=${EVENTS:-5000}
REPLIES=${REPLIES:-1000}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-larkbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go test -c -o "$work/larkbench.test" ./bench/larkbench
: >"$work/rows.tsv"
cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3)"
echo "== EVENTS=$EVENTS REPLIES=$REPLIES, load average $(cut -d' ' -f1-3 /proc/loadavg)"
(cd bench/larkbench && "$work/larkbench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 30m \
  -courier "$work/courier" -events "$EVENTS" -replies "$REPLIES" -out "$work/rows.tsv")
echo
awk -F'\t' '
  BEGIN { print "| measure | courier | baseline | ratio | target | met |"; print "|---|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }
' "$work/rows.tsv"
