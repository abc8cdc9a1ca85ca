#!/usr/bin/env bash
# Issue 10 benchmarks: Courier's Slack paths, each beside the bare slack-go
# program a user would otherwise write, against the same fake Slack, in
# one run, reported as ratios:
#   1. a Socket Mode event -> a durable file (courier serve, debounce off),
#      p50 and p99 over EVENTS events, against a slack-go socketmode handler
#      that writes the JSON, fsyncs and acks;
#   2. REPLIES drafts queued -> posted in their threads by courier serve,
#      against slack-go's PostMessage in a loop.
# The two sides interleave over ROUNDS rounds (the order rotating each
# round, after an untimed warm-up of each), each run against a fresh fake
# in a folder of its own created before the first timed run, nothing
# deleted until the end; each percentile and time is given as the median
# (min-max) over the rounds, with the load average before and after. The
# event p99 has a target: under 20 ms.
# The benchmarks are Go code in bench/slackbench; this script builds the
# binary, runs them and prints the table.
#
# Usage: bench/slack.sh            EVENTS=5000 REPLIES=1000 ROUNDS=3 (defaults; EVENTS and REPLIES a round)
#        BEFORE=path/to/courier  another build, run as a third side (a before/after in one run)
set -euo pipefail
EVENTS=${EVENTS:-5000}
REPLIES=${REPLIES:-1000}
ROUNDS=${ROUNDS:-3}
BEFORE=${BEFORE:-}
cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-slackbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go test -c -o "$work/slackbench.test" ./bench/slackbench
: >"$work/rows.tsv"
bench_header "EVENTS=$EVENTS REPLIES=$REPLIES ROUNDS=$ROUNDS${BEFORE:+ BEFORE=$BEFORE}"
(cd bench/slackbench && "$work/slackbench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 60m \
  -courier "$work/courier" -before "$BEFORE" -rounds "$ROUNDS" -events "$EVENTS" -replies "$REPLIES" -out "$work/rows.tsv")
echo "== load average after $(loadavg)"
echo
bench_table "$work/rows.tsv"
