#!/usr/bin/env bash
# Issue 9, item 8: what it costs agents that the service is the only
# writer. The writing verbs as an agent runs them (one process each),
# acting on the mailbox itself (the baseline: what every verb did before)
# beside the same verbs through the running service's socket, in one run:
#   - claim + done of one message, over N pairs;
#   - send of a quick text, over N sends;
#   - send of a draft with a 100 MB artifact: wall time, peak RSS of the
#     command line, and what the service's peak RSS grew by (the artifact
#     is streamed through the socket, never held).
# The two sides interleave over ROUNDS rounds (the order swapping each
# round, after an untimed warm-up of each), each run in a workspace of its
# own made before the first timed run, nothing deleted until the end; each
# figure is the median (min-max) over the rounds, with the load average.
# Usage: bench/agents.sh [N]   (default 100; ROUNDS=3)
set -euo pipefail
N=${1:-100}
ROUNDS=${ROUNDS:-3}
cd "$(dirname "$0")/.."
. bench/lib.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-bench.XXXXXX")
serve_pid=
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/genmailbox" ./bench/genmailbox
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
now() { date +%s.%N; }
go build -o "$work/membench" ./bench/membench
port=$("$work/membench" port)
head -c 100000000 /dev/urandom >"$work/big.bin"

# Every workspace, made before anything is timed: ws.SIDE.ROUND (round 0
# is the warm-up), each with N messages and the 100 MB draft.
for side in direct service; do
  for i in $(seq 0 "$ROUNDS"); do
    ws="$work/ws.$side.$i"
    "$work/genmailbox" -root "$ws" -n "$N" >/dev/null
    cat >"$ws/.monoco/config/courier.yaml" <<EOF
courier:
  http: {listen: 127.0.0.1:$port}
  adapters:
    email: {enabled: true, receiver: {smtp: ""}}
EOF
    mkdir -p "$ws/work"
    cp "$work/big.bin" "$ws/work/big.bin"
    printf -- '---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: big.bin\n---\nThe data.\n' >"$ws/work/big.md"
    "$work/courier" --root "$ws" list --all --format id >"$ws/ids"
  done
done

# pairs WS: seconds per claim+done pair over the N messages of WS.
pairs() {
  local t0 t1
  t0=$(now)
  while read -r id; do
    "$work/courier" --root "$1" claim "$id" --agent bench >/dev/null
    "$work/courier" --root "$1" done "$id" --agent bench >/dev/null
  done <"$1/ids"
  t1=$(now)
  awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN{printf "%.4f\n", (b - a) / n}'
}
# sends WS: seconds per quick send, over N sends.
sends() {
  local t0 t1
  t0=$(now)
  # (each warns that no Lark adapter is enabled to deliver it: not shown)
  for _ in $(seq "$N"); do "$work/courier" --root "$1" send --provider lark --to oc_1 --text "Deployed." >/dev/null 2>&1; done
  t1=$(now)
  awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN{printf "%.4f\n", (b - a) / n}'
}
# big WS: wall seconds and peak RSS (MB) of one send of the 100 MB draft.
big() {
  "$TIME" -f "%e %M" -o "$1/big.time" "$work/courier" --root "$1" send "$1/work/big.md" >/dev/null
  awk '{printf "%s %.1f\n", $1, $2 / 1024}' "$1/big.time"
}
hwm() { awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$serve_pid/status"; }

# run SIDE ROUND: the three measures on ws.SIDE.ROUND, through the service
# when SIDE is service; appended to $work/SIDE.* from round 1.
run() {
  local side=$1 i=$2 ws="$work/ws.$1.$2" out="$work/warm.$1"
  [ "$i" -eq 0 ] || out="$work/$side"
  if [ "$side" = service ]; then
    "$work/courier" --root "$ws" serve --log-format json >"$ws/serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 200); do [ -S "$ws/.monoco/run/courier.sock" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
  fi
  sync
  pairs "$ws" >>"$out.pair"
  sends "$ws" >>"$out.send"
  local before="" after s r
  [ "$side" != service ] || before=$(hwm)
  read -r s r < <(big "$ws")
  echo "$s" >>"$out.big"
  echo "$r" >>"$out.bigrss"
  if [ "$side" = service ]; then
    after=$(hwm)
    awk -v a="$before" -v b="$after" 'BEGIN{printf "%.1f\n", b - a}' >>"$out.grew"
    grep -c '"agent request"' "$ws/serve.log" >>"$out.requests" || true
    kill -TERM "$serve_pid"
    wait "$serve_pid" 2>/dev/null || true
    serve_pid=
  fi
}

bench_header "N=$N ROUNDS=$ROUNDS"
for i in $(seq 0 "$ROUNDS"); do
  if [ $((i % 2)) -eq 0 ]; then order="direct service"; else order="service direct"; fi
  for side in $order; do run "$side" "$i"; done
done
echo "== load average after $(loadavg)"

echo "| | without the service (direct) | through the service's socket | ratio (service / direct) |"
echo "|---|---|---|---|"
row() { echo "| $1 | $(spread "$work/direct.$2" "$3") | $(spread "$work/service.$2" "$3") | $(ratio "$(median "$work/service.$2")" "$(median "$work/direct.$2")")× |"; }
row "claim+done, s a pair" pair %.4f
row "send (text), s" send %.4f
row "send (100 MB artifact), s" big %.2f
row "send (100 MB artifact), command line peak RSS, MB" bigrss %.1f
echo "| the service's peak RSS grew by (MB) | | $(spread "$work/service.grew" %.1f) | |"
echo "(median (min-max) of $ROUNDS rounds; requests the service logged a round: $(tr '\n' ' ' <"$work/service.requests"))"
