#!/usr/bin/env bash
# The web viewer's benchmark, through the real `courier serve` over a
# mailbox of N generated messages (bench/genmailbox): the inbox page (the
# first, one 20 pages deep, a filtered one) and search, p50 and p99 of the
# time to the last byte on loopback, beside `courier list --limit 50` over
# the same mailbox; how long the service takes to fill the search index;
# and the time from a mail handed to the SMTP receiver (which makes the
# file durable before its 250) to its Server-Sent Event in /ui/events. The benchmark is Go code in
# bench/webbench.
#
# Usage: bench/web.sh [N]        (default 100000; REQUESTS=200, LIVE=100)
set -euo pipefail
N=${1:-100000}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-webbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/genmailbox" ./bench/genmailbox
go test -c -o "$work/webbench.test" ./bench/webbench
: >"$work/rows.tsv"
cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3)"
echo "== N=$N, load average $(cut -d' ' -f1-3 /proc/loadavg)"
(cd bench/webbench && TMPDIR="$work" "$work/webbench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 60m \
  -courier "$work/courier" -genmailbox "$work/genmailbox" -n "$N" -requests "${REQUESTS:-200}" -live "${LIVE:-100}" -out "$work/rows.tsv")
echo
awk -F'\t' '
  BEGIN { print "| measure | courier | against | ratio | target | met |"; print "|---|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }
' "$work/rows.tsv"
