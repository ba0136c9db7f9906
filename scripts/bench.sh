#!/usr/bin/env bash
# Builds the release binary, runs the benchmarks (benches/bench.rs) and writes BENCHMARKS.md:
# the machine, the date, the command, then one table per area, each figure beside a baseline
# measured in the same run, the issue's target and whether it is met. Asserts nothing.
#
#   scripts/bench.sh                 # full run (~3 min after the build), writes BENCHMARKS.md
#   scripts/bench.sh --quick         # fewer iterations
#   scripts/bench.sh --only proxy    # some areas: canon,taint,show,sign,lock,verify,proxy,sandbox,egress
#   BENCH_OUT=/tmp/b.md scripts/bench.sh   # write elsewhere
#
# Needs Linux, /usr/bin/python3 (the fake server) and, for the sandbox area, what
# `mcpsum sandbox test` needs (root, or unprivileged user namespaces).
set -euo pipefail

cd "$(dirname "$0")/.."
out="${BENCH_OUT:-BENCHMARKS.md}"
args=("$@")

# The egress bench runs squid and tinyproxy beside mcpsum's relay (each started by the bench on a
# free loopback port); install them where we can, as scripts/install-test-deps.sh does.
peers_missing=()
for p in squid tinyproxy; do
  [ -x "/usr/sbin/$p" ] || [ -x "/usr/bin/$p" ] || peers_missing+=("$p")
done
if [ ${#peers_missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing the egress bench's peers: ${peers_missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${peers_missing[@]}" >&2
    for svc in "${peers_missing[@]}"; do
      { systemctl disable --now "$svc" || service "$svc" stop; } >/dev/null 2>&1 || true
    done
  else
    echo "note: ${peers_missing[*]} missing (install as root: apt-get install squid tinyproxy); the egress area runs without them" >&2
  fi
fi

echo "building release binaries and bench..." >&2
cargo build --release --bin mcpsum --bin mcpsum-launch >&2
cargo build --release -p mcpsum-egress --example bench >&2
cargo bench --bench bench --no-run >&2

body="$(mktemp)"
trap 'rm -f "$body"' EXIT
cargo bench --bench bench -- "${args[@]}" >"$body"

cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)"
mem_total="$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
os="$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null || uname -s)"
rev="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git status --porcelain -- src sandbox egress Cargo.toml Cargo.lock 2>/dev/null | wc -l)"

{
  echo "# Benchmarks"
  echo
  echo "Speed and memory figures for the lock core (issue 2), the proxy (issue 3), the sandbox"
  echo "(issue 5) and the egress proxy (issue 6). Every figure is printed beside a baseline"
  echo "measured in the same run; nothing here is asserted in a test. Regenerate with the"
  echo "command below."
  echo
  echo "- **Command:** \`scripts/bench.sh${args[*]:+ ${args[*]}}\` (builds \`target/release/mcpsum\`, then \`cargo bench --bench bench${args[*]:+ -- ${args[*]}}\`)"
  echo "- **Date:** $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- **Source:** commit \`$rev\`$([ "$dirty" -gt 0 ] && echo " plus $dirty uncommitted change(s) in the working tree (others' work in progress)")"
  echo "- **Machine:** $(nproc) CPU(s), ${cpu_model:-unknown CPU}, $mem_total RAM; kernel $(uname -r); $os"
  echo "- **Load:** see the last line; other sessions were compiling and testing on the same machine"
  echo "  during this run, so wall-clock figures are inflated and noisy. On-CPU figures (rusage,"
  echo "  \`/proc/*/schedstat\`) are shown beside them because contention does not inflate them."
  echo "- **Servers:** the Python fake (\`tests/servers/mcp_fake.py\`) and a native server built"
  echo "  into the bench binary (\`--serve-native\`, ~20 µs per call), so that what mcpsum adds"
  echo "  is not hidden in a Python server's own cost and jitter."
  echo
  echo "## Results"
  echo
  cat "$body"
} >"$out"
echo "wrote $out" >&2
