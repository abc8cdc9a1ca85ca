#!/usr/bin/env bash
# Issue 12 benchmark: how soon a courier.notify hook starts once a mail is
# durable, through the real `courier serve`, in one run: a mail handed to
# the SMTP receiver -> the 250 (the file durable), a url hook's POST, an
# exec hook's start, and, beside them, an inotify watcher on inbound/ (what
# a user would otherwise run to be woken), p50 and p99, as ratios to the
# time to the durable file. The benchmark is Go code in bench/notifybench.
#
# Usage: bench/notify.sh            MESSAGES=500 (default)
set -euo pipefail
MESSAGES=${MESSAGES:-500}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-notifybench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go test -c -o "$work/notifybench.test" ./bench/notifybench
: >"$work/rows.tsv"
cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3)"
echo "== MESSAGES=$MESSAGES, load average $(cut -d' ' -f1-3 /proc/loadavg)"
(cd bench/notifybench && "$work/notifybench.test" -test.run '^$' -test.bench . -test.benchtime 1x -test.timeout 30m \
  -courier "$work/courier" -messages "$MESSAGES" -out "$work/rows.tsv")
echo
awk -F'\t' '
  BEGIN { print "| measure | courier | against | ratio | target | met |"; print "|---|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }
' "$work/rows.tsv"
