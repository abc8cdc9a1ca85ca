#!/usr/bin/env bash
# Issue 12 benchmark: how soon a courier.notify hook starts once a mail is
# durable, through the real `courier serve`, in one run: a mail handed to
# the SMTP receiver -> the 250 (the file durable), a url hook's POST, an
# exec hook's start, and, beside them, an inotify watcher on inbound/ (what
# a user would otherwise run to be woken), p50 and p99, as ratios to the
# time to the durable file; and the hooks' own share (from the 250 to the
# hook's start), whose target is p99 under a second. ROUNDS rounds, each
# in a fresh workspace created before the first timed run (after an untimed
# warm-up), nothing deleted until the end; each percentile is given as the
# median (min-max) over the rounds, with the load average before and
# after. The benchmark is Go code in bench/notifybench.
#
# Usage: bench/notify.sh            MESSAGES=500 ROUNDS=3 (defaults; MESSAGES a round)
#        BEFORE=path/to/courier     another build, its rounds interleaved with this one's
set -euo pipefail
MESSAGES=${MESSAGES:-500}
ROUNDS=${ROUNDS:-3}
BEFORE=${BEFORE:-}
cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-notifybench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go test -c -o "$work/notifybench.test" ./bench/notifybench
: >"$work/rows.tsv"
bench_header "MESSAGES=$MESSAGES ROUNDS=$ROUNDS${BEFORE:+ BEFORE=$BEFORE}"
(cd bench/notifybench && "$work/notifybench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 30m \
  -courier "$work/courier" -before "$BEFORE" -rounds "$ROUNDS" -messages "$MESSAGES" -out "$work/rows.tsv")
echo "== load average after $(loadavg)"
echo
bench_table "$work/rows.tsv"
