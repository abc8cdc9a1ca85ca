#!/usr/bin/env bash
# Issue 9 benchmark, items 2 and 3: what clients can make the embedded
# SMTP receiver hold, measured on `courier serve` as built now ("after")
# beside Courier built at BASE (before the receiver's limits), in one
# table. Loopback only (127.0.0.0/8); every class starts a fresh
# workspace and `courier serve` under GNU time (peak RSS), then:
#   quiet      5 warm-up mails, then MAILS real mails from 127.0.0.1, one
#              session each, one after the other: latency p50/p95 (dial to
#              the 250 that ends DATA)
#   slowloris  the same warm-up, then N slow clients from IPS addresses
#              (127.1.x.y; half trickle a command one byte every 3 s, half
#              send a NOOP a minute; a client refused or closed reconnects
#              2.5-7.5 s later), 15 s for them to settle, then the MAILS
#              real mails while they hang on; courier's open files sampled
#   fdlimit    the slowloris class with `courier serve` limited to FDS
#              (1,024) open files, the way issue 9's 19,980 clients ran the
#              process out of them, at a tenth of the scale: how many of 5
#              real mails are delivered (a mail not delivered within 20 s
#              counts as failed)
#   longline   10 clients at once, each a NOOP then a 140 MB command line
#              without a newline (issue 9: 3.6 GB RSS)
#   rcpts      100 sessions at once, each naming 1,000 recipients of 4 KB
#              and holding them
#   listener   issue 18, item 6: PROBES (10) rounds, 3 s apart, of GET
#              /health and POST /webhook/slack on the HTTP listener, quiet
#              and then with LN (140) loopback clients each holding a POST
#              /webhook/slack with Content-Length: 100 and one byte of body
#              (a client closed reconnects 1 s later); then PROBES rounds
#              of GET /v1/whoami and POST /v1/claim on the agent socket,
#              as uid 65534 (nobody; the bench opens the workspace's
#              folders and socket to it), with SN (64) such clients of
#              this user on it. A request counts as answered with any
#              status but 503 within 10 s (the bench workspace has no
#              Slack adapter: the webhook's answer is a 404, which the
#              listener had to get to; the claim's is "not found")
# The slowloris latency is also given as a ratio to the quiet one.
#
# Usage: bench/slowloris.sh                      (about 5 minutes)
#        N=2000 IPS=200 MAILS=50 FDS=1024 BASE=9a4e235 CLASSES="quiet slowloris fdlimit longline rcpts" bench/slowloris.sh
#        BASE=bf1eeba CLASSES=listener bench/slowloris.sh          (about 12 minutes)
# The two builds alternate class by class (the order swapping each class),
# each in a fresh workspace, nothing deleted until the end; the load
# average is printed before and after each class.
# Needs GNU time (/usr/bin/time; Debian package time) and git. The slow
# clients need N file descriptors, and Courier at BASE as many: the
# script raises the soft limit to the hard one (ulimit -n).
set -euo pipefail
BASE=${BASE:-9a4e235}
N=${N:-2000}
IPS=${IPS:-200}
MAILS=${MAILS:-50}
FDS=${FDS:-1024}
LN=${LN:-140}
SN=${SN:-64}
PROBES=${PROBES:-10}
CLASSES=${CLASSES:-"quiet slowloris fdlimit longline rcpts"}
cd "$(dirname "$0")/.."
. bench/lib.sh
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d "${TMPDIR:-/tmp}/courier-slowbench.XXXXXX")
servepid="" holdpid=""
cleanup() {
  [ -n "$holdpid" ] && kill "$holdpid" 2>/dev/null || true
  [ -n "$servepid" ] && kill -TERM "$servepid" 2>/dev/null || true
  git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/after" "$work/base"
go build -o "$work/after/courier" ./cmd/courier
go build -o "$work/slowbench" ./bench/slowbench
git worktree add --detach "$work/base-src" "$BASE" >/dev/null 2>&1
(cd "$work/base-src" && go build -o "$work/base/courier" ./cmd/courier)
git worktree remove --force "$work/base-src" >/dev/null 2>&1

echo "== $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(go version | cut -d' ' -f3), ulimit -n $(ulimit -n); base $(git rev-parse --short "$BASE"), after $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+working tree')"
echo "== N=$N IPS=$IPS MAILS=$MAILS"

rows="$work/rows.tsv"
: >"$rows"
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$rows"; } # class measure side value
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }            # field NAME LINE

