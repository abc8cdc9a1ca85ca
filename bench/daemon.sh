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
# Usage: bench/daemon.sh [N]   (default 20)
set -euo pipefail
N=${1:-20}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-bench.XXXXXX")
trap '"$work/courier" --root "$work/ws" stop --force >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
c() { "$work/courier" --root "$work/ws" "$@"; }
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END{printf "%.4f", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

c init >/dev/null
web=$(free)
cat >"$work/ws/.monoco/config/courier.yaml" <<EOF
courier:
  http: {listen: 127.0.0.1:$web}
  adapters:
    email: {enabled: true, receiver: {smtp: 127.0.0.1:$(free)}}
EOF

: >"$work/start.cli" >"$work/stop.cli" >"$work/start.sh" >"$work/stop.sh"
for _ in $(seq "$N"); do
  t0=$(now); c start >/dev/null; t1=$(now)
  echo "$t1 - $t0" | bc >>"$work/start.cli"
  t0=$(now); c stop >/dev/null; t1=$(now)
  echo "$t1 - $t0" | bc >>"$work/stop.cli"

  t0=$(now)
  setsid "$work/courier" --root "$work/ws" serve --log-file "$work/ws/.monoco/logs/courier.log" </dev/null >>"$work/ws/.monoco/logs/courier.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$web/health" 2>/dev/null | grep -q started_at; do sleep 0.05; done
  t1=$(now)
  echo "$t1 - $t0" | bc >>"$work/start.sh"
  t0=$(now)
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  t1=$(now)
  wait "$pid" 2>/dev/null || true
  echo "$t1 - $t0" | bc >>"$work/stop.sh"
done

sc=$(median <"$work/start.cli"); ss=$(median <"$work/start.sh")
pc=$(median <"$work/stop.cli"); ps=$(median <"$work/stop.sh")
printf '%-8s %22s %34s %8s\n' "" "courier start|stop (s)" "serve & + curl|kill loop (s)" "ratio"
printf '%-8s %22s %34s %8s\n' start "$sc" "$ss" "$(ratio "$sc" "$ss")"
printf '%-8s %22s %34s %8s\n' stop "$pc" "$ps" "$(ratio "$pc" "$ps")"
echo "(median of $N cycles; ratio < 1: courier's verbs are faster)"
