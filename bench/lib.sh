# Shared by the bench/*.sh scripts (sourced): the machine's description,
# the load average, and the table they print. Keep it to what several
# scripts use; the Go benchmarks share bench/internal/benchutil.

# bench_header prints the machine, the Go version and the load average.
bench_header() {
  local cpu
  cpu=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
  echo "== $(nproc) cores ($cpu), $(awk '/MemTotal/{printf "%.0f GB", $2/1048576}' /proc/meminfo), $(uname -r), $(go version | cut -d' ' -f3)"
  echo "== $*, load average $(loadavg)"
}

# loadavg is the 1, 5 and 15 minute load averages.
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# bench_table FILE prints FILE's tab-separated rows (measure, courier,
# baseline, ratio, target, met) as a Markdown table.
bench_table() {
  awk -F'\t' '
    BEGIN { print "| measure | courier | baseline | ratio | target | met |"; print "|---|---|---|---|---|---|" }
    { printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }
  ' "$1"
}

# spread prints "median (min-max)" of the numbers in FILE, one a line,
# with FMT (default %.3f): the figure every script reports.
spread() {
  sort -g "$1" | awk -v f="${2:-%.3f}" '{a[NR]=$1} END{m=a[int((NR+1)/2)]; printf f " (" f "-" f ")\n", m, a[1], a[NR]}'
}

# median prints the median of the numbers in FILE (the lower one of an
# even count, as spread does).
median() { sort -g "$1" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

# elapsed T0 T1 prints T1 - T0 (seconds, as date +%s.%N gives them).
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.4f\n", b - a}'; }

# ratio A B prints A/B to two places.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "n/a" }'; }

# bench_time DIR LABEL CMD: runs the shell command CMD (a string) once
# under GNU time (output discarded) and appends its wall seconds to
# DIR/LABEL.wall and its peak RSS (MB) to DIR/LABEL.rss.
bench_time() {
  local dir=$1 label=$2 cmd=$3
  /usr/bin/time -f "%e %M" -o "$dir/$label.one" bash -c "$cmd" >/dev/null 2>&1
  tail -n 1 "$dir/$label.one" | awk -v w="$dir/$label.wall" -v r="$dir/$label.rss" '{print $1 >> w; printf "%.1f\n", $2 / 1024 >> r}'
}

# bench_alternate ROUNDS DIR LABEL1 CMD1 LABEL2 CMD2 [LABEL3 CMD3]: the
# sides (each CMD a shell command, a string) run ROUNDS times
# under bench_time, interleaved, the order rotating each round, after one
# untimed run of each.
bench_alternate() {
  local rounds=$1 dir=$2 i k n
  shift 2
  local labels=() cmds=()
  while [ $# -gt 0 ]; do labels+=("$1"); cmds+=("$2"); shift 2; done
  n=${#labels[@]}
  for k in $(seq 0 $((n - 1))); do bash -c "${cmds[$k]}" >/dev/null 2>&1; done
  for i in $(seq 0 $((rounds - 1))); do
    for k in $(seq 0 $((n - 1))); do
      local j=$(((i + k) % n))
      sync
      bench_time "$dir" "${labels[$j]}" "${cmds[$j]}"
    done
  done
}
