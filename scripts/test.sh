#!/usr/bin/env bash
# Courier's test command. On a fresh Debian machine, as root, it installs
# what the integration tests run against (Dovecot, Postfix and its
# smtp-sink, mbsync, msmtp, swaks, systemd-analyze, GNU time, and Exim's
# binary unpacked beside Postfix), downloads the Go modules, then vets and
# runs every test, the real-server ones included.
#
#   scripts/test.sh            everything
#   scripts/test.sh -short     skip the slow tests (100 MB streams, fuzz seeds only)
#
# COURIER_CORPUS, when set to the shared corpus, adds the corpus tests
# (taken from ../shared/corpus when it is beside the checkout); without
# it they skip, and the script says so before and after the run.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${COURIER_CORPUS:-}" ] && [ -d ../shared/corpus ]; then
  COURIER_CORPUS=$(cd ../shared/corpus && pwd)
  export COURIER_CORPUS
  echo "COURIER_CORPUS=$COURIER_CORPUS (the shared corpus beside the checkout)"
fi
corpus_note=""
if [ -z "${COURIER_CORPUS:-}" ]; then
  n=$(grep -rl --include='*_test.go' 'CorpusDir(' . | xargs grep -c 'CorpusDir(' | awk -F: '{s+=$2} END {print s+0}')
  corpus_note="warning: COURIER_CORPUS is not set, so the corpus tests skip ($n calls of testutil.CorpusDir, some in table loops; \"COURIER_CORPUS not set\" in go test -v); set it to the shared corpus to run them"
  echo "$corpus_note" >&2
fi

declare -A pkg=(
  [dovecot]=dovecot-imapd [doveadm]=dovecot-core [smtp-sink]=postfix [mbsync]=isync
  [msmtp]=msmtp [swaks]=swaks [systemd-analyze]=systemd [/usr/bin/time]=time
  [curl]=curl # bench/daemon.sh and bench/agents.sh ask /health
  [chromium]=chromium # the web viewer's browser tests (chromedp)
)
missing=()
for cmd in "${!pkg[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "$cmd" ] || missing+=("${pkg[$cmd]}")
done
# dovecot-lmtpd is not needed: Courier is the LMTP server in its tests.
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections 2>/dev/null || true
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
  else
    echo "warning: not root or no apt-get; tests needing ${missing[*]} will be skipped" >&2
  fi
fi

# Exim, which TestEximInFront puts in front of Courier: Debian installs one
# MTA at a time (exim4 conflicts with postfix), so exim4-daemon-light's
# binary is unpacked into a cache, not installed, with the libraries it
# needs, and named by COURIER_EXIM. The test runs it as root only.
if [ -z "${COURIER_EXIM:-}" ] && ! command -v exim4 >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  # Not under $HOME: Exim drops root for its own user and re-executes
  # itself (a queue run for each delivery), so every folder on the way to
  # the binary must be open to that user, and root's home is not.
  eximdir="/var/cache/courier-test/exim4-daemon-light"
  if [ ! -x "$eximdir/usr/sbin/exim4" ]; then
    tmp=$(mktemp -d)
    ( cd "$tmp" && { apt-get download exim4-daemon-light >/dev/null 2>&1 ||
        { apt-get update -qq && apt-get download exim4-daemon-light >/dev/null 2>&1; }; } ) &&
      mkdir -p "$eximdir" && dpkg-deb -x "$tmp"/exim4-daemon-light_*.deb "$eximdir" ||
      echo "warning: cannot unpack exim4-daemon-light; TestEximInFront will fail or be skipped" >&2
    rm -rf "$tmp"
  fi
  if [ -x "$eximdir/usr/sbin/exim4" ]; then
    if ldd "$eximdir/usr/sbin/exim4" | grep -q "not found"; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        libdb5.3 libgnutls-dane0 libgnutls30 libidn12 libidn2-0 libnsl2 libpcre2-8-0 >/dev/null
    fi
    export COURIER_EXIM="$eximdir/usr/sbin/exim4"
  fi
fi

go mod download
# Independent checks from npm: the Slack mrkdwn tests compare with two
# JavaScript implementations (skipped, with a warning, when npm is missing).
npmdir=adapters/slack/internal/mrkdwn/testdata/npm
if command -v npm >/dev/null; then
  npm ci --prefix "$npmdir" --no-audit --no-fund --loglevel=error >/dev/null ||
    echo "warning: npm ci in $npmdir failed; TestNodeReference will be skipped" >&2
else
  echo "warning: no npm; TestNodeReference will be skipped" >&2
fi
# The official MCP conformance suite (and the Node 22 it needs, from npm),
# which TestMCPConformance runs against the service's /mcp.
mcpdir=cmd/courier/testdata/mcpconformance
if command -v npm >/dev/null; then
  npm ci --prefix "$mcpdir" --no-audit --no-fund --loglevel=error >/dev/null ||
    echo "warning: npm ci in $mcpdir failed; TestMCPConformance will be skipped" >&2
fi
go vet ./...
# Real servers are required when they are installed: a test that would
# skip for lack of Dovecot fails instead, so CI cannot pass by skipping.
if command -v dovecot >/dev/null && command -v smtp-sink >/dev/null; then
  export COURIER_REQUIRE_SERVERS=1
fi
status=0
go test -count=1 -timeout 15m "$@" ./... || status=$?
if [ -n "$corpus_note" ]; then
  echo "$corpus_note" >&2
fi
exit "$status"
