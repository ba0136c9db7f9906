#!/usr/bin/env python3
"""Checks what one VM of scripts/vm-test.sh reported on its result port (see scripts/vm/init).

Prints one line per case and the layers and compensations the sandbox used; exits 1 when a
case failed, the sandbox was weaker than pinned for this kernel, or the VM did not finish.
"""

import argparse
import json
import re
import sys


def parse(path):
    facts, cases, done = {}, [], False
    cur, stream = None, None
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return facts, cases, done
    with f:
        for raw in f:
            line = raw.rstrip("\r\n")
            if line.startswith("@@case "):
                # @@case ID USER WANT RC, where WANT may contain spaces (`refuse:user namespace`).
                head = line[len("@@case "):].split(" ")
                cur = {
                    "id": head[0],
                    "user": head[1],
                    "want": " ".join(head[2:-1]),
                    "rc": int(head[-1]),
                    "stdout": [],
                    "stderr": [],
                }
                stream = None
            elif line == "@@stdout" and cur is not None:
                stream = "stdout"
            elif line == "@@stderr" and cur is not None:
                stream = "stderr"
            elif line == "@@end" and cur is not None:
                cur["stdout"] = "\n".join(cur["stdout"])
                cur["stderr"] = "\n".join(cur["stderr"])
                cases.append(cur)
                cur, stream = None, None
            elif cur is not None and stream is not None:
                cur[stream].append(line)
            elif line.startswith("@@fact "):
                parts = line.split(" ", 2)
                facts[parts[1]] = parts[2] if len(parts) > 2 else ""
            elif line == "@@done":
                done = True
    return facts, cases, done


def row(doc, prefix):
    for r in doc["report"]["rows"]:
        if r["check"].startswith(prefix):
            return r
    return None


def layer_abi(doc):
    for layer in doc["report"]["layers"]:
        if layer["layer"] == "landlock":
            m = re.match(r"ABI (\d+)", layer["status"])
            return int(m.group(1)) if m else None
    return None


def check_report(case, abi):
    """Problems with one `sandbox test --json` document."""
    try:
        doc = json.loads(case["stdout"])
    except ValueError:
        return None, ["stdout is not the JSON report"]
    problems = []
    failed = [r for r in doc["report"]["rows"] if not r["pass"]]
    for r in failed:
        problems.append(f"`{r['check']}`: expected {r['expected']}, observed {r['observed']}")
    if not doc.get("passed") and not failed:
        problems.append("report says not passed")
    got = layer_abi(doc)
    if got != abi:
        problems.append(
            f"Landlock ABI {got}, pinned {abi} for this kernel"
            + (" (weaker than promised)" if got is not None and got < abi else "")
        )
    want = [("Landlock ABI", str(abi))]
    allow = case["id"].endswith("test-allow")
    if allow:
        want += [
            ("egress CONNECT 127.0.0.1:8443", "HTTP 200"),
            ("egress CONNECT localhost:8443", "HTTP 200"),
            ("egress CONNECT unlisted", "HTTP 403"),
            ("socket(AF_INET)", "allowed"),
        ]
    else:
        want += [("socket(AF_INET)", "refused (EPERM)")]
    want += [
        # Landlock governs truncate(2) from ABI 3; below, the seccomp compensation must. The
        # read-only view outside the write set answers first where it is in place.
        ("truncate (seccomp)", "refused (EPERM)")
        if abi < 3
        else ("truncate (landlock)", ("refused (EACCES)", "refused (EROFS)")),
        ("direct connect to host loopback", None),
        ("read home", "refused (EACCES)"),
        ("socket(AF_UNIX)", "refused (EPERM)"),
        ("unshare", "refused (EPERM)"),
    ]
    for prefix, observed in want:
        r = row(doc, prefix)
        if r is None:
            problems.append(f"no `{prefix}` row")
        elif observed is not None and r["observed"] not in (
            observed if isinstance(observed, tuple) else (observed,)
        ):
            problems.append(f"`{r['check']}`: observed {r['observed']}, this VM needs {observed}")
    return doc, problems


ESCAPE_ATTEMPTS = 12
ESCAPE_CONTROLS = 3


