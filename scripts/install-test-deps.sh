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
UV=0.13.9
SERVER_EVERYTHING=2026.8.31   # @modelcontextprotocol/server-everything (legacy)
SERVER_FILESYSTEM=2026.8.31   # @modelcontextprotocol/server-filesystem (legacy)

if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  missing=()
  for tool in ip:iproute2 setpriv:util-linux curl:curl openssl:openssl \
    qemu-system-x86_64:qemu-system-x86 busybox:busybox-static; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
  done
  # scripts/vm-test.sh needs a static busybox for its initramfs (Debian's `busybox` is dynamic).
  if command -v busybox >/dev/null 2>&1 && ldd "$(command -v busybox)" >/dev/null 2>&1; then
    missing+=(busybox-static)
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

stamp="$prefix/.installed-$MCP_SDK-$MCP_SERVER_TIME-$UV-$SERVER_EVERYTHING-$SERVER_FILESYSTEM"
if [ -f "$stamp" ]; then
  exit 0
fi

python3 -m venv "$prefix/venv"
"$prefix/venv/bin/pip" install -q --disable-pip-version-check \
  "mcp==$MCP_SDK" "mcp-server-time==$MCP_SERVER_TIME" "uv==$UV"

mkdir -p "$prefix/node"
(cd "$prefix/node" && npm install --silent --no-audit --no-fund \
  "@modelcontextprotocol/server-everything@$SERVER_EVERYTHING" \
  "@modelcontextprotocol/server-filesystem@$SERVER_FILESYSTEM" >/dev/null)

chmod -R a+rX "$prefix"
touch "$stamp"
