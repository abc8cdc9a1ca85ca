#!/usr/bin/env bash
# Issue 2 benchmarks, each beside a baseline, in one run:
#   - the durable inbound write path (messages/s) against a naive writer
#     that makes each file durable on its own;
#   - `courier list --all --format json` over N messages (wall time, peak
#     RSS) against grep reading the id of every file;
#   - `courier reindex` over N messages against cat reading every file.
# The sides interleave (the order rotating each round, after an untimed
# run of each): the writers over WRITES rounds, each into a folder of its
# own created before the first, nothing deleted until the end (deleting
# thousands of files slows the next creations on ext4); list and reindex
# RUNS times over the first round's mailbox. Each figure is the median
# (min-max), with the load average before and after each part.
# Usage: bench/mailbox.sh [N]   (default 100000; NAIVE_N defaults to N/10; RUNS=5, WRITES=3)
#        BEFORE=path/to/courier  another build's list and reindex, as a third side
set -euo pipefail
N=${1:-100000}
NAIVE_N=${NAIVE_N:-$((N / 10))}
RUNS=${RUNS:-5}
WRITES=${WRITES:-3}
BEFORE=${BEFORE:-}
cd "$(dirname "$0")/.."
. bench/lib.sh
[ -x /usr/bin/time ] || { echo "bench: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/genmailbox" ./bench/genmailbox
bench_header "N=$N NAIVE_N=$NAIVE_N RUNS=$RUNS WRITES=$WRITES${BEFORE:+ BEFORE=$BEFORE}"
t="$work/t"
mkdir -p "$t"
for i in $(seq 0 "$WRITES"); do mkdir -p "$work/ws$i" "$work/naive$i"; done

echo "== write path, load average before $(loadavg)"
# Round 0 is the warm-up; the order alternates from round 1.
for i in $(seq 0 "$WRITES"); do
  if [ $((i % 2)) -eq 0 ]; then order="courier naive"; else order="naive courier"; fi
  for side in $order; do
    sync
    if [ "$side" = courier ]; then
      "$work/genmailbox" -root "$work/ws$i" -n "$N" >"$t/w.courier.$i"
    else
      "$work/genmailbox" -root "$work/naive$i" -n "$NAIVE_N" -naive >"$t/w.naive.$i"
    fi
  done
  if [ "$i" -gt 0 ]; then
    grep -o '[0-9]* messages/s' "$t/w.courier.$i" | cut -d' ' -f1 >>"$t/rate.courier"
    grep -o '[0-9]* messages/s' "$t/w.naive.$i" | cut -d' ' -f1 >>"$t/rate.naive"
  fi
done
echo "courier write path:  $(spread "$t/rate.courier" %.0f) messages/s, median (min-max) of $WRITES"
echo "naive writer:        $(spread "$t/rate.naive" %.0f) messages/s"
echo "courier/naive write rate: $(ratio "$(median "$t/rate.courier")" "$(median "$t/rate.naive")")x   (target: >= 2000 messages/s), load average after $(loadavg)"

ws="$work/ws1"
c_list="'$work/courier' --root '$ws' list --all --format json"
b_list="'$BEFORE' --root '$ws' list --all --format json"
grep_ids="grep -r -h -m1 --include='*.md' '^id: ' '$ws/.monoco/mailbox'"
c_reindex="'$work/courier' --root '$ws' reindex"
b_reindex="'$BEFORE' --root '$ws' reindex"
cat_all="find '$ws/.monoco/mailbox' -name '*.md' -print0 | xargs -0 cat"
report() { # LABEL: the figures of one side
  printf '%-36s %s s, peak RSS %s MB\n' "$1" "$(spread "$t/$1.wall" %.2f)" "$(spread "$t/$1.rss" %.0f)"
}
# part NAME RUNS COURIER-CMD BASELINE-LABEL BASELINE-CMD BEFORE-CMD: the
# sides of one measure, alternated, and their figures.
part() {
  local sides=("courier-$1" "$3" "$4" "$5")
  [ -z "$BEFORE" ] || sides+=("before-$1" "$6")
  bench_alternate "$2" "$t" "${sides[@]}"
  report "courier-$1"
  report "$4"
  [ -z "$BEFORE" ] || report "before-$1"
}

echo "== list --all --format json, $N messages, $RUNS runs each, load average before $(loadavg)"
part list "$RUNS" "$c_list" grep-ids "$grep_ids" "$b_list"
echo "courier/grep time: $(ratio "$(median "$t/courier-list.wall")" "$(median "$t/grep-ids.wall")")x   (target: < 0.300 s, < 100 MB), load average after $(loadavg)"

R=$((RUNS < 3 ? RUNS : 3))
echo "== reindex, $N messages, $R runs each, load average before $(loadavg)"
part reindex "$R" "$c_reindex" find-cat "$cat_all" "$b_reindex"
echo "courier/cat time: $(ratio "$(median "$t/courier-reindex.wall")" "$(median "$t/find-cat.wall")")x   (target: < 30 s), load average after $(loadavg)"
