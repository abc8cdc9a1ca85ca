#!/usr/bin/env bash
# The web viewer's benchmark, through the real `courier serve` over a
# mailbox of N generated messages (bench/genmailbox): the inbox page (the
# first, one 20 pages deep, a filtered one) and search, p50 and p99 of the
# time to the last byte on loopback, beside `courier list --limit 50` over
# the same mailbox; how long the service takes to fill the search index;
# and the time from a mail handed to the SMTP receiver (which makes the
# file durable before its 250) to its Server-Sent Event in /ui/events. The
# mailbox is made before anything is timed and only read; the measures
# interleave over ROUNDS rounds (the order rotating), each p50 and p99
# given as the median (min-max) over the rounds, with the load average
# before and after. The benchmark is Go code in bench/webbench.
#
# Usage: bench/web.sh [N]        (default 100000; REQUESTS=200 (in all, per measure), ROUNDS=3, LIVE=100)
set -euo pipefail
N=${1:-100000}
cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-webbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/genmailbox" ./bench/genmailbox
go test -c -o "$work/webbench.test" ./bench/webbench
: >"$work/rows.tsv"
bench_header "N=$N ROUNDS=${ROUNDS:-3}"
(cd bench/webbench && TMPDIR="$work" "$work/webbench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 60m \
  -courier "$work/courier" -genmailbox "$work/genmailbox" -n "$N" -requests "${REQUESTS:-200}" -rounds "${ROUNDS:-3}" -live "${LIVE:-100}" -out "$work/rows.tsv")
echo "== load average after $(loadavg)"
echo
bench_table "$work/rows.tsv"
