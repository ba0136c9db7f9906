#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs the pinned real MCP servers and clients the
# tests run against (scripts/install-test-deps.sh), then formatting, lints and every test.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

scripts/install-test-deps.sh

# Tests that need the real servers or the kernel's sandbox features fail instead of skipping.
export MCPSUM_REQUIRE_REAL_SERVERS=1
export MCPSUM_REQUIRE_SANDBOX=1

# The AppArmor profile, checked with a 4.x parser without a kernel (prints `skipped:` when the
# parser cannot be had here).
scripts/check-apparmor.sh

# No import cycles between source files (src/, sandbox/, egress/): layers point one way.
scripts/import-cycles.py

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked --quiet

# The sandbox on other kernels: pinned Debian kernels (6.1: Landlock ABI 2, 6.12: ABI 6, 7.3:
# ABI 11) booted under qemu with a busybox initramfs (scripts/vm-test.sh, a few minutes). Runs
# where qemu and a static busybox are installed (install-test-deps.sh installs them as root).
if command -v qemu-system-x86_64 >/dev/null 2>&1 && command -v busybox >/dev/null 2>&1; then
  scripts/vm-test.sh
else
  echo "skipped: scripts/vm-test.sh (install qemu-system-x86 and busybox-static to run it)"
fi
