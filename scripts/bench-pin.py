#!/usr/bin/env python3
"""Artifact pinning (#17) figures for BENCHMARKS.md: what a pinned install adds to the proxy's
start-up, and a warm re-lock of a pinned `uvx` and `npx` server.

Usage: scripts/bench-pin.py [MCPSUM] (default target/release/mcpsum, else target/debug/mcpsum).
Needs `scripts/install-test-deps.sh` (uv) and the registries (PyPI, npm) for the first lock.

Start-up: the same server, once as a pinned `uvx` entry (the proxy checks the install's stamp
and fingerprint, then runs its console script) and once as an entry whose command is that very
script (nothing pinned). Each run spawns `mcpsum proxy`, sends `initialize` and times the answer
(which the proxy gives from the lock, so the server's own start is not on that path), in
alternating pairs; the figure is the median of the per-pair differences.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAIRS = 30
RELOCKS = 5


def mcpsum_path():
    if len(sys.argv) > 1:
        return os.path.abspath(sys.argv[1])
    for p in ("target/release/mcpsum", "target/debug/mcpsum"):
        if os.path.exists(os.path.join(ROOT, p)):
            return os.path.join(ROOT, p)
    sys.exit("build mcpsum first")


def main():
    mcpsum = mcpsum_path()
    venv_bin = os.path.join(ROOT, "target/test-deps/venv/bin")
    tmp = tempfile.mkdtemp(prefix="mcpsum-bench-pin-")
    env = {k: v for k, v in os.environ.items() if k.startswith(("SSL_", "NODE_EXTRA"))}
    env.update(
        PATH=venv_bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
        HOME=os.path.join(tmp, "home"),
        XDG_CACHE_HOME=os.path.join(tmp, "cache"),
        MCPSUM_STATE_DIR=os.path.join(tmp, "state"),
        UV_CACHE_DIR=os.path.join(tmp, "uv-cache"),
        npm_config_cache=os.path.join(tmp, "npm-cache"),
        NO_COLOR="1",
    )
    os.makedirs(env["HOME"])
    lock = os.path.join(tmp, "mcp.lock")

    def run(*args):
        r = subprocess.run([mcpsum, "--lockfile", lock, *args], env=env, cwd=tmp,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"mcpsum {' '.join(args)} failed:\n{r.stdout}{r.stderr}")
        return r

    run("lock", "--name", "time", "--era", "legacy", "--", "uvx", "mcp-server-time==2026.10.19")
    installs = os.path.join(env["XDG_CACHE_HOME"], "mcpsum/installs")
    script = os.path.join(installs, os.listdir(installs)[0], "bin/mcp-server-time")
    run("lock", "--name", "direct", "--era", "legacy", "--", script)
    run("lock", "--name", "everything", "--era", "legacy", "--", "npx", "-y",
        "@modelcontextprotocol/server-everything@2026.8.31", "stdio")

    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}}) + "\n"

    def startup(name):
        t0 = time.perf_counter()
        p = subprocess.Popen([mcpsum, "--lockfile", lock, "proxy", "--name", name], env=env,
                             cwd=tmp, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        p.stdin.write(init)
        p.stdin.flush()
        line = p.stdout.readline()
        dt = time.perf_counter() - t0
        assert '"result"' in line, line
        p.stdin.close()
        p.wait()
        return dt * 1000

    pinned, direct, diffs = [], [], []
    for i in range(PAIRS):
        order = ["time", "direct"] if i % 2 == 0 else ["direct", "time"]
        got = {n: startup(n) for n in order}
        pinned.append(got["time"])
        direct.append(got["direct"])
        diffs.append(got["time"] - got["direct"])

    def relock(name):
        times = []
        for _ in range(RELOCKS):
            t0 = time.perf_counter()
            run("lock", "--name", name)
            times.append(time.perf_counter() - t0)
        return statistics.median(times), max(times)

    uv_med, uv_max = relock("time")
    npm_med, npm_max = relock("everything")
    load = open("/proc/loadavg").read().split()[:3]
    print(f"mcpsum: {mcpsum}")
    print(f"proxy start-up to the initialize answer, median of {PAIRS} pairs: pinned uvx entry "
          f"{statistics.median(pinned):.2f} ms, same script unpinned {statistics.median(direct):.2f} ms, "
          f"added {statistics.median(diffs):.2f} ms (per-pair median)")
    print(f"warm re-lock, median of {RELOCKS} (max): uvx mcp-server-time {uv_med:.2f} s ({uv_max:.2f} s), "
          f"npx server-everything {npm_med:.2f} s ({npm_max:.2f} s)")
    print(f"load average: {' '.join(load)}")
    subprocess.run(["chmod", "-R", "u+w", tmp])
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