def check_escape(value):
    """Problems with one escape battery fact: `limit=N` then the servers' lines, each start
    ending in `done`."""
    words = value.split()
    if not words or not words[0].startswith("limit="):
        return ["no limit recorded"]
    limit = int(words[0][len("limit="):])
    problems = []
    starts = words.count("done")
    if starts == 0:
        return ["the escape server never finished its attempts"]
    for i, w in enumerate(words[:-1]):
        if w == "ESCAPED":
            problems.append(f"`{words[i + 1]}` was not refused")
        elif w == "FAILED":
            problems.append(f"control `{words[i + 1]}` failed (the write set must stay writable)")
        elif w == "bomb":
            n = int(words[i + 1]) if words[i + 1].isdigit() else -1
            if not 0 < n < limit:
                problems.append(f"the fork bomb forked {n} children, the limit is {limit} tasks")
    if words.count("refused") + words.count("ESCAPED") != ESCAPE_ATTEMPTS * starts:
        problems.append(f"expected {ESCAPE_ATTEMPTS} attempts per start")
    if words.count("ok") + words.count("FAILED") != ESCAPE_CONTROLS * starts:
        problems.append(f"expected {ESCAPE_CONTROLS} controls per start")
    return problems


def check_case(case, abi):
    """(problems, detail, report document or None) for one case."""
    rc, want = case["rc"], case["want"]
    if want.startswith("refuse:"):
        layer = want[len("refuse:"):]
        problems = []
        if rc != 2:
            problems.append(f"exit {rc}, expected 2 (the sandbox cannot be built)")
        # `verify` reports each server on stdout, the other commands on stderr.
        text = case["stderr"] + "\n" + case["stdout"]
        if f"{layer}:" not in text:
            problems.append(f"the error does not name the layer `{layer}`")
        if '"passed"' in case["stdout"]:
            problems.append("printed a report although the sandbox could not be built")
        reason = next((l.strip() for l in text.splitlines() if f"{layer}:" in l), "")
        reason = reason[reason.find(f"{layer}:"):] if f"{layer}:" in reason else reason
        return problems, f"exit {rc}, {reason[:100]}", None
    problems = [] if rc == 0 else [f"exit {rc}"]
    if " test-" in f" {case['id'].split(':')[-1]}":
        doc, more = check_report(case, abi)
        problems += more
        if doc is not None:
            rows = doc["report"]["rows"]
            ok = sum(1 for r in rows if r["pass"])
            return problems, f"exit {rc}, {ok}/{len(rows)} checks hold", doc
        return problems, f"exit {rc}", None
    return problems, f"exit {rc}", None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--abi", required=True, type=int)
    ap.add_argument("--mode", required=True, choices=["main", "nolandlock"])
    ap.add_argument("--wall", required=True)
    ap.add_argument("--console", required=True)
    ap.add_argument("--summary", help="append one summary line to this file")
    ap.add_argument("--counts", help="append `PASSED FAILED` (cases and VM-level checks) here")
    ap.add_argument("results")
    a = ap.parse_args()

    facts, cases, done = parse(a.results)
    what = "all checks" if a.mode == "main" else "booted without Landlock"
    print(
        f"\n== kernel {a.kernel} ({facts.get('kernel', '?')}), {what}: "
        f"{a.wall} s wall, VM uptime {facts.get('uptime', '?')} s"
    )
    print(f"   LSMs: {facts.get('lsm', '?')}")
    vm_failures = 0  # problems of the VM as a whole, each counted as one failed check
    failed_cases = 0

    def fail(msg):
        nonlocal vm_failures
        vm_failures += 1
        print(f"   FAIL  {msg}")

    if not done:
        fail("the VM did not finish its cases (crash, hang or timeout); console tail:")
        try:
            with open(a.console, encoding="utf-8", errors="replace") as f:
                for line in f.read().splitlines()[-40:]:
                    print(f"         | {line}")
        except OSError:
            pass
    lsm = facts.get("lsm", "")
    if a.mode == "main" and "landlock" not in lsm:
        fail(f"Landlock is not in this kernel's LSM list ({lsm})")
    if a.mode == "nolandlock" and "landlock" in lsm.split(","):
        fail(f"booted without Landlock, but the LSM list has it ({lsm})")

    layers_shown = set()
    abis = set()
    comps = {}
    for case in cases:
        problems, detail, doc = check_case(case, a.abi)
        if doc is not None:
            abis.add(layer_abi(doc))
            net = "allow" if case["id"].endswith("allow") else "[]"
            comps[net] = [
                l["layer"].split(" ", 1)[1] for l in doc["report"]["layers"]
                if l["layer"].startswith("landlock ")
            ]
            if net not in layers_shown:
                layers_shown.add(net)
                print(f"   layers with network.allow {'[]' if net == '[]' else 'listing hosts'}:")
                for l in doc["report"]["layers"]:
                    print(f"     {l['layer']:<34} {l['status']}")
                # The rows where a compensation or a documented gap shows.
                shown = ("truncate (", "direct connect", "signal a process", "egress CONNECT")
                for r in doc["report"]["rows"]:
                    if r["check"].startswith(shown):
                        check = re.sub(r" (/tmp/\S+|127\.0\.0\.1:\d{5})$", "", r["check"])
                        print(f"     row: {check}: {r['observed']} (expected {r['expected']})")
        tag = "ok  " if not problems else "FAIL"
        print(f"   {tag}  {case['id']:<55} {case['user']:<7} {detail}")
        failed_cases += 1 if problems else 0
        for p in problems:
            print(f"           {p}")
        if problems and case["want"].startswith("refuse:") or (problems and doc is None):
            for line in (case["stderr"].splitlines() + case["stdout"].splitlines())[:8]:
                print(f"           | {line}")

    for key, value in sorted(facts.items()):
        if key.startswith("knob-missing-"):
            print(f"   note  sysctl {key[len('knob-missing-'):]} {value}: its cases skipped")
        elif key.startswith("started-"):
            n = int(value or 0)
            if key.startswith("started-userns-off") or (
                a.mode == "nolandlock" and not key.startswith("started-unsandboxed")
            ):
                if n != 0:
                    fail(f"{key}: the server started {n} time(s) although its sandbox could not be built")
            elif n == 0:
                fail(f"{key}: the server never started")
    # The escape battery's outcomes (scripts/vm/escape-server.sh), one fact per user and mode.
    escapes = {k: v for k, v in facts.items() if k.startswith("escape-")}
    for key, value in sorted(escapes.items()):
        problems = check_escape(value)
        words = value.split()
        held = sum(1 for w in words if w == "refused")
        bombs = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "bomb"]
        print(f"   {'ok  ' if not problems else 'FAIL'}  {key:<55} {held} attempts refused, "
              f"fork bomb stopped at {'/'.join(bombs) or '?'}")
        for p in problems:
            fail(f"{key}: {p}")
    if a.mode == "main" and done:
        for u in ("root", "tester"):
            for net in ("none", "allow"):
                if f"escape-{net}-{u}" not in escapes:
                    fail(f"no escape battery result for {u} with {net}")
    if a.mode == "main":
        expected_cases = 14
        for knob, n in [("kernel.unprivileged_userns_clone", 3), ("user.max_user_namespaces", 6)]:
            if f"knob-missing-{knob}" not in facts:
                expected_cases += n
    else:
        expected_cases = 5
    if done and len(cases) != expected_cases:
        fail(f"{len(cases)} cases reported, expected {expected_cases}")

    ok_cases = len(cases) - failed_cases
    failed = failed_cases + vm_failures
    abi_text = (
        "ABI " + ",".join(str(x) for x in sorted(abis, key=str)) if abis else "Landlock off"
    )
    comp_text = ", ".join(comps.get("[]", [])) or "none"
    line = (
        f"  {a.kernel:<5} {facts.get('kernel', '?'):<28} {a.mode:<10} {abi_text:<13} "
        f"{a.wall:>6} s wall  {ok_cases}/{len(cases)} cases ok"
        + (f"  compensations: {comp_text}" if a.mode == "main" else "")
        + ("" if failed == 0 else f"  FAILED ({failed})")
    )
    if a.summary:
        with open(a.summary, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    if a.counts:
        with open(a.counts, "a", encoding="utf-8") as f:
            f.write(f"{ok_cases} {failed}\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
