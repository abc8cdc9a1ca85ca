#!/usr/bin/env bash
# Issue 9, item 8: what it costs agents that the service is the only
# writer. The writing verbs as an agent runs them (one process each),
# acting on the mailbox itself (the baseline: what every verb did before)
# beside the same verbs through the running service's socket, in one run:
#   - claim + done of one message, median of N pairs;
#   - send of a quick text;
#   - send of a draft with a 100 MB artifact: wall time, peak RSS of the
#     command line, and what the service's peak RSS grew by (the artifact
#     is streamed through the socket, never held).
# Usage: bench/agents.sh [N]   (default 100)
set -euo pipefail
N=${1:-100}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-bench.XXXXXX")
serve_pid=
trap '[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/genmailbox" ./bench/genmailbox
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
c() { "$work/courier" --root "$work/ws" "$@"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }
now() { date +%s.%N; }

"$work/genmailbox" -root "$work/ws" -n $((2 * N)) >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$work/ws/.monoco/config/courier.yaml" <<EOF
courier:
  http: {listen: 127.0.0.1:$port}
  adapters:
    email: {enabled: true, receiver: {smtp: ""}}
EOF
mkdir -p "$work/ws/work"
head -c 100000000 /dev/urandom >"$work/ws/work/big.bin"
printf -- '---\nprovider: lark\nto: oc_1\nartifacts:\n  - path: big.bin\n---\nThe data.\n' >"$work/ws/work/big.md"
c list --all --format id | head -n $((2 * N)) >"$work/ids"

# pairs FROM: seconds per claim+done pair over N ids starting at line FROM.
pairs() {
  local t0 t1
  t0=$(now)
  sed -n "$1,$(($1 + N - 1))p" "$work/ids" | while read -r id; do
    c claim "$id" --agent bench >/dev/null
    c done "$id" --agent bench >/dev/null
  done
  t1=$(now)
  awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN{printf "%.4f", (b - a) / n}'
}
# sends: seconds per quick send, over N sends.
sends() {
  local t0 t1
  t0=$(now)
  for _ in $(seq "$N"); do c send --provider lark --to oc_1 --text "Deployed." >/dev/null; done
  t1=$(now)
  awk -v a="$t0" -v b="$t1" -v n="$N" 'BEGIN{printf "%.4f", (b - a) / n}'
}
# big LABEL: wall seconds and peak RSS (MB) of one send of the 100 MB draft.
big() {
  # A new artifact each time, so that it is stored.
  printf '%s' "$1" | dd of="$work/ws/work/big.bin" bs=1 conv=notrunc status=none
  "$TIME" -f "%e %M" -o "$work/big.$1" "$work/courier" --root "$work/ws" send "$work/ws/work/big.md" >/dev/null
  awk '{printf "%s %.1f\n", $1, $2 / 1024}' "$work/big.$1"
}
hwm() { awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$serve_pid/status"; }

echo "== without the service (baseline: the verbs write the mailbox themselves)"
d_pair=$(pairs 1); echo "claim+done: $d_pair s a pair"
d_send=$(sends); echo "send (text): $d_send s"
read -r d_big d_rss < <(big direct); echo "send (100 MB artifact): $d_big s, command line peak RSS $d_rss MB"

echo "== through the service's socket"
"$work/courier" --root "$work/ws" serve --log-format json >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 200); do [ -S "$work/ws/.monoco/run/courier.sock" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
s_pair=$(pairs $((N + 1))); echo "claim+done: $s_pair s a pair"
s_send=$(sends); echo "send (text): $s_send s"
before=$(hwm)
read -r s_big s_rss < <(big service); after=$(hwm)
echo "send (100 MB artifact): $s_big s, command line peak RSS $s_rss MB; service peak RSS $before -> $after MB"
grep -c '"agent request"' "$work/serve.log" | xargs echo "requests the service logged:"

echo "== ratios (service / direct)"
echo "claim+done:              $(ratio "$s_pair" "$d_pair")x"
echo "send (text):             $(ratio "$s_send" "$d_send")x"
echo "send (100 MB artifact):  $(ratio "$s_big" "$d_big")x time, $(ratio "$s_rss" "$d_rss")x command line RSS, service +$(awk -v a="$before" -v b="$after" 'BEGIN{printf "%.1f", b - a}') MB"
