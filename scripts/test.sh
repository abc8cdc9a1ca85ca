#!/usr/bin/env bash
# Courier's test command. On a fresh Debian machine, as root, it installs
# what the integration tests run against (Dovecot, Postfix's smtp-sink,
# mbsync, msmtp, swaks, systemd-analyze, GNU time), downloads the Go
# modules, then vets and runs every test, the real-server ones included.
#
#   scripts/test.sh            everything
#   scripts/test.sh -short     skip the slow tests (100 MB streams, fuzz seeds only)
#
# COURIER_CORPUS, when set to the shared corpus, adds the corpus tests.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A pkg=(
  [dovecot]=dovecot-imapd [doveadm]=dovecot-core [smtp-sink]=postfix [mbsync]=isync
  [msmtp]=msmtp [swaks]=swaks [systemd-analyze]=systemd [/usr/bin/time]=time
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
go test -count=1 -timeout 15m "$@" ./...
