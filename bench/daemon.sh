#!/usr/bin/env bash
# Issue 12, item 3: what `courier start` and `courier stop` cost beside
# what a user scripts without them, in one run, median of N cycles each:
#   - start: `courier start` (returns once the service said READY=1)
#     against `setsid courier serve ... &` then curl /health every 50 ms
#     until it says the service started;
#   - stop: `courier stop` (SIGTERM, then a pidfd says when it ended)
#     against `kill -TERM` then `kill -0` every 50 ms until it is gone.
# The service is the embedded default's email receiver and nothing to
# connect to, so the figures are Courier's own start and stop.
# The sides alternate cycle by cycle (the order swapping each cycle, after
# an untimed cycle of each), on one workspace (a start and a stop write
# only a few files); each figure is the median (min-max) of the N cycles,
# with the load average before and after.
# Usage: bench/daemon.sh [N]   (default 20)
#        BEFORE=path/to/courier  another build's start and stop, as a third side
set -euo pipefail
N=${1:-20}
BEFORE=${BEFORE:-}
cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-bench.XXXXXX")
trap '"$work/courier" --root "$work/ws" stop --force >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/membench" ./bench/membench
c() { "$work/courier" --root "$work/ws" "$@"; }
now() { date +%s.%N; }
free() { "$work/membench" port; }

c init >/dev/null
web=$(free)
cat >"$work/ws/.monoco/config/courier.yaml" <<EOF
courier:
  http: {listen: 127.0.0.1:$web}
  adapters:
    email: {enabled: true, receiver: {smtp: 127.0.0.1:$(free)}}
EOF

: >"$work/start.cli" >"$work/stop.cli" >"$work/start.sh" >"$work/stop.sh" >"$work/start.before" >"$work/stop.before"
# verbs BIN SUFFIX: one start and one stop by BIN's own verbs.
verbs() {
  local t0 t1
  t0=$(now); "$1" --root "$work/ws" start >/dev/null; t1=$(now)
  elapsed "$t0" "$t1" >>"$work/start.$2"
  t0=$(now); "$1" --root "$work/ws" stop >/dev/null; t1=$(now)
  elapsed "$t0" "$t1" >>"$work/stop.$2"
}
# script: one start and one stop as a user scripts them.
script() {
  local t0 t1 pid
  t0=$(now)
  setsid "$work/courier" --root "$work/ws" serve --log-file "$work/ws/.monoco/logs/courier.log" </dev/null >>"$work/ws/.monoco/logs/courier.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$web/health" 2>/dev/null | grep -q started_at; do sleep 0.05; done
  t1=$(now)
  elapsed "$t0" "$t1" >>"$work/start.sh"
  t0=$(now)
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  t1=$(now)
  wait "$pid" 2>/dev/null || true
  elapsed "$t0" "$t1" >>"$work/stop.sh"
}
sides=("verbs $work/courier cli" script)
[ -z "$BEFORE" ] || sides+=("verbs $BEFORE before")
for s in "${sides[@]}"; do $s; done # the warm-up, not counted
for f in "$work"/start.* "$work"/stop.*; do : >"$f"; done
bench_header "N=$N${BEFORE:+ BEFORE=$BEFORE}"
for i in $(seq 0 $((N - 1))); do
  for k in $(seq 0 $((${#sides[@]} - 1))); do
    ${sides[$(((i + k) % ${#sides[@]}))]}
  done
done
echo "== load average after $(loadavg)"

printf '%-8s %-32s %-32s %8s\n' "" "courier start|stop (s)" "serve & + curl|kill loop (s)" "ratio"
for v in start stop; do
  printf '%-8s %-32s %-32s %8s\n' "$v" "$(spread "$work/$v.cli")" "$(spread "$work/$v.sh")" "$(ratio "$(median "$work/$v.cli")" "$(median "$work/$v.sh")")"
  [ -z "$BEFORE" ] || printf '%-8s %-32s %-32s %8s\n' "  before" "$(spread "$work/$v.before")" "" "$(ratio "$(median "$work/$v.before")" "$(median "$work/$v.sh")")"
done
echo "(median (min-max) of $N cycles; ratio < 1: courier's verbs are faster)"
