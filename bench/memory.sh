#!/usr/bin/env bash
# Issue 9 benchmark: Courier's peak memory (GNU time's maximum resident set
# size) whatever the mail, beside the same measures of Courier built at
# BASE (the commit before the text bound, by default), in one table.
#
# For each class of input, a fresh workspace, `courier serve` under
# /usr/bin/time, the mail handed to its SMTP receiver (bench/membench send:
# it returns once every copy got its 250, so every file is durable), then
# SIGTERM; then `read` of a message, `list --all --format json` and
# `reindex` on what it wrote, each under /usr/bin/time:
#   html30     one 123 MB mail of 30 HTML parts of 4 MB (issue: 2.1 GB, a
#              363 MB file, and 1.4 GB to read it)
#   html60     60 mails of 4 MB HTML, 60 sessions at once (issue: 3.0 GB)
#   text140    one mail of a single 140 MB text part
#   attach100  one mail with a 100 MB attachment
#   address-header    issue 18, item 5: one mail of 57,000 Cc addresses (a
#              megabyte of header; issue: a 9.7 MB file, serve 144 MB,
#              read 274 MB, reindex 400 MB)
#   address-header-8  8 of those at once, 8 sessions
#   address-max-8     8 at once of the most addresses a header keeps
#              (95,000 in its 1 MiB)
# and, in rows marked "old file", the new binary's read/list/reindex of the
# workspace BASE wrote (the huge files of before).
#
# The receiver's session caps (added in issue 9 too) are raised to 64 a
# client for the new binary, so that the 60 sessions run at once as they
# do on BASE and the table shows the bound on normalising, not the cap.
#
# Usage: bench/memory.sh                  all classes (about 10 minutes)
#        CLASSES="html30" bench/memory.sh  some
#        BASE=<commit> bench/memory.sh     another baseline
#        BASE=bf1eeba CLASSES="address-header address-header-8 address-max-8" bench/memory.sh
#                                          issue 18's address headers
# The two builds alternate (the order swapping from class to class), each
# class in fresh workspaces, nothing deleted until the end; the load
# average is printed before and after each class.
# Needs GNU time (/usr/bin/time; Debian package time) and git.
set -euo pipefail
BASE=${BASE:-9a4e235}
CLASSES=${CLASSES:-"html30 html60 text140 attach100"}
cd "$(dirname "$0")/.."
. bench/lib.sh
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/courier-membench.XXXXXX")
servepid=""
cleanup() {
  [ -n "$servepid" ] && kill -TERM "$servepid" 2>/dev/null || true
  git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/after" "$work/base"
go build -o "$work/after/courier" ./cmd/courier
go build -o "$work/membench" ./bench/membench
git worktree add --detach "$work/base-src" "$BASE" >/dev/null 2>&1
(cd "$work/base-src" && go build -o "$work/base/courier" ./cmd/courier)
git worktree remove --force "$work/base-src" >/dev/null 2>&1

echo "== $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(go version | cut -d' ' -f3); base $(git rev-parse --short "$BASE"), after $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+working tree')"

rows="$work/rows.tsv"
: >"$rows"
row() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$rows"; } # class measure side value

# rss CMD...: run CMD under GNU time, print its peak RSS in MB.
rss() {
  "$TIME" -f %M -o "$work/rss.one" "$@" >/dev/null 2>"$work/err.one" || { echo "bench: $* failed:" >&2; cat "$work/err.one" >&2; exit 1; }
  awk '{v=$1} END {printf "%.0f", v/1024}' "$work/rss.one"
}

# serve SIDE CLASS EML N CONC: a workspace SIDE wrote by serving N copies.
serve() {
  local side=$1 class=$2 eml=$3 n=$4 conc=$5
  local bin="$work/$side/courier" ws="$work/ws-$side-$class"
  mkdir -p "$ws"
  "$bin" --root "$ws" init >/dev/null
  local smtp http
  smtp=$("$work/membench" port)
  http=$("$work/membench" port)
  local caps=""
  if grep -aq max_sessions_per_ip "$bin"; then
    caps="
        max_sessions: 128
        max_sessions_per_ip: 64"
  fi
  cat >"$ws/.monoco/config/courier.yaml" <<EOF
courier:
  http: {listen: 127.0.0.1:$http}
  adapters:
    email:
      enabled: true
      receiver:
        smtp: 127.0.0.1:$smtp$caps
EOF
  "$TIME" -f %M -o "$work/rss.serve" "$bin" --root "$ws" serve >"$work/serve.log" 2>&1 &
  local tpid=$!
  local start end
  start=$(date +%s.%N)
  "$work/membench" send -addr "127.0.0.1:$smtp" -n "$n" -conc "$conc" "$eml" >"$work/send.log"
  end=$(date +%s.%N)
  servepid=$(pgrep -P "$tpid")
  kill -TERM "$servepid"
  wait "$tpid" || true
  servepid=""
  row "$class" "serve: peak RSS (MB)" "$side" "$(awk '{v=$1} END {printf "%.0f", v/1024}' "$work/rss.serve")"
  row "$class" "serve: time to take all (s)" "$side" "$(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')"
  row "$class" "largest .md file (MB)" "$side" "$(find "$ws/.monoco/mailbox/inbound" -name '*.md' -printf '%s\n' | sort -n | tail -1 | awk '{printf "%.1f", $1/1048576}')"
}

# tools SIDE CLASS WS LABEL: read, list and reindex of workspace WS by SIDE.
tools() {
  local side=$1 class=$2 ws=$3 label=$4
  local bin="$work/$side/courier"
  local id
  id=$("$bin" --root "$ws" list --all --format id | head -1)
  row "$class" "read$label: peak RSS (MB)" "$side" "$(rss "$bin" --root "$ws" read "$id")"
  row "$class" "read --format json$label (MB)" "$side" "$(rss "$bin" --root "$ws" read --format json "$id")"
  row "$class" "list --all --format json$label (MB)" "$side" "$(rss "$bin" --root "$ws" list --all --format json)"
  row "$class" "reindex$label: peak RSS (MB)" "$side" "$(rss "$bin" --root "$ws" reindex)"
}

k=0
for class in $CLASSES; do
  case $class in
    html30) kind=html30 n=1 conc=1 ;;
    html60) kind=html4 n=60 conc=60 ;;
    text140) kind=text140 n=1 conc=1 ;;
    attach100) kind=attach100 n=1 conc=1 ;;
    address-header) kind=cc57k n=1 conc=1 ;;
    address-header-8) kind=cc57k n=8 conc=8 ;;
    address-max-8) kind=ccmax n=8 conc=8 ;;
    *) echo "bench: unknown class $class" >&2; exit 1 ;;
  esac
  eml=$work/$kind.eml
  [ -f "$eml" ] || "$work/membench" gen -kind "$kind" -o "$eml"
  echo "== $class, load average before $(loadavg)"
  if [ $((k % 2)) -eq 0 ]; then order="base after"; else order="after base"; fi
  k=$((k + 1))
  for side in $order; do
    serve "$side" "$class" "$eml" "$n" "$conc"
    tools "$side" "$class" "$work/ws-$side-$class" ""
  done
  # The new binary on the files BASE wrote.
  tools after "$class" "$work/ws-base-$class" " (old file)"
  awk -F'\t' -v c="$class" '$1 == c {printf "  %-40s %-6s %s\n", $2, $3, $4}' "$rows"
  echo "   load average after $(loadavg)"
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
      if (p[2] ~ /old file/) { m = p[2]; sub(/ \(old file\)/, "", m); b = v[p[1] "\t" m "\tbase"] }
      r = (b + 0 > 0 && a != "") ? sprintf("%.3f", a / b) : "n/a"
      printf "| %s | %s | %s | %s | %s |\n", p[1], p[2], (b == "" ? "-" : b), (a == "" ? "-" : a), r
    }
  }' "$rows"
