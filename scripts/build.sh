#!/usr/bin/env bash
# Builds the courier binary with its version stamped in, and prints the
# path it wrote (the only line on stdout):
#
#   scripts/build.sh                 writes bin/courier
#   scripts/build.sh -o PATH         writes PATH (relative to the current folder)
#   scripts/build.sh -o PATH ARGS... passes ARGS to go build (e.g. -race)
#
#   install -m 0755 "$(scripts/build.sh)" /usr/local/bin/courier
#
# `courier version` then prints the version (git describe --always
# --dirty), the commit and its time (git log -1 --format=%cI) and the Go
# version. Go stamps the commit itself only with -buildvcs, which
# GOFLAGS=-buildvcs=false (and some packagers) turn off: this script stamps
# it with -ldflags -X whatever GOFLAGS says. Outside a git checkout (a
# source archive), set COURIER_VERSION, COURIER_REVISION and COURIER_TIME.
set -euo pipefail
here=$(pwd)
cd "$(dirname "$0")/.."

out=bin/courier
if [ "${1:-}" = -o ]; then
  [ $# -ge 2 ] || { echo "build.sh: -o needs a path" >&2; exit 64; }
  case $2 in
    /*) out=$2 ;;
    *) out=$here/$2 ;;
  esac
  shift 2
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  version=${COURIER_VERSION:-$(git describe --always --dirty)}
  revision=${COURIER_REVISION:-$(git rev-parse HEAD)}
  time=${COURIER_TIME:-$(git log -1 --format=%cI)}
else
  version=${COURIER_VERSION:-}
  revision=${COURIER_REVISION:-}
  time=${COURIER_TIME:-}
  if [ -z "$version" ] || [ -z "$revision" ]; then
    echo "build.sh: $(pwd) is not a git checkout: set COURIER_VERSION, COURIER_REVISION and COURIER_TIME" >&2
    exit 66
  fi
fi

pkg=github.com/monoco/courier/internal/buildinfo
go build -trimpath -o "$out" \
  -ldflags "-X $pkg.version=$version -X $pkg.revision=$revision -X $pkg.commitTime=$time" \
  "$@" ./cmd/courier
echo "built courier $version ($revision, $time)" >&2
case $out in
  /*) echo "$out" ;;
  *) echo "$(pwd)/$out" ;;
esac
