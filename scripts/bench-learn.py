#!/usr/bin/env python3
"""Learn mode's cost (#18): per watched call and at a server's start, with and without it.

Usage: scripts/bench-learn.py [MCPSUM_BINARY]   (default: target/release/mcpsum, else debug)

Both sides run under the same guard (`mcpsum __guard` against `mcpsum __learn`), so the
difference is the seccomp listener and the guard's recording alone. Prints figures; asserts
nothing. The server for the start figure is `mcp-server-git` from `target/test-deps` when it is
installed, else the bundled `mcp-server-time`. With `mcp-server-git`, it also times a
`tools/call` of `git_status` (which runs `git status` in a repository with a commit and an
untracked file), learning against plain, in alternating sessions.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
CALLS = 20000
LOOP = f"""
import os, time
p = {ROOT!r} + "/README.md"
t = time.perf_counter()
for _ in range({CALLS}):
    os.close(os.open(p, os.O_RDONLY))
t2 = time.perf_counter()
for _ in range({CALLS}):
    os.stat(p)
t3 = time.perf_counter()
print((t2 - t) / {CALLS} * 1e6, (t3 - t2) / {CALLS} * 1e6)
"""


def binary():
    if len(sys.argv) > 1:
        return sys.argv[1]
    for kind in ("release", "debug"):
        p = os.path.join(ROOT, "target", kind, "mcpsum")
        if os.path.exists(p):
            return p
    sys.exit("build mcpsum first")


def wrapped(mcpsum, learn, program, argv):
    pid = str(os.getpid())
    if learn:
        return [mcpsum, "__learn", learn, pid, program, *argv]
    return [mcpsum, "__guard", pid, program, *argv]


def per_call(mcpsum, learn):
    out = subprocess.run(
        wrapped(mcpsum, learn, PY, ["python3", "-c", LOOP]),
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"},
    ).stdout.split()
    return float(out[0]), float(out[1])


def server():
    git = os.path.join(ROOT, "target/test-deps/venv/bin/mcp-server-git")
    if os.path.exists(git):
        repo = tempfile.mkdtemp(prefix="bench-learn-repo-")
        run = lambda *a: subprocess.run(["git", "-C", repo, *a], check=True,
                                        capture_output=True)
        run("init", "-q", "-b", "main")
        with open(os.path.join(repo, "README.md"), "w") as f:
            f.write("bench\n")
        run("add", "README.md")
        run("-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
            "commit", "-q", "-m", "first")
        with open(os.path.join(repo, "new.txt"), "w") as f:
            f.write("untracked\n")
        return "mcp-server-git", git, ["mcp-server-git", "--repository", repo], repo
    t = os.path.join(ROOT, "target/test-deps/venv/bin/mcp-server-time")
    return "mcp-server-time", t, ["mcp-server-time"], None


def tool_calls(mcpsum, learn, program, argv, repo, calls):
    """One session: initialize, then `calls` `git_status` calls, each timed from the request
    written to its answer read (ms)."""
    p = subprocess.Popen(wrapped(mcpsum, learn, program, argv), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")})

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    def answer(i):
        while True:
            line = p.stdout.readline()
            assert line, "the server ended"
            m = json.loads(line)
            if m.get("id") == i:
                return m

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}})
    answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    took = []
    for i in range(1, calls + 1):
        t = time.perf_counter()
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "git_status", "arguments": {"repo_path": repo}}})
        m = answer(i)
        took.append((time.perf_counter() - t) * 1000)
        text = m["result"]["content"][0]["text"]
        assert "new.txt" in text and not m["result"].get("isError"), m
    p.kill()
    p.wait()
    return took


def start(mcpsum, learn, program, argv):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}}
    t = time.perf_counter()
    p = subprocess.Popen(wrapped(mcpsum, learn, program, argv), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")})
    p.stdin.write((json.dumps(init) + "\n").encode())
    p.stdin.flush()
    line = p.stdout.readline()
    took = time.perf_counter() - t
    p.kill()
    p.wait()
    assert b'"result"' in line, line
    return took * 1000


def main():
    mcpsum = binary()
    d = tempfile.mkdtemp(prefix="bench-learn-")
    obs = os.path.join(d, "obs.jsonl")
    rounds = 5
    plain = [per_call(mcpsum, None) for _ in range(rounds)]
    learned = [per_call(mcpsum, obs) for _ in range(rounds)]
    po = statistics.median(x[0] for x in plain)
    lo = statistics.median(x[0] for x in learned)
    ps = statistics.median(x[1] for x in plain)
    ls = statistics.median(x[1] for x in learned)
    print(f"binary: {mcpsum}")
    print(f"open+close, watched:   {lo:.2f} µs learning, {po:.2f} µs plain: +{lo - po:.2f} µs per call")
    print(f"stat, not watched:     {ls:.2f} µs learning, {ps:.2f} µs plain")
    name, program, argv, repo = server()
    runs = 10
    s_plain = [start(mcpsum, None, program, argv) for _ in range(runs)]
    s_learn = [start(mcpsum, obs + ".srv", program, argv) for _ in range(runs)]
    mp, ml = statistics.median(s_plain), statistics.median(s_learn)
    n = len(set(open(obs + ".srv").read().splitlines()))
    print(f"{name} start to the initialize answer: {ml:.0f} ms learning, {mp:.0f} ms plain "
          f"({(ml - mp) / mp * 100:+.0f}%), median of {runs}; {n} distinct observations in a session")
    if repo is not None:
        sessions, calls = 6, 20
        plain_calls, learn_calls = [], []
        for i in range(sessions):
            # Alternating, the first call of each session (imports, git's first run) dropped.
            plain_calls += tool_calls(mcpsum, None, program, argv, repo, calls)[1:]
            learn_calls += tool_calls(mcpsum, obs + f".call{i}", program, argv, repo, calls)[1:]
        cp, cl = statistics.median(plain_calls), statistics.median(learn_calls)
        print(f"{name} tools/call git_status (runs `git status`): {cl:.2f} ms learning, "
              f"{cp:.2f} ms plain: {cl - cp:+.2f} ms ({(cl - cp) / cp * 100:+.0f}%) per call, "
              f"median of {len(plain_calls)} calls each ({sessions} alternating sessions)")
    print(f"load: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
