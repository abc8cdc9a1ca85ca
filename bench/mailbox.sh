#!/usr/bin/env bash
# Issue 2 benchmarks, each beside a baseline, in one run:
#   - the durable inbound write path (messages/s) against a naive writer
#     that makes each file durable on its own;
#   - `courier list --all --format json` over N messages (wall time, peak
#     RSS) against grep reading the id of every file;
#   - `courier reindex` over N messages against cat reading every file.
# Usage: bench/mailbox.sh [N]   (default 100000; NAIVE_N defaults to N/10)
set -euo pipefail
N=${1:-100000}
NAIVE_N=${NAIVE_N:-$((N / 10))}
RUNS=${RUNS:-5}
cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/courier-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/genmailbox" ./bench/genmailbox
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }

# measure LABEL CMD...: median wall time and peak RSS over $RUNS runs.
measure() {
  local label=$1; shift
  local f="$work/times.$label"
  : >"$f"
  for _ in $(seq "$RUNS"); do
    "$TIME" -f "%e %M" -o "$f.one" "$@" >/dev/null 2>&1
    tail -n 1 "$f.one" >>"$f"
  done
  sort -n "$f" | awk -v l="$label" -v r="$RUNS" 'NR==int((r+1)/2){printf "%-34s median %6.2f s   peak RSS %6.1f MB\n", l, $1, $2/1024; print $1 > "'"$work"'/median.'"$label"'"}'
}
median() { cat "$work/median.$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }

echo "== write path"
"$work/genmailbox" -root "$work/ws" -n "$N" | tee "$work/w.courier"
"$work/genmailbox" -root "$work/naive" -n "$NAIVE_N" -naive | tee "$work/w.naive"
wc=$(grep -o '[0-9]* messages/s' "$work/w.courier" | cut -d' ' -f1)
wn=$(grep -o '[0-9]* messages/s' "$work/w.naive" | cut -d' ' -f1)
echo "courier/naive write rate: $(ratio "$wc" "$wn")x   (target: >= 2000 messages/s)"

echo "== list --all --format json, $N messages"
"$work/courier" --root "$work/ws" list --limit 1 >/dev/null # open once
measure "courier list --format json" "$work/courier" --root "$work/ws" list --all --format json
measure "grep -r '^id:' (baseline)" grep -r -h -m1 --include='*.md' '^id: ' "$work/ws/.monoco/mailbox"
echo "courier/grep time: $(ratio "$(median 'courier list --format json')" "$(median "grep -r '^id:' (baseline)")")x   (target: < 0.300 s, < 100 MB)"

echo "== reindex, $N messages"
RUNS=$(( RUNS < 3 ? RUNS : 3 )) measure "courier reindex" "$work/courier" --root "$work/ws" reindex
RUNS=$(( RUNS < 3 ? RUNS : 3 )) measure "find | cat (baseline: read only)" sh -c "find '$work/ws/.monoco/mailbox' -name '*.md' -print0 | xargs -0 cat"
echo "courier/cat time: $(ratio "$(median 'courier reindex')" "$(median 'find | cat (baseline: read only)')")x   (target: < 30 s)"
