#!/usr/bin/env bash
# Issue 10 benchmarks: Courier's Slack paths, each beside the bare slack-go
# program a user would otherwise write, against the same fake Slack, in
# one run, reported as ratios:
#   1. a Socket Mode event -> a durable file (courier serve, debounce off),
#      p50 and p99 over EVENTS events, against a slack-go socketmode handler
#      that writes the JSON, fsyncs and acks;
#   2. REPLIES drafts queued -> posted in their threads by courier serve,
#      against slack-go's PostMessage in a loop.
# The benchmarks are Go code in bench/slackbench; this script builds the
# binary, runs them once each and prints the table.
#
# Usage: bench/slack.sh            EVENTS=5000 REPLIES=1000 (defaults)
set -euo pipefail
EVENTS=${EVENTS:-5000}
REPLIES=${REPLIES:-1000}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-slackbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go test -c -o "$work/slackbench.test" ./bench/slackbench
: >"$work/rows.tsv"
cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3)"
echo "== EVENTS=$EVENTS REPLIES=$REPLIES, load average $(cut -d' ' -f1-3 /proc/loadavg)"
(cd bench/slackbench && "$work/slackbench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 30m \
  -courier "$work/courier" -events "$EVENTS" -replies "$REPLIES" -out "$work/rows.tsv")
echo
awk -F'\t' '
  BEGIN { print "| measure | courier | baseline | ratio | target | met |"; print "|---|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }
' "$work/rows.tsv"
