#!/usr/bin/env bash
# Issue 4 benchmarks: Courier's email paths, each beside the tool a user
# would otherwise pick, in one run, reported as ratios:
#   1. `courier fetch` of 5,000 realistic messages (23 MB) from a local
#      Dovecot against mbsync (FSync on, its default) and against the
#      floor, a bare go-imap v2 client that writes one file per message
#      and one syncfs per 250 (bench/imapfloor), from the same Dovecot:
#      RUNS rounds of the three, interleaved (the order rotates each
#      round), each run in a fresh folder created before the first timed
#      run, nothing deleted until the end (deleting thousands of files
#      slows the next creations on ext4); min, median and max wall time,
#      courier's CPU time and peak RSS (GNU time), the load average;
#   2. the peak RSS a 100 MB attachment adds to `courier fetch` (against a
#      4.6 KB message), beside what it adds to mbsync;
#   3. IDLE push: APPEND over IMAP -> file in inbound/email/ with `courier
#      serve` idling, beside a bare IDLE client's APPEND -> EXISTS
#      (Dovecot's own notification delay);
#   4. 1,000 drafts delivered by `courier serve` to Postfix's smtp-sink
#      against msmtp sending 1,000 of the same messages, a process each;
#      and drafts -> SMTP one at a time, p50 (target: under 50 ms).
# 2-4 follow the same method as 1, over min(RUNS, 3) rounds: the sides
# interleave after a warm-up, each run in a fresh folder (and a fresh
# Dovecot or smtp-sink), nothing deleted until the end, each figure the
# median (min-max) over the rounds, with the load average.
# The benchmarks are Go code in bench/emailbench (they start their own
# Dovecot and smtp-sink through internal/testutil); this script builds the
# binary, runs them once each and prints the table.
#
# Usage: bench/email.sh
#   RUNS=5 N=5000 SAMPLES=50 DRAFTS=1000 PACED=200   the sizes (defaults shown)
#   PREFILL=50000                                      inbound messages in the send benchmark's mailbox first
#   BENCH=Fetch                                        a subset (a -bench regexp)
#   BEFORE=path/to/courier                             another build, run as one more side of each (before/after in one run)
# Needs what scripts/test.sh installs (as root on Debian): dovecot-imapd,
# isync, msmtp, postfix (smtp-sink), time.
set -euo pipefail
RUNS=${RUNS:-5}
N=${N:-5000}
SAMPLES=${SAMPLES:-50}
DRAFTS=${DRAFTS:-1000}
PACED=${PACED:-200}
PREFILL=${PREFILL:-0}
BENCH=${BENCH:-.}
BEFORE=${BEFORE:-}
cd "$(dirname "$0")/.."
. bench/lib.sh
export PATH="$PATH:/usr/sbin:/sbin"

missing=()
for c in dovecot doveadm mbsync msmtp smtp-sink /usr/bin/time; do
  command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench: missing ${missing[*]}; run scripts/test.sh once (as root it installs them)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/courier-emailbench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/courier" ./cmd/courier
go build -o "$work/imapfloor" ./bench/imapfloor
go test -c -o "$work/emailbench.test" ./bench/emailbench
: >"$work/rows.tsv"

cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r)"
echo "== $(go version | cut -d' ' -f3), dovecot $(dovecot --version | cut -d' ' -f1), $(mbsync --version), $(msmtp --version | head -1)"
echo "== load average $(loadavg)"
echo "== RUNS=$RUNS N=$N SAMPLES=$SAMPLES DRAFTS=$DRAFTS PACED=$PACED PREFILL=$PREFILL"
start=$(date +%s)
(cd bench/emailbench && "$work/emailbench.test" -test.run '^$' -test.bench "$BENCH" -test.benchtime 1x \
  -test.timeout 60m -courier "$work/courier" -floor "$work/imapfloor" -before "$BEFORE" -runs "$RUNS" -n "$N" -samples "$SAMPLES" \
  -drafts "$DRAFTS" -paced "$PACED" -prefill "$PREFILL" -out "$work/rows.tsv")
echo "== done in $(( $(date +%s) - start )) s, load average $(loadavg)"
echo
awk -F'\t' '
  BEGIN { print "| measure | courier | baseline | floor | ratio | target | met |"; print "|---|---|---|---|---|---|---|" }
  { printf "| %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }
' "$work/rows.tsv"