# start SIDE CLASS [FDS]: a fresh workspace and `courier serve` under GNU
# time (with at most FDS open files).
start() {
  local side=$1 class=$2 fds=${3:-}
  ws="$work/ws-$side-$class"
  mkdir -p "$ws"
  "$work/$side/courier" --root "$ws" init >/dev/null
  smtp=127.0.0.1:$("$work/slowbench" port)
  web=127.0.0.1:$("$work/slowbench" port)
  cat >"$ws/.monoco/config/courier.yaml" <<EOF
courier:
  http: {listen: $web}
  adapters:
    email:
      enabled: true
      receiver: {smtp: "$smtp"}
EOF
  (
    [ -n "$fds" ] && ulimit -n "$fds"
    exec "$TIME" -f %M -o "$work/rss" "$work/$side/courier" --root "$ws" serve >"$work/serve.log" 2>&1
  ) &
  timepid=$!
  for _ in $(seq 100); do
    servepid=$(pgrep -P "$timepid" || true)
    [ -n "$servepid" ] && grep -q 'courier is serving' "$work/serve.log" && return
    sleep 0.1
  done
  echo "bench: courier serve did not start:" >&2; cat "$work/serve.log" >&2; exit 1
}

# stop SIDE CLASS: SIGTERM, and the peak RSS row.
stop() {
  kill -TERM "$servepid"
  wait "$timepid" || true
  servepid=""
  row "$2" "courier serve: peak RSS (MB)" "$1" "$(awk '{v=$1} END {printf "%.0f", v/1024}' "$work/rss")"
}

# attack SLOWBENCH-ARGS...: 5 warm-up mails, then N slow clients; once they
# have settled, slowbench with the arguments given (its output in $out)
# while they hang on; courier's open files sampled all along.
attack() {
  "$work/slowbench" mail -addr "$smtp" -n 5 -tag warm >/dev/null
  : >"$work/fds"
  ( while kill -0 "$servepid" 2>/dev/null; do ls "/proc/$servepid/fd" 2>/dev/null | wc -l >>"$work/fds"; sleep 0.5; done ) &
  local fdpid=$!
  hold slow -addr "$smtp" -n "$N" -ips "$IPS" -trickle 3s -noop 1m -retry 5s -settle 15s
  local cmd=$1
  shift
  out=$("$work/slowbench" "$cmd" -addr "$smtp" "$@")
  echo "   $out"
  unhold
  kill "$fdpid" 2>/dev/null || true
}

# hold SLOWBENCH-ARGS...: slowbench with the arguments given, until
# unhold; once it is ready.
hold() {
  mkfifo "$work/hold"
  sleep infinity >"$work/hold" &
  holdpid=$!
  : >"$work/slow.out"
  "$work/slowbench" "$@" <"$work/hold" >"$work/slow.out" &
  slowpid=$!
  until grep -q '^ready' "$work/slow.out"; do
    kill -0 "$slowpid" 2>/dev/null || { echo "bench: slowbench $1 ended:" >&2; cat "$work/slow.out" >&2; exit 1; }
    sleep 0.5
  done
  echo "   $(grep '^ready' "$work/slow.out")"
}

unhold() {
  kill "$holdpid"
  holdpid=""
  wait "$slowpid" || true
  rm -f "$work/hold"
  echo "   $(grep '^done' "$work/slow.out")"
}

# listener SIDE: the listener class's rows.
listener() {
  local side=$1 sock="$ws/.monoco/run/courier.sock" probe=("$work/slowbench" probe -n "$PROBES" -every 3s -giveup 10s)
  out=$("${probe[@]}" -net tcp -addr "$web")
  echo "   quiet: $out"
  row listener "/health p50 (ms), quiet" "$side" "$(field get_p50_ms "$out")"
  hold bodies -net tcp -addr "$web" -path /webhook/slack -n "$LN"
  out=$("${probe[@]}" -net tcp -addr "$web")
  echo "   $out"
  unhold
  row listener "/health p50 (ms), $LN slow bodies" "$side" "$(field get_p50_ms "$out")"
  row listener "/health max (ms), $LN slow bodies" "$side" "$(field get_max_ms "$out")"
  row listener "/health answered of $PROBES, $LN slow bodies" "$side" "$(field get_answered "$out")"
  row listener "webhook answered of $PROBES, $LN slow bodies" "$side" "$(field post_answered "$out")"
  # Another user than the slow clients' reaches the socket.
  chmod 755 "$work" "$ws" "$ws/.monoco" "$ws/.monoco/run"
  chmod 666 "$sock"
  hold bodies -net unix -addr "$sock" -path /v1/claim -n "$SN"
  out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "${probe[@]}" -net unix -addr "$sock" -get /v1/whoami -post /v1/claim)
  echo "   $out"
  unhold
  row listener "socket whoami p50 (ms), $SN slow bodies" "$side" "$(field get_p50_ms "$out")"
  row listener "socket whoami max (ms), $SN slow bodies" "$side" "$(field get_max_ms "$out")"
  row listener "socket claim answered of $PROBES, $SN slow bodies" "$side" "$(field post_answered "$out")"
}

k=0
for class in $CLASSES; do
  if [ $((k % 2)) -eq 0 ]; then order="base after"; else order="after base"; fi
  k=$((k + 1))
  for side in $order; do
    echo "== $side $class, load average before $(loadavg)"
    if [ "$class" = fdlimit ]; then start "$side" "$class" "$FDS"; else start "$side" "$class"; fi
    case $class in
      quiet)
        "$work/slowbench" mail -addr "$smtp" -n 5 -tag warm >/dev/null
        out=$("$work/slowbench" mail -addr "$smtp" -n "$MAILS" -tag quiet)
        echo "   $out"
        row quiet "real mail p50 (ms)" "$side" "$(field p50_ms "$out")"
        row quiet "real mail p95 (ms)" "$side" "$(field p95_ms "$out")"
        ;;
      slowloris)
        attack mail -n "$MAILS" -tag slow
        row slowloris "real mail p50 (ms)" "$side" "$(field p50_ms "$out")"
        row slowloris "real mail p95 (ms)" "$side" "$(field p95_ms "$out")"
        row slowloris "real mail: 4xx answers (retried)" "$side" "$(field refusals "$out")"
        row slowloris "courier serve: open files, peak" "$side" "$(sort -n "$work/fds" | tail -1)"
        ;;
      fdlimit)
        attack mail -n 5 -tag fd -giveup 20s
        row fdlimit "real mails delivered of 5" "$side" "$(field delivered "$out")"
        row fdlimit "courier serve: open files, peak" "$side" "$(sort -n "$work/fds" | tail -1)"
        ;;
      longline)
        out=$("$work/slowbench" longline -addr "$smtp" -n 10 -size $((140 << 20)))
        echo "   $out"
        row longline "octets the clients got to send (MB)" "$side" "$(field sent_mb "$out")"
        ;;
      listener)
        listener "$side"
        ;;
      rcpts)
        out=$("$work/slowbench" rcpts -addr "$smtp" -n 100 -rcpts 1000 -len 4000)
        echo "   $out"
        row rcpts "recipients taken" "$side" "$(field recipients_taken "$out")"
        ;;
    esac
    stop "$side" "$class"
    awk -F'\t' -v c="$class" -v s="$side" '$1 == c && $3 == s {printf "   %-40s %s\n", $2, $4}' "$rows"
    echo "   load average after $(loadavg)"
  done
done

echo
echo "| class | measure | base | after | after/base |"
echo "|---|---|---|---|---|"
awk -F'\t' '
  { k = $1 "\t" $2; if (!(k in seen)) { seen[k] = 1; order[++n] = k } v[k "\t" $3] = $4 }
  END {
    for (i = 1; i <= n; i++) {
      split(order[i], p, "\t")
      b = v[order[i] "\tbase"]; a = v[order[i] "\tafter"]
      r = (b + 0 > 0 && a != "") ? sprintf("%.3f", a / b) : "n/a"
      printf "| %s | %s | %s | %s | %s |\n", p[1], p[2], (b == "" ? "-" : b), (a == "" ? "-" : a), r
    }
    for (s = 1; s <= 2; s++) {
      side = (s == 1 ? "base" : "after")
      for (q = 50; q <= 95; q += 45) {
        m = "real mail p" q " (ms)"
        l = v["slowloris\t" m "\t" side]; z = v["quiet\t" m "\t" side]
        if (l != "" && z + 0 > 0) printf "| slowloris/quiet | %s, %s | | | %.2f |\n", m, side, l / z
      }
    }
  }' "$rows"
